"""`mmsim run --native`: a workload run on the host kernel, reported in `mmsim run --json`'s
schema (the part a kernel can tell) and printed as `mmsim run` prints a report."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from mmsim.native import EVENT, run_native
from mmsim.native_compare import FIELDS, FILE_COUNTERS, HUGETLB_COUNTERS, LAZYFREE_EVENTS, THP_EVENTS, _system
from mmsim.native_host import POOL_KNOBS, SWAP_KNOBS, host_settings
from mmsim.native_knobs import HostSettings
from mmsim.runner_program import file_systems

#: Per-process fields of the runner's snapshot lines, as `mmsim run --json` names them: the
#: compared ones (:data:`~mmsim.native_compare.FIELDS`), with VmRSS and VmHWM after the faults.
PROCESS_FIELDS = (*FIELDS[:2], "VmRSS", "VmHWM", *FIELDS[2:])


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
    mmsim's: a task killed by SIGSEGV or SIGBUS ("segfault"), a failed system call ("syscall":
    "munmap p: EINVAL", as mmsim's engine words it). Under memory pressure a snapshot has the
    workload's ``cgroups`` (each cgroup's files, as the host's hierarchy has them) and ``swaps``
    (/proc/swaps' rows of the workload's swap devices, made for the run: the report's
    ``swaps`` are the last snapshot's); the workload's reclaim and swap knobs
    (:data:`SWAP_KNOBS`) are written for the run and restored after it, as the pool's."""
    changes = {k: v for k, v in (workload.get("knobs") or {}).items() if k in (*POOL_KNOBS, *SWAP_KNOBS)}
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
        out = {
            "label": r["label"],
            "pid": r["pid"],
            "perf": perf,
            "vmstat": r.get("vmstat", {}),
            "meminfo": r.get("meminfo", {}),
            "processes": [proc],
        }
        out.update({k: r[k] for k in ("cgroups", "swaps") if k in r})
        return out

    start = next((r for r in rows if r["label"] == "__start"), None)
    last_swaps = next((r["swaps"] for r in reversed(rows) if "swaps" in r), None)
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
        # As mmsim's: a task killed by SIGSEGV or SIGBUS ("segfault"), a failed system call ("syscall").
        "events": [{"pid": r["pid"], "kind": r["kind"], "message": r["message"]} for r in rows if r["label"] == EVENT],
        # The workload creates files: the page cache's counters (FILE_COUNTERS) are its too.
        "files": bool(file_systems(workload.get("program", []))),
        **({"swaps": last_swaps} if last_swaps is not None else {}),
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
    system_counters = THP_EVENTS + LAZYFREE_EVENTS + HUGETLB_COUNTERS + (FILE_COUNTERS if report.get("files") else ())
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
    lines += _cgroup_lines(report)
    if report.get("events"):
        lines += ["", " Events:"] + [f"  pid {e['pid']:>4} {e['kind']}: {e['message']}" for e in report["events"]]
    return "\n".join(lines) + "\n"


#: What the text shows of a cgroup at each snapshot (kB), v1's or v2's files, whichever the
#: host has: its usage, its peak and its swap.
CGROUP_COLUMNS = (
    ("usage", ("memory.usage_in_bytes", "memory.current")),
    ("peak", ("memory.max_usage_in_bytes", "memory.peak")),
    ("swap", ("memory.stat swap", "memory.swap.current")),
)


def _cgroup_lines(report: Mapping[str, Any]) -> list[str]:
    """The workload's cgroups at each snapshot, and its swap devices at the end."""
    rows = [s for s in report["snapshots"] if s.get("cgroups")]
    lines: list[str] = []
    if rows:
        head = f"  {'snapshot':<16} {'pid':>4} {'cgroup':<16}" + "".join(f" {c:>13}" for c, _ in CGROUP_COLUMNS)
        lines += ["", " Memory cgroups (kB):", head]
        for s in rows:
            for name, files in s["cgroups"].items():
                vals = "".join(f" {_cgroup_kb(files, keys):>13,}" for _, keys in CGROUP_COLUMNS)
                lines.append(f"  {s['label']:<16} {s['pid']:>4} {name:<16}{vals}")
    if report.get("swaps"):
        lines += ["", " Swap devices (/proc/swaps, kB):"]
        lines += [
            f"  {i}: {r['Type']:<10} size {r['Size']:>12,}  used {r['Used']:>12,}  priority {r['Priority']}"
            for i, r in enumerate(report["swaps"])
            if r
        ]
    return lines


def _cgroup_kb(files: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    """The first of `keys` ("FILE" or "FILE KEY") a cgroup's files have, in kB (0 if none)."""
    for k in keys:
        f, _, key = k.partition(" ")
        v = files.get(f)
        if isinstance(v, Mapping):
            v = v.get(key)
        if isinstance(v, int):
            return v // 1024
    return 0
