"""Cost: the KV cache, the weights in memory, the FLOPs of a token and the active parameters,
each figure with the formula that made it, checked against a measured run.

May import: atlas.proof, atlas.model, atlas.inputs and the base modules.
"""
