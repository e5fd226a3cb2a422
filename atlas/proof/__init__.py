"""Proven equations: every component's steps, run on the preview run, reproduce its module.

``equations(...)`` builds each component page's chain of steps (``atlas.proof.kinds`` says which),
runs it on the tiny model's weights and the call the module received on the preview run, and
returns the facts the pages render: the steps' TeX at the checkpoint's sizes, what each step was
built from, and how closely it reproduced the module. A chain that does not reproduce its module
fails the build with one line naming the family, the component and the step.

The modules, bottom up: tex and steps (a step is TeX plus a function), core (a part beside its tiny
twin, reproduce), library (generic chains), then one module a kind of component (positions, scores,
attention, router, experts, mixture, compressed, sparse, hyper, linear, ssm, rglru), stack (a block),
kinds (which chain a module gets), whole_model, and prove on top.

May import: atlas.model, atlas.inputs and the base modules (atlas.errors, atlas.numbers, atlas.notation).
"""

from atlas.proof.prove import equations

__all__ = ["equations"]
