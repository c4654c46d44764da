"""The real kernel as an oracle: run a workload natively (``native/runner.c``) and compare
what the kernel did with what mmsim predicts (``mmsim validate``).

The runner executes the workload compiled to a line format (:func:`compile_program`) with real
mmap/munmap/mprotect/madvise/fork/wait and one-byte-per-stride reads and writes, and reports
at each ``snapshot`` the process's fault counts (getrusage), /proc/self/status, smaps_rollup's
AnonHugePages and system-wide /proc/vmstat and /proc/meminfo counters. Comparisons are of
changes between two snapshots of one process: a real process's start-up (libc, stack) is not
the workload's.

Files (the ops create, pwrite, pread, fadvise, fsync, an mmap of a file, and ``set`` of
``vm/drop_caches``) need, for the filesystems a workload's creates name:

- ``ext4``: a writable directory on an ext4 filesystem. By default the repository's
  ``target/`` (in a checkout), else :func:`tempfile.gettempdir`, else mmsim's cache directory,
  the first that is on ext4; ``mmsim validate --dir ext4=PATH`` chooses another.
- ``tmpfs``: a writable directory on a tmpfs, ``/dev/shm`` by default (``--dir tmpfs=PATH``).

Each run works in a directory of its own, ``DIR/mmsim-PID`` (PID the runner's), removed when the
run ends, also when it fails. A workload that creates files on a filesystem with no such
directory is refused (:class:`MmsimError`, naming it). ``set`` of ``vm/drop_caches`` needs root.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from mmsim._mmsim import MmsimError
from mmsim.runner_build import runner_path

__all__ = ["Case", "compile_program", "host_settings", "parse_size", "run_native", "validate_case"]

THP = Path("/sys/kernel/mm/transparent_hugepage")

_SIZE = re.compile(r"^\s*(0x[0-9a-fA-F]+|\d+)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)


def parse_size(v: Any) -> int:
    """A workload size (``4096``, ``"4K"``, ``"2MiB"``, ``"0x200000"``) in bytes.

    >>> parse_size("2M"), parse_size(4096), parse_size("0x1000")
    (2097152, 4096, 4096)
    """
    if isinstance(v, int):
        return v
    m = _SIZE.match(str(v))
    if not m:
        raise MmsimError(f"validate: {v!r} is not a size")
    n = int(m.group(1), 0)
    return n << (10 * " KMGT".index((m.group(2) or " ").upper()))


#: The mmap flags the native runner maps with (mmsim's own `dontexpand` has no native form).
MMAP_FLAGS = ("private", "shared", "anonymous", "hugetlb")

#: madvise advice the native runner knows (native/runner.c's advice_of).
MADVICE = (
    "hugepage",
    "nohugepage",
    "dontneed",
    "populate_read",
    "populate_write",
    "collapse",
    "willneed",
    "sequential",
    "random",
)

#: The filesystems a workload's files may be on, and posix_fadvise's advice the runner knows.
FILESYSTEMS = ("ext4", "tmpfs")
FADVICE = ("dontneed", "willneed")

#: The runner's buffer of file reads and writes (native/runner.c IO_BUF): a pread or pwrite
#: call moves at most this many bytes.
MAX_CHUNK = 2 << 20

#: The ops on a workload's files (besides an mmap with "file"), each naming it in "file".
FILE_OPS = ("create", "pwrite", "pread", "fadvise", "fsync")

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


def _ops(program: list[Any]) -> Iterator[Mapping[str, Any]]:
    """Every op of a program, nested ones too."""
    for op in program:
        if not isinstance(op, Mapping):
            continue
        yield op
        for key in ("program", "body"):
            if isinstance(op.get(key), list):
                yield from _ops(op[key])


def file_systems(program: list[Any]) -> set[str]:
    """The filesystems a program's creates put files on ("ext4" unless "fs" says otherwise)."""
    return {str(op.get("fs", "ext4")) for op in _ops(program) if op.get("op") == "create"}


def sets_drop_caches(program: list[Any]) -> bool:
    """Does a program write /proc/sys/vm/drop_caches (a `set` op of vm/drop_caches)?"""
    return any(op.get("op") == "set" and op.get("knob") == "vm/drop_caches" for op in _ops(program))


def compile_program(ops: list[Mapping[str, Any]]) -> str:
    """The runner's line format of a program (see native/runner.c). A file op or file mapping
    must name a file some create op of the program makes."""
    created = {op.get("file") for op in _ops(ops) if op.get("op") == "create"}
    for op in _ops(ops):
        f = op.get("file") if op.get("op") in (*FILE_OPS, "mmap") else None
        if f is not None and f not in created:
            what = f"mmap {op.get('name')}" if op.get("op") == "mmap" else f"{op['op']} {f}"
            raise MmsimError(f"validate: {what}: no create op of the workload makes the file {f!r}")
    return "\n".join(x for x in _compile(ops) if x) + "\n"


def _compile(ops: list[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for op in ops:
        kind = op["op"]
        region = op.get("region", "")
        off = parse_size(op.get("offset", 0))
        length = parse_size(op["length"]) if "length" in op else -1
        if kind == "mmap":
            file = op.get("file")
            flags = op.get("flags", ["private"] if file is not None else ["private", "anonymous"])
            if "dontexpand" in flags:
                raise MmsimError("validate: the native runner cannot map with the dontexpand flag (mmsim's own)")
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
                bits |= 4
                tail = f" {_file_name(op)} {parse_size(op.get('file_offset', 0))}"
            out.append(
                f"mmap {op['name']} {parse_size(op['size'])} {parse_size(op.get('align', 0))} "
                f"{op.get('prot', 'rw')} {bits} {parse_size(op.get('addr', 0))} {int(bool(op.get('fixed')))}{tail}"
            )
        elif kind == "mremap":
            fixed = bool(op.get("fixed"))
            out.append(f"mremap {region} {parse_size(op['size'])} {int(fixed)} {parse_size(op.get('addr', 0))}")
        elif kind in ("mlock", "munlock"):
            out.append(f"{kind} {region} {off} {length}")
        elif kind == "madvise":
            advice = op.get("advice")
            if advice not in MADVICE:
                raise MmsimError(
                    f"validate: madvise {region}: advice {advice!r} is not one the native runner knows "
                    f"({', '.join(MADVICE)})"
                )
            out.append(f"madvise {region} {off} {length} {advice}")
        elif kind in ("munmap", "mprotect"):
            extra = {"munmap": "", "mprotect": f" {op.get('prot')}"}[kind]
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
            out.append(f"{kind} {n}")
            out.extend(_compile(op.get("body" if kind == "loop" else "program", [])))
            out.append("end")
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


def host_settings() -> dict[str, Any]:
    """The host's THP settings, page size and hugetlb pool, as sysfs and procfs show them; and
    for a workload's files, where they go (``file_dirs``: {"ext4": PATH, "tmpfs": PATH}, None
    for a filesystem with no directory; ``mmsim validate --dir FS=PATH`` chooses them, see
    :func:`file_dirs`), the ext4 directory's disk's ``read_ahead_kb`` and the tmpfs
    directory's ``huge=`` mount option (``tmpfs_huge``)."""

    def sel(p: Path) -> str | None:
        try:
            t = p.read_text().strip()
        except OSError:
            return None
        m = re.search(r"\[([^\]]+)\]", t)
        return m.group(1) if m else t

    s: dict[str, Any] = {
        "transparent_hugepage/enabled": _pmd_enabled(sel),
        "transparent_hugepage/defrag": sel(THP / "defrag"),
        "transparent_hugepage/use_zero_page": sel(THP / "use_zero_page"),
        "transparent_hugepage/khugepaged/defrag": sel(THP / "khugepaged" / "defrag"),
        "page_size": os.sysconf("SC_PAGE_SIZE"),
        "kernel": os.uname().release,
    }
    for knob in POOL_KNOBS:
        try:
            s[knob] = int(sysctl_path(knob).read_text())
        except (OSError, ValueError):
            s[knob] = None
    s["nr_hugepages"] = s["vm/nr_hugepages"]
    s["hugetlb"] = hugetlb_meminfo()
    s["transparent_hugepage/shmem_enabled"] = sel(THP / "shmem_enabled")
    # Anonymous mTHP sizes other than the PMD size that may be used (mmsim has none).
    s["mthp_enabled"] = sorted(
        d.name.removeprefix("hugepages-")
        for d in (THP.glob("hugepages-*kB") if THP.exists() else [])
        if d.name != f"hugepages-{PMD_KB}kB" and sel(d / "enabled") not in (None, "never")
    )
    s["fault_around_bytes"] = _fault_around_bytes()
    s["kernel/pt_reclaim"] = _pt_reclaim()
    # Where a workload's files go (see the module's docstring; `mmsim validate --dir FS=PATH`
    # overrides), the readahead of the ext4 directory's disk (read_ahead_kb: the ra_pages a
    # file opened there starts with) and the tmpfs directory's mount option huge=.
    dirs = file_dirs()
    s["file_dirs"] = dirs
    s["read_ahead_kb"] = read_ahead_kb(dirs["ext4"]) if dirs.get("ext4") else None
    s["max_sectors_kb"] = read_ahead_kb(dirs["ext4"], "max_sectors_kb") if dirs.get("ext4") else None
    s["tmpfs_huge"] = tmpfs_huge(dirs["tmpfs"]) if dirs.get("tmpfs") else None
    return s


def _unescape(field: str) -> str:
    """A mountinfo path: \\040 and the like are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mount_of(path: str | Path) -> tuple[str, str] | None:
    """The filesystem type and super options of the mount holding `path` (or its nearest existing
    ancestor), from /proc/self/mountinfo: the mount of the path's device, else the longest
    mount point above it. None where mountinfo cannot be read."""
    p = Path(os.path.realpath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        text = Path("/proc/self/mountinfo").read_text()
        st = os.stat(p)
    except OSError:
        return None
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    by_dev, by_prefix = None, None
    best = -1
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if not sep or len(f) < 5 or len(r) < 3:
            continue
        info = (r[0], r[2])
        point = _unescape(f[4])
        if f[2] == dev and by_dev is None:
            by_dev = info
        under = str(p) == point or str(p).startswith(point.rstrip("/") + "/")
        if under and len(point) >= best:
            best, by_prefix = len(point), info
    return by_dev or by_prefix


def fs_type(path: str | Path) -> str | None:
    """The type of the filesystem `path` is on ("ext4", "tmpfs"; None if unknown)."""
    m = _mount_of(path)
    return m[0] if m else None


def tmpfs_huge(path: str | Path) -> str:
    """The huge= mount option of the tmpfs `path` is on ("never" without one)."""
    m = _mount_of(path)
    opts = dict(o.partition("=")[::2] for o in (m[1] if m else "").split(","))
    return opts.get("huge") or "never"


def read_ahead_kb(path: str | Path, attr: str = "read_ahead_kb") -> int | None:
    """read_ahead_kb (or another queue attribute, such as max_sectors_kb) of the block device
    the filesystem of `path` is on (a partition's is its disk's); None where there is none
    (tmpfs) or sysfs does not say."""
    try:
        dev = os.stat(path).st_dev
        d = Path(os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"))
        if (d / "partition").exists():
            d = d.parent
        return int((d / "queue" / attr).read_text())
    except (OSError, ValueError):
        return None


#: The repository's target/ where mmsim runs from a checkout (None when installed).
_CHECKOUT = Path(__file__).resolve().parents[2]
_TARGET = _CHECKOUT / "target" if (_CHECKOUT / "Cargo.toml").is_file() else None

#: Directories given with `mmsim validate --dir FS=PATH` (see :func:`file_dirs_override`).
_dir_overrides: dict[str, str] = {}


def _usable(fs: str, path: str | Path) -> str:
    """Why `path` cannot hold the workload's `fs` files ("" if it can): it must be a writable
    directory (or one to create under a writable one) on that filesystem."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        return f"{path} is not a directory"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    t = fs_type(path)
    if t != fs:
        return f"{path} is on {t or 'a filesystem of unknown type'}, not {fs}"
    return ""


def default_file_dirs() -> dict[str, str | None]:
    """Where a workload's files go unless `--dir` says: ext4, the repository's ``target/`` (a
    checkout), else :func:`tempfile.gettempdir`, else mmsim's cache directory, the first on
    ext4; tmpfs, ``/dev/shm``. None for a filesystem with no such directory."""
    from mmsim.runner_build import cache_dir

    ext4 = [*([_TARGET] if _TARGET else []), Path(tempfile.gettempdir()), cache_dir()]
    return {
        "ext4": next((str(d) for d in ext4 if not _usable("ext4", d)), None),
        "tmpfs": "/dev/shm" if not _usable("tmpfs", "/dev/shm") else None,
    }


def file_dirs() -> dict[str, str | None]:
    """The directories of a workload's files now: `--dir`'s, else :func:`default_file_dirs`."""
    return {**default_file_dirs(), **_dir_overrides}


def parse_dir_options(values: list[str]) -> dict[str, str]:
    """`mmsim validate --dir FS=PATH` options as {FS: PATH}, each checked (:func:`_usable`)."""
    out: dict[str, str] = {}
    for v in values:
        fs, eq, path = v.partition("=")
        if not eq or fs not in FILESYSTEMS or not path:
            raise MmsimError(f"validate: --dir expects FS=PATH with FS one of {', '.join(FILESYSTEMS)}, got {v!r}")
        why = _usable(fs, path)
        if why:
            raise MmsimError(f"validate: --dir {v}: {why}")
        out[fs] = str(Path(path).resolve())
    return out


@contextlib.contextmanager
def file_dirs_override(dirs: Mapping[str, str]) -> Iterator[None]:
    """Put the workloads' files of each filesystem in `dirs` ({FS: PATH}, as
    :func:`parse_dir_options` gives) for the block: :func:`file_dirs` and every run say so."""
    saved = dict(_dir_overrides)
    _dir_overrides.update(dirs)
    try:
        yield
    finally:
        _dir_overrides.clear()
        _dir_overrides.update(saved)


#: The PMD size in kB (x86-64: 2 MiB), the mTHP size the global THP knob stands for.
PMD_KB = 2048

#: The hugetlb pool's sysctls: a case's workload may set them in its `knobs` (and `--host-set`
#: may), and validate writes them for the case and restores the host's values after it. mmsim
#: has knobs of the same names, which it is given as the host has them.
POOL_KNOBS = ("vm/nr_hugepages", "vm/nr_overcommit_hugepages")

#: The pool's state in /proc/meminfo (pages, and Hugepagesize in kB).
POOL_STATE = ("HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "Hugepagesize")


def sysctl_path(knob: str) -> Path:
    """/proc/sys/vm/nr_hugepages for ``vm/nr_hugepages``."""
    return Path("/proc/sys") / knob


def hugetlb_meminfo() -> dict[str, int]:
    """The hugetlb pool as /proc/meminfo shows it (:data:`POOL_STATE`; empty without hugetlb)."""
    out: dict[str, int] = {}
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in POOL_STATE and rest.split():
            out[key] = int(rest.split()[0])
    return out


def _mmaps(program: list[Any]) -> Iterator[Mapping[str, Any]]:
    """Every mmap op of a program, nested ones too."""
    for op in program:
        if not isinstance(op, Mapping):
            continue
        if op.get("op") == "mmap":
            yield op
        for key in ("program", "body"):
            if isinstance(op.get(key), list):
                yield from _mmaps(op[key])


def uses_hugetlb(program: list[Any]) -> bool:
    """Does a program map hugetlb memory (an mmap with the "hugetlb" flag)?"""
    return any("hugetlb" in (op.get("flags") or ()) for op in _mmaps(program))


def pool_in_use(state: Mapping[str, int]) -> str:
    """Why the host's hugetlb pool is not the case's to use ("" if it is free): pages reserved,
    surplus or in use by another process."""
    total, free = state.get("HugePages_Total", 0), state.get("HugePages_Free", 0)
    rsvd, surp = state.get("HugePages_Rsvd", 0), state.get("HugePages_Surp", 0)
    if rsvd or surp or free != total:
        return (
            f"the host's hugetlb pool is in use by another process (HugePages_Total {total}, HugePages_Free "
            f"{free}, HugePages_Rsvd {rsvd}, HugePages_Surp {surp})"
        )
    return ""


def _pmd_enabled(sel: Any) -> str | None:
    """THP for PMD-sized pages: hugepages-2048kB/enabled unless it says "inherit" (Linux >= 6.8),
    then the global transparent_hugepage/enabled."""
    own = sel(THP / f"hugepages-{PMD_KB}kB" / "enabled")
    return sel(THP / "enabled") if own in (None, "inherit") else own


def _pt_reclaim() -> str:
    """CONFIG_PT_RECLAIM of the running kernel: from /proc/config.gz where the kernel exposes
    its config, else by version (Linux >= 6.14 builds it by default on x86-64)."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            return "1" if any(line.strip() == "CONFIG_PT_RECLAIM=y" for line in f) else "0"
    except (OSError, EOFError):
        pass
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return "1" if m and (int(m.group(1)), int(m.group(2))) >= (6, 14) else "0"


def _fault_around_bytes() -> int:
    """debugfs's fault_around_bytes (mounted or not: Linux's default then, 64 KiB)."""
    try:
        return int(Path("/sys/kernel/debug/fault_around_bytes").read_text())
    except (OSError, ValueError):
        return 65536


def unmirrored(workload: Mapping[str, Any], host: Mapping[str, Any]) -> str:
    """Why host state that mmsim cannot mirror would change this workload's counts ("" if none)."""
    if host.get("transparent_hugepage/enabled") is None:
        return "the host kernel has no transparent hugepage support"
    if uses_hugetlb(workload.get("program", [])):
        if host.get("vm/nr_hugepages") is None:
            return "the host kernel has no hugetlb support (no /proc/sys/vm/nr_hugepages)"
        size = (host.get("hugetlb") or {}).get("Hugepagesize")
        if size != PMD_KB:
            return f"the host's default hugetlb page is {size} kB; mmsim's is {PMD_KB} kB"
    if host.get("mthp_enabled"):
        sizes = ", ".join(host["mthp_enabled"])
        return f"the host has anonymous mTHP sizes enabled ({sizes}); mmsim models PMD THPs only"
    shared = '"shared"' in json.dumps(workload.get("program", []))
    if shared and host.get("transparent_hugepage/shmem_enabled") not in (None, "never", "deny"):
        return (
            f"shmem_enabled is {host['transparent_hugepage/shmem_enabled']} on the host and the workload maps shared "
            "memory; mmsim has no shmem THPs"
        )
    # tmpfs files get huge folios from their mount's huge= option, or from shmem_enabled=force
    # (which the check above sees only for a workload with a shared mapping).
    if "tmpfs" in file_systems(workload.get("program", [])):
        if host.get("transparent_hugepage/shmem_enabled") == "force":
            return "shmem_enabled is force on the host and the workload creates tmpfs files; mmsim has no shmem THPs"
        if host.get("tmpfs_huge") not in (None, "never", "deny"):
            return (
                f"the tmpfs directory {(host.get('file_dirs') or {}).get('tmpfs')} is mounted with "
                f"huge={host['tmpfs_huge']}; mmsim has no shmem THPs (give another with --dir tmpfs=PATH)"
            )
    return ""


def _run_dirs(program: list[Any], dirs: Mapping[str, str | None] | None) -> dict[str, str]:
    """The directories a program's files go in, for the filesystems it creates files on: `dirs`
    (default :func:`file_dirs`); none for a filesystem without one is an error naming it."""
    have = file_dirs() if dirs is None else dict(dirs)
    out: dict[str, str] = {}
    for fs in sorted(file_systems(program)):
        d = have.get(fs)
        why = _usable(fs, d) if d else f"this host has no {fs} directory mmsim could find"
        if why:
            raise MmsimError(
                f"validate: the workload creates {fs} files and {why}: give a writable directory on {fs} "
                f"with --dir {fs}=PATH"
            )
        Path(d).mkdir(parents=True, exist_ok=True)
        out[fs] = str(d)
    return out


def _kill_group(p: subprocess.Popen[str]) -> None:
    """Kill a runner still running and the tasks it forked (its process group), and reap it."""
    if p.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def run_native(workload: Mapping[str, Any], dirs: Mapping[str, str | None] | None = None) -> list[dict[str, Any]]:
    """Run a workload on the host kernel; returns every snapshot line the runner wrote. Its
    files go in `dirs` ({FS: PATH}; default :func:`file_dirs`), in a directory of the run's
    own that is removed after it, also when it fails."""
    runner = runner_path()
    ops = workload.get("program", [])
    program = compile_program(ops)
    if sets_drop_caches(ops) and os.geteuid() != 0:
        raise MmsimError(
            "validate: the workload's set op of vm/drop_caches writes /proc/sys/vm/drop_caches, which needs root"
        )
    roots = _run_dirs(ops, dirs)
    # The lines come through a pipe: an output file would be page cache the runner reports.
    args = [str(runner), "/dev/stdout", *(f"{fs}={d}" for fs, d in roots.items())]
    # A session of its own: the runner and its children (a forked task may be running when a
    # timeout or Ctrl-C ends the run) are killed together before their files are removed.
    p = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(program, timeout=600)
    except subprocess.TimeoutExpired:
        _kill_group(p)
        raise MmsimError("validate: native run took more than 600 s") from None
    except BaseException:  # Ctrl-C
        _kill_group(p)
        raise
    finally:
        # The runner removes its directories as its first process ends; not when killed.
        for d in roots.values():
            shutil.rmtree(Path(d) / f"mmsim-{p.pid}", ignore_errors=True)
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    # The first process killed by SIGSEGV or SIGBUS (it said so, see native/runner.c) ended
    # the run as the workload did; anything else is the runner's failure.
    died = -p.returncode in (signal.SIGSEGV, signal.SIGBUS) and any(
        r["label"] == EVENT and r.get("kind") == "segfault" for r in rows
    )
    if p.returncode != 0 and not died:
        why = err.strip()[:300] or (f"killed by signal {-p.returncode}" if p.returncode < 0 else "")
        raise MmsimError(f"validate: native run failed ({p.returncode}): {why}")
    return rows


@dataclass
class Case:
    """A validation case: a workload whose snapshots `before` and `after` (taken by the
    processes named in `pids`) bracket the behaviour it pins down."""

    name: str
    pins: str
    program: list[dict[str, Any]]
    pids: tuple[int, ...] = (1,)
    counters: tuple[str, ...] = ("minflt", "RssAnon", "VmPTE", "AnonHugePages")
    #: System-wide counters (/proc/vmstat's, or /proc/meminfo's such as HugePages_Free),
    #: compared between the first pid's snapshots.
    vmstat: tuple[str, ...] = ()
    needs: dict[str, str] = field(default_factory=dict)
    tolerance: dict[str, float] = field(default_factory=dict)
    #: Host sysctls the case sets for its run (the hugetlb pool: :data:`POOL_KNOBS`), as a
    #: workload's `knobs` do; validate restores the host's values after it.
    knobs: dict[str, str] = field(default_factory=dict)
    #: The first pid is the only task that allocates or frees page tables between its
    #: snapshots, so the kernel's system-wide nr_page_table_pages must move by its VmPTE: a
    #: case that differs only there when it did not is skipped as another process's noise.
    own_tables: bool = False


def _snap(rows: list[dict[str, Any]], label: str, pid: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["label"] == label and r["pid"] == pid), None)


def _host_workload(name: str, program: list[Any], host: Mapping[str, Any]) -> dict[str, Any]:
    """A workload with the host's state as its knobs, so that mmsim starts where the kernel
    does: its THP settings, fault_around_bytes, and the huge zero folio, which the runner
    makes sure exists before the program (native/runner.c) wherever a THP read fault would
    map it: mmsim then has it from boot, and neither side counts its allocation."""
    knobs: dict[str, Any] = {k: host[k] for k in HOST_KNOBS if host.get(k) is not None}
    if host.get("fault_around_bytes"):
        knobs["fault_around_bytes"] = host["fault_around_bytes"]
    if host.get("kernel/pt_reclaim") is not None:
        knobs["kernel/pt_reclaim"] = host["kernel/pt_reclaim"]
    # The ext4 directory's block device: its readahead window and largest request.
    for k in ("read_ahead_kb", "max_sectors_kb"):
        if host.get(k) is not None:
            knobs[f"block/{k}"] = str(host[k])
    if host.get("transparent_hugepage/use_zero_page") == "1" and host.get("transparent_hugepage/enabled") not in (
        None,
        "never",
    ):
        knobs["transparent_hugepage/huge_zero_page_alloc"] = "boot"
    # The hugetlb pool, as the host has it (a case's knobs have sized it: see with_pool), for a
    # program that maps hugetlb memory or a host with a pool.
    if uses_hugetlb(program) or any(host.get(k) for k in POOL_KNOBS):
        knobs.update({k: host[k] for k in POOL_KNOBS if host.get(k) is not None})
    return {"name": name, "knobs": knobs, "program": program}


#: How mmsim runs a workload it compares with the kernel: the serial schedule, which the
#: runner follows too (a task a fork or thread op creates runs to its end before the next,
#: and all of them before their creator goes on), so that no count depends on timing.
SIM_SETS = {"engine.schedule": "serial"}

#: Labels of the implicit snapshots: every process and thread at its start (the first
#: process before its first op, a child or thread when it is created) and at its end.
BEGIN, END = "__begin", "__end"


#: mmsim's first process: a 132 KiB stack vma below TASK_SIZE (kernel/fork.rs exec_mm).
TASK_SIZE = 0x7FFFFFFFF000
STACK_TOP_VMA = 132 * 1024


def host_layout(maps: list[list[Any]]) -> list[dict[str, Any]]:
    """Ops that give mmsim's first process the runner's address space before the program: an
    anonymous stand-in at the address of each of the runner's mappings (its binary, heap,
    libraries, vdso, stack, thread stacks), every page written, so that mmsim's top-down mmap
    puts the workload's regions where the kernel did and the same page tables exist already
    (VmPTE would otherwise differ by the tables the runner's own mappings share with them).
    A stand-in merges with a workload's region only where the kernel's mapping would: a shared
    mapping's is shared, and a file's or a special mapping's (vdso) never merges (mmsim's
    `dontexpand`, until mmsim models files). A PROT_NONE mapping (the runner's mlock-drain
    page, a library's gap) is a stand-in never written. mmsim's own stack vma stands for the
    top of the runner's stack."""
    ops: list[dict[str, Any]] = []
    for i, (start, end, perms, kind) in enumerate(maps):
        if start >= TASK_SIZE:
            continue
        if kind == "stack":
            end = min(end, TASK_SIZE - STACK_TOP_VMA)
            if end <= start:
                continue
        name = f"__host{i}"
        flags = ["shared" if perms[3:4] == "s" else "private", "anonymous"]
        if kind in ("file", "special"):
            flags.append("dontexpand")
        ops.append({"op": "mmap", "name": name, "size": end - start, "addr": start, "fixed": True, "flags": flags})
        if perms[:3] != "---":
            ops.append({"op": "write", "region": name})
        # The runner marks its writable memory MADV_NOHUGEPAGE (vm flags decide merging), and
        # a stand-in ends with the mapping's own protection.
        prot = "".join(c for c in perms[:3] if c != "-") or "none"
        if "w" in prot:
            ops.append({"op": "madvise", "region": name, "advice": "nohugepage"})
        elif prot in ("none", "r", "rx"):
            ops.append({"op": "mprotect", "region": name, "prot": prot})
    return ops


def run_both(
    name: str, program: list[Any], host: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Run a program on the kernel (the runner), then in mmsim from the runner's layout with the
    host's state as knobs and the serial schedule; the runner's snapshot lines (its own
    `__start` and `__maps` taken out), its events, and mmsim's report (``{"error": ...}``
    when mmsim refuses the workload)."""
    from mmsim.workload import run_workload

    rows = run_native({"name": name, "program": program})
    maps = next((r["maps"] for r in rows if r["label"] == "__maps"), [])
    w = _host_workload(name, host_layout(maps) + list(program), host)
    try:
        sim = run_workload(w, sets=SIM_SETS)
    except MmsimError as e:
        sim = {"error": " ".join(str(e).split())}
    snaps = [r for r in rows if r["label"] not in ("__start", "__maps", EVENT)]
    return snaps, [r for r in rows if r["label"] == EVENT], sim


#: The label of the runner's event lines (a failed mmap, a task killed by a signal).
EVENT = "__event"


def _event_key(e: Mapping[str, Any]) -> str | None:
    """What a compared event says, on either side: a task's death by SIGSEGV or SIGBUS (mmsim's
    kind "segfault" covers both: the message says SIGBUS), a failed mmap with its error
    ("mmap-ENOMEM"), a failed madvise with its advice and error ("madvise-collapse-EINVAL",
    from "madvise REGION ADVICE: EINVAL"), a failed file op with its error ("pread-ENOENT"), a
    pread's failed expect ("pread-expect", from "pread FILE at 0xOFFSET: expected E, found V"),
    a kill by another signal (SIGKILL: mmsim's OOM killer); None for events the runner does
    not have."""
    kind, msg = e.get("kind"), str(e.get("message", ""))
    if kind == "segfault":
        return str(e.get("signal") or ("SIGBUS" if msg.startswith("SIGBUS") else "SIGSEGV"))
    if kind == "syscall":
        head, _, err = msg.rpartition(": ")
        words, err = head.split(), err.strip()
        if words[:1] == ["mmap"]:
            return "mmap-" + err
        if words[:1] == ["madvise"] and len(words) >= 3:
            return f"madvise-{words[2]}-{err}"
        if words[:1] and words[0] in FILE_OPS:
            return f"{words[0]}-{err}"
        return None
    if kind == "expect" and msg.startswith("pread "):
        # The runner's only expect events (a read op's failed expect ends its run instead).
        return "pread-expect"
    if kind in ("killed", "oom-kill"):
        return "killed"
    return None


def not_cold(events: list[Mapping[str, Any]]) -> str:
    """Why a native run's counts depend on the host's page cache ("" if they do not): a file
    the runner created stayed (partly) cached after fsync and POSIX_FADV_DONTNEED (its
    "not-cold" event, see native/runner.c)."""
    bad = [e for e in events if e.get("kind") == "not-cold"]
    if not bad:
        return ""
    return "the kernel kept files cached that the runner created cold: " + "; ".join(str(e["message"]) for e in bad)


def compare_events(native: list[Mapping[str, Any]], sim: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per task, how many times each compared event happened on the kernel and in mmsim
    (``pid 2 SIGBUS``, ``pid 1 mmap-ENOMEM``): only events either side had."""
    counts: dict[tuple[int, str], list[int]] = {}
    for side, events in ((0, native), (1, sim)):
        for e in events:
            key = _event_key(e)
            if key is not None:
                counts.setdefault((int(e.get("pid", 0)), key), [0, 0])[side] += 1
    return [
        {"name": f"pid {pid} {key}", "kernel": n, "simulated": m, "tolerance": 0}
        for (pid, key), (n, m) in sorted(counts.items())
    ]


def with_baselines(program: list[Any]) -> list[Any]:
    """The program with an implicit snapshot at the start and the end of every process and
    thread (before an `exit` too), so that a workload with one snapshot or none is compared
    like one with two. A forked child's counters start at fork, as getrusage's do."""

    def inner(ops: list[Any]) -> list[Any]:
        out: list[Any] = []
        for op in ops:
            kind = op.get("op")
            if kind in ("fork", "thread"):
                op = {**op, "program": with_baselines(list(op.get("program", [])))}
            elif kind == "loop":
                op = {**op, "body": inner(list(op.get("body", [])))}
            elif kind == "exit":
                out.append({"op": "snapshot", "label": END})
            out.append(op)
        return out

    return [{"op": "snapshot", "label": BEGIN}, *inner(program), {"op": "snapshot", "label": END}]


def _result(name: str, status: str, reason: str, pins: str, counters: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "status": status, "reason": reason, "pins": pins, "counters": counters}


def _verdict(name: str, pins: str, counters: list[dict[str, Any]]) -> dict[str, Any]:
    """Pass unless a counter differs by more than its tolerance (the reason names each)."""
    bad = [c for c in counters if abs(c["kernel"] - c["simulated"]) > c["tolerance"]]
    reason = ", ".join(f"{c['name']}: kernel {c['kernel']}, mmsim {c['simulated']}" for c in bad)
    return _result(name, "fail" if bad else "pass", reason, pins, counters)


def validate_case(case: Case, host: Mapping[str, Any], tolerance: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Run one case natively and in mmsim with the host's settings (and the hugetlb pool its
    knobs ask for); compare the changes between the `before` and `after` snapshots of each
    process, the system-wide counters between the first one's, and the events of every task."""
    for knob, value in case.needs.items():
        if str(host.get(knob)) != value:
            return _result(case.name, "skip", f"needs {knob}={value}, host has {host.get(knob)}", case.pins, [])
    why = unmirrored({"program": case.program}, host)
    if why:
        return _result(case.name, "skip", why, case.pins, [])
    return with_pool(
        case.name, case.pins, case.knobs, case.program, host, lambda h: _run_case(case, h, tolerance or {})
    )


def _system(snap: Mapping[str, Any], name: str) -> int:
    """A system-wide counter of a snapshot: /proc/vmstat's, else /proc/meminfo's (0 where the
    snapshot has neither: mmsim before it modelled the counter)."""
    v = snap.get("vmstat", {}).get(name)
    return int(v if v is not None else snap.get("meminfo", {}).get(name, 0))


def _run_case(case: Case, host: Mapping[str, Any], tolerance: Mapping[str, float]) -> dict[str, Any]:
    native, events, sim = run_both(case.name, case.program, host)
    if not_cold(events):
        return _result(case.name, "skip", not_cold(events), case.pins, [])
    if "error" in sim:
        return _result(case.name, "fail", f"mmsim cannot run it: {sim['error']}", case.pins, [])
    counters = []
    tol = {**case.tolerance, **tolerance}
    for pid in case.pids:
        nb, na = _snap(native, "before", pid), _snap(native, "after", pid)
        sb = next((s for s in sim["snapshots"] if s["label"] == "before" and s["pid"] == pid), None)
        sa = next((s for s in sim["snapshots"] if s["label"] == "after" and s["pid"] == pid), None)
        if None in (nb, na, sb, sa):
            return _result(case.name, "fail", f"pid {pid}: missing before/after snapshots", case.pins, [])
        sp = {p["pid"]: p for p in sb["processes"]}[pid], {p["pid"]: p for p in sa["processes"]}[pid]
        for c in case.counters:
            k = f"{c}" if len(case.pids) == 1 else f"pid {pid} {c}"
            counters.append(
                {
                    "name": k,
                    "kernel": na.get(c, 0) - nb.get(c, 0),
                    "simulated": sp[1].get(c, 0) - sp[0].get(c, 0),
                    "tolerance": tol.get(c, 0),
                }
            )
        if pid == case.pids[0]:
            for v in case.vmstat:
                counters.append(
                    {
                        "name": v,
                        "kernel": _system(na, v) - _system(nb, v),
                        "simulated": _system(sa, v) - _system(sb, v),
                        "tolerance": tol.get(v, 0),
                    }
                )
    counters += compare_events(events, sim.get("events", []))
    result = _verdict(case.name, case.pins, counters)
    noise = _host_tables(case, native) if result["status"] == "fail" else ""
    if noise and all(c["name"] in case.vmstat for c in counters if c["kernel"] != c["simulated"]):
        return {**result, "status": "skip", "reason": f"{noise} (mmsim: {result['reason']})"}
    return result


def _host_tables(case: Case, native: list[dict[str, Any]]) -> str:
    """For a case whose first pid alone allocates or frees page tables between its snapshots
    (:attr:`Case.own_tables`): why the kernel's system-wide nr_page_table_pages is another
    process's noise ("" if it is not): it moved by other than that pid's own VmPTE."""
    if not case.own_tables or "nr_page_table_pages" not in case.vmstat:
        return ""
    pid = case.pids[0]
    nb, na = _snap(native, "before", pid), _snap(native, "after", pid)
    if nb is None or na is None:
        return ""
    system = _system(na, "nr_page_table_pages") - _system(nb, "nr_page_table_pages")
    own = (na.get("VmPTE", 0) - nb.get("VmPTE", 0)) * 1024 // os.sysconf("SC_PAGE_SIZE")
    if system == own:
        return ""
    return (
        f"another process on the host allocated or freed page tables during the case: the kernel's "
        f"nr_page_table_pages moved by {system:+}, pid {pid}'s own VmPTE by {own:+} pages"
    )


THP_EVENTS = ("thp_fault_alloc", "thp_zero_page_alloc", "thp_split_pmd")
#: mlock's events, compared like the THP events (system-wide, between pid 1's snapshots) in the
#: suite and in a user's workloads. The random campaign leaves them out: Linux counts them when
#: a CPU's mlock batch (mlock_fbatch) is processed, and for a folio not yet on the LRU as
#: "stranded", which mmsim, with no LRU and no per-CPU batches, does not model (README's
#: deliberate differences); the campaign is for finding the differences not yet known.
MLOCK_EVENTS = ("unevictable_pgs_mlocked", "unevictable_pgs_munlocked")

#: The hugetlb pool's system-wide counters, compared between pid 1's snapshots in every
#: workload (the random campaign's too): /proc/meminfo's HugePages_Free, HugePages_Rsvd and
#: HugePages_Surp (pages) and /proc/vmstat's nr_hugetlb (4 KiB pages of hugetlb folios in use).
HUGETLB_COUNTERS = ("HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "nr_hugetlb")


#: The per-process counters compared between a process's consecutive snapshots. RssFile counts
#: the runner's own text too, the same in every snapshot of a process (a forked child maps it
#: again before its first: native/runner.c), so its changes are the workload's.
FIELDS = ("minflt", "majflt", "RssAnon", "RssFile", "RssShmem", "VmPTE", "VmLck", "AnonHugePages", "HugetlbPages")

#: The page cache's system-wide counters a native run reports (/proc/vmstat's and
#: /proc/meminfo's, see native/runner_report.h), shown by `mmsim run --native`. Other processes
#: on the host move them too (and a DAMON thread evicts cold page cache within seconds here),
#: so they are not compared by default.
FILE_COUNTERS = (
    "pgmajfault",
    "pgpgin",
    "nr_file_pages",
    "nr_mapped",
    "nr_shmem",
    "nr_file_hugepages",
    "nr_file_pmdmapped",
    "nr_shmem_hugepages",
    "nr_shmem_pmdmapped",
    "thp_file_alloc",
    "thp_file_fallback",
    "thp_file_mapped",
    "Cached",
    "Buffers",
    "Mapped",
    "Dirty",
    "FileHugePages",
    "FilePmdMapped",
    "ShmemHugePages",
    "ShmemPmdMapped",
)


def validate_workload(
    workload: Mapping[str, Any], host: Mapping[str, Any], events: tuple[str, ...] = THP_EVENTS + MLOCK_EVENTS
) -> dict[str, Any]:
    """Run a user's workload natively and in mmsim; compare consecutive snapshots per process,
    from each process's implicit start to its end (see :func:`with_baselines`), the
    system-wide `events` and :data:`HUGETLB_COUNTERS` between pid 1's, and each task's fatal
    signals and failed mmaps. The workload's `knobs` may size the hugetlb pool
    (:data:`POOL_KNOBS`: see :func:`with_pool`); its other knobs are the host's to set
    (``--host-set``)."""
    name = str(workload.get("name", "workload"))
    why = unmirrored(workload, host)
    if why:
        return _result(name, "skip", why, "", [])
    program = list(workload["program"])

    pins = "the workload's own snapshots, from each process's start to its end"

    def once(h: Mapping[str, Any]) -> dict[str, Any]:
        native, native_events, sim = run_both(name, with_baselines(program), h)
        if not_cold(native_events):
            return _result(name, "skip", not_cold(native_events), pins, [])
        if "error" in sim:
            return _result(name, "fail", f"mmsim cannot run it: {sim['error']}", "", [])
        counters = compare_snapshots(native, sim["snapshots"], events)
        if isinstance(counters, str):
            return _result(name, "fail", counters, "", [])
        counters += compare_events(native_events, sim.get("events", []))
        return _verdict(name, pins, counters)

    def body(h: Mapping[str, Any]) -> dict[str, Any]:
        r = once(h)
        # A difference in system-wide counters only may be another process's (this machine's
        # VM agent mlocks pages now and then): the run is deterministic on both sides (serial
        # schedule, one CPU), so such a case is run again, up to SYSTEM_RERUNS times, and
        # passes if a run agrees exactly; it fails, with the first run's reason, if none does.
        for k in range(SYSTEM_RERUNS):
            if r["status"] != "fail" or not _system_only(r):
                break
            again = once(h)
            if again["status"] == "pass":
                again["reason"] = (
                    f"system-wide counters differed in {k + 1} earlier run(s) ({r['reason']}): another "
                    "process on the host"
                )
                return again
        return r

    return with_pool(name, "", workload.get("knobs") or {}, program, host, body)


#: How many times :func:`validate_workload` runs a case again whose only differences are in
#: system-wide counters, which every process on the host reaches.
SYSTEM_RERUNS = 2


def _system_only(result: Mapping[str, Any]) -> bool:
    """Does a failed result differ only in system-wide counters (named ``SPAN COUNTER``, where
    a process's are ``pid N SPAN COUNTER``), never in a task's own counters or events?"""
    bad = [c for c in result["counters"] if abs(c["kernel"] - c["simulated"]) > c["tolerance"]]
    return bool(bad) and all(not c["name"].startswith("pid ") for c in bad)


def compare_snapshots(
    native: list[dict[str, Any]],
    sim: list[dict[str, Any]],
    events: tuple[str, ...] = THP_EVENTS + MLOCK_EVENTS,
    system: tuple[str, ...] = HUGETLB_COUNTERS,
) -> list[dict[str, Any]] | str:
    """Every counter of consecutive snapshots of each process, kernel beside mmsim, and the
    system-wide `events` and `system` counters between pid 1's (a counter mmsim's snapshot
    lacks counts as 0); a string says why they cannot be compared (a process took other
    snapshots on one side)."""
    counters = []
    for pid in sorted({r["pid"] for r in native} | {s["pid"] for s in sim}):
        ns = [r for r in native if r["pid"] == pid]
        ss = [s for s in sim if s["pid"] == pid]
        if [r["label"] for r in ns] != [s["label"] for s in ss]:
            return f"pid {pid}: snapshots differ (kernel {[r['label'] for r in ns]}, mmsim {[s['label'] for s in ss]})"
        for (n0, n1), (s0, s1) in zip(pairwise(ns), pairwise(ss), strict=True):
            p0 = {p["pid"]: p for p in s0["processes"]}[pid]
            p1 = {p["pid"]: p for p in s1["processes"]}[pid]
            span = f"{n0['label']}->{n1['label']}"
            for f in FIELDS:
                counters.append(
                    {
                        "name": f"pid {pid} {span} {f}",
                        "kernel": n1.get(f, 0) - n0.get(f, 0),
                        "simulated": p1.get(f, 0) - p0.get(f, 0),
                        "tolerance": 0,
                    }
                )
            if pid == 1:
                for v in (*events, *system):
                    counters.append(
                        {
                            "name": f"{span} {v}",
                            "kernel": _system(n1, v) - _system(n0, v),
                            "simulated": _system(s1, v) - _system(s0, v),
                            "tolerance": 0,
                        }
                    )
    return counters


#: Host knobs `--host-set` may change (sysfs files under /sys/kernel/mm/).
HOST_KNOBS = ("transparent_hugepage/enabled", "transparent_hugepage/defrag", "transparent_hugepage/use_zero_page")


#: Every `mmsim validate` (a campaign, a --host-set run, a plain one) holds this lock while it
#: runs: a run that writes the host's THP knobs would change them under another's cases.
LOCK = Path("/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()) / "mmsim-host-thp.lock"
_lock_depth = 0


@contextlib.contextmanager
def host_lock(waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold :data:`LOCK` (an exclusive flock) for the block; call `waiting` first if another
    process holds it, and wait for it. Re-entrant within a process. Where the lock file
    cannot be opened (no permission), run without it."""
    global _lock_depth
    if _lock_depth:
        _lock_depth += 1
        try:
            yield
        finally:
            _lock_depth -= 1
        return
    try:
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        _lock_depth = 1
        yield
    finally:
        _lock_depth = 0
        os.close(fd)


def _waiting() -> None:
    print(f"mmsim: waiting for another mmsim validate to finish with the host ({LOCK})", file=sys.stderr, flush=True)


class HostSettings:
    """Holds the host lock, changes host knobs for the duration of a ``with`` block and
    restores each one on the way out (also on errors and Ctrl-C): the THP knobs in sysfs
    (:data:`HOST_KNOBS`) and the hugetlb pool's sysctls (:data:`POOL_KNOBS`). A pool the host
    cannot provide (a write of ``vm/nr_hugepages`` that leaves fewer pages) is an error, or
    with ``strict=False`` is said in :attr:`shortfall`. `source` names where the changes come
    from in errors (``--host-set``, a workload's knobs)."""

    def __init__(self, changes: Mapping[str, Any], *, source: str = "--host-set", strict: bool = True) -> None:
        for k, v in changes.items():
            if k not in HOST_KNOBS + POOL_KNOBS:
                raise MmsimError(
                    f"validate: {source} {k}: not a knob the runner may set (known: "
                    f"{', '.join(HOST_KNOBS + POOL_KNOBS)})"
                )
            if k in POOL_KNOBS and not re.fullmatch(r"\d+", str(v).strip()):
                raise MmsimError(f"validate: {source} {k}: expected a number of huge pages (0 or more), got {v!r}")
        self.changes = {k: str(v).strip() for k, v in changes.items()}
        self.source, self.strict = source, strict
        self.saved: dict[str, str] = {}
        self.shortfall = ""
        self._lock = contextlib.ExitStack()

    @staticmethod
    def path(knob: str) -> Path:
        return sysctl_path(knob) if knob in POOL_KNOBS else Path("/sys/kernel/mm") / knob

    def __enter__(self) -> HostSettings:
        self._lock.enter_context(host_lock(_waiting))
        try:
            for k, v in self.changes.items():
                old = host_settings()[k]
                if k in POOL_KNOBS:
                    why = "the host kernel has no hugetlb pool" if old is None else pool_in_use(hugetlb_meminfo())
                    if why:
                        self.__exit__(None, None, None)
                        raise MmsimError(f"validate: {self.source} {k}: {why}")
                self.path(k).write_text(v)
                self.saved[k] = str(old)
                if k == "vm/nr_hugepages":
                    got = int(self.path(k).read_text())
                    if got < int(v):
                        self.shortfall = (
                            f"the host provided {got} of the {v} huge pages {k} asks for (memory too fragmented?)"
                        )
        except OSError as e:
            self.__exit__(None, None, None)
            raise MmsimError(f"validate: {self.source}: cannot write {e.filename}: {e.strerror} (needs root)") from None
        if self.shortfall and self.strict:
            self.__exit__(None, None, None)
            raise MmsimError(f"validate: {self.source}: {self.shortfall}")
        return self

    def __exit__(self, *exc: Any) -> None:
        for k, v in reversed(list(self.saved.items())):
            with contextlib.suppress(OSError):
                self.path(k).write_text(v)
        self.saved.clear()
        self._lock.close()


def with_pool(
    name: str,
    pins: str,
    knobs: Mapping[str, Any],
    program: list[Any],
    host: Mapping[str, Any],
    body: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """Run `body` (a case) with the hugetlb pool its knobs ask for: for a program that maps
    hugetlb memory or knobs that size the pool, write ``vm/nr_hugepages`` and
    ``vm/nr_overcommit_hugepages`` for the case (under the host lock) and restore the host's
    values after it, also on errors and Ctrl-C; skip the case if the pool is another
    process's (pages reserved, surplus or in use) before or after the write, or if the host
    cannot provide it. `body` gets the host's settings as they are then. A program that uses
    hugetlb without setting the pool runs with the host's pool as it is (mmsim is given its
    size)."""
    changes = {k: knobs[k] for k in POOL_KNOBS if k in knobs}
    if not changes and not uses_hugetlb(program):
        return body(host)
    with host_lock(_waiting):
        busy = pool_in_use(hugetlb_meminfo())
        if busy:
            return _result(name, "skip", busy, pins, [])
        settings = HostSettings(changes, source=f"{name}: knobs", strict=False)
        try:
            settings.__enter__()
        except MmsimError as e:
            return _result(name, "skip", f"cannot size the hugetlb pool: {e}", pins, [])
        try:
            now = host_settings()
            why = settings.shortfall or pool_in_use(now["hugetlb"])
            if why:
                return _result(name, "skip", why, pins, [])
            return body(now)
        finally:
            settings.__exit__(None, None, None)


#: Per-process fields of the runner's snapshot lines, as `mmsim run --json` names them.
PROCESS_FIELDS = (
    "minflt",
    "majflt",
    "VmRSS",
    "VmHWM",
    "RssAnon",
    "RssFile",
    "RssShmem",
    "VmPTE",
    "VmLck",
    "AnonHugePages",
    "HugetlbPages",
)


def native_report(workload: Mapping[str, Any]) -> dict[str, Any]:
    """Run a workload on the host kernel and report it in `mmsim run --json`'s schema, the part
    a kernel can tell: each snapshot has ``label``, ``pid``, ``processes`` (the process that
    took it, from getrusage, /proc/self/status and smaps_rollup), ``perf`` (that process's
    perf events since it started, those the host supports), and the system-wide ``vmstat``
    and ``meminfo``. ``baseline`` is pid 1 before the first op; ``perf_unsupported`` lists
    the perf events the host (a VM without a PMU, say) could not count; ``machine.aslr`` says
    whether the run's address-space layout was randomised (the runner turns it off so that
    the page-table pages a run needs do not depend on where its regions landed). The
    workload's hugetlb pool knobs (:data:`POOL_KNOBS`) are written for the run and restored
    after it, and ``knobs`` has the host's settings during the run. ``events`` are as
    mmsim's: a task killed by SIGSEGV or SIGBUS ("segfault"), a failed mmap ("syscall")."""
    changes = {k: v for k, v in (workload.get("knobs") or {}).items() if k in POOL_KNOBS}
    with HostSettings(changes, source="run --native: knobs") if changes else contextlib.nullcontext():
        host = host_settings()
        rows = run_native(workload)
    unsupported = sorted({u for r in rows for u in r.get("unsupported", [])})

    def snap(r: dict[str, Any]) -> dict[str, Any]:
        proc = {"pid": r["pid"], "state": "running", **{f: r.get(f, 0) for f in PROCESS_FIELDS}}
        perf = dict(r.get("perf", {}))
        if "task-clock" in perf:
            # The kernel counts it in ns; perf stat and `mmsim run --json` show ms.
            perf["task-clock"] = perf["task-clock"] / 1e6
        return {
            "label": r["label"],
            "pid": r["pid"],
            "perf": perf,
            "vmstat": r.get("vmstat", {}),
            "meminfo": r.get("meminfo", {}),
            "processes": [proc],
        }

    start = next((r for r in rows if r["label"] == "__start"), None)
    return {
        "workload": str(workload.get("name", "workload")),
        "machine": {
            "host": f"Linux {host['kernel']}",
            "page_size": host["page_size"],
            # The runner turns address-space layout randomisation off (native/runner.c).
            "aslr": any(r["aslr"] for r in rows if "aslr" in r),
        },
        "knobs": {k: v for k, v in host.items() if k.startswith("transparent_hugepage/") or k in POOL_KNOBS},
        "baseline": snap(start) if start else {},
        "snapshots": [snap(r) for r in rows if r["label"] not in ("__start", "__maps", EVENT)],
        "perf_unsupported": unsupported,
        # As mmsim's: a task killed by SIGSEGV or SIGBUS ("segfault"), a failed mmap ("syscall").
        "events": [{"pid": r["pid"], "kind": r["kind"], "message": r["message"]} for r in rows if r["label"] == EVENT],
        # The workload creates files: the page cache's counters (FILE_COUNTERS) are its too.
        "files": bool(file_systems(workload.get("program", []))),
        "native": True,
    }


def format_native(report: Mapping[str, Any]) -> str:
    """The text of `mmsim run --native`: each snapshot's process (HugetlbPages too where a
    process has hugetlb pages, majflt and RssFile where they change) and the system's THP
    events and hugetlb pool counters (and the page cache's, :data:`FILE_COUNTERS`, for a
    workload with files), as changes since the run's start (pid 1) or the process's first
    snapshot, then the events."""
    lines = [
        f" Native run of '{report['workload']}' on {report['machine']['host']} "
        f"(THP {report['knobs'].get('transparent_hugepage/enabled')}):",
        "",
    ]
    if report["perf_unsupported"]:
        lines += [f" perf events this host cannot count: {', '.join(report['perf_unsupported'])}", ""]
    first: dict[int, dict[str, Any]] = {}
    base = report.get("baseline") or {}
    if base:
        first[1] = base
    cols = ["minflt", "RssAnon", "VmPTE", "AnonHugePages"]
    if any(s["processes"][0].get("HugetlbPages") for s in report["snapshots"]):
        cols.append("HugetlbPages")
    # Major faults and RssFile where they changed (a workload's files).
    seen: dict[int, dict[str, Any]] = {1: base["processes"][0]} if base else {}
    for f in ("majflt", "RssFile"):
        if any(
            s["processes"][0].get(f, 0) != seen.setdefault(s["pid"], s["processes"][0]).get(f, 0)
            for s in report["snapshots"]
        ):
            cols.insert(1 if f == "majflt" else len(cols), f)
    system_counters = THP_EVENTS + HUGETLB_COUNTERS + (FILE_COUNTERS if report.get("files") else ())
    head = f"  {'snapshot':<16} {'pid':>4} " + " ".join(f"{f:>13}" for f in cols)
    lines += [" Changes since the start (pid 1) or the process's first snapshot (kB for sizes):", head]
    for s in report["snapshots"]:
        p = s["processes"][0]
        b = first.setdefault(s["pid"], s)["processes"][0]
        vals = " ".join(f"{p.get(f, 0) - b.get(f, 0):>+13,}" for f in cols)
        system = ""
        if s["pid"] == 1 and base:
            d = {k: _system(s, k) - _system(base, k) for k in system_counters}
            changed = ", ".join(f"{k} {v:+}" for k, v in d.items() if v)
            system = f"  {changed}" if changed else ""
        lines.append(f"  {s['label']:<16} {s['pid']:>4} {vals}{system}")
    if report.get("events"):
        lines += ["", " Events:"] + [f"  pid {e['pid']:>4} {e['kind']}: {e['message']}" for e in report["events"]]
    return "\n".join(lines) + "\n"
