"""Lowering: export (`lower.py`), the edge form (`edge_form.py`), decompositions, partitions (`partition.py`),
delegates (`delegate.py`), what torch.export makes of a user's model (`user_model.py`) and the node vocabulary the
floors above share (`nodes.py`, `ops.py`, `arguments.py`, `sources.py`). Imports `runtime` and the floors below it
(docs/design.md §3). Importing it silences the known third-party deprecation noise these steps trigger (see
`noise`)."""

from .noise import quiet_known_noise

quiet_known_noise()
