"""``mmsim validate``'s comparison of a native run with mmsim's: the counters of consecutive
snapshots of each process and the system-wide ones (:func:`compare_snapshots`, a suite case's
:func:`compare_case`), the events of each task (:func:`compare_events`) and its failed system
calls (:func:`compare_syscalls`), and the verdict: a counter :func:`differs` by more than its
tolerance (or the one-sided allowance of the kernel's I/O timing, :func:`with_io_timing`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from mmsim.runner_program import FILE_OPS

if TYPE_CHECKING:
    from mmsim.native import Case

__all__ = [
    "FIELDS",
    "FILE_COUNTERS",
    "HUGETLB_COUNTERS",
    "LAZYFREE_EVENTS",
    "MLOCK_EVENTS",
    "THP_EVENTS",
    "compare_case",
    "compare_events",
    "compare_snapshots",
    "compare_syscalls",
    "differs",
    "failed_syscall",
    "not_cold",
    "reads_cold_files",
    "with_io_timing",
]

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


def _system(snap: Mapping[str, Any], name: str) -> int:
    """A system-wide counter of a snapshot: /proc/vmstat's, else /proc/meminfo's (0 where the
    snapshot has neither: mmsim before it modelled the counter)."""
    v = snap.get("vmstat", {}).get(name)
    return int(v if v is not None else snap.get("meminfo", {}).get(name, 0))


def _snap(rows: list[dict[str, Any]], label: str, pid: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["label"] == label and r["pid"] == pid), None)


def compare_case(
    case: Case,
    native: list[dict[str, Any]],
    events: list[dict[str, Any]],
    sim: dict[str, Any],
    tolerance: Mapping[str, float],
) -> dict[str, Any]:
    """A suite case's result from its run on the kernel (`native` snapshot lines and `events`)
    and in mmsim (`sim`, :func:`~mmsim.native.run_both`'s): the changes of its counters between
    the `before` and `after` snapshots of each of its pids, its system-wide counters between
    the first pid's, the events and failed system calls of every task."""
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
