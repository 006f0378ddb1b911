"""Device identity and its string form (docs/semantics.md §2)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devcopy_lib.devices import CPU, Device, DeviceType


def test_device_type_values_are_executorchs():
    assert (DeviceType.CPU, DeviceType.CUDA) == (0, 1)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("cuda:0", Device(DeviceType.CUDA, 0)),
        ("cuda:1", Device(DeviceType.CUDA, 1)),
        ("cpu", CPU),
        ("CUDA:0", Device(DeviceType.CUDA, 0)),
        ("Cuda:2", Device(DeviceType.CUDA, 2)),
        ("  cuda ", Device(DeviceType.CUDA, 0)),
    ],
)
def test_parse_accepts_executorchs_spellings(text, expected):
    assert Device.parse(text) == expected


def test_parse_rejects_unknown_type_naming_valid_types():
    with pytest.raises(ValueError, match=r"Unknown device type 'tpu'\. Valid types: CPU, CUDA"):
        Device.parse("tpu:0")


@pytest.mark.parametrize("text", ["cuda:", "cuda:-1", "cuda:x", "cuda:1:2", ""])
def test_parse_rejects_malformed_text(text):
    with pytest.raises(ValueError, match="Invalid device index|Unknown device type"):
        Device.parse(text)


def test_device_is_frozen_and_hashable():
    device = Device.parse("cuda:1")
    with pytest.raises(AttributeError, match="cannot assign to field 'index'"):
        device.index = 2
    assert {device: 1}[Device(DeviceType.CUDA, 1)] == 1


@given(st.sampled_from(list(DeviceType)), st.integers(0, 64))
def test_str_round_trips_through_parse(dtype, index):
    device = Device(dtype, 0 if dtype is DeviceType.CPU else index)
    assert Device.parse(str(device)) == device
