"""The model: the family's transformers class built on the meta device, described as plain data.

The module tree and its block kinds (introspect), exact parameter counts and the checkpoint's layout
(params, files), the one vocabulary of standard values and where each family hosts them (standard),
the derived abbreviations (features), the capture API (trace) and the tiny seeded preview run (preview).

May import: atlas.inputs and the base modules (atlas.errors, atlas.numbers).
"""
