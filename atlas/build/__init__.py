"""Build: the driver around the stages. The facts cache (cache), many families collected in worker
processes (parallel), publishing a site so that it cannot half-happen (publish), and the local server
that rebuilds on edits (serve).

May import: every stage.
"""
