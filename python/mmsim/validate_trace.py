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


#: Under ``--memory-max``, the system-wide events of reclaim and swap also compared (their
#: change over the native run, and the replay's).
PRESSURE_EVENTS = (
    "pswpin",
    "pswpout",
    "swpout_zero",
    "swpin_zero",
    "pgmajfault",
    "workingset_refault_anon",
    "workingset_refault_file",
)


def _vmstat() -> dict[str, int]:
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        k, _, v = line.partition(" ")
        if k in THP_EVENTS or k in PRESSURE_EVENTS:
            out[k] = int(v)
    return out


def run_native(cmd: Sequence[str], quiet: bool = False, cgroup_procs: str | None = None) -> dict[str, Any]:
    """Run ``cmd`` natively: ``minflt``, ``majflt``, ``maxrss`` (kB) of its tree, its wait
    ``status``, the THP events' change over the run and that of :data:`PRESSURE_EVENTS`
    (``events``; system-wide). ``quiet``: its output goes nowhere. ``cgroup_procs``: the
    cgroup.procs of a memory cgroup the command runs in (the runner that measures it does not)."""
    from mmsim.runner_build import runner_path

    runner = runner_path()
    env = dict(os.environ)
    if cgroup_procs is not None:
        env["MMSIM_SPAWN_CGROUP"] = cgroup_procs
    with tempfile.TemporaryDirectory(prefix="mmsim-spawn-") as d:
        out = Path(d) / "rusage"
        before = _vmstat()
        out_to = subprocess.DEVNULL if quiet else None
        p = subprocess.run([str(runner), "--spawn", str(out), *cmd], check=False, stdout=out_to, env=env)
        after = _vmstat()
        if p.returncode != 0 or not out.is_file():
            raise MmsimError(f"validate --trace: could not run {cmd[0]!r} natively (runner exit {p.returncode})")
        minflt, majflt, maxrss, status = (int(x) for x in out.read_text().split())
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 127:
        raise MmsimError(f"validate --trace: {cmd[0]!r}: command not found")
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 126 and cgroup_procs is not None:
        raise MmsimError(f"validate --trace: cannot join the memory cgroup {cgroup_procs} (needs root)")
    return {
        "minflt": minflt,
        "majflt": majflt,
        "maxrss": maxrss,
        "status": status,
        "thp": {k: after.get(k, 0) - before.get(k, 0) for k in THP_EVENTS},
        "events": {k: after.get(k, 0) - before.get(k, 0) for k in PRESSURE_EVENTS},
    }


def run_native_limited(cmd: Sequence[str], workload: dict[str, Any], quiet: bool = False) -> dict[str, Any]:
    """:func:`run_native` in the memory cgroup ``trace`` and with the swap device the replay's
    workload declares (made for the run, removed after: :func:`mmsim.native.pressure_host`),
    with the cgroup's peak usage (``peak``, bytes: v2's memory.peak, v1's
    memory.max_usage_in_bytes) read before it goes. ``quiet``: its output goes nowhere."""
    from mmsim.native import pressure_host

    with pressure_host(workload) as (extra, _swaps):
        memcg = next(a for a in extra if a.startswith("memcg="))
        version, _, parent = memcg.removeprefix("memcg=").partition(":")
        d = Path(parent) / "trace"
        native = run_native(cmd, quiet=quiet, cgroup_procs=str(d / "cgroup.procs"))
        peak = d / ("memory.peak" if version == "v2" else "memory.max_usage_in_bytes")
        native["peak"] = int(peak.read_text().split()[0])
    return native


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


#: Native runs of a program under ``--memory-max`` (reclaim on the kernel varies from run to
#: run: mmsim passes inside the runs' range, as validate's pressure cases do).
LIMITED_RUNS = 3


def validate_trace(
    trace: str,
    cmd: Sequence[str],
    host: dict[str, Any],
    cpus: int | None = None,
    place: str = "kernel",
    memory_max: str | None = None,
    swap: str | None = None,
    runs: int | None = None,
) -> dict[str, Any]:
    """One case: the native run of ``cmd`` beside the replay of ``trace`` under the host's knobs,
    with the mappings the program did not fix placed as ``place`` says. With ``memory_max``
    (and ``swap``, as ``mmsim run --trace`` takes them) both run in a memory cgroup of that
    memory.max with a swap partition, the kernel ``runs`` times (:data:`LIMITED_RUNS`), and the
    reclaim and swap events (:data:`PRESSURE_EVENTS`) and the cgroup's peak are compared too:
    mmsim passes inside the runs' range (the peak also within a per-CPU charge batch:
    :func:`mmsim.native_compare.stock_allowance`)."""
    from mmsim import trace as tr
    from mmsim.native_compare import differs, merge_runs, stock_allowance
    from mmsim.native_host import host_knobs
    from mmsim.workload import run_json

    w = tr.replay_workload(trace, cpus=cpus or 1, place=place, memory_max=memory_max, swap=swap)
    w["knobs"] = host_knobs([], host, pressure=memory_max is not None)
    report = json.loads(run_json(w))
    sim = simulated(report)
    if memory_max is None:
        natives = [run_native(cmd)]
    else:
        natives = [run_native_limited(cmd, w) for _ in range(runs or LIMITED_RUNS)]
        cg = report["cgroups"]["trace"]
        # v1's max_usage_in_bytes where mmsim models v1 (as the host has it), else memory.peak.
        sim["peak"] = cg.get("memory.max_usage_in_bytes", cg["memory.peak"])
        vm, base = report["vmstat"], report["baseline"]["vmstat"]
        sim["events"] = {k: vm.get(k, 0) - base.get(k, 0) for k in PRESSURE_EVENTS}

    def counters_of(native: dict[str, Any]) -> list[dict[str, Any]]:
        out = [
            {"name": n, "kernel": native[n], "simulated": sim[n], "tolerance": 0}
            for n in ("minflt", "majflt", "maxrss")
        ]
        out += [
            {"name": k, "kernel": native["thp"][k], "simulated": sim["thp"][k], "tolerance": 0}
            for k in THP_EVENTS
            if native["thp"][k] or sim["thp"][k]
        ]
        if memory_max is not None:
            out += [
                {"name": k, "kernel": native["events"][k], "simulated": sim["events"][k], "tolerance": 0}
                for k in PRESSURE_EVENTS
            ]
            up, down = stock_allowance()
            name = "cgroup trace peak"
            out.append({"name": name, "kernel": native["peak"], "simulated": sim["peak"], "tolerance": 0})
            out[-1].update(kernel_excess=up, kernel_deficit=down)
        return out

    per_run = [counters_of(n) for n in natives]
    counters = per_run[0] if len(per_run) == 1 else merge_runs(per_run)
    bad = [c for c in counters if differs(c)]

    def kernel(c: dict[str, Any]) -> str:
        lo, hi = c.get("kernel_min", c["kernel"]), c.get("kernel_max", c["kernel"])
        return str(lo) if lo == hi else f"{lo}..{hi} ({len(per_run)} runs)"

    native = natives[0]
    return {
        "name": f"trace {Path(trace).name}" + (f" in memory.max {memory_max}" if memory_max else ""),
        "trace": trace,
        "command": list(cmd),
        "status": "fail" if bad else "pass",
        "reason": ", ".join(f"{c['name']} kernel {kernel(c)} mmsim {c['simulated']}" for c in bad),
        "counters": counters,
        "native_status": native["status"],
        "replay": {
            k: report["replay"][0][k]
            for k in ("records", "instructions", "unmodelled", "exit_status", "place", "relocated")
        },
    }
