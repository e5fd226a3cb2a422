"""Render: pages from the facts. A family's Jinja2 pages (site, pages/), the comparisons (compare),
the index's search entries (search) and the equations, rendered by the pinned KaTeX (math).

May import: atlas.check's page checks, atlas.facts' schema, and the base modules.
"""
