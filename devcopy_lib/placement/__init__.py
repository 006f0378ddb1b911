"""Device placement: the pass that puts H2D/D2H (and D2D) copies around delegates and tags every node with its
device (`place.py`), its strategies told as rewrites of the executorch placement (`rewrites.py`), constant hoisting
(`hoist.py`), copy roles (`roles.py`), cross-device pairs (`peer.py`), the pricing protocol (`pricing.py`), the
report (`report.py`), its exports (`report_export.py`) and the placement diff (`diff.py`). Imports `lowering` and
the floors below it (docs/design.md §3)."""
