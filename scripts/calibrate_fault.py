"""`make calibrate`: the cost of a page fault on this machine's kernel beside mmsim's model.

Runs three fault-bound workloads natively (native/runner.c, task-clock per pass) and in mmsim
on the `default` profile (the build machine), prints the time per fault of each, and the value
of the profile parameter that would make mmsim's time equal the kernel's (everything else in
the model held as it is):

- thp-write: madvise(MADV_HUGEPAGE) on 1 GiB, one write per 2 MiB: a THP allocated and its
  2 MiB of cold memory cleared per fault, which sets `memory.stream_mlp` (the line fills a
  streaming clear keeps in flight);
- hzp-read: the same on 16 GiB, one read per 2 MiB: a huge-zero-page fault each (seed
  000/001's fault: a PTE table allocated, cleared and deposited, a pmd set);
- anon-write: 1 GiB without THP, one write per 4 KiB: do_anonymous_page with a page cleared.

The last two set `cost.fault_handler`; calibrate `memory.stream_mlp` first, since their
clears depend on it. Then one process doing locked adds to one word of a shared page sets
`smp.atomic`, and two, as a check only, show what a contended line costs on both. Each fault workload maps,
faults and unmaps its region several times; the first pass is left out (the VM this runs in
hands freed memory back to its host, and a first touch is slow). Wall times only: nothing
here is a pass/fail test.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MMSIM = [sys.executable, "-m", "mmsim"]
PASSES = 6


def workload(name: str, size: str, stride: str, thp: bool, access: str) -> dict:
    body = [{"op": "mmap", "name": "p", "size": size, "align": "2M"}]
    if thp:
        body.append({"op": "madvise", "region": "p", "advice": "hugepage"})
    body += [
        {"op": "snapshot", "label": "before"},
        {"op": access, "region": "p", "stride": stride},
        {"op": "snapshot", "label": "after"},
        {"op": "munmap", "region": "p"},
    ]
    return {
        "name": name,
        "machine": {"profile": "default", "memory": "20G", "cpus": 1},
        "knobs": {"transparent_hugepage/enabled": "madvise", "transparent_hugepage/use_zero_page": 1},
        "program": [{"op": "loop", "count": PASSES, "body": body}],
    }


WORKLOADS = [
    (workload("thp-write", "1G", "2M", True, "write"), "memory.stream_mlp"),
    (workload("hzp-read", "16G", "2M", True, "read"), "cost.fault_handler"),
    (workload("anon-write", "1G", "4K", False, "write"), "cost.fault_handler"),
]


ATOMICS = 20_000_000


def atomic_workload(processes: int) -> dict:
    """`processes` processes on their own CPUs each doing ATOMICS locked adds to one word of a
    shared page."""
    return {
        "name": f"atomic-{processes}",
        "machine": {"profile": "default", "cpus": 2},
        "program": [
            {"op": "mmap", "name": "s", "size": "4K", "flags": ["shared", "anonymous"]},
            {"op": "write", "region": "s", "length": 8},
            {
                "op": "fork",
                "count": processes,
                "program": [
                    {"op": "snapshot", "label": "start"},
                    {"op": "atomic", "region": "s", "count": ATOMICS},
                    {"op": "snapshot", "label": "done"},
                ],
            },
            {"op": "wait"},
        ],
    }


def per_atomic_ns(report: dict) -> float:
    """ns per atomic, the mean over the processes (each one's task-clock from start to done)."""
    clock: dict[int, dict[str, float]] = {}
    for s in report["snapshots"]:
        # The process's own counters: mmsim's snapshot `perf` is the whole machine's, the
        # native runner's is the process's (its process entry has no perf).
        own = next((p for p in s["processes"] if p["pid"] == s["pid"] and "perf" in p), s)
        clock.setdefault(s["pid"], {})[s["label"]] = own["perf"]["task-clock"]
    times = [(c["done"] - c["start"]) * 1e6 / ATOMICS for c in clock.values() if "done" in c]
    return statistics.mean(times)


def per_fault_ns(report: dict, func: str | None = None) -> list[float]:
    """ns per fault of each pass after the first (task-clock is in ms, native or not), or
    with `func` the cycles per fault mmsim charged to that kernel function."""
    out, before = [], None
    for s in report["snapshots"]:
        if s["label"] == "before":
            before = s
            continue
        faults = s["perf"]["page-faults"] - before["perf"]["page-faults"]
        if func is None:
            out.append((s["perf"]["task-clock"] - before["perf"]["task-clock"]) * 1e6 / faults)
        else:
            out.append((s["profile"].get(func, 0) - before["profile"].get(func, 0)) / faults)
    return out[1:]


def run(w: dict, native: bool) -> dict:
    path = ROOT / "target" / f"calibrate-{w['name']}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(w))
    cmd = [*MMSIM, "run", str(path), "--json"] + (["--native"] if native else [])
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def implied(param: str, value: float, nat: float, sim: float, sim_report: dict, ghz: float) -> float:
    """The parameter's value that makes mmsim's ns per fault `sim` equal the kernel's `nat`."""
    if param == "cost.fault_handler":
        return value + (nat - sim) * ghz
    # memory.stream_mlp: the cold clear's time is inversely proportional to it.
    clear = statistics.median(per_fault_ns(sim_report, "clear_page_erms")) / ghz
    return value * clear / (nat - (sim - clear))


def main() -> None:
    show = [*MMSIM, "profiles", "show", "default", "--json"]
    prof = json.loads(subprocess.run(show, check=True, capture_output=True, text=True).stdout)
    ghz = float(prof["cpu.freq_ghz"])
    print(f"{'workload':12s} {'kernel ns/fault':>16s} {'mmsim ns/fault':>15s} {'mmsim/kernel':>13s}  implied")
    for w, param in WORKLOADS:
        nat = statistics.median(per_fault_ns(run(w, True)))
        sim_report = run(w, False)
        sim = statistics.median(per_fault_ns(sim_report))
        value = float(prof[param])
        new = implied(param, value, nat, sim, sim_report, ghz)
        print(f"{w['name']:12s} {nat:16.0f} {sim:15.0f} {sim / nat:13.2f}  {param} {value:g} -> {new:.1f}")
    # One process sets smp.atomic (a locked add on an owned line is all its loop costs in
    # mmsim); two are a check, not a calibration: mmsim passes a contended line to the other
    # CPU at every use, and hardware need not (see README, "Deliberate differences").
    print(f"\nAtomics ({ATOMICS:,} locked adds per process on one shared line):")
    print(f"{'processes':12s} {'kernel ns/op':>16s} {'mmsim ns/op':>15s} {'mmsim/kernel':>13s}  implied")
    for n in (1, 2):
        w = atomic_workload(n)
        nat, sim = per_atomic_ns(run(w, True)), per_atomic_ns(run(w, False))
        value = float(prof["smp.atomic"])
        note = f"smp.atomic {value:g} -> {value * nat / sim:.1f}" if n == 1 else "(a check)"
        print(f"{n:<12d} {nat:16.2f} {sim:15.2f} {sim / nat:13.2f}  {note}")


if __name__ == "__main__":
    main()
