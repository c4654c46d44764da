"""The real kernel as an oracle: run a workload natively (``native/runner.c``) and compare
what the kernel did with what mmsim predicts (``mmsim validate``).

The runner executes the workload compiled to a line format (:func:`compile_program`) with real
mmap/munmap/mprotect/madvise/fork/wait and one-byte-per-stride reads and writes, and reports
at each ``snapshot`` the process's fault counts (getrusage), /proc/self/status, smaps_rollup's
AnonHugePages and LazyFree and system-wide /proc/vmstat and /proc/meminfo counters. Comparisons are of
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
import errno
import fcntl
import functools
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
from mmsim.host_files import (  # noqa: F401  (re-exported: mmsim.native is the validate API)
    default_file_dirs,
    file_dirs,
    file_dirs_override,
    fs_type,
    parse_dir_options,
    queue_file,
    read_ahead_kb,
    tmpfs_huge,
    usable_dir,
)
from mmsim.runner_build import runner_path
from mmsim.runner_program import (  # noqa: F401  (re-exported)
    FADVICE,
    FILE_OPS,
    FILESYSTEMS,
    MADVICE,
    MAX_CHUNK,
    MMAP_FLAGS,
    RUNNER_SETS,
    compile_program,
    file_systems,
    parse_size,
    sets_drop_caches,
)

__all__ = ["Case", "compile_program", "host_settings", "parse_size", "run_native", "validate_case"]

THP = Path("/sys/kernel/mm/transparent_hugepage")


def host_settings() -> dict[str, Any]:
    """The host's THP settings, page size and hugetlb pool, as sysfs and procfs show them; and
    for a workload's files, where they go (``file_dirs``: {"ext4": PATH, "tmpfs": PATH}, None
    for a filesystem with no directory; ``mmsim validate --dir FS=PATH`` chooses them, see
    :func:`file_dirs`), the ext4 directory's disk's ``read_ahead_kb`` and the tmpfs
    directory's ``huge=`` mount option (``tmpfs_huge``)."""
    sel = _sel
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


def _sel(p: Path) -> str | None:
    """A sysfs or procfs setting: the selected choice of "always [madvise] never", else the
    file's text (None where it cannot be read)."""
    try:
        t = p.read_text().strip()
    except OSError:
        return None
    m = re.search(r"\[([^\]]+)\]", t)
    return m.group(1) if m else t


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


def _all_ops(program: list[Any]) -> Iterator[Mapping[str, Any]]:
    """Every op of a program, nested ones too."""
    for op in program:
        if not isinstance(op, Mapping):
            continue
        yield op
        for key in ("program", "body"):
            if isinstance(op.get(key), list):
                yield from _all_ops(op[key])


def _mmaps(program: list[Any]) -> Iterator[Mapping[str, Any]]:
    """Every mmap op of a program, nested ones too."""
    return (op for op in _all_ops(program) if op.get("op") == "mmap")


def uses_hugetlb(program: list[Any]) -> bool:
    """Does a program use hugetlb memory (an mmap with the "hugetlb" flag, a memfd_create with
    "hugetlb")?"""
    if any("hugetlb" in (op.get("flags") or ()) for op in _mmaps(program)):
        return True
    return any(op.get("op") == "memfd_create" and op.get("hugetlb") for op in _all_ops(program))


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
    program = json.dumps(workload.get("program", []))
    # A tmpfs memfd is on the internal shm mount, whose huge pages shmem_enabled decides.
    shared = '"shared"' in program or '"memfd_create"' in program
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
        why = usable_dir(fs, d) if d else f"this host has no {fs} directory mmsim could find"
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
    #: Knobs the case sets on the host for its run (and gives mmsim), as a workload's `knobs`
    #: do (:func:`with_knobs`); validate restores the host's values after it.
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
    map it: mmsim then has it from boot, and neither side counts its allocation. The case's
    own knobs (``workload_knobs``: :func:`with_knobs` has set the host as they say) come
    last."""
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
    # The hugetlb pool, as the host has it (a case's knobs have sized it: see with_knobs), for
    # a program that maps hugetlb memory or a host with a pool.
    if uses_hugetlb(program) or any(host.get(k) for k in POOL_KNOBS):
        knobs.update({k: host[k] for k in POOL_KNOBS if host.get(k) is not None})
    # The case's own knobs, which with_knobs has set on the host (or found it had already).
    knobs.update(host.get("workload_knobs") or {})
    return {"name": name, "knobs": knobs, "program": program}


#: How mmsim runs a workload it compares with the kernel: the serial schedule, which the
#: runner follows too (a task a fork or thread op creates runs to its end before the next,
#: and all of them before their creator goes on), so that no count depends on timing.
SIM_SETS = {"engine.schedule": "serial"}

#: Labels of the implicit snapshots: every process and thread at its start (the first
#: process before its first op, a child or thread when it is created) and at its end.
BEGIN, END = "__begin", "__end"


#: The top of the user address space (x86-64), where the stack ends.
TASK_SIZE = 0x7FFFFFFFF000


def host_layout(maps: list[list[Any]], brk: list[int] | None = None) -> list[dict[str, Any]]:
    """Ops that give mmsim's first process the runner's address space before the program: an
    anonymous stand-in at the address of each of the runner's mappings (its binary, heap,
    libraries, vdso, stack, thread stacks), every page present, so that mmsim's top-down mmap
    puts the workload's regions where the kernel did and the same page tables exist already
    (VmPTE would otherwise differ by the tables the runner's own mappings share with them),
    and an mlockall finds what the kernel finds (no page to populate; the same vmas to lock).
    A stand-in merges with a workload's region only where the kernel's mapping would: a shared
    mapping's is shared (its own shmem object), a private file mapping's never merges and is
    otherwise an ordinary vma that mlockall locks (mmsim's `nomerge`), a special mapping's
    (vdso, vvar) never merges nor is locked (mmsim's `dontexpand`, VM_SPECIAL). Writable and
    anonymous memory is written, as the runner wrote its own; a read-only private file
    mapping's stand-in is read, mapping the zero page, which no mlock counts: the runner's lock
    helper holds those page-cache pages mlocked (native/runner.c). A PROT_NONE mapping (the
    runner's mlock-drain page, a library's gap) is a stand-in never touched. The stack's
    stand-in replaces mmsim's own stack vma (the runner wrote all of its stack). The runner's
    heap is mmsim's too: ``brk`` ([start_brk, brk]) is where it begins and ends (the
    workload's ``start_brk``, :func:`_host_workload`), and a `brk` op grows mmsim's to the
    same break."""
    ops: list[dict[str, Any]] = []
    start_brk, cur_brk = brk or (0, 0)
    for i, (start, end, perms, kind) in enumerate(maps):
        if start >= TASK_SIZE:
            continue
        if kind == "heap" and start_brk and start <= start_brk <= end:
            # Without address randomization the kernel's heap vma begins with the bss, which
            # brk expanded: a stand-in for the bss, then mmsim's brk to the same break.
            names = []
            if start < start_brk:
                names.append(f"__host{i}bss")
                ops.append({"op": "mmap", "name": names[-1], "size": start_brk - start, "addr": start, "fixed": True})
            names.append(f"__host{i}")
            ops.append({"op": "brk", "name": names[-1], "delta": cur_brk - start_brk})
            ops += [{"op": "write", "region": n} for n in names if n != names[-1] or cur_brk > start_brk]
            ops += [{"op": "madvise", "region": n, "advice": "nohugepage"} for n in names]
            continue
        name = f"__host{i}"
        shared = perms[3:4] == "s"
        flags = ["shared" if shared else "private", "anonymous"]
        if kind == "special":
            flags.append("dontexpand")
        elif kind == "file" and not shared:
            flags.append("nomerge")
        ops.append({"op": "mmap", "name": name, "size": end - start, "addr": start, "fixed": True, "flags": flags})
        prot = "".join(c for c in perms[:3] if c != "-") or "none"
        if prot != "none":
            page_cache = kind == "file" and not shared and "w" not in prot
            ops.append({"op": "read" if page_cache else "write", "region": name})
        # The runner marks its writable memory MADV_NOHUGEPAGE (vm flags decide merging), and
        # a stand-in ends with the mapping's own protection.
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
    maps_row = next((r for r in rows if r["label"] == "__maps"), {})
    maps, brk = maps_row.get("maps", []), maps_row.get("brk")
    w = _host_workload(name, host_layout(maps, brk) + list(program), host)
    if brk and brk[0]:
        w["start_brk"] = brk[0]
    try:
        sim = run_workload(w, sets=SIM_SETS)
    except MmsimError as e:
        sim = {"error": " ".join(str(e).split())}
    snaps = [r for r in rows if r["label"] not in ("__start", "__maps", EVENT)]
    return snaps, [r for r in rows if r["label"] == EVENT], sim


#: The label of the runner's event lines (a failed mmap, a task killed by a signal).
EVENT = "__event"


#: The system calls of a workload's ops whose failures both sides report (the runner every
#: one it makes: native/runner.c; mmsim's engine as Linux fails them), compared task by task
#: in order (:func:`compare_syscalls`). "open" is a file op's open(2).
SYSCALLS = (
    "mmap",
    "munmap",
    "mprotect",
    "madvise",
    "mlock",
    "munlock",
    "mlockall",
    "munlockall",
    "mremap",
    "brk",
    "open",
    "ftruncate",
    *FILE_OPS,
)


def failed_syscall(e: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """A failed system call of either side's events, as (call, what, errno): "munmap p:
    EINVAL" is ("munmap", "p", "EINVAL"), "madvise p collapse: EINVAL" ("madvise", "p
    collapse", "EINVAL"), "mmap x (4096 bytes): ENOMEM" ("mmap", "x", "ENOMEM"), "pread f:
    ENOENT" ("pread", "f", "ENOENT"); None for another event (a `set` op's, a fault's)."""
    if e.get("kind") != "syscall":
        return None
    head, sep, err = str(e.get("message", "")).partition(": ")
    words = head.split()
    if not sep or not words or words[0] not in SYSCALLS:
        return None
    what = words[1] if words[0] == "mmap" and len(words) > 1 else " ".join(words[1:])
    return words[0], what, (err.split() or ["?"])[0]


def compare_syscalls(native: list[Mapping[str, Any]], sim: list[Mapping[str, Any]]) -> str:
    """Why the failed system calls of the kernel's run and mmsim's differ ("" if they do not):
    each task's list of them (call, region or file, errno: :func:`failed_syscall`), in order,
    must be the same on both sides; the first difference is named."""

    def lists(events: list[Mapping[str, Any]]) -> dict[int, list[tuple[str, str, str]]]:
        out: dict[int, list[tuple[str, str, str]]] = {}
        for e in events:
            f = failed_syscall(e)
            if f is not None:
                out.setdefault(int(e.get("pid", 0)), []).append(f)
        return out

    def show(calls: list[tuple[str, str, str]], i: int) -> str:
        return f"`{calls[i][0]} {calls[i][1]}: {calls[i][2]}`" if i < len(calls) else "none"

    kernel, mmsim = lists(native), lists(sim)
    for pid in sorted(set(kernel) | set(mmsim)):
        a, b = kernel.get(pid, []), mmsim.get(pid, [])
        if a == b:
            continue
        i = next(i for i in range(max(len(a), len(b))) if i >= len(a) or i >= len(b) or a[i] != b[i])
        return (
            f"pid {pid}: failed system calls differ: failure {i + 1} is {show(a, i)} on the kernel, {show(b, i)} "
            f"in mmsim ({len(a)} failed on the kernel, {len(b)} in mmsim)"
        )
    return ""


def _event_key(e: Mapping[str, Any]) -> str | None:
    """What a compared event says, on either side: a task's death by SIGSEGV or SIGBUS (mmsim's
    kind "segfault" covers both: the message says SIGBUS), a failed system call with its error
    ("mmap-ENOMEM", "munmap-EINVAL", "open-ENOENT"; a madvise with its advice,
    "madvise-collapse-EINVAL", from "madvise REGION ADVICE: EINVAL": :func:`failed_syscall`), a
    pread's failed expect ("pread-expect", from "pread FILE at 0xOFFSET: expected E, found V"),
    a kill by another signal (SIGKILL: mmsim's OOM killer); None for events the runner does
    not have."""
    kind, msg = e.get("kind"), str(e.get("message", ""))
    if kind == "segfault":
        return str(e.get("signal") or ("SIGBUS" if msg.startswith("SIGBUS") else "SIGSEGV"))
    if kind == "syscall":
        f = failed_syscall(e)
        if f is None:
            return None
        call, what, err = f
        if call == "madvise" and len(what.split()) >= 2:
            return f"madvise-{what.split()[1]}-{err}"
        return f"{call}-{err}"
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


def differs(c: Mapping[str, Any]) -> bool:
    """Does a compared counter differ: by more than its `tolerance` either way, or, where the
    kernel's I/O timing allows it (:data:`IO_TIMING_EXCESS`), by more than `kernel_excess`
    above mmsim's or `kernel_deficit` below it?"""
    d = c["kernel"] - c["simulated"]
    hi = max(c["tolerance"], c.get("kernel_excess", 0))
    lo = -max(c["tolerance"], c.get("kernel_deficit", 0))
    return not lo <= d <= hi


#: What the kernel's I/O timing may add to a process's counters between two snapshots of a
#: workload that reads a cold ext4 file, one-sided (mmsim's reads complete when submitted, so
#: it never meets a folio in flight): `filemap_map_pages` skips a folio whose read is still in
#: flight, so fault-around maps less and a later access takes a minor fault of its own, up to
#: 16 more (435 to 442 seen on the suite's 64 MiB cold read, against mmsim's exact 435); and a
#: page fault-around did not map and nothing touched is missing from RssFile, up to 16
#: windows of `fault_around_bytes` (64 KiB). Major faults stay exact: a fault that waits for a
#: folio in flight is retried as a minor one (the per-VMA-lock path).
IO_TIMING_EXCESS = {"minflt": 16}
IO_TIMING_DEFICIT = {"RssFile": 16 * 64}


def with_io_timing(counter: dict[str, Any], field: str) -> dict[str, Any]:
    """A process counter of a workload that reads cold files, with its one-sided I/O-timing
    allowance (:data:`IO_TIMING_EXCESS`, :data:`IO_TIMING_DEFICIT`) if it has one."""
    if field in IO_TIMING_EXCESS:
        counter["kernel_excess"] = IO_TIMING_EXCESS[field]
    if field in IO_TIMING_DEFICIT:
        counter["kernel_deficit"] = IO_TIMING_DEFICIT[field]
    return counter


def reads_cold_files(program: list[Mapping[str, Any]]) -> bool:
    """Does a program create an ext4 file (cold on the kernel: read from the device)?"""
    for op in program:
        if op.get("op") == "create" and op.get("fs", "ext4") == "ext4":
            return True
        if reads_cold_files(op.get("program", []) or op.get("body", []) or []):
            return True
    return False


def _verdict(name: str, pins: str, counters: list[dict[str, Any]], syscalls: str = "") -> dict[str, Any]:
    """Pass unless a counter differs (:func:`differs`; the reason names each) or the failed
    system calls do (`syscalls`: :func:`compare_syscalls`, named first)."""
    bad = [c for c in counters if differs(c)]
    reason = "; ".join(
        x for x in (syscalls, ", ".join(f"{c['name']}: kernel {c['kernel']}, mmsim {c['simulated']}" for c in bad)) if x
    )
    return _result(name, "fail" if bad or syscalls else "pass", reason, pins, counters)


def validate_case(case: Case, host: Mapping[str, Any], tolerance: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Run one case natively and in mmsim with the host's settings (and its knobs set on the
    host: :func:`with_knobs`); compare the changes between the `before` and `after` snapshots of each
    process, the system-wide counters between the first one's, and the events of every task."""
    for knob, value in case.needs.items():
        if str(host.get(knob)) != value:
            return _result(case.name, "skip", f"needs {knob}={value}, host has {host.get(knob)}", case.pins, [])
    why = unmirrored({"program": case.program}, host)
    if why:
        return _result(case.name, "skip", why, case.pins, [])
    return with_knobs(
        case.name, case.pins, case.knobs, case.program, host, lambda h: _run_case_again(case, h, tolerance)
    )


def _run_case_again(case: Case, host: Mapping[str, Any], tolerance: Mapping[str, float] | None) -> dict[str, Any]:
    """Run a case; while it fails on the kernel's side of a count, run it again, up to
    SYSTEM_RERUNS times, and pass it if a run agrees exactly. mmsim is deterministic, so a later
    run that agrees shows the kernel's count varying between runs: another process reaching a
    system-wide counter of its `vmstat` (its disk reads move pgpgin), or the kernel's own rare
    races (about one child in 80 of shmem-2g-16-readers takes 32,769 faults; under perf, such
    a child's read faults twice at the same address within a microsecond). The pass keeps the
    earlier runs' differences in its reason."""
    first = _run_case(case, host, tolerance or {})
    r = first
    for k in range(SYSTEM_RERUNS):
        if r["status"] != "fail" or not any(differs(c) for c in r["counters"]):
            break
        r = _run_case(case, host, tolerance or {})
        if r["status"] == "pass":
            r["reason"] = (
                f"the kernel's counts differed in {k + 1} earlier run(s) ({first['reason']}) and agreed "
                "in this one: the kernel varies between runs (another process, or its own races)"
            )
    return r


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
    io = reads_cold_files(case.program)
    for pid in case.pids:
        nb, na = _snap(native, "before", pid), _snap(native, "after", pid)
        sb = next((s for s in sim["snapshots"] if s["label"] == "before" and s["pid"] == pid), None)
        sa = next((s for s in sim["snapshots"] if s["label"] == "after" and s["pid"] == pid), None)
        if None in (nb, na, sb, sa):
            return _result(case.name, "fail", f"pid {pid}: missing before/after snapshots", case.pins, [])
        sp = {p["pid"]: p for p in sb["processes"]}[pid], {p["pid"]: p for p in sa["processes"]}[pid]
        for c in case.counters:
            k = f"{c}" if len(case.pids) == 1 else f"pid {pid} {c}"
            counter = {
                "name": k,
                "kernel": na.get(c, 0) - nb.get(c, 0),
                "simulated": sp[1].get(c, 0) - sp[0].get(c, 0),
                "tolerance": tol.get(c, 0),
            }
            counters.append(with_io_timing(counter, c) if io else counter)
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
    syscalls = compare_syscalls(events, sim.get("events", []))
    result = _verdict(case.name, case.pins, counters, syscalls)
    noise = _host_tables(case, native) if result["status"] == "fail" and not syscalls else ""
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
#: MADV_FREE's events, compared like the THP events in the suite, a user's workloads and the
#: random campaign: pages made lazyfree (Linux counts a small folio when its CPU's lazyfree
#: batch drains, which the runner makes happen before each snapshot, on the one CPU it runs
#: on: native/runner_report.h) and lazyfree pages reclaim discarded (none, unless the host
#: is short of memory).
LAZYFREE_EVENTS = ("pglazyfree", "pglazyfreed")

#: The hugetlb pool's system-wide counters, compared between pid 1's snapshots in every
#: workload (the random campaign's too): /proc/meminfo's HugePages_Free, HugePages_Rsvd and
#: HugePages_Surp (pages) and /proc/vmstat's nr_hugetlb (4 KiB pages of hugetlb folios in use).
HUGETLB_COUNTERS = ("HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "nr_hugetlb")


#: The per-process counters compared between a process's consecutive snapshots. RssFile counts
#: the runner's own text too, the same in every snapshot of a process (a forked child maps it
#: again before its first: native/runner.c), so its changes are the workload's.
FIELDS = (
    "minflt",
    "majflt",
    "RssAnon",
    "RssFile",
    "RssShmem",
    "VmPTE",
    "VmLck",
    "AnonHugePages",
    "HugetlbPages",
    "LazyFree",
)

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
    workload: Mapping[str, Any],
    host: Mapping[str, Any],
    events: tuple[str, ...] = THP_EVENTS + MLOCK_EVENTS + LAZYFREE_EVENTS,
) -> dict[str, Any]:
    """Run a user's workload natively and in mmsim; compare consecutive snapshots per process,
    from each process's implicit start to its end (see :func:`with_baselines`), the
    system-wide `events` and :data:`HUGETLB_COUNTERS` between pid 1's, and each task's fatal
    signals, and the failed system calls of each task (:func:`compare_syscalls`). The
    workload's `knobs` are set on the host for the case and given to mmsim (:func:`with_knobs`:
    a knob the host cannot take skips the case, naming it)."""
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
        counters = compare_snapshots(native, sim["snapshots"], events, io_timing=reads_cold_files(program))
        if isinstance(counters, str):
            return _result(name, "fail", counters, "", [])
        counters += compare_events(native_events, sim.get("events", []))
        return _verdict(name, pins, counters, compare_syscalls(native_events, sim.get("events", [])))

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

    return with_knobs(name, "", workload.get("knobs") or {}, program, host, body)


#: How many times :func:`validate_workload` runs a case again whose only differences are in
#: system-wide counters, which every process on the host reaches, and the suite a case whose
#: counts differ (:func:`_run_case_again`).
SYSTEM_RERUNS = 2


def _system_only(result: Mapping[str, Any]) -> bool:
    """Does a failed result differ only in system-wide counters (named ``SPAN COUNTER``, where
    a process's are ``pid N SPAN COUNTER``), never in a task's own counters or events?"""
    bad = [c for c in result["counters"] if differs(c)]
    return bool(bad) and all(not c["name"].startswith("pid ") for c in bad)


def compare_snapshots(
    native: list[dict[str, Any]],
    sim: list[dict[str, Any]],
    events: tuple[str, ...] = THP_EVENTS + MLOCK_EVENTS + LAZYFREE_EVENTS,
    system: tuple[str, ...] = HUGETLB_COUNTERS,
    io_timing: bool = False,
) -> list[dict[str, Any]] | str:
    """Every counter of consecutive snapshots of each process, kernel beside mmsim, and the
    system-wide `events` and `system` counters between pid 1's (a counter mmsim's snapshot
    lacks counts as 0); a string says why they cannot be compared (a process took other
    snapshots on one side). With `io_timing` (the workload reads cold files), the process
    counters carry the one-sided allowances of :data:`IO_TIMING_EXCESS` and
    :data:`IO_TIMING_DEFICIT`."""
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
                c = {
                    "name": f"pid {pid} {span} {f}",
                    "kernel": n1.get(f, 0) - n0.get(f, 0),
                    "simulated": p1.get(f, 0) - p0.get(f, 0),
                    "tolerance": 0,
                }
                counters.append(with_io_timing(c, f) if io_timing else c)
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


#: The THP knobs of the host (sysfs files under /sys/kernel/mm/): `--host-set` and a workload's
#: knobs may change them, as every knob :func:`host_knob_file` maps to a host file.
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


# --------------------------------------------------------------------------------------------
# A workload's knobs on the host
# --------------------------------------------------------------------------------------------

#: Where debugfs is mounted, if it is.
DEBUGFS = Path("/sys/kernel/debug")

#: mmsim's knobs that are files in debugfs on the host (the same path under :data:`DEBUGFS`).
DEBUGFS_KNOBS = ("fault_around_bytes", "sched/base_slice_ns")

#: mmsim's knobs of the ext4 directory's disk: its queue/read_ahead_kb and queue/max_sectors_kb.
BLOCK_KNOBS = ("block/read_ahead_kb", "block/max_sectors_kb")

#: Knobs whose write is an action, not a setting (written for the case, nothing to restore).
ACTION_KNOBS = ("vm/drop_caches",)

#: Host knobs validate never writes, though the host has them, and why.
NEVER_WRITTEN = {
    "kernel/pid_max": "the host's pid space is every process's on the host (validate does not write "
    "/proc/sys/kernel/pid_max)",
    **{
        k: "fault injection on the host would fail every process's allocations (validate does not write "
        "debugfs's fail_page_alloc, whose attributes are not mmsim's either)"
        for k in ("fail_page_alloc/min_order", "fail_page_alloc/every")
    },
}

#: mmsim's knobs of the host kernel's build or boot parameters: fixed on the host.
BOOT_KNOBS = (
    "kernel/pt_reclaim",
    "init_on_alloc",
    "init_on_free",
    "kernel/hz",
    "kernel/hugetlb_pmd_share",
    "transparent_hugepage/file_text",
)

KHUGEPAGED = "transparent_hugepage/khugepaged/"


def _debugfs_unwritable() -> str:
    """Why the host's debugfs knobs cannot be written ("" if they can)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        mounts = []
    for line in mounts:
        f = line.split()
        if len(f) >= 4 and f[1] == str(DEBUGFS) and f[2] == "debugfs":
            return "debugfs is mounted read-only" if "ro" in f[3].split(",") else ""
    return f"debugfs is not mounted at {DEBUGFS}"


def host_knob_file(knob: str) -> Path | str:
    """The host's file of an mmsim knob, which a workload's knobs (and ``--host-set``) may write
    for a case: the THP knobs and khugepaged's under /sys/kernel/mm/transparent_hugepage/, the
    hugetlb pool's sysctls and vm/drop_caches under /proc/sys/vm/, fault_around_bytes and
    sched/base_slice_ns in debugfs (where it is mounted and writable), block/read_ahead_kb and
    block/max_sectors_kb in the ext4 directory's disk's queue/. Else why the host cannot take
    it (a string): mmsim's own knob, a build or boot parameter, debugfs not mounted, ..."""
    if knob in HOST_KNOBS or knob.startswith(KHUGEPAGED):
        f = Path("/sys/kernel/mm") / knob
        return f if f.is_file() else f"the host kernel has no {f}"
    if knob in POOL_KNOBS or knob in ACTION_KNOBS:
        f = sysctl_path(knob)
        return f if f.is_file() else f"the host kernel has no {f}"
    if knob in DEBUGFS_KNOBS:
        why = _debugfs_unwritable()
        if why:
            return f"the host's is in debugfs, and {why}"
        f = DEBUGFS / knob
        try:
            f.read_text()
        except OSError as e:
            # Not there, or debugfs locked down (a kernel booted with lockdown, or
            # debugfs=no-mount: EPERM even for root).
            return f"the host's is in debugfs, and {f} cannot be read: {e.strerror}"
        return f
    if knob in BLOCK_KNOBS:
        d = file_dirs().get("ext4")
        f = queue_file(d, knob.removeprefix("block/")) if d else None
        return f or "it is the ext4 directory's disk's, and there is no ext4 directory on a block device"
    if knob in NEVER_WRITTEN:
        return NEVER_WRITTEN[knob]
    if knob in BOOT_KNOBS:
        return "the host kernel has it fixed by its build or boot parameters"
    return "it is mmsim's own knob, which the host kernel does not have"


def _writable_names() -> str:
    """The knobs a host may take, for messages."""
    return ", ".join((*HOST_KNOBS, f"{KHUGEPAGED}*", *POOL_KNOBS, *ACTION_KNOBS, *DEBUGFS_KNOBS, *BLOCK_KNOBS))


def _knob_file_value(knob: str, f: Path) -> str | None:
    """What the host has now of a knob it takes (file `f`): THP enabled as PMD THPs see it
    (hugepages-2048kB/enabled unless "inherit"), else the file's setting."""
    return _pmd_enabled(_sel) if knob == "transparent_hugepage/enabled" else _sel(f)


@functools.cache
def _kernel_config() -> dict[str, str] | None:
    """The running kernel's build configuration (/proc/config.gz, else /boot/config-RELEASE):
    {"CONFIG_HZ": "250", ...}, options not set left out; None where neither can be read."""
    for path, opener in ((Path("/proc/config.gz"), gzip.open), (Path(f"/boot/config-{os.uname().release}"), open)):
        try:
            with opener(path, "rt") as f:
                return dict(
                    line.strip().partition("=")[::2] for line in f if line.startswith("CONFIG_") and "=" in line
                )
        except (OSError, EOFError):
            continue
    return None


def _boot_flag(name: str) -> str | None:
    """init_on_alloc or init_on_free of the running kernel ("0" or "1"): its boot parameter,
    else the build's default (CONFIG_INIT_ON_ALLOC_DEFAULT_ON); None where neither says."""
    try:
        params = Path("/proc/cmdline").read_text().split()
    except OSError:
        params = []
    for p in reversed(params):
        key, eq, value = p.partition("=")
        if key == name and eq:
            return "1" if value.lower() in ("1", "y", "yes", "on", "true") else "0"
    config = _kernel_config()
    if config is None:
        return None
    return "1" if config.get(f"CONFIG_{name.upper()}_DEFAULT_ON") == "y" else "0"


def _fixed_value(knob: str, host: Mapping[str, Any]) -> str | None:
    """The host's value of a knob it cannot take (see :func:`host_knob_file`), as mmsim spells
    it; None where it cannot be told. A build or boot parameter the host's configuration and
    command line say; a knob validate gives mmsim from the host (fault_around_bytes, Linux's
    64 KiB where debugfs is not mounted; kernel/pt_reclaim; the huge zero page's allocation)
    as it gives it; mmsim's own knobs at mmsim's defaults, which are today's Linux (none of
    their models, such as vm/ptshare's shared page tables, is the host's)."""
    config = _kernel_config()
    if knob in ("init_on_alloc", "init_on_free"):
        return _boot_flag(knob)
    if knob == "kernel/hz":
        return config.get("CONFIG_HZ") if config else None
    if knob == "kernel/hugetlb_pmd_share" and config is not None:
        return "1" if config.get("CONFIG_HUGETLB_PMD_PAGE_TABLE_SHARING") == "y" else "0"
    if knob == "transparent_hugepage/file_text" and config is not None:
        return "khugepaged" if config.get("CONFIG_READ_ONLY_THP_FOR_FS") == "y" else "off"
    if knob == "kernel/pid_max":
        return _sel(Path("/proc/sys/kernel/pid_max"))
    if knob == "sched/base_slice_ns":
        return "auto"  # debugfs not mounted: Linux's default (as fault_around_bytes')
    mirrored = _host_workload("", [], host)["knobs"]
    if knob in mirrored:
        return str(mirrored[knob])
    return _knob_defaults().get(knob)


@functools.cache
def _knob_defaults() -> dict[str, str]:
    from mmsim.knobs import knobs

    return {k["name"]: str(k["default"]) for k in knobs()}


def _linux_base_slice() -> str:
    """Linux's default sched/base_slice_ns on this host: 0.7 ms x (1 + ilog2(min(CPUs, 8)))."""
    cpus = min(max(os.cpu_count() or 1, 1), 8)
    return str(700_000 * (1 + cpus.bit_length() - 1))


@functools.lru_cache(maxsize=64)
def _engine_spelling(items: str) -> str:
    from mmsim.workload import run_workload

    knobs = dict(json.loads(items))
    r = run_workload({"name": "knobs", "knobs": knobs, "program": []})
    return json.dumps({k: str(r["knobs"][k]) for k in knobs})


def case_knobs(knobs: Mapping[str, Any]) -> dict[str, str]:
    """A workload's knobs as mmsim spells them (as sysfs prints them: ``"vm/ptshare": "0"`` is
    "off", ``"transparent_hugepage/use_zero_page": 1`` is "1"), the hugetlb pool's sizes as
    numbers; a knob or value mmsim does not take is an :class:`MmsimError`."""
    out: dict[str, str] = {}
    rest = {}
    for k, v in knobs.items():
        if k in POOL_KNOBS:
            if not re.fullmatch(r"\d+", str(v).strip()):
                raise MmsimError(f"validate: knobs: {k}: expected a number of huge pages (0 or more), got {v!r}")
            out[k] = str(int(str(v).strip()))
        else:
            rest[k] = v
    if rest:
        out.update(json.loads(_engine_spelling(json.dumps(sorted(rest.items())))))
    return {k: out[k] for k in knobs}


class HostSettings:
    """Holds the host lock, changes host knobs for the duration of a ``with`` block and
    restores each one on the way out (also on errors and Ctrl-C): every knob the host takes
    (:func:`host_knob_file`: the THP knobs and khugepaged's in sysfs, the hugetlb pool's
    sysctls, fault_around_bytes in a mounted debugfs, ...). A pool the host cannot provide (a
    write of ``vm/nr_hugepages`` that leaves fewer pages) is an error, or with
    ``strict=False`` is said in :attr:`shortfall`. `source` names where the changes come from
    in errors (``--host-set``, a workload's knobs)."""

    def __init__(self, changes: Mapping[str, Any], *, source: str = "--host-set", strict: bool = True) -> None:
        self.files: dict[str, Path] = {}
        for k, v in changes.items():
            f = host_knob_file(k)
            if not isinstance(f, Path):
                if k in _knob_defaults() and _is_host_knob(k):
                    raise MmsimError(f"validate: {source} {k}: the host cannot take it: {f}")
                raise MmsimError(f"validate: {source} {k}: not a knob the runner may set (known: {_writable_names()})")
            if k in POOL_KNOBS and not re.fullmatch(r"\d+", str(v).strip()):
                raise MmsimError(f"validate: {source} {k}: expected a number of huge pages (0 or more), got {v!r}")
            self.files[k] = f
        self.changes = {k: str(v).strip() for k, v in changes.items()}
        self.source, self.strict = source, strict
        #: Each knob written, with its file and the setting to write back.
        self.saved: dict[str, tuple[Path, str]] = {}
        self.shortfall = ""
        self._lock = contextlib.ExitStack()

    @staticmethod
    def path(knob: str) -> Path:
        f = host_knob_file(knob)
        return f if isinstance(f, Path) else Path("/sys/kernel/mm") / knob

    def __enter__(self) -> HostSettings:
        self._lock.enter_context(host_lock(_waiting))
        f: Path | None = None
        try:
            for k, v in self.changes.items():
                f = self.files[k]
                if k in POOL_KNOBS:
                    why = pool_in_use(hugetlb_meminfo())
                    if why:
                        raise MmsimError(f"validate: {self.source} {k}: {why}")
                # Saved before the write, so that a Ctrl-C between them still restores it.
                old = _sel(f)
                if k not in ACTION_KNOBS and old is not None:
                    self.saved[k] = (f, old)
                f.write_text(v)
                if k == "vm/nr_hugepages":
                    got = int(f.read_text())
                    if got < int(v):
                        self.shortfall = (
                            f"the host provided {got} of the {v} huge pages {k} asks for (memory too fragmented?)"
                        )
        except OSError as e:
            self.__exit__(None, None, None)
            why = e.strerror + (" (needs root)" if e.errno in (errno.EPERM, errno.EACCES) else "")
            raise MmsimError(f"validate: {self.source}: cannot write {e.filename or f}: {why}") from None
        except BaseException:  # an MmsimError above, Ctrl-C
            self.__exit__(None, None, None)
            raise
        if self.shortfall and self.strict:
            self.__exit__(None, None, None)
            raise MmsimError(f"validate: {self.source}: {self.shortfall}")
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            for f, v in reversed(list(self.saved.values())):
                with contextlib.suppress(OSError):
                    f.write_text(v)
            self.saved.clear()
        finally:
            self._lock.close()


def _is_host_knob(knob: str) -> bool:
    """Is `knob` one the host may take where it has the file (debugfs mounted, an ext4 disk)?"""
    return knob in (*HOST_KNOBS, *POOL_KNOBS, *ACTION_KNOBS, *DEBUGFS_KNOBS, *BLOCK_KNOBS) or knob.startswith(
        KHUGEPAGED
    )


def _host_target(knob: str, value: str) -> str:
    """What to write to the host's file for mmsim's spelling of a knob (sched/base_slice_ns
    "auto" is Linux's default, in ns)."""
    return _linux_base_slice() if knob == "sched/base_slice_ns" and value == "auto" else value


def knob_plan(knobs: Mapping[str, str], host: Mapping[str, Any]) -> tuple[dict[str, str], str]:
    """For a workload's knobs (:func:`case_knobs`' spelling): the host writes to make (knob ->
    value; none for a knob the host has at that value already), or why the host cannot take
    them (the first knob it cannot take that differs from the host's, named, else "")."""
    changes: dict[str, str] = {}
    for k, v in knobs.items():
        f = host_knob_file(k)
        if isinstance(f, Path):
            want = _host_target(k, v)
            if k in ACTION_KNOBS:
                if v != _knob_defaults().get(k):
                    changes[k] = want
            elif _knob_file_value(k, f) != want:
                changes[k] = want
            continue
        have = _fixed_value(k, host)
        if have != v:
            if have is None:
                told = "what the host has cannot be told"
            elif k in DEBUGFS_KNOBS:
                told = f"the host's is taken to be Linux's default, {have}"
            elif _is_host_knob(k) or k in NEVER_WRITTEN or k in BOOT_KNOBS:
                told = f"the host's is {have}"
            else:
                told = f"the host is as mmsim's {have}"
            return {}, f"the workload's knob {k}={v} cannot be set on the host: {f} ({told})"
    return changes, ""


def with_knobs(
    name: str,
    pins: str,
    knobs: Mapping[str, Any],
    program: list[Any],
    host: Mapping[str, Any],
    body: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """Run `body` (a case) with the host set as its knobs say, and give mmsim the same values:
    every knob the host takes (:func:`host_knob_file`) whose host value differs is written for
    the case (:class:`HostSettings`, under the host lock) and the host's value restored after
    it, also on errors and Ctrl-C; a knob the host cannot take (mmsim's own, a boot parameter,
    debugfs not mounted) skips the case, naming it, unless the host has that value already
    (:func:`knob_plan`); so does a write the host does not take as asked. For a program that
    maps hugetlb memory or knobs that size the pool, the case is skipped if the pool is
    another process's (pages reserved, surplus or in use) before or after the write, or if the
    host cannot provide it; a program that uses hugetlb without sizing the pool runs with the
    host's pool as it is (mmsim is given its size). `body` gets the host's settings as they
    are then, with the case's knobs in ``workload_knobs`` (see :func:`_host_workload`)."""
    pool = uses_hugetlb(program) or any(k in POOL_KNOBS for k in knobs)
    if not knobs and not pool:
        return body(host)
    try:
        want = case_knobs(knobs)
    except MmsimError as e:
        return _result(name, "fail", f"mmsim cannot run it: {' '.join(str(e).split())}", pins, [])
    with host_lock(_waiting):
        if pool:
            busy = pool_in_use(hugetlb_meminfo())
            if busy:
                return _result(name, "skip", busy, pins, [])
        now = host_settings()
        changes, why = knob_plan(want, now)
        if why:
            return _result(name, "skip", why, pins, [])
        settings = HostSettings(changes, source=f"{name}: knobs", strict=False)
        try:
            settings.__enter__()
        except MmsimError as e:
            what = "size the hugetlb pool" if set(changes) <= set(POOL_KNOBS) else "set the workload's knobs"
            return _result(name, "skip", f"cannot {what}: {str(e).removeprefix('validate: ')}", pins, [])
        try:
            now = host_settings()
            why = settings.shortfall or (pool_in_use(now["hugetlb"]) if pool else "")
            if why:
                return _result(name, "skip", why, pins, [])
            for k, v in changes.items():
                got = _knob_file_value(k, settings.files[k]) if k not in ACTION_KNOBS else v
                if got != v:
                    return _result(name, "skip", f"the host took the workload's knob {k}={v} as {got}", pins, [])
            return body({**now, "workload_knobs": want})
        finally:
            settings.__exit__(None, None, None)
