# %% [markdown]
# # 03 · Registration: portable vs ATen mode
# A method load resolves every operator of the program in the linked libs. The portable lib is generated from
# `functions.yaml`, which lists the `et_copy` ops. ATen-mode codegen starts from ATen's `native_functions.yaml` and
# refuses a `functions.yaml`, so the copy kernels come from `et_copy_ops.yaml` through the custom-op path, as a
# separate lib, `device_copy_ops_aten_lib`. Forget to link it and the load fails with `Missing operator`.
#
# **Backend.** Loading and running use the selected backend; the next cell says which.

# %%
from devcopy_lib import select_backend

print("backend:", select_backend())

# %% [markdown]
# ## Who registers the copy ops

# %%
from devcopy_lib import registration_status

for row in registration_status(ops=["et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"]):
    print(f"{row.op:24} {row.mode:8} {row.lib:26} {'registered' if row.registered else 'missing':10} "
          f"{row.kernel_name or ''}")

# %% [markdown]
# ## The quantized kernels
# A model quantized with PT2E (`models.pt2e_quantize`) calls `quantized_decomposed` quantize and dequantize ops
# on the CPU. ExecuTorch keeps their kernels in a lib of their own, generated from `quantized.yaml` in both modes;
# devcopy links it by default (`quantized`, `quantized_ops_aten_lib`). Leave it out and the load says
# `Missing operator` and which lib to link.

# %%
for row in registration_status(ops=["quantized_decomposed::dequantize_per_tensor.out"]):
    print(f"{row.lib:26} {row.mode:8} {'registered' if row.registered else 'missing':10} {row.kernel_name or ''}")

# %% [markdown]
# ## Loading one program three ways
# `cpu_between` placed on `cuda:0`: `sin(a + b)` is delegated, `cumsum` runs on the CPU, then `* b` is delegated
# again. Its operator table holds the copies (in and out of each delegate) and the CPU op between them, so every
# lib has to provide both kinds.

# %%
from devcopy_lib import MissingOperatorError, export_and_lower, load_method, models, place_devices

placed = place_devices(export_and_lower(*models.cpu_between()))
for mode, libs in (("portable", ["portable"]), ("aten", ["native", "device_copy_ops_aten_lib"]), ("aten", ["native"])):
    try:
        with load_method(placed, mode=mode, libs=libs, backend="auto") as method:
            print(f"{mode:8} {'+'.join(libs):33} loaded: {', '.join(method.program.operators)}")
    except MissingOperatorError as error:
        print(f"{mode:8} {'+'.join(libs):33} refused:\n{error}")

# %% [markdown]
# ## Run and compare with eager PyTorch

# %%
from devcopy_widgets import PlacementState, RegistrationState

for mode in ("portable", "aten"):
    state = RegistrationState(mode=mode, placement=PlacementState(model="cpu_between"))
    print(f"{mode:8}", state.load_and_run().summary())

# %% [markdown]
# ## The panel
# Switch the mode, untick a lib and press **Load**. The matrix shows, per operator of the program (the two copies
# and `aten::cumsum.out`, the CPU op between the delegates), which lib of the mode registers it (`n/a`: a lib of the
# other mode, which cannot be linked here) and which linked lib resolves it. Each mode keeps its own ticks.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import RegistrationPanel

RegistrationPanel(mode="aten", placement=PlacementState(model="cpu_between"))

# %% [markdown]
# **Next:** [04 · Bring your own model](04_bring_your_own_model.ipynb): the same steps on your own module.
