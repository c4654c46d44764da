"""ChampSim's trace layout, written from Python (tests, and conversions of other traces).

ChampSim reads a stream of fixed-size little-endian records, one per instruction: its
``input_instr`` (64 bytes: ip, is_branch, branch_taken, 2 destination and 4 source register
numbers, 2 destination and 4 source memory addresses) or, for the CloudSuite traces,
``cloudsuite_instr`` (96 bytes: 4 destination registers and addresses, and two address-space
ids). mmsim reads both (``mmsim run --trace FILE``, docs/replay.md)::

    from mmsim import champsim
    champsim.write("loop.champsimtrace.xz", [champsim.Instr(ip=0x401000, src=(0x600000,))])
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO

__all__ = ["Instr", "write"]

_STANDARD = struct.Struct("<QBB2B4B2Q4Q")
_CLOUDSUITE = struct.Struct("<QBB4B4B6x4Q4Q2B6x")
assert _STANDARD.size == 64 and _CLOUDSUITE.size == 96


@dataclass(frozen=True)
class Instr:
    """One instruction: its address, its branch, and the memory it stores to (``dst``) and
    loads from (``src``); ``asid`` only in a CloudSuite trace."""

    ip: int
    src: tuple[int, ...] = ()
    dst: tuple[int, ...] = ()
    is_branch: bool = False
    branch_taken: bool = False
    asid: tuple[int, int] = field(default=(255, 255))


def _pad(xs: tuple[int, ...], n: int, what: str) -> list[int]:
    if len(xs) > n:
        raise ValueError(f"{what}: at most {n} addresses in this layout, got {len(xs)}")
    return [*xs, *([0] * (n - len(xs)))]


def encode(i: Instr, layout: str = "standard") -> bytes:
    """The record's bytes (``layout``: ``standard``, ``input_instr``; or ``cloudsuite``)."""
    if layout == "standard":
        return _STANDARD.pack(
            i.ip, i.is_branch, i.branch_taken, 0, 0, 0, 0, 0, 0, *_pad(i.dst, 2, "dst"), *_pad(i.src, 4, "src")
        )
    if layout == "cloudsuite":
        return _CLOUDSUITE.pack(
            i.ip, i.is_branch, i.branch_taken, *([0] * 8), *_pad(i.dst, 4, "dst"), *_pad(i.src, 4, "src"), *i.asid
        )
    raise ValueError(f"layout: expected 'standard' or 'cloudsuite', got {layout!r}")


def write(
    path: str | os.PathLike[str], instrs: Iterable[Instr], compression: str | None = None, layout: str = "standard"
) -> int:
    """Write ``instrs`` as a ChampSim trace; the compression is ``xz``, ``gzip``, ``bzip2`` or
    ``raw`` (default: from the name's ending, ``.xz``, ``.gz``, ``.bz2``, else raw). Returns
    the number of records."""
    p = os.fspath(path)
    if compression is None:
        compression = {".xz": "xz", ".gz": "gzip", ".bz2": "bzip2"}.get(os.path.splitext(p)[1], "raw")
    opener = {"xz": lzma.open, "gzip": gzip.open, "bzip2": bz2.open, "raw": open}.get(compression)
    if opener is None:
        raise ValueError(f"compression: expected xz, gzip, bzip2 or raw, got {compression!r}")
    n = 0
    f: IO[bytes]
    with opener(p, "wb") as f:
        for i in instrs:
            f.write(encode(i, layout))
            n += 1
    return n
