"""``mmsim validate``'s comparison of a native run with mmsim's: the counters of consecutive
snapshots of each process and the system-wide ones (:func:`compare_snapshots`, a suite case's
:func:`compare_case`), the events of each task (:func:`compare_events`) and its failed system
calls (:func:`compare_syscalls`), and the verdict: a counter :func:`differs` by more than its
tolerance (or the one-sided allowance of the kernel's I/O timing, :func:`with_io_timing`).

Under memory pressure (swap, memory cgroups, MADV_PAGEOUT: :func:`~mmsim.native_memcg.uses_pressure`)
the comparison takes in the reclaim and swap counters (:data:`PRESSURE_VMSTAT`,
:data:`PRESSURE_MEMINFO`), each cgroup's files (:func:`compare_cgroups`) and the swap devices
(:func:`compare_swaps`); the host's reclaim varies a little from run to run, so such a workload
runs N times natively and each counter passes when mmsim's value lies in the range the runs saw,
widened by its tolerance (:func:`merge_runs`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from mmsim.runner_program import FILE_OPS, all_ops

if TYPE_CHECKING:
    from mmsim.native import Case

__all__ = [
    "CGROUP_NOT_COMPARED",
    "FIELDS",
    "FILE_COUNTERS",
    "HUGETLB_COUNTERS",
    "LAZYFREE_EVENTS",
    "MLOCK_EVENTS",
    "PRESSURE_MEMINFO",
    "PRESSURE_VMSTAT",
    "THP_EVENTS",
    "compare_case",
    "compare_cgroups",
    "compare_events",
    "compare_snapshots",
    "compare_syscalls",
    "differs",
    "failed_syscall",
    "forked_children",
    "format_counter",
    "locked_forks",
    "merge_runs",
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
    above mmsim's or `kernel_deficit` below it? A counter of several native runs
    (:func:`merge_runs`) differs when mmsim's value is outside the range the runs saw
    (`kernel_min`..`kernel_max`) widened so."""
    up = max(c["tolerance"], c.get("kernel_excess", 0))
    down = max(c["tolerance"], c.get("kernel_deficit", 0))
    lo, hi = c.get("kernel_min", c["kernel"]), c.get("kernel_max", c["kernel"])
    return not lo - up <= c["simulated"] <= hi + down


def merge_runs(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The counters of several native runs of one workload, each run's compared with the same
    mmsim run, as one counter per name: `kernel_runs` (each run's value; 0 in a run that did not
    have the counter, as :func:`compare_events` leaves out an event neither side had),
    `kernel_min` and `kernel_max` (the host's spread, which :func:`differs` takes: mmsim passes
    inside it, widened by the counter's tolerance), and `kernel` the runs' median. A counter
    whose runs agree has no spread to widen by: it stays exact (tolerance aside). In the order
    the first run that has each counter gives them.

    ```python
    >>> a = [{"name": "pswpout", "kernel": 16384, "simulated": 16384, "tolerance": 0}]
    >>> b = [{"name": "pswpout", "kernel": 16390, "simulated": 16384, "tolerance": 0}]
    >>> (c,) = merge_runs([a, b, a])
    >>> c["kernel_min"], c["kernel_max"], c["kernel"], c["kernel_runs"], differs(c)
    (16384, 16390, 16384, [16384, 16390, 16384], False)

    ```
    """
    order: dict[str, dict[str, Any]] = {}
    for run in runs:
        for c in run:
            order.setdefault(c["name"], c)
    out = []
    for name, first in order.items():
        values = []
        for run in runs:
            found = next((c for c in run if c["name"] == name), None)
            values.append(found["kernel"] if found is not None else 0)
        ranked = sorted(values)
        out.append(
            {
                **first,
                "kernel": ranked[(len(ranked) - 1) // 2],
                "kernel_min": ranked[0],
                "kernel_max": ranked[-1],
                "kernel_runs": values,
            }
        )
    return out


def format_counter(c: Mapping[str, Any]) -> str:
    """A compared counter as validate prints it, with the host's spread when several native runs
    made it (``pswpout   kernel 16,384   mmsim 16,384   (host 16,384..16,384, 5 runs)``)."""
    line = f"{c['name']:<40} kernel {c['kernel']:>10,}   mmsim {c['simulated']:>10,}"
    if "kernel_runs" in c and len(c["kernel_runs"]) > 1:
        line += f"   (host {c['kernel_min']:,}..{c['kernel_max']:,}, {len(c['kernel_runs'])} runs)"
    return line


def _kernel_text(c: Mapping[str, Any]) -> str:
    """The kernel's side of a counter in a reason: its value, or the runs' range."""
    if "kernel_runs" in c and c["kernel_min"] != c["kernel_max"]:
        return f"{c['kernel_min']}..{c['kernel_max']} ({len(c['kernel_runs'])} runs)"
    return str(c["kernel"])


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
        x
        for x in (syscalls, ", ".join(f"{c['name']}: kernel {_kernel_text(c)}, mmsim {c['simulated']}" for c in bad))
        if x
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
            # The case's cgroup files (`cgroup`: "memory.usage_in_bytes", "memory.stat rss"),
            # events as changes, sizes as the value after (compare_cgroups).
            for c in compare_cgroups(nb, na, sb, sa, ""):
                what = c["name"].split(" ", 2)[2]
                if what in case.cgroup:
                    counters.append({**c, "tolerance": tol.get(what, 0)})
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
    "VmSwap",
)

#: Reclaim's and swap's system-wide counters (/proc/vmstat), compared as changes between pid
#: 1's snapshots in a workload under memory pressure. Memory cgroup reclaim (a charge over
#: memory.max, memory.reclaim) counts in the pgscan_anon/file, pgsteal_anon/file,
#: pgactivate, pgdeactivate, workingset_*, pswp* and swap_ra* ones only; its
#: pgscan_direct, pgsteal_direct, pgrefill and allocstall_* are the cgroup's own (v2's
#: memory.stat), not /proc/vmstat's.
PRESSURE_VMSTAT = (
    "pswpin",
    "pswpout",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgscan_khugepaged",
    "pgscan_proactive",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgsteal_khugepaged",
    "pgsteal_proactive",
    "pgscan_anon",
    "pgscan_file",
    "pgsteal_anon",
    "pgsteal_file",
    "pgactivate",
    "pgdeactivate",
    "pgrefill",
    "workingset_refault_anon",
    "workingset_refault_file",
    "workingset_activate_anon",
    "workingset_activate_file",
    "workingset_restore_anon",
    "workingset_restore_file",
    "workingset_nodereclaim",
    "swap_ra",
    "swap_ra_hit",
    "swpin_zero",
    "swpout_zero",
    "allocstall_normal",
    "allocstall_movable",
    "pageoutrun",
    "thp_swpout",
    "thp_swpout_fallback",
    "oom_kill",
    "nr_inactive_anon",
    "nr_active_anon",
    "nr_inactive_file",
    "nr_active_file",
    "nr_unevictable",
    "nr_isolated_anon",
    "nr_isolated_file",
    "nr_swapcached",
    "nr_vmscan_write",
)
#: Not compared: what depends on when the device finished a write, which on the kernel is
#: real time passing (the runner's snapshot itself takes milliseconds) and in mmsim simulated
#: time (a snapshot takes none): pgrotated (a folio reclaim wrote, rotated when its write
#: completes), nr_writeback, and a cgroup's memory.stat writeback.
IO_TIMED = ("pgrotated", "nr_writeback")

#: Swap's and the LRU lists' /proc/meminfo lines (kB), compared like PRESSURE_VMSTAT.
PRESSURE_MEMINFO = (
    "SwapTotal",
    "SwapFree",
    "SwapCached",
    "Active",
    "Inactive",
    "Active(anon)",
    "Inactive(anon)",
    "Active(file)",
    "Inactive(file)",
    "Unevictable",
)

#: A cgroup's files that are counts of events (compared as changes between two snapshots);
#: every other number is a size or a setting (compared as the value at each snapshot). v1's
#: memory.stat events (and their total_ twins), v2's (its memory.stat events, every key of
#: memory.events, memory.events.local and memory.swap.events), memory.failcnt, and the OOM
#: kills of memory.oom_control.
CGROUP_EVENT_FILES = ("memory.events", "memory.events.local", "memory.swap.events")
CGROUP_EVENTS = frozenset({"memory.failcnt", "oom_kill"})
V1_STAT_EVENTS = frozenset(
    k
    for e in ("pgpgin", "pgpgout", "pgfault", "pgmajfault", "workingset_refault_anon", "workingset_refault_file")
    for k in (e, f"total_{e}")
)
#: v2 memory.stat's sizes (bytes): the rest of its keys are events (memcg_stat_format).
V2_STAT_SIZES = frozenset(
    {
        "anon", "file", "kernel", "kernel_stack", "pagetables", "sec_pagetables", "percpu", "sock", "vmalloc",
        "shmem", "zswap", "zswapped", "file_mapped", "file_dirty", "file_writeback", "swapcached", "anon_thp",
        "file_thp", "shmem_thp", "inactive_anon", "active_anon", "inactive_file", "active_file", "unevictable",
        "slab_reclaimable", "slab_unreclaimable", "slab", "hugetlb",
    }
)  # fmt: skip
#: What the runner reports of a cgroup but validate does not compare: the kernel memory in a
#: v1 cgroup's usage (mmsim's v1 report has no such file; it shows in the usage).
CGROUP_NOT_COMPARED = frozenset({"memory.kmem.usage_in_bytes", "memory.stat.live"})
#: memory.stat keys not compared (IO_TIMED's reason), v1's and v2's.
CGROUP_STAT_IO_TIMED = frozenset({"writeback", "total_writeback", "file_writeback"})


def _is_event(file: str, key: str | None, v1: bool) -> bool:
    """Is a cgroup file's number (key `key` of a keyed file) an event count?"""
    if key is None:
        return file in CGROUP_EVENTS
    if file in CGROUP_EVENT_FILES:
        return True
    if file == "memory.oom_control":
        return key in CGROUP_EVENTS
    if file == "memory.stat":
        return key in V1_STAT_EVENTS if v1 else key not in V2_STAT_SIZES
    return False


def _cgroup_numbers(snap: Mapping[str, Any], name: str) -> dict[tuple[str, str | None], int]:
    """A cgroup's numbers in a snapshot by (file, key): keyed files (memory.stat, ...) by key."""
    out: dict[tuple[str, str | None], int] = {}
    for f, v in ((snap.get("cgroups") or {}).get(name) or {}).items():
        if f in CGROUP_NOT_COMPARED:
            continue
        if isinstance(v, Mapping):
            out.update(
                {(f, k): _number(x) for k, x in v.items() if f != "memory.stat" or k not in CGROUP_STAT_IO_TIMED}
            )
        else:
            out[(f, None)] = _number(v)
    return out


def _stat_range(snap: Mapping[str, Any], name: str, key: str) -> tuple[int, int]:
    """The values a memory.stat key of mmsim's snapshot may show on the kernel: from what a
    read shows (the statistics rstat last flushed) to the live value (`memory.stat.live`), as
    the kernel's periodic flush (every 2 s of its time) may or may not have run before it."""
    files = (snap.get("cgroups") or {}).get(name) or {}
    read = _number((files.get("memory.stat") or {}).get(key, 0))
    live = _number((files.get("memory.stat.live") or {}).get(key, read))
    return min(read, live), max(read, live)


def _with_unflushed(
    c: dict[str, Any], s0: Mapping[str, Any] | None, s1: Mapping[str, Any], name: str, key: str, event: bool
) -> None:
    """Widen a memory.stat counter by the statistics mmsim has not flushed at its snapshots
    (:func:`_stat_range`): an event's change may be any from the first snapshot's range to the
    second's, a size any value of the second's; the kernel's periodic flush decides, at times
    of its own. Exact where mmsim has nothing pending."""
    lo, hi = _stat_range(s1, name, key)
    if event and s0 is not None:
        lo0, hi0 = _stat_range(s0, name, key)
        lo, hi = lo - hi0, hi - lo0
    if hi > c["simulated"]:
        c["kernel_excess"] = c.get("kernel_excess", 0) + hi - c["simulated"]
    if lo < c["simulated"]:
        c["kernel_deficit"] = c.get("kernel_deficit", 0) + c["simulated"] - lo


def _number(v: Any) -> int:
    """A cgroup file's number ("max": -1)."""
    return -1 if v == "max" else int(v)


#: A cgroup's page counters (v1's and v2's files): the pages charged to it, with each CPU's
#: stock of pages charged ahead (`consume_stock` / `refill_stock`, up to MEMCG_CHARGE_BATCH).
PAGE_COUNTERS = frozenset(
    {
        ("memory.usage_in_bytes", None),
        ("memory.max_usage_in_bytes", None),
        ("memory.memsw.usage_in_bytes", None),
        ("memory.memsw.max_usage_in_bytes", None),
        ("memory.current", None),
        ("memory.peak", None),
    }
)
#: MEMCG_CHARGE_BATCH (include/linux/memcontrol.h): the pages a charge takes ahead into its
#: CPU's stock. The kernel also charges kernel memory to a cgroup (slab objects its tasks
#: allocate: vm_area_struct, anon_vma, the runner's own files), which mmsim does not model;
#: its first object charges a batch and leaves the stock full. So a page counter on the
#: kernel may be up to a batch a CPU off mmsim's either way, and above it by the kernel
#: memory the workload's tasks hold (KMEM_PAGES: the slab of a few hundred vmas).
MEMCG_CHARGE_BATCH = 64
KMEM_PAGES = 16


def stock_allowance(cpus: int | None = None) -> tuple[int, int]:
    """The bytes a page counter may be above (kernel_excess) and below (kernel_deficit) mmsim's
    on a host of `cpus` CPUs (default: this one's): :data:`MEMCG_CHARGE_BATCH` a CPU either
    way, and :data:`KMEM_PAGES` above."""
    n = cpus or os.cpu_count() or 1
    return (n * MEMCG_CHARGE_BATCH + KMEM_PAGES) * 4096, n * MEMCG_CHARGE_BATCH * 4096


#: Pages of its own the runner's parent writes between fork(2) and the wait for the child
#: (native/runner.c do_fork: its stack, the cgroup path it writes, its task record), each a
#: copy-on-write copy while the child lives. Where an mlockall(MCL_CURRENT) locked the
#: runner's memory, each copy mlocks the new page and munlocks the old: measured up to 4 of
#: each a fork on this host (unevictable_pgs_mlocked and _munlocked of an
#: mlockall(MCL_CURRENT) then forks whose children exit at once: 4 for the first, 1 for each
#: after). mmsim's stand-ins are never written: its counts may be that much below the
#: kernel's, never above.
RUNNER_FORK_LOCKED_PAGES = 4


def locked_forks(program: list[Mapping[str, Any]]) -> int:
    """The children :func:`forked_children` counts, where the program locks the runner's own
    memory with an mlockall(MCL_CURRENT) (else 0): the forks
    :data:`RUNNER_FORK_LOCKED_PAGES` allows for."""
    current = any(op.get("op") == "mlockall" and "current" in (op.get("flags") or []) for op in all_ops(program))
    return forked_children(program) if current else 0


def forked_children(program: list[Mapping[str, Any]]) -> int:
    """How many children a program's fork ops make (each op's count once: an upper bound of
    the pages :data:`RUNNER_FORK_PAGES` allows for, with loops taken once)."""
    return sum(int(op.get("count", 1)) for op in all_ops(program) if op.get("op") == "fork")


def compare_cgroups(
    n0: Mapping[str, Any] | None,
    n1: Mapping[str, Any],
    s0: Mapping[str, Any] | None,
    s1: Mapping[str, Any],
    span: str,
) -> list[dict[str, Any]]:
    """Each cgroup's files between two snapshots, kernel (`n0`, `n1`) beside mmsim (`s0`, `s1`):
    an event count as its change (None for `n0` and `s0`: the first snapshot, whose events are
    not compared), a size or a setting as its value at the second. The kernel's files decide
    what is compared (v1's or v2's, as the host has them); one mmsim lacks counts as 0. (The
    runner forks from a cgroup of its own, so the pages it copies at a fork are not the
    workload's: native/runner.c do_fork.) The page counters carry
    the per-CPU stock's and kernel memory's allowance (:func:`stock_allowance`), memory.stat's
    keys what mmsim has not flushed (:func:`_with_unflushed`).
    Named ``SPAN cgroup NAME FILE`` (``SPAN cgroup NAME memory.stat KEY``)."""
    out = []
    for name in n1.get("cgroups") or {}:
        v1 = "memory.usage_in_bytes" in n1["cgroups"][name]
        k1, m1 = _cgroup_numbers(n1, name), _cgroup_numbers(s1, name)
        k0 = _cgroup_numbers(n0, name) if n0 is not None else {}
        m0 = _cgroup_numbers(s0, name) if s0 is not None else {}
        for (f, key), v in k1.items():
            what = " ".join(x for x in (span, "cgroup", name, f, key) if x)
            if _is_event(f, key, v1):
                if n0 is None:
                    continue
                kernel, simulated = v - k0.get((f, key), 0), m1.get((f, key), 0) - m0.get((f, key), 0)
            else:
                kernel, simulated = v, m1.get((f, key), 0)
            c = {"name": what, "kernel": kernel, "simulated": simulated, "tolerance": 0}
            if (f, key) in PAGE_COUNTERS:
                up, down = stock_allowance()
                c["kernel_excess"] = c.get("kernel_excess", 0) + up
                c["kernel_deficit"] = c.get("kernel_deficit", 0) + down
            if f == "memory.stat" and key is not None:
                _with_unflushed(c, s0 if n0 is not None else None, s1, name, key, _is_event(f, key, v1))
            out.append(c)
    return out


def compare_swaps(
    native: list[Mapping[str, Any] | None], sim: list[Mapping[str, Any]], span: str = ""
) -> list[dict[str, Any]]:
    """The workload's swap devices as /proc/swaps shows them (its rows, in the workload's
    order), kernel beside mmsim: Size, Priority and, where mmsim's rows have it, Used (kB); and
    whether the Type agrees (``swap 0 Type file``: 1 on the kernel, 1 in mmsim when it says the
    same). Named ``SPAN swap I FIELD``."""
    out = []
    for i, row in enumerate(native):
        if row is None:
            continue
        other = sim[i] if i < len(sim) else {}
        for f in ("Size", "Used", "Priority"):
            if f == "Used" and "Used" not in other:
                continue
            name = " ".join(x for x in (span, "swap", str(i), f) if x)
            out.append({"name": name, "kernel": int(row[f]), "simulated": int(other.get(f, 0)), "tolerance": 0})
        same = int(other.get("Type") == row["Type"])
        name = " ".join(x for x in (span, "swap", str(i), "Type", row["Type"]) if x)
        out.append({"name": name, "kernel": 1, "simulated": same, "tolerance": 0})
    return out


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
    pressure: bool = False,
    swaps: list[Mapping[str, Any]] | None = None,
    locked: int = 0,
) -> list[dict[str, Any]] | str:
    """Every counter of consecutive snapshots of each process, kernel beside mmsim, and the
    system-wide `events` and `system` counters between pid 1's (a counter mmsim's snapshot
    lacks counts as 0); a string says why they cannot be compared (a process took other
    snapshots on one side). With `io_timing` (the workload reads cold files), the process
    counters carry the one-sided allowances of :data:`IO_TIMING_EXCESS` and
    :data:`IO_TIMING_DEFICIT`. With `pressure` (the workload reclaims or swaps), also
    :data:`PRESSURE_VMSTAT` and :data:`PRESSURE_MEMINFO` between pid 1's snapshots, each
    cgroup's files at each of pid 1's snapshots (:func:`compare_cgroups`) and the workload's
    swap devices (:func:`compare_swaps`: mmsim's snapshot's rows, else `swaps`, its report's,
    whose Used is the end's and is not compared). With `locked` (:func:`locked_forks`), the mlock events
    may be larger on the kernel by :data:`RUNNER_FORK_LOCKED_PAGES` a child."""
    if pressure:
        system = (*system, *PRESSURE_VMSTAT, *PRESSURE_MEMINFO)
    counters = []
    for pid in sorted({r["pid"] for r in native} | {s["pid"] for s in sim}):
        ns = [r for r in native if r["pid"] == pid]
        ss = [s for s in sim if s["pid"] == pid]
        if [r["label"] for r in ns] != [s["label"] for s in ss]:
            return f"pid {pid}: snapshots differ (kernel {[r['label'] for r in ns]}, mmsim {[s['label'] for s in ss]})"
        if pressure and pid == 1 and ns:
            counters += compare_cgroups(None, ns[0], None, ss[0], ns[0]["label"])
            counters += _swap_counters(ns[0], ss[0], swaps, ns[0]["label"])
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
                    c = {
                        "name": f"{span} {v}",
                        "kernel": _system(n1, v) - _system(n0, v),
                        "simulated": _system(s1, v) - _system(s0, v),
                        "tolerance": 0,
                    }
                    if locked and v in MLOCK_EVENTS:
                        c["kernel_excess"] = locked * RUNNER_FORK_LOCKED_PAGES
                    counters.append(c)
                if pressure:
                    counters += compare_cgroups(n0, n1, s0, s1, span)
                    counters += _swap_counters(n1, s1, swaps, n1["label"])
    return counters


def _swap_counters(
    n: Mapping[str, Any], s: Mapping[str, Any], report: list[Mapping[str, Any]] | None, label: str
) -> list[dict[str, Any]]:
    """:func:`compare_swaps` at one snapshot: the runner's rows (run_native's: the workload's
    devices) against mmsim's snapshot's, else its report's without Used."""
    rows = n.get("swaps") or []
    if not rows:
        return []
    sim = s.get("swaps")
    if sim is None:
        sim = [{k: v for k, v in r.items() if k != "Used"} for r in report or []]
    return compare_swaps(rows, sim, label)
