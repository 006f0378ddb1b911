"""What the CLI and the panels show of a program: `copies()` per direction, `to_dict()` as JSON-ready data,
`pte_inputs` (a .pte keeps no example inputs), and executorch_pte's skip options reaching ExecuTorch's pass."""

import json

import pytest
import torch

from devcopy_lib import executorch_pte, open_pte, pte_inputs
from devcopy_lib.pte.reader import PteProgram, PteScalar, PteTensor

pytestmark = pytest.mark.reference


def test_copies_count_the_copy_kernels_and_their_bytes(sin_program):
    assert sin_program.copies() == {"h2d": (2, 48), "d2h": (1, 24), "d2d": (0, 0)}


def test_to_dict_is_json_and_names_every_instruction(sin_program, sin_instruction_names):
    data = json.loads(json.dumps(sin_program.to_dict()))
    assert [i.get("name") for i in data["instructions"]] == sin_instruction_names
    assert data["instructions"][2]["args"] == [2, 3, 4] and data["inputs"] == [0, 1] and data["outputs"] == [7]
    assert data["delegates"] == [
        {
            "name": "delegate_0",
            "backend_id": "DevcopyExportBackend",
            "device": "cuda:0",
            "blob_bytes": len(sin_program.delegates[0].blob),
        }
    ]
    assert data["bytes"] == sin_program.size and data["plans"] == ["forward"]


def test_pte_inputs_follow_the_input_values_and_the_seed():
    cpu = torch.device("cpu")
    values = [
        PteTensor(torch.float32, (2, 3), (0, 1), "STATIC", 1, 0, None, 0),
        PteTensor(torch.int64, (4,), (0,), "STATIC", 1, 32, None, 0),
        PteTensor(torch.bool, (5,), (0,), "STATIC", 1, 64, None, 0),
        PteScalar(7),
    ]
    program = PteProgram("forward", ("forward",), [], [], values, [0, 1, 2, 3], [], [0, 96], {}, [], [])
    a, i, b, s = pte_inputs(program, seed=1)
    assert a.shape == (2, 3) and a.dtype == torch.float32 and a.device == cpu
    assert i.dtype == torch.int64 and bool(((i >= 0) & (i < 10)).all())
    assert b.dtype == torch.bool and s == 7
    torch.testing.assert_close(pte_inputs(program, seed=1)[0], a)
    assert not torch.equal(pte_inputs(program, seed=2)[0], a)


def test_skip_options_reach_executorchs_device_pass():
    from devcopy_lib import models

    module, inputs = models.add()  # a + b, float32 [4, 4]: each input read by the delegate only
    plain = open_pte(executorch_pte(module, inputs, ["add.Tensor"], "cuda:0"))
    assert plain.copies()["h2d"] == (2, 128) and plain.copies()["d2h"] == (1, 64)
    p = open_pte(executorch_pte(module, inputs, ["add.Tensor"], "cuda:0", skip_h2d_for_method_inputs=True))
    assert p.copies()["h2d"] == (0, 0) and p.copies()["d2h"] == (1, 64)
    assert [p.tensor(i).device for i in p.inputs] == [p.delegates[0].device] * 2
