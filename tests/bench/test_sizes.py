"""Size parsing for the sweep and `devcopy bench --sizes`."""

import pytest

from devcopy_lib.bench.sizes import format_bytes, format_size, parse_size, parse_sizes


def test_binary_suffixes():
    assert [parse_size(s) for s in ("4", "4K", "64m", "1G", "2KiB")] == [4, 4096, 64 << 20, 1 << 30, 2048]


def test_list_and_power_of_two_range_are_sorted_without_repeats():
    assert parse_sizes("4K..64K") == [4096, 8192, 16384, 32768, 65536]
    assert parse_sizes("3..17") == [4, 8, 16]
    assert parse_sizes("1M,4K,4K") == [4096, 1 << 20]


@pytest.mark.parametrize("text", ["4X", "0", "", "K", "1.5M"])
def test_bad_size_names_the_text_and_the_accepted_forms(text):
    with pytest.raises(ValueError, match=r"Bad size|No sizes"):
        parse_sizes(text)


def test_reversed_range_says_how_to_write_it():
    with pytest.raises(ValueError, match="write it low..high"):
        parse_sizes("1G..4K")


def test_format_size():
    assert [format_size(n) for n in (4, 4096, 3 << 20, 1 << 30, 1000)] == ["4B", "4K", "3M", "1G", "1000B"]


def test_format_bytes_uses_binary_units_and_no_e_notation():
    assert [format_bytes(n) for n in (0, 64, 4096, 1536, 156552192, 3 << 30)] == [
        "0 B",
        "64 B",
        "4 KiB",
        "1.5 KiB",
        "149.3 MiB",
        "3 GiB",
    ]
