# %% [markdown]
# # 05 · ExecuTorch's own programs (`.pte`)
# The other notebooks run devcopy's re-implementation of ExecuTorch's pipeline. This one starts from the artifact a
# user ships: ExecuTorch's own `to_edge_transform_and_lower(...).to_executorch()`, with devcopy's partitioner and
# backend, writes a `.pte`. devcopy opens that file, shows ExecuTorch's CPU runtime refusing it (the CPU wheel has no
# CUDA allocator), runs it in both modes, and reproduces the seed's `Missing operator` on it (docs/pte.md).
#
# **Backend.** devcopy's runs use the selected backend; the next cell says which.

# %%
import os
import tempfile
from pathlib import Path

import torch

from devcopy_lib import executorch_pte, models, select_backend

SMOKE = "CI" in os.environ  # small sizes under CI and `make test`
size = 4 if SMOKE else 512
module, _ = models.cpu_between()  # sin(a + b) delegated, cumsum on the CPU, then * b delegated again
torch.manual_seed(0)
inputs = (torch.randn(size, size), torch.randn(size, size))
path = Path(tempfile.mkdtemp()) / "cpu_between.pte"
path.write_bytes(executorch_pte(module, inputs, target_device="cuda:0"))
print("backend:", select_backend())
print(f"ExecuTorch wrote {path.name}: {size}x{size} float32 inputs, delegates on cuda:0")

# %% [markdown]
# ## Open it
# `open_pte` reads the file with ExecuTorch's own deserializer and checks every index in it: the operator table,
# the instructions (copies, delegate calls, CPU kernels), and the memory plan, whose buffer on `cuda:0` is where
# ExecuTorch's device pass put the delegates' inputs and outputs. The same in a shell: `devcopy place
# cpu_between.pte`.

# %%
from devcopy_lib import open_pte

program = open_pte(path)
print(program)

# %% [markdown]
# ## ExecuTorch's CPU runtime refuses it
# `portable_lib`, ExecuTorch's Python runtime, registers every operator of the table and loads the program, then
# fails the first call: nothing in the CPU wheel can allocate the `cuda:0` buffer.

# %%
from devcopy_lib import run_in_executorch

print(run_in_executorch(path.read_bytes(), inputs, program.operators).summary())

# %% [markdown]
# ## devcopy runs it, in both modes
# `pte_program` keeps ExecuTorch's memory plan (its buffers, offsets and devices); devcopy allocates the device
# buffer through the registered allocator, runs the `et_copy` kernels for the copies and the delegates' exported
# graphs, and the outputs equal eager PyTorch on the same inputs (`devcopy run cpu_between.pte` in a shell).

# %%
from devcopy_lib import compare_outputs, load_method, make_allocator, pte_program, scoped_allocators

with torch.no_grad():
    expected = [module(*inputs)]
for mode in ("portable", "aten"):
    with (
        make_allocator(select_backend()) as allocator,
        scoped_allocators(allocator),
        load_method(pte_program(program), mode) as method,
    ):
        outputs = method(*inputs)
        copies = dict(method.copies_executed)
    ok, _ = compare_outputs(outputs, expected)
    print(f"{mode:8} equals eager: {ok}; copies executed: {copies}")

# %% [markdown]
# ## The seed's `Missing operator`, on this real file
# An ATen-mode runtime links `native` (ATen's kernels), which has no `et_copy` ops: ATen-mode codegen does not see
# `functions.yaml`. Without `device_copy_ops_aten_lib` the load fails with ExecuTorch's own message.

# %%
from devcopy_lib import MissingOperatorError

try:
    load_method(pte_program(program), "aten", ["native"])
except MissingOperatorError as error:
    print(error)

# %% [markdown]
# The fix is to link `device_copy_ops_aten_lib` beside `native`. What each mode and lib set resolves
# (`devcopy registry cpu_between.pte` prints the same):

# %%
from devcopy_lib import pte_registration

for mode, libs in (("portable", ["portable"]), ("aten", ["native", "device_copy_ops_aten_lib"]), ("aten", ["native"])):
    r = pte_registration(program, mode, libs)
    missing = ", ".join(name for _, name in r.missing)
    print(f"{mode:8} {'+'.join(libs):33} {'resolves all' if r.ok else 'misses ' + missing}")

# %% [markdown]
# ## The panel
# The registration panel opens a `.pte` too: type a path in the `.pte` box, or start from `RegistrationState.from_pte`.

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import RegistrationPanel, RegistrationState

RegistrationPanel(RegistrationState.from_pte(str(path), mode="aten", libs=("native",)))

# %% [markdown]
# ## In the explorer, with its memory plan
# `memory_picture` turns ExecuTorch's memory plan into a picture's data: a lane per buffer (so per device), a block
# per tensor at the offset ExecuTorch gave it, for the instructions from its first use to its last (an input from
# the start, an output to the end, the caller's read). Two tensors share bytes only when they never live together.

# %%
from devcopy_lib import memory_picture

picture = memory_picture(program)
for lane in picture.lanes:
    print(f"buffer {lane.buffer} on {lane.device}: {lane.nbytes} bytes")
    for b in lane.blocks:
        print(f"  bytes {b.offset:>6}..{b.offset + b.nbytes:<6} instructions {b.first}..{b.last}  {b.label}")
    print("  overlaps while live:", lane.overlaps() or "none")

# %% [markdown]
# The placement explorer opens the same file: the instructions as the graph (the copies outlined in red, the
# delegate on `cuda:0`, the CPU kernels), and this plan drawn beside it. Hover a block to name its tensor; a click
# selects the instruction that writes it in the graph, and a node selected in the graph picks its blocks. The
# controls that re-place a model are off, and the panel says why: ExecuTorch placed this program when it was
# written. **export trace** profiles the program itself (`devcopy run cpu_between.pte --trace t.json` in a shell).

# %%
# NBVAL_IGNORE_OUTPUT
from devcopy_widgets import PlacementExplorer

PlacementExplorer.for_pte(path)

# %% [markdown]
# Back to the start: [00 · devcopy in five minutes](00_tour.ipynb).
