"""The model: the family's transformers class built on the meta device, described as plain data.

The module tree and its block kinds (introspect), exact parameter counts and the checkpoint's layout
(params, files), the one vocabulary of standard values and where each family hosts them (standard),
the derived abbreviations (features), the capture API (trace), the tiny seeded preview run (preview)
and config.json in words, one module a topic (config_words).

May import: atlas.inputs and the base modules (atlas.errors, atlas.numbers).
"""
