"""Inputs: what a person writes, read and checked before anything is built.

The ``Family`` a family module declares (atlas/families/<name>.py), its notes, its checkpoint folder
(atlas/checkpoints/<org>/<repo>/: config.json, checkpoint.json, headers) and a configuration's per-layer
values, the strict safetensors header reader for local weights (whose checks ``pin`` applies to what
the Hub serves), and the preflight checks that turn a bad input into one line naming the file and the
field; and the plain tables they share with the model (dtypes: the safetensors dtypes; config_keys:
the keys a config gives a mixture's sizes under).

May import: atlas.errors, atlas.numbers, atlas.families; torch and transformers only inside functions.
"""
