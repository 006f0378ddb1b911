# %% [markdown]
# # 01 · Placement: where the device copies go
# The placement pass (ExecuTorch's `PropagateDevicePass`) runs after delegation. For each device delegate it
# inserts an `_h2d_copy` per distinct input value, a `_d2h_copy` per output, then removes round trips
# (`d2h` followed by `h2d` to the same device). devcopy adds a `dedupe` strategy: one H2D per (value, device).
#
# **Backend.** Placement does not touch a device, so nothing here depends on it; the next cell still says which
# backend is selected (`DEVCOPY_BACKEND=cupy|simulated`).

# %%
from devcopy_lib import select_backend

print("backend:", select_backend())

# %% [markdown]
# ## The reference counts
# Each sample model shows one situation. `per_node` makes every delegated op its own delegate, which is where the
# strategies differ; `capability` groups ops like ExecuTorch's partitioners.

# %%
from devcopy_lib import export_and_lower, models, place_devices
from devcopy_lib.bench.sizes import format_bytes
from devcopy_widgets import totals_line

CASES = [("add", "capability"), ("shared_input", "capability"), ("shared_input", "per_node"),
         ("back_to_back", "per_node"), ("cpu_between", "capability"), ("mlp", "capability")]
for name, partition in CASES:
    lowered = export_and_lower(*models.MODELS[name](), partition=partition)
    for strategy in ("executorch", "dedupe"):
        print(f"{name:14} {partition:10}", totals_line(place_devices(lowered, strategy=strategy).report))

# %% [markdown]
# ## One decision table
# Every node of the placed `add`: what it is, where it runs and why. Copies carry the bytes they move per execution.

# %%
report = place_devices(export_and_lower(*models.add())).report
for row in report.rows:
    print(f"{row.name:8} {row.kind:9} {row.device:7} {format_bytes(row.bytes):>6}  {row.reason}")

# %% [markdown]
# ## The skip switches
# `skip_h2d_for_method_inputs` lets the caller hand inputs already on the device; `skip_d2h_for_method_outputs`
# leaves an output on the device, but only when nothing on the CPU reads it.

# %%
for name in ("add", "output_and_cpu_user"):
    lowered = export_and_lower(*models.MODELS[name]())
    for skip_h2d, skip_d2h in ((False, False), (True, False), (False, True)):
        r = place_devices(lowered, skip_h2d_for_method_inputs=skip_h2d, skip_d2h_for_method_outputs=skip_d2h).report
        print(f"{name:20} skip_h2d={skip_h2d!s:5} skip_d2h={skip_d2h!s:5} -> {r.copies}")

# %% [markdown]
# ## ExecuTorch's own counts
# With the `reference` extra installed, ExecuTorch 1.5.1 lowers the same model with the same partition and its
# own pass; the counts must agree.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_lib import reference as executorch_reference

if executorch_reference.available():
    for name, partition in CASES[:4]:
        module, inputs = models.MODELS[name]()
        ours = place_devices(export_and_lower(module, inputs, partition=partition)).report
        theirs = executorch_reference.executorch_counts(module, inputs, ours.delegate_ops, partition=partition)
        print(f"{name:14} {partition:10} devcopy {ours.copies}  ExecuTorch h2d={theirs['h2d']} d2h={theirs['d2h']}")
        assert (theirs["h2d"], theirs["d2h"]) == (ours.copies["h2d"], ours.copies["d2h"])
else:
    print("ExecuTorch is not installed (pip install -e '.[reference]'): comparison skipped")

# %% [markdown]
# ## Explore
# Pick a model, tick ops, change the strategy or the switches; tick *compare with ExecuTorch* to see its counts for
# the same settings. The model is exported once: toggles and strategies only lower and place again. The target
# applies on Enter; `delegate_0=cuda:0, delegate_1=cuda:1` puts delegates on two devices, and then the `peer`
# strategy (direct device-to-device copies) is offered. *hoist constants* copies constant-derived values once at
# load instead of on every call.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import PlacementExplorer

PlacementExplorer(model="cpu_between")

# %% [markdown]
# **Next:** [02 · Copy timings](02_copy_timings.ipynb): how long those copies take.
