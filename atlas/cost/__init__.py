"""Cost: the KV cache, the weights in memory, the FLOPs of a token and the active parameters,
each figure with the formula that made it, checked against a measured run.

Its modules, each importing only those listed after it: figures (facts["cost"] and the page's figures),
measured (the preview run that checks the rules), charges (the hooks that measure the model's own FLOPs
on that run), model_figure (the model's FLOPs of a token, beside transformers' eager execution), blocks
(the rules per block kind), compressed
(DeepSeek-V4's compressed blocks), weights (the weights in memory), active (the active parameters),
coefficients (BlockTerms, the formulas they are built of, their evaluation at a context).

May import: atlas.proof, atlas.model, atlas.inputs and the base modules.
"""
