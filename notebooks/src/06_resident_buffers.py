# %% [markdown]
# # A KV cache that stays on the device
# An LLM decode step keeps its KV cache in buffers the program updates in place. ExecuTorch plans such a buffer in
# host memory and runs its update on the CPU, so every attention delegate gets the whole cache host-to-device on every
# token. devcopy's **resident buffers** keep it on the device instead: copied there once at load, updated there, never
# copied per call. This notebook places the tiny decode step three ways, runs it token by token against eager
# PyTorch, and reads the cache back.

# %%
import os

from devcopy_lib import select_backend

SMOKE = "CI" in os.environ  # small sizes under CI and `make test`
BACKEND = select_backend()
print("backend:", BACKEND)

# %% [markdown]
# ## 1. Bytes per call, by role, side by side
# The report splits each call's copies by what they move (cache, weights-derived values, activations) and places the
# program three ways: as ExecuTorch does (*plain*), with constant hoisting, and with hoisting and resident buffers.

# %%
from devcopy_lib import export_and_lower, models, place_devices

CACHE = 32 if SMOKE else 128
step, inputs = models.llama_decode_step(max_cache_len=CACHE, prompt_len=8)
lowered = export_and_lower(step, inputs)
resident = place_devices(lowered, resident_buffers=True)
print("\n".join(resident.report.placements_lines()))

# %% [markdown]
# Where each buffer lives, and why (a buffer a CPU op computes from would stay on the host, saying which op):

# %%
for buffer in resident.report.buffers:
    print(f"{buffer['name']:14} {buffer['bytes']:>6} B  {buffer['reason']}")

# %% [markdown]
# ## 2. Token after token, equal to eager
# One loaded method keeps its cache between calls. Each step feeds both it and the eager module the eager step's most
# likely token and the next position (`next_inputs`), and compares the logits.

# %%
import copy

import torch

from devcopy_lib import compare_outputs, load_method

eager = copy.deepcopy(step)
method = load_method(resident, mode="aten", backend=BACKEND)
token, position = inputs
for n in range(3):
    ours = method(token, position)
    with torch.no_grad():
        theirs = eager(token, position)
    ok, _ = compare_outputs(ours, [theirs])
    print(f"step {n}: position {int(position[0])}, equal to eager: {ok}")
    token, position = step.next_inputs((token, position), [theirs])
print("copies per call:", resident.report.copies, "- none of them cache")

# %% [markdown]
# ## 3. Reading and resetting the state
# `buffers()` reads the cache back (one D2H per buffer, counted as the caller's); `reset_buffers()` puts it back to
# its value at load, so the next call computes as the first one did.

# %%
state = method.buffers()
print({name: tuple(t.shape) for name, t in state.items()}, "caller copies:", method.caller_copies)
print("equal to eager's buffers:", all(torch.allclose(t, getattr(eager, name), atol=1e-6) for name, t in state.items()))
method.reset_buffers()
first = method(*inputs)
with torch.no_grad():
    print("after reset, the first step again:", compare_outputs(first, [copy.deepcopy(step)(*inputs)])[0])
method.close()

# %% [markdown]
# ## 4. In the explorer
# Tick **resident buffers**: the cache rows move to `cuda:0` and the table above the graph shows the three
# placements' bytes per call.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import PlacementExplorer

explorer = PlacementExplorer.for_model(step, inputs)
explorer.resident.value = True
explorer
