"""Check: every claim a page makes, tested against an independent source (claims), and the pages'
visible text (visible_text). A failed check stops the build with one line.

May import: the stages before it (facts, cost, proof, model, inputs) and the base modules.
"""
