# %% [markdown]
# # devcopy in five minutes
# What crosses the host/accelerator boundary when an ExecuTorch-style runtime runs a model: where the placement
# pass puts the `et_copy` device copies, what happens when a runtime lacks their kernels, and how fast a copy is.
#
# **Backend.** This runs on `cupy` (real CUDA) where a GPU is available and on the `simulated` accelerator
# elsewhere; `DEVCOPY_BACKEND=cupy|simulated` chooses. The next cell prints which one ran.

# %%
import os

from devcopy_lib import select_backend

SMOKE = "CI" in os.environ  # small sizes under CI and `make test`
BACKEND = select_backend()
print("backend:", BACKEND)

# %% [markdown]
# ## 1. Placement: where the copies go
# `shared_input` computes `t=a+b; u=t+a; w=t+b; u+w`. With one delegate per op, ExecuTorch's strategy copies an
# input once per delegate that reads it; devcopy's `dedupe` strategy copies it once per device.

# %%
from devcopy_lib import export_and_lower, models, place_devices
from devcopy_widgets import totals_line

lowered = export_and_lower(*models.shared_input(), partition="per_node")
for strategy in ("executorch", "dedupe"):
    print(totals_line(place_devices(lowered, strategy=strategy).report))

# %% [markdown]
# The explorer draws the placed graph (copies outlined in red, with their bytes). Switch **strategy** to `dedupe`
# and watch the H2D count drop; tick ops off to keep them on the CPU.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import PlacementExplorer

explorer = PlacementExplorer(model="shared_input", partition="per_node")
explorer

# %%
print(explorer.placed.report.copies)

# %% [markdown]
# ## 2. Registration: the ATen-mode "Missing operator"
# The portable runtime registers the copy kernels from `functions.yaml`. ATen-mode codegen never reads that file,
# so an ATen-mode runtime needs the separate `device_copy_ops_aten_lib`; without it, loading fails.

# %%
from devcopy_lib import MissingOperatorError, load_method

placed = place_devices(export_and_lower(*models.add()))
try:
    load_method(placed, mode="aten", libs=["native"])
except MissingOperatorError as error:
    print(error)

# %% [markdown]
# In the panel: choose `aten`, untick `device_copy_ops_aten_lib` and press **Load**; tick it again and the same
# program loads, runs and matches eager PyTorch.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import RegistrationPanel

registration = RegistrationPanel()
registration

# %%
from devcopy_widgets import RegistrationState

for mode in ("portable", "aten"):
    print(f"{mode:8}", RegistrationState(mode=mode).load_and_run().summary())

# %% [markdown]
# ## 3. Copy timings
# Bandwidth against size for devcopy's copy path (solid) and the baselines (dashed), with the ceiling they share
# (dotted, named in the legend), and the same numbers as a size x method GB/s table. **Run** sweeps in the
# background (**Stop** ends it early). On the simulated backend the "device" is host memory, so these numbers say
# nothing about a GPU.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import CopyTimingPanel

timing = CopyTimingPanel(sizes="4K..64K" if SMOKE else "4K..64M")
timing.run()
timing

# %% [markdown]
# **Next:** [01 · Placement](01_placement.ipynb), every placement case. Then
# [02 · Copy timings](02_copy_timings.ipynb), [03 · Registration](03_registration_aten_vs_portable.ipynb),
# [04 · Bring your own model](04_bring_your_own_model.ipynb) and
# [05 · ExecuTorch's own programs](05_executorch_programs.ipynb).
