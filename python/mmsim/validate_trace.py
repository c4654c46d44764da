"""``mmsim validate --trace FILE -- CMD``: the kernel checks a replay.

The command runs natively, with no recorder, as the child of a small process
(``runner --spawn``: its peak RSS then starts from that process's, a few hundred kB, not from
Python's), and what ``wait4`` says of its whole tree (minor and major faults, peak RSS) and the
system-wide THP events of ``/proc/vmstat`` are compared with the replay of the trace under the
host's knobs. The recorder ran the program under Valgrind, which places the heap, the stack,
the libraries and every mapping the program let the kernel place itself. The replay here
places the last as the simulated kernel does (``place="kernel"``: THP-aligned as the native
run's kernel placed them); the image, the stack and the heap stay where Valgrind put them, and
a difference that this causes is shown, never hidden behind a tolerance (each counter's
tolerance is 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mmsim._mmsim import MmsimError

#: The system-wide THP events compared (their change over the native run, and the replay's).
THP_EVENTS = (
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_collapse_alloc",
    "thp_file_alloc",
    "thp_file_mapped",
    "thp_zero_page_alloc",
)


def _vmstat() -> dict[str, int]:
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        k, _, v = line.partition(" ")
        if k in THP_EVENTS:
            out[k] = int(v)
    return out


def run_native(cmd: Sequence[str], quiet: bool = False) -> dict[str, Any]:
    """Run ``cmd`` natively: ``minflt``, ``majflt``, ``maxrss`` (kB) of its tree, its wait
    ``status``, and the THP events' change over the run (system-wide). ``quiet``: its output
    goes nowhere."""
    from mmsim.runner_build import runner_path

    runner = runner_path()
    with tempfile.TemporaryDirectory(prefix="mmsim-spawn-") as d:
        out = Path(d) / "rusage"
        before = _vmstat()
        out_to = subprocess.DEVNULL if quiet else None
        p = subprocess.run([str(runner), "--spawn", str(out), *cmd], check=False, stdout=out_to)
        after = _vmstat()
        if p.returncode != 0 or not out.is_file():
            raise MmsimError(f"validate --trace: could not run {cmd[0]!r} natively (runner exit {p.returncode})")
        minflt, majflt, maxrss, status = (int(x) for x in out.read_text().split())
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 127:
        raise MmsimError(f"validate --trace: {cmd[0]!r}: command not found")
    return {
        "minflt": minflt,
        "majflt": majflt,
        "maxrss": maxrss,
        "status": status,
        "thp": {k: after.get(k, 0) - before.get(k, 0) for k in THP_EVENTS},
    }


def simulated(report: dict[str, Any]) -> dict[str, Any]:
    """The same counters from a replay's report: faults summed over every task of the tree,
    the peak RSS as wait4 gives it (the largest of any process's VmHWM, images replaced by
    execve included), and the THP events."""
    procs = report["processes"]
    rep = report["replay"][0]
    # wait4 sums every task of the tree: threads, and children the tree waited for.
    minflt = sum(p["minflt"] for p in procs)
    majflt = sum(p["majflt"] for p in procs)
    maxrss = max([p["VmHWM"] for p in procs] + [rep.get("exec_hwm_kb", 0)])
    vm = report["vmstat"]
    base = report["baseline"]["vmstat"]
    return {
        "minflt": minflt,
        "majflt": majflt,
        "maxrss": maxrss,
        "thp": {k: vm.get(k, 0) - base.get(k, 0) for k in THP_EVENTS},
    }


def validate_trace(
    trace: str, cmd: Sequence[str], host: dict[str, Any], cpus: int | None = None, place: str = "kernel"
) -> dict[str, Any]:
    """One case: the native run of ``cmd`` beside the replay of ``trace`` under the host's knobs,
    with the mappings the program did not fix placed as ``place`` says."""
    from mmsim import trace as tr
    from mmsim.native_host import host_knobs
    from mmsim.workload import run_json

    w = tr.replay_workload(trace, cpus=cpus or 1, place=place)
    w["knobs"] = host_knobs([], host)
    report = json.loads(run_json(w))
    native = run_native(cmd)
    sim = simulated(report)
    counters = [
        {"name": n, "kernel": native[n], "simulated": sim[n], "tolerance": 0} for n in ("minflt", "majflt", "maxrss")
    ]
    counters += [
        {"name": k, "kernel": native["thp"][k], "simulated": sim["thp"][k], "tolerance": 0}
        for k in THP_EVENTS
        if native["thp"][k] or sim["thp"][k]
    ]
    bad = [c for c in counters if c["kernel"] != c["simulated"]]
    return {
        "name": f"trace {Path(trace).name}",
        "trace": trace,
        "command": list(cmd),
        "status": "fail" if bad else "pass",
        "reason": ", ".join(f"{c['name']} kernel {c['kernel']} mmsim {c['simulated']}" for c in bad),
        "counters": counters,
        "native_status": native["status"],
        "replay": {
            k: report["replay"][0][k]
            for k in ("records", "instructions", "unmodelled", "exit_status", "place", "relocated")
        },
    }
