"""Bad programs past the parser: a tensor on another device than its buffer, a constant whose
bytes do not fit its sizes, a delegate blob torch.export cannot read, a device buffer with no allocator registered.
Each is a devcopy error naming the value and the fix, raised before anything is half-loaded."""

import pytest
import torch

from devcopy_lib.devices import get_device_allocator, scoped_allocators
from devcopy_lib.devices.device import Device, DeviceType
from devcopy_lib.load import load_method
from devcopy_lib.pte.convert import pte_program
from devcopy_lib.pte.reader import PteLoadError, open_pte
from devcopy_lib.runtime.failures import LoadError
from devcopy_lib.tensors.error import Error

pytestmark = pytest.mark.reference


def _rewritten(data: bytes, change) -> bytes:
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte = deserialize_pte_binary(data)
    change(pte.program)
    return bytes(serialize_pte_binary(pte))


def test_a_tensor_on_another_device_than_its_buffer(sin_bytes):
    def to_cpu(program):
        program.execution_plan[0].values[2].val.extra_tensor_info.device_type = 0

    with pytest.raises(PteLoadError, match="value 2 is on cpu, but planned in buffer 2 on cuda:0. To fix:"):
        open_pte(_rewritten(sin_bytes, to_cpu))


def test_a_constant_that_does_not_fit_its_sizes(reduce_bytes):
    def shorter(program):
        program.constant_buffer[1].storage = program.constant_buffer[1].storage[:-4]

    with pytest.raises(PteLoadError, match=r"constant 1 holds 20 bytes, its torch.float32 \[2, 3\] needs 24"):
        open_pte(_rewritten(reduce_bytes, shorter))


def test_a_delegate_blob_torch_export_cannot_read_is_a_load_error(sin_program):
    from dataclasses import replace

    from devcopy_lib.pte.backend import BLOB_MAGIC

    damaged = replace(sin_program.delegates[0], blob=BLOB_MAGIC + b"not a zip archive")
    program = replace(sin_program, delegates=[damaged])
    with pytest.raises(PteLoadError, match="delegate 0's blob .* is no DevcopyExportBackend program") as info:
        pte_program(program)
    assert info.value.error == Error.InvalidProgram and info.value.kind == "load"


def test_a_device_buffer_with_no_allocator_refuses_the_load_naming_the_device(sin_program):
    """ExecuTorch's runtime fails the first call (`No device allocator registered for device type 1`); devcopy's
    refuses at load, with the fix, and leaves no allocator registered behind. An empty registry for this thread:
    earlier tests in the process may have registered the default allocator globally (the CLI and widgets do)."""
    with scoped_allocators():
        with pytest.raises(LoadError, match=r"No DeviceAllocator registered for CUDA \(needed for cuda:0\)") as info:
            load_method(pte_program(sin_program), "portable")
        assert "To fix" in str(info.value) and get_device_allocator(DeviceType.CUDA) is None


def test_the_same_program_loads_once_an_allocator_is_registered(sin_program, sim):
    with load_method(pte_program(sin_program), "portable") as method:
        (out,) = method(torch.ones(2, 3), torch.ones(2, 3))
    torch.testing.assert_close(out, torch.sin(torch.full((2, 3), 2.0)))
    assert sim.stats.allocate_count >= 1 and Device(DeviceType.CUDA, 0) in {
        b.device for b in method.program.memory_plan.buffers
    }
