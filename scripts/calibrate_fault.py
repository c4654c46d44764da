"""`make calibrate`: the cost of a page fault on this machine's kernel beside mmsim's model.

Runs two fault-bound workloads natively (native/runner.c, task-clock per pass) and in mmsim on
the `default` profile (the build machine), and prints the time per fault of each, and the
`cost.fault_handler` that would make mmsim's time per fault equal the kernel's (everything else
in the model held as it is):

- hzp-read: madvise(MADV_HUGEPAGE) on 16 GiB, one read per 2 MiB: a huge-zero-page fault each
  (seed 000/001's fault: a PTE table allocated, cleared and deposited, a pmd set);
- anon-write: 1 GiB without THP, one write per 4 KiB: do_anonymous_page with a page cleared.

Each workload maps, faults and unmaps its region several times; the first pass is left out
(the VM this runs in hands freed memory back to its host, and a first touch is slow). Wall
times only: nothing here is a pass/fail test.
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
    workload("hzp-read", "16G", "2M", True, "read"),
    workload("anon-write", "1G", "4K", False, "write"),
]


def per_fault_ns(report: dict) -> list[float]:
    """ns per fault of each pass after the first (task-clock is in ms, native or not)."""
    out, before = [], None
    for s in report["snapshots"]:
        if s["label"] == "before":
            before = s["perf"]
            continue
        ms = s["perf"]["task-clock"] - before["task-clock"]
        faults = s["perf"]["page-faults"] - before["page-faults"]
        out.append(ms * 1e6 / faults)
    return out[1:]


def run(w: dict, native: bool) -> dict:
    path = ROOT / "target" / f"calibrate-{w['name']}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(w))
    cmd = [*MMSIM, "run", str(path), "--json"] + (["--native"] if native else [])
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    show = [*MMSIM, "profiles", "show", "default", "--json"]
    prof = json.loads(subprocess.run(show, check=True, capture_output=True, text=True).stdout)
    ghz, handler = float(prof["cpu.freq_ghz"]), float(prof["cost.fault_handler"])
    print(f"{'workload':12s} {'kernel ns/fault':>16s} {'mmsim ns/fault':>15s} {'mmsim/kernel':>13s}  fault_handler")
    for w in WORKLOADS:
        nat = statistics.median(per_fault_ns(run(w, True)))
        sim = statistics.median(per_fault_ns(run(w, False)))
        implied = f"{handler:.0f} -> {handler + (nat - sim) * ghz:.0f} cycles"
        print(f"{w['name']:12s} {nat:16.0f} {sim:15.0f} {sim / nat:13.2f}  {implied}")


if __name__ == "__main__":
    main()
