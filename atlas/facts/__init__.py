"""Collect: every fact of one family as plain JSON (collect), the contract it must meet (schema,
facts.schema.json) and the pinned source excerpts (sources).

Nothing here renders a page. May import: atlas.cost, atlas.proof, atlas.model, atlas.inputs and the
base modules.
"""
