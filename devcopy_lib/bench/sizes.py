"""Copy sizes: binary K/M/G suffixes (`4K`, `64M`, `1G`), lists (`4K,1M`) and power-of-two ranges (`4K..1G`)."""

from __future__ import annotations

import re

from ..names import format_bytes as format_bytes  # the one bytes formatter (names.py), re-exported for the panels

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:I?B)?\s*$", re.IGNORECASE)

MAX_DIGITS = 18  # a size of 19 digits is already more than an exabyte: longer ones are typos
CUDA_SIZES = [4 << (2 * i) for i in range(15)]  # 4 B .. 1 GiB in steps of 4x
CI_SIZES = [4, 4 << 10, 256 << 10, 1 << 20]


def parse_size(text: str) -> int:
    """`64M` -> 67108864; raises ValueError naming the bad text and the accepted forms."""
    match = _SIZE.match(text)
    shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"
    if match and len(match.group(1).lstrip("0")) > MAX_DIGITS:
        # refused before int(): a long digit string is no size, and past 4300 digits int() itself refuses it
        raise ValueError(
            f"Bad size {shown}: {len(match.group(1).lstrip('0'))} digits are more bytes than any memory holds; "
            "give sizes up to 1G or so (e.g. 4K..1G)"
        )
    if not match or int(match.group(1)) == 0:
        raise ValueError(
            f"Bad size {shown}: expected a positive integer with an optional binary suffix K, M or G (e.g. 4K, 64M, 1G)"
        )
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def parse_sizes(text: str) -> list[int]:
    """`4K,1M,64M` or `4K..1G` (every power of two from A to B) or a mix, sorted and without repeats."""
    sizes: set[int] = set()
    for part in (p for p in text.split(",") if p.strip()):
        low, sep, high = part.partition("..")
        if not sep:
            sizes.add(parse_size(part))
            continue
        a, b = parse_size(low), parse_size(high)
        if a > b:
            raise ValueError(
                f"Bad size range {part.strip()!r}: {low.strip()} is larger than {high.strip()}; write it low..high"
            )
        sizes.update(1 << k for k in range(b.bit_length()) if a <= 1 << k <= b)
    if not sizes:
        raise ValueError(f"No sizes in {text!r}: give e.g. 4K,1M,64M or 4K..1G")
    return sorted(sizes)


def format_size(nbytes: int) -> str:
    """4096 -> '4K', 3 << 30 -> '3G', 1000 -> '1000B'."""
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= unit and nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return f"{nbytes}B"
