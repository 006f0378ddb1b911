# %% [markdown]
# # 02 · Copy timings
# How long an H2D or D2H copy takes against its size, for devcopy's copy path and the baselines measured in the
# same run (on CUDA: `cudaMemcpy`, `cudaMemcpyAsync`, CuPy, PyTorch), with pageable and pinned host memory and both
# clocks (device events and the caller's wall time).
#
# **Backend.** On the `simulated` backend the "device" is host memory: the numbers show the harness working, not a
# GPU. Run on a CUDA machine (`DEVCOPY_BACKEND=cupy`) for real ones; the next cell says which backend ran.

# %%
import os

from devcopy_lib.devices.backend import select_backend

SMOKE = "CI" in os.environ  # small sizes under CI and `make test`
BACKEND = select_backend()
SIZES = "4K..64K" if SMOKE else ("4K..1G" if BACKEND == "cupy" else "4K..64M")
print("backend:", BACKEND)

# %% [markdown]
# ## A sweep from code
# `sweep()` returns a plain result: raw samples kept, median and IQR computed from them.

# %%
from devcopy_lib.bench.harness import Policy
from devcopy_lib.bench.sizes import parse_sizes
from devcopy_lib.bench.sweep import sweep

result = sweep(sizes=parse_sizes(SIZES), directions=("h2d", "d2h"), policy=Policy.quick())
methods = sorted({(m.method, m.direction, m.memory, m.clock) for m in result.measurements})
print(f"{len(result.measurements) // len(methods)} sizes x {len(methods)} series:")
for series in methods:
    print("  ", *series)

# %%
# NBVAL_IGNORE_OUTPUT
for row in result.rows()[:8]:
    print(f"{row['method']:18} {row['direction']} {row['bytes']:>9} B  {row['median_s'] * 1e6:8.2f} us  "
          f"{row['gbps']:6.2f} GB/s")

# %% [markdown]
# ## Bandwidth against size
# One panel per direction and host memory, on the wall clock (what a caller sees); the dashed line is the pinned
# `cudaMemcpyAsync` peak measured in this same run.

# %%
# NBVAL_IGNORE_OUTPUT
from IPython.display import Image

from devcopy_lib.bench.plots import plot_bandwidth, to_png

Image(to_png(plot_bandwidth(result, clock="wall")))

# %%
# NBVAL_IGNORE_OUTPUT
largest = max(m.nbytes for m in result.measurements)
print(f"at {largest} bytes (wall clock):")
for row in result.rows():
    if row["bytes"] == largest and row["clock"] == "wall":
        print(f"  {row['method']:22} {row['direction']} {row['memory']:8} {row['gbps']:7.2f} GB/s")

# %% [markdown]
# ## The panel
# Choose sizes (`4K..64M` is every power of two between; `4K,1M` a list), direction and host memory, then **Run**:
# the plot redraws after each size, with the baselines dashed and the ceiling dotted.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import CopyTimingPanel

panel = CopyTimingPanel(sizes=SIZES)
panel.run()
panel
