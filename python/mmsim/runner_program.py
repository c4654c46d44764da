"""The native runner's program: a workload compiled to the runner's line format
(``native/runner.c``), with what the runner can and cannot run refused by name
(:func:`compile_program`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from mmsim import _mmsim
from mmsim._mmsim import MmsimError

_SIZE = re.compile(r"^\s*(0x[0-9a-fA-F]+|\d+)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)


def parse_size(v: Any) -> int:
    """A workload size (``4096``, ``"4K"``, ``"2MiB"``, ``"0x200000"``) in bytes.

    ```python
    >>> parse_size("2M"), parse_size(4096), parse_size("0x1000")
    (2097152, 4096, 4096)

    ```
    """
    if isinstance(v, int):
        return v
    m = _SIZE.match(str(v))
    if not m:
        raise MmsimError(f"validate: {v!r} is not a size")
    n = int(m.group(1), 0)
    return n << (10 * " KMGT".index((m.group(2) or " ").upper()))


#: The workload format's vocabularies as the engine declares them (kernel/uapi.rs), with
#: Linux's values: this module keeps no copies.
SCHEMA: dict[str, Any] = json.loads(_mmsim.schema())

#: The mmap flags the native runner maps with (mmsim's own, such as `dontexpand`, have no
#: Linux value and no native form).
MMAP_FLAGS = tuple(f["word"] for f in SCHEMA["map_flags"] if f["value"] >= 0)

#: Linux's numbers of the advice that reclaims (MADV_COLD, MADV_PAGEOUT: include/uapi/asm-generic/
#: mman-common.h), for an engine whose schema does not declare them yet; where it does, its
#: numbers must be these (python/tests/test_validate_memcg.py).
RECLAIM_ADVICE = {"cold": 20, "pageout": 21}

#: madvise advice the native runner knows: every advice of the engine, which the runner
#: passes to madvise(2) as its MADV_* number.
ADVICE_VALUE = {a["word"]: a["value"] for a in SCHEMA["advice"]}
ADVICE_VALUE |= {w: v for w, v in RECLAIM_ADVICE.items() if w not in ADVICE_VALUE}
MADVICE = tuple(ADVICE_VALUE)

#: PROT_* bits by the letter a workload's prot word spells them with.
PROT_BITS = {p["word"]: p["value"] for p in SCHEMA["prot"]}


def prot_bits(word: str) -> int:
    """The PROT_* bits of a prot word (``"none"``, or r, w and x in that order).

    ```python
    >>> prot_bits("rw"), prot_bits("none"), prot_bits("wx")
    (3, 0, 6)

    ```
    """
    return 0 if word == "none" else sum(PROT_BITS[c] for c in word)


#: mremap's MREMAP_* bits by the op's field that asks for each (the engine's schema).
MREMAP_BITS = {f["word"]: f["value"] for f in SCHEMA["mremap_flags"]}

#: mlockall's flags, with Linux's MCL_* values (native/runner.c passes them to mlockall).
MCL_FLAGS = {"current": 1, "future": 2, "onfault": 4}


#: fallocate's modes, with Linux's FALLOC_FL_* values (native/runner.c passes the bits).
FALLOC_MODE = {m["word"]: m["value"] for m in SCHEMA["falloc_mode"]}

#: The filesystems a workload's files may be on, and posix_fadvise's advice the runner knows.
FILESYSTEMS = ("ext4", "tmpfs")
FADVICE = ("dontneed", "willneed")

#: The runner's buffer of file reads and writes (native/runner.c IO_BUF): a pread or pwrite
#: call moves at most this many bytes.
MAX_CHUNK = 2 << 20

#: The ops on a workload's files (besides an mmap with "file"), each naming it in "file".
FILE_OPS = ("create", "memfd_create", "fallocate", "pwrite", "pread", "fadvise", "fsync")

#: The `set` knobs the runner can set during a program (others are the host's: --host-set).
RUNNER_SETS = ("vm/drop_caches",)

_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _file_name(op: Mapping[str, Any]) -> str:
    """The file an op names, checked: [A-Za-z0-9_.-], not "." or "..", at most 63 bytes."""
    f = op.get("file")
    if not isinstance(f, str) or not _NAME.fullmatch(f) or f in (".", "..") or len(f) > 63:
        raise MmsimError(
            f"validate: {op.get('op')}: file {f!r}: the native runner takes a name of [A-Za-z0-9_.-] (not . or ..), "
            "at most 63 characters"
        )
    return f


def _chunk(op: Mapping[str, Any]) -> int:
    chunk = parse_size(op.get("chunk", 4096))
    if not 1 <= chunk <= MAX_CHUNK:
        raise MmsimError(
            f"validate: {op['op']} {op.get('file')}: chunk {op.get('chunk')!r}: the native runner reads and writes at "
            f"most {MAX_CHUNK} bytes (2 MiB) per call, from a buffer of its own"
        )
    return chunk


def all_ops(program: list[Any]) -> Iterator[Mapping[str, Any]]:
    """Every op of a program, nested ones too."""
    for op in program:
        if not isinstance(op, Mapping):
            continue
        yield op
        for key in ("program", "body"):
            if isinstance(op.get(key), list):
                yield from all_ops(op[key])


def file_systems(program: list[Any]) -> set[str]:
    """The filesystems a program's creates put files on ("ext4" unless "fs" says otherwise)."""
    return {str(op.get("fs", "ext4")) for op in all_ops(program) if op.get("op") == "create"}


def sets_drop_caches(program: list[Any]) -> bool:
    """Does a program write /proc/sys/vm/drop_caches (a `set` op of vm/drop_caches)?"""
    return any(op.get("op") == "set" and op.get("knob") == "vm/drop_caches" for op in all_ops(program))


#: cgroup_write's files (cgroup v2's names) and what each takes: a limit ("max" or a size),
#: memory.oom.group's 0 or 1, anything for memory.peak (a write resets it), 0 for cgroup.procs
#: (the writing process moves there); a write to memory.reclaim is the memory_reclaim op's.
CGROUP_FILES = (
    "memory.max",
    "memory.high",
    "memory.low",
    "memory.min",
    "memory.swap.max",
    "memory.swap.high",
    "memory.oom.group",
    "memory.reclaim",
    "memory.peak",
    "cgroup.procs",
)

#: memory.reclaim's swappiness=max (SWAPPINESS_ANON_ONLY), as the runner takes it.
SWAPPINESS_MAX = 201


def _cgroup_name(name: Any, what: str) -> str:
    """A cgroup path the runner takes: parts of [A-Za-z0-9_.-], not . or .., joined by /."""
    parts = str(name).split("/") if isinstance(name, str) else []
    if not parts or any(not _NAME.fullmatch(p) or p in (".", "..") for p in parts) or len(name) > 120:
        raise MmsimError(f"validate: {what}: cgroup {name!r}: a path of names of [A-Za-z0-9_.-] (a/b), at most 120")
    return name


def _limit_value(v: Any, what: str) -> int:
    """A limit file's value as the runner takes it: bytes, -1 for "max"."""
    if isinstance(v, str) and v.strip() == "max":
        return -1
    try:
        return parse_size(v)
    except MmsimError:
        raise MmsimError(f'validate: {what}: expected "max" or a size, got {v!r}') from None


def _reclaim_request(text: Any, what: str) -> tuple[int, int]:
    """memory.reclaim's "BYTES [swappiness=N|max]" as (bytes, swappiness; -1: none)."""
    words = str(text).split()
    if not words:
        raise MmsimError(f"validate: {what}: expected a size to reclaim")
    swappiness = -1
    for w in words[1:]:
        v = w.removeprefix("swappiness=")
        if v == w or not (v == "max" or (v.isdigit() and int(v) <= 200)):
            raise MmsimError(f"validate: {what}: {w!r}: expected swappiness=N (0..200) or swappiness=max")
        swappiness = SWAPPINESS_MAX if v == "max" else int(v)
    return parse_size(words[0]), swappiness


def compile_workload(workload: Mapping[str, Any]) -> str:
    """The runner's line format of a whole workload: its cgroups (``cgroup NAME``, each parent
    first), the first process's (``join NAME``), then its program (:func:`compile_program`)."""
    cgroups = workload.get("cgroups") or {}
    head = [f"cgroup {_cgroup_name(n, 'cgroups')}" for n in sorted(cgroups, key=lambda n: (n.count("/"), n))]
    own = workload.get("cgroup")
    if own is not None:
        if own not in cgroups:
            raise MmsimError(f"validate: cgroup {own!r}: not one of the workload's cgroups")
        head.append(f"join {own}")
    for op in all_ops(workload.get("program", [])):
        cg = op.get("cgroup") if op.get("op") in ("fork", "memory_reclaim", "cgroup_write") else None
        if cg is not None and cg not in cgroups:
            raise MmsimError(f"validate: {op['op']}: cgroup {cg!r}: not one of the workload's cgroups")
    return "".join(f"{line}\n" for line in head) + compile_program(list(workload.get("program", [])))


def compile_program(ops: list[Mapping[str, Any]]) -> str:
    """The runner's line format of a program (see native/runner.c). A file op or file mapping
    must name a file some create or memfd_create op of the program makes; fallocate, which
    mmsim does not model on ext4, a file no create makes on ext4."""
    created = {op.get("file") for op in all_ops(ops) if op.get("op") in ("create", "memfd_create")}
    ext4 = {op.get("file") for op in all_ops(ops) if op.get("op") == "create" and op.get("fs", "ext4") == "ext4"}
    hugetlbfs = {op.get("file") for op in all_ops(ops) if op.get("op") == "memfd_create" and op.get("hugetlb")}
    for op in all_ops(ops):
        if op.get("op") == "fallocate" and op.get("file") in ext4:
            raise MmsimError(f"validate: fallocate {op.get('file')}: fallocate of an ext4 file is not modelled")
    for op in all_ops(ops):
        f = op.get("file") if op.get("op") in (*FILE_OPS, "mmap") else None
        if f is not None and f not in created:
            what = f"mmap {op.get('name')}" if op.get("op") == "mmap" else f"{op['op']} {f}"
            raise MmsimError(f"validate: {what}: no create op of the workload makes the file {f!r}")
    return "\n".join(x for x in _compile(ops, hugetlbfs) if x) + "\n"


def _compile(ops: list[Mapping[str, Any]], hugetlbfs: AbstractSet[Any] = frozenset()) -> list[str]:
    out: list[str] = []
    for op in ops:
        if op["op"] == "exec":
            # The ELF loader's mapping of the text, as the engine makes it (ExecOp::to_mmap).
            e = op
            op = {"op": "mmap", "name": e["name"], "size": e["text_size"], "file": e["file"], "file_offset": 0}
            op |= {"flags": ["private"], "prot": "rx"} | {k: v for k, v in e.items() if k in ("align", "addr")}
            if "addr" in e:
                op["fixed"] = True
        kind = op["op"]
        region = op.get("region", "")
        off = parse_size(op.get("offset", 0))
        length = parse_size(op["length"]) if "length" in op else -1
        if kind == "mmap":
            file = op.get("file")
            flags = op.get("flags", ["private"] if file is not None else ["private", "anonymous"])
            for own in ("dontexpand", "nomerge"):
                if own in flags:
                    raise MmsimError(f"validate: the native runner cannot map with the {own} flag (mmsim's own)")
            unknown = [f for f in flags if f not in MMAP_FLAGS]
            if unknown:
                raise MmsimError(
                    f"validate: mmap {op.get('name')}: flags: {unknown[0]!r} is not a flag the native runner knows "
                    f"({', '.join(MMAP_FLAGS)})"
                )
            # Bit 0: MAP_SHARED, bit 1: MAP_HUGETLB, bit 2: a mapping of FILE at FILE_OFFSET, the
            # two fields after FIXED (native/runner.c).
            bits = (1 if "shared" in flags else 0) | (2 if "hugetlb" in flags else 0)
            tail = ""
            if file is not None:
                bad = [f for f in flags if f in ("anonymous", "hugetlb")]
                if bad:
                    raise MmsimError(f"validate: mmap {op.get('name')}: a mapping of file {file!r} cannot be {bad[0]}")
                # A hugetlb memfd: the kernel rounds the length to huge pages (MAP_HUGETLB
                # with a hugetlbfs file is allowed and changes nothing else).
                bits |= 4 | (2 if file in hugetlbfs else 0)
                tail = f" {_file_name(op)} {parse_size(op.get('file_offset', 0))}"
            out.append(
                f"mmap {op['name']} {parse_size(op['size'])} {parse_size(op.get('align', 0))} "
                f"{prot_bits(op.get('prot', 'rw'))} {bits} {parse_size(op.get('addr', 0))} "
                f"{int(bool(op.get('fixed')))}{tail}"
            )
        elif kind == "brk":
            delta = op["delta"]
            sign = -1 if isinstance(delta, str) and delta.strip().startswith("-") else 1
            n = sign * parse_size(delta.strip().lstrip("-")) if isinstance(delta, str) else int(delta)
            out.append(f"brk {op['name']} {n}")
        elif kind == "mremap":
            asked = {"maymove": op.get("maymove", True), "fixed": op.get("fixed"), "dontunmap": op.get("dontunmap")}
            bits = sum(v for w, v in MREMAP_BITS.items() if asked[w])
            out.append(
                f"mremap {region} {parse_size(op['size'])} {bits} {parse_size(op.get('addr', 0))} {off} {length} "
                f"{op.get('name') or '-'}"
            )
        elif kind == "mlock":
            out.append(f"mlock {region} {off} {length} {int(bool(op.get('onfault')))}")
        elif kind == "munlock":
            out.append(f"munlock {region} {off} {length}")
        elif kind == "mlockall":
            flags = op.get("flags") or []
            unknown = [f for f in flags if f not in MCL_FLAGS]
            if unknown or not flags:
                raise MmsimError(f"validate: mlockall: flags {flags!r}: a non-empty list of {', '.join(MCL_FLAGS)}")
            out.append(f"mlockall {sum(MCL_FLAGS[f] for f in set(flags))}")
        elif kind == "munlockall":
            out.append("munlockall")
        elif kind == "madvise":
            advice = op.get("advice")
            if advice not in MADVICE:
                raise MmsimError(
                    f"validate: madvise {region}: advice {advice!r} is not one the native runner knows "
                    f"({', '.join(MADVICE)})"
                )
            out.append(f"madvise {region} {off} {length} {advice} {ADVICE_VALUE[advice]}")
        elif kind in ("munmap", "mprotect"):
            extra = f" {prot_bits(str(op.get('prot')))}" if kind == "mprotect" else ""
            out.append(f"{kind} {region} {off} {length}{extra}")
        elif kind in ("read", "write"):
            value = op.get("expect", -1) if kind == "read" else op.get("value", 1)
            value = -1 if value is None else value
            block = parse_size(op.get("block", 0))
            bstride = parse_size(op.get("block_stride", 64))
            random = op.get("pattern", "sequential") == "random"
            count, seed = (op["count"], op.get("seed", 0)) if random else (-1, 0)
            out.append(
                f"{kind} {region} {off} {length} {parse_size(op.get('stride', 4096))} {value} "
                f"{block} {bstride} {count} {seed}"
            )
        elif kind == "compare":
            a, b = op["a"], op["b"]
            expect = op.get("expect")
            e = -1 if expect is None else int(bool(expect))
            out.append(
                f"compare {a['region']} {parse_size(a.get('offset', 0))} "
                f"{b['region']} {parse_size(b.get('offset', 0))} "
                f"{parse_size(op['length'])} {parse_size(op.get('stride', 0))} {e}"
            )
        elif kind == "atomic":
            if parse_size(op.get("hold", 0)) > 0:
                raise MmsimError("validate: the native runner cannot run an atomic op with hold (a spinlock)")
            out.append(f"atomic {region} {off} {op.get('count', 1)}")
        elif kind == "create":
            fs = op.get("fs", "ext4")
            if fs not in FILESYSTEMS:
                raise MmsimError(f"validate: create {op.get('file')}: fs {fs!r} is not one of {', '.join(FILESYSTEMS)}")
            out.append(f"create {_file_name(op)} {parse_size(op['size'])} {fs}")
        elif kind == "memfd_create":
            out.append(f"memfd_create {_file_name(op)} {parse_size(op['size'])} {int(bool(op.get('hugetlb')))}")
        elif kind == "fallocate":
            modes = op.get("mode") or []
            unknown = [m for m in modes if m not in FALLOC_MODE]
            if unknown:
                raise MmsimError(
                    f"validate: fallocate {op.get('file')}: mode {unknown[0]!r} is not one of {', '.join(FALLOC_MODE)}"
                )
            bits = sum(FALLOC_MODE[m] for m in set(modes))
            out.append(f"fallocate {_file_name(op)} {off} {parse_size(op['length'])} {bits}")
        elif kind in ("pwrite", "pread"):
            value = op.get("value", 1) if kind == "pwrite" else op.get("expect")
            value = -1 if value is None else int(value)
            if not (0 if kind == "pwrite" else -1) <= value <= 255:
                raise MmsimError(f"validate: {kind} {op.get('file')}: a byte value is 0 to 255, got {value}")
            out.append(f"{kind} {_file_name(op)} {off} {length} {_chunk(op)} {value}")
        elif kind == "fadvise":
            advice = op.get("advice")
            if advice not in FADVICE:
                raise MmsimError(
                    f"validate: fadvise {op.get('file')}: advice {advice!r} is not one of {', '.join(FADVICE)}"
                )
            flen = parse_size(op.get("length", 0))
            out.append(f"fadvise {_file_name(op)} {off} {flen} {advice}")
        elif kind == "fsync":
            out.append(f"fsync {_file_name(op)}")
        elif kind == "set" and op.get("knob") in RUNNER_SETS:
            value = str(op.get("value")).strip()
            if value not in ("1", "2", "3"):
                raise MmsimError(f"validate: set vm/drop_caches: the value is 1, 2 or 3, got {op.get('value')!r}")
            out.append(f"drop_caches {value}")
        elif kind in ("loop", "fork", "thread"):
            n = op.get("count", 1)
            cg = op.get("cgroup") if kind == "fork" else None
            out.append(f"{kind} {n}" + (f" {_cgroup_name(cg, 'fork')}" if cg is not None else ""))
            out.extend(_compile(op.get("body" if kind == "loop" else "program", []), hugetlbfs))
            out.append("end")
        elif kind == "memory_reclaim":
            cg = op.get("cgroup")
            what = f"memory_reclaim {cg or ''}".strip()
            sw = op.get("swappiness")
            if sw is not None and (not isinstance(sw, int) or not 0 <= sw <= 200):
                raise MmsimError(f"validate: {what}: swappiness {sw!r}: expected 0..200")
            name = _cgroup_name(cg, "memory_reclaim") if cg is not None else "-"
            out.append(f"memory_reclaim {name} {parse_size(op['bytes'])} {-1 if sw is None else sw}")
        elif kind == "cgroup_write":
            cg, f, v = op.get("cgroup"), op.get("file"), op.get("value")
            what = f"cgroup_write {cg} {f}"
            if f not in CGROUP_FILES:
                raise MmsimError(f"validate: {what}: not one of {', '.join(CGROUP_FILES)}")
            name = _cgroup_name(cg, "cgroup_write")
            if f == "memory.reclaim":
                nbytes, sw = _reclaim_request(v, what)
                out.append(f"memory_reclaim {name} {nbytes} {sw}")
                continue
            if f == "memory.oom.group":
                text = str(v).strip().lower()
                if text not in ("0", "1", "true", "false"):
                    raise MmsimError(f"validate: {what}: expected 0 or 1, got {v!r}")
                value = int(text in ("1", "true"))
            elif f == "memory.peak":
                value = 0
            elif f == "cgroup.procs":
                if str(v).strip() != "0":
                    raise MmsimError(f"validate: {what}: expected 0 (the writing process), got {v!r}")
                value = 0
            else:
                value = _limit_value(v, what)
            out.append(f"cgroup_write {name} {f} {value}")
        elif kind in ("wait", "exit"):
            out.append(kind)
        elif kind == "snapshot":
            label = op["label"]
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
                raise MmsimError(f"validate: snapshot label {label!r}: the native runner takes [A-Za-z0-9_.-] only")
            out.append(f"snapshot {label}")
        else:
            raise MmsimError(f"validate: the native runner cannot run the {kind!r} op")
    return out
