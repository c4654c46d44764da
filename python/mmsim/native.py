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

This module runs the runner (:func:`run_native`; :func:`run_both` beside mmsim) and validates
a suite's :class:`Case` (:func:`validate_case`) and a user's workload
(:func:`validate_workload`). What the host has is :mod:`mmsim.native_host`'s, the host's knobs
a case sets :mod:`mmsim.native_knobs`', the comparison of the two runs :mod:`mmsim.native_compare`'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
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
from mmsim.native_compare import (
    LAZYFREE_EVENTS,
    MLOCK_EVENTS,
    THP_EVENTS,
    _result,
    _system_only,
    _verdict,
    compare_case,
    compare_events,
    compare_snapshots,
    compare_syscalls,
    differs,
    not_cold,
    reads_cold_files,
)
from mmsim.native_host import host_knobs, unmirrored
from mmsim.native_knobs import with_knobs
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

__all__ = ["Case", "compile_program", "parse_size", "run_native", "validate_case"]


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


def _host_workload(name: str, program: list[Any], host: Mapping[str, Any]) -> dict[str, Any]:
    """A workload of `program` with the host's state as its knobs (:func:`host_knobs`), so that
    mmsim starts where the kernel does."""
    return {"name": name, "knobs": host_knobs(program, host), "program": program}


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
    helper holds those page-cache pages mlocked (native/runner_host.h). A PROT_NONE mapping (the
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


def _run_case(case: Case, host: Mapping[str, Any], tolerance: Mapping[str, float]) -> dict[str, Any]:
    native, events, sim = run_both(case.name, case.program, host)
    return compare_case(case, native, events, sim, tolerance)


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
