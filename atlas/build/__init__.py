"""Build: the driver around the stages. Many families collected in worker processes, each from the facts
cache where its inputs are unchanged (parallel); the site written (site) and published so that it
cannot half-happen (publish); the local server that rebuilds on edits (serve); and ``pin``, which writes
a checkpoint folder from the Hub's config and headers, swapped in whole as a site is.

May import: every stage.
"""
