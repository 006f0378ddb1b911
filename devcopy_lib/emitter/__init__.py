"""Emit: a placed graph as a `Program` of out-variant instructions, values and an operator table (`emit.py`), with
each functional op's out variant found by `out_variant.py`. Imports `placement`, `lowering` and the floors below them
(docs/design.md §3). The folder is not called `emit`: that is the public function `devcopy_lib.emit`, which a
subpackage of the same name would replace on the package once imported."""
