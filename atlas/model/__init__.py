"""The model: the family's transformers class built on the meta device, described as plain data.

Lowest first: what a module is from its tensors and children (structure), the module tree and the
block list (introspect); the roles of a block's modules (roles) and the blocks grouped into kinds
(block_kinds); exact parameter counts (accounting) and the checkpoint's layout (checkpoint_layout,
quantization, pinned_figures, files); the one vocabulary of standard values and their layouts
(vocabulary), the sizes a config gives them (sizes), how a value is read (reads), where each family
hosts it (resolver) and the support table (support); the derived abbreviations (features), the
capture API (trace) and the tiny seeded preview run (tiny, preview, identities, preview_data,
preview_facts); config.json in words, one module a topic (config_words).

May import: atlas.inputs and the base modules (atlas.errors, atlas.numbers).
"""
