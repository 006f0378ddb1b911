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

from devcopy_lib import select_backend

SMOKE = "CI" in os.environ  # small sizes under CI and `make test`
BACKEND = select_backend()
SIZES = "4K..64K" if SMOKE else ("4K..1G" if BACKEND == "cupy" else "4K..64M")
print("backend:", BACKEND)

# %% [markdown]
# ## A sweep from code
# `sweep()` returns a plain result: raw samples kept, median and IQR computed from them. The simulated backend
# times pageable host memory one way at a time; on CUDA pinned memory and `both` (H2D and D2H at once) join.

# %%
from devcopy_lib.bench.harness import Policy
from devcopy_lib.bench.sizes import parse_sizes
from devcopy_lib.bench.sweep import sweep

result = sweep(sizes=parse_sizes(SIZES), directions=("h2d", "d2h"), policy=Policy.quick())
methods = sorted({(m.method, m.direction, m.memory, m.clock) for m in result.measurements})
print(f"{len(result.measurements) // len(methods)} sizes x {len(methods)} series:")
for series in methods:
    print("  ", *series)

# %% [markdown]
# ## The numbers: GB/s by size and method
# One row per size, one column per method, direction and host memory (like `nvbandwidth`'s matrices), on the wall
# clock: what a caller waits for.

# %%
# NBVAL_IGNORE_OUTPUT
from IPython.display import HTML

from devcopy_lib.bench.plots import gbps_matrix
from devcopy_widgets import html_table

HTML(html_table(*reversed(gbps_matrix(result, clock="wall"))))

# %% [markdown]
# ## Bandwidth against size
# One panel per direction and host memory, on the wall clock. devcopy's path is drawn solid, the baselines dashed,
# each point with its IQR as an error bar; the dotted lines are the ceilings named in the legend (on CUDA the PCIe
# link and the pinned `cudaMemcpyAsync` peak measured in this run; here the host memcpy peak).

# %%
# NBVAL_IGNORE_OUTPUT
from IPython.display import Image

from devcopy_lib.bench.plots import plot_bandwidth, to_png

Image(to_png(plot_bandwidth(result, clock="wall")))

# %% [markdown]
# ## The panel
# Choose sizes (`4K..64M` is every power of two between; `4K,1M` a list; applied on Enter), direction and host
# memory (only what this backend can time is offered; the panel says why), then **Run**: the sweep runs in the
# background, the plot (the same one as above) redraws after each size, **Stop** ends it early, and the GB/s table
# follows.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import CopyTimingPanel

panel = CopyTimingPanel(sizes=SIZES)
panel.run()
panel

# %% [markdown]
# **Next:** [03 · Registration](03_registration_aten_vs_portable.ipynb): which libs provide the copy kernels.
