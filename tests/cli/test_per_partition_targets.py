"""`--target OP=DEVICE` (repeatable) in `devcopy place` and `devcopy run`, and `--strategy peer`."""

import json

import pytest

from devcopy_lib.cli import main

TWO_DEVICES = ["--partition", "per_node", "--delegate", "add.Tensor", "--target", "delegate_1=cuda:1"]


def _json(capsys, *argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_place_shows_each_delegates_device(capsys):
    code, result = _json(capsys, "place", "add", "--target", "add.Tensor=cuda:1")
    assert code == 0 and result["delegate_devices"] == {"delegate_0": "cuda:1"}
    assert (result["target"], result["targets"]) == ("cuda:0", {"add.Tensor": "cuda:1"})


def test_plain_target_still_sets_the_default(capsys):
    code, result = _json(capsys, "place", "add", "--target", "cuda:2")
    assert code == 0 and result["delegate_devices"] == {"delegate_0": "cuda:2"} and result["targets"] == {}


def test_delegate_names_map_too(capsys):
    code, result = _json(capsys, "place", "back_to_back", *TWO_DEVICES)
    assert code == 0 and result["delegate_devices"] == {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    assert result["copies"] == {"h2d": 4, "d2h": 2} and result["cross_device"][0]["chosen"] == "host_hop"


@pytest.mark.parametrize(
    "target, message",
    [
        ("=cuda:1", "nothing before '='"),
        ("add.Tensor=tpu:0", "Unknown device type 'tpu'"),
        ("addd.Tensor=cuda:1", "Close matches: add.Tensor"),
    ],
)
def test_bad_targets_are_argument_errors(capsys, target, message):
    assert main(["place", "add", "--target", target]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_run_peer_on_two_devices_matches_eager(capsys, mode):
    code, result = _json(
        capsys, "run", "back_to_back", *TWO_DEVICES, "--strategy", "peer", "--mode", mode, "--backend", "simulated"
    )
    assert code == 0 and result["ok"] and result["copies_executed"] == {"h2d": 3, "d2h": 1, "d2d": 1}
    assert {"cuda:0", "cuda:1"} <= set(result["arena_bytes"])
