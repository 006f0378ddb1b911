"""Emit: a placed graph as a `Program` of out-variant instructions, values and an operator table (`emitter.py`),
with each functional op's out variant found by `out_variant.py`. Imports `placement`, `lowering` and the floors
below them (docs/design.md §3)."""
