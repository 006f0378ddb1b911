# %% [markdown]
# # 04 · Bring your own model
# Any `nn.Module` that `torch.export` accepts, with example inputs: lower it with the ops your device supports,
# place the copies, load and run it in both runtime modes, and compare with eager PyTorch.
#
# **Backend.** Running uses the selected backend; the next cell says which.

# %%
import torch

from devcopy_lib import select_backend

print("backend:", select_backend())

# %% [markdown]
# ## A model with a CPU-only step in the middle
# `cumsum` is not in the device's op list, so the graph leaves the device and comes back.

# %%
class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.proj(x))
        return torch.sigmoid(torch.cumsum(h, dim=-1)) * h


torch.manual_seed(0)
model, inputs = Gate(), (torch.randn(4, 8),)

# %%
from devcopy_lib import export_and_lower, place_devices
from devcopy_widgets import totals_line

lowered = export_and_lower(model, inputs)
print("delegated ops:", sorted({op for d in lowered.delegates.values() for op in d.ops}))
for strategy in ("executorch", "dedupe"):
    print(totals_line(place_devices(lowered, strategy=strategy).report))

# %% [markdown]
# ## Only some ops on the device
# Pass `delegate_ops` to choose: here only the matrix multiply.

# %%
only_addmm = place_devices(export_and_lower(model, inputs, delegate_ops=["addmm.default"]))
print("addmm only:", totals_line(only_addmm.report))

# %% [markdown]
# ## Run it in both modes

# %%
from devcopy_widgets import PlacementState, RegistrationState

placement = PlacementState()
placement.add_model("gate", model, inputs)
for mode in ("portable", "aten"):
    print(f"{mode:8}", RegistrationState(mode=mode, placement=placement).load_and_run().summary())

# %% [markdown]
# ## Explore it
# `PlacementExplorer.for_model` opens the explorer on your module; the sample models stay in its list.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import PlacementExplorer

PlacementExplorer.for_model(model, inputs, name="gate")

# %% [markdown]
# **Next:** [05 · ExecuTorch's own programs](05_executorch_programs.ipynb): the `.pte` ExecuTorch writes, opened
# and run.
