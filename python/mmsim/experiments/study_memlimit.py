"""``memory-limit`` (issue 57): a recorded real program under a memory cgroup's ``memory.max``,
from its peak RSS down to a third of it, with a swap partition on the profile's block device
(the build machine's virtio disk: 58 us reads, 40 us writes, an SSD's latencies).

The program is ``real_programs``' python3 (``make bench``'s: a 128 MiB ``bytearray`` written
whole and a list of a million ints, then both read back by ``len``; the interpreter's own heap
and text besides). It is recorded once (cached), replayed without a limit for its peak RSS, then
under each limit in a cgroup ``trace`` with a 4 GiB swap partition (``mmsim run --trace
--memory-max``). As root, the program runs natively at three of the limits, in a memory cgroup
of that ``memory.max`` with a swap partition of the same size (``validate --trace
--memory-max``'s set-up), and its major faults and the system-wide swap and refault events
stand beside the replay's. The replay's stores carry no data: each page the program writes is
taken as holding data (``Kernel::mark_page_written``), so swap writes it as the kernel does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mmsim.experiments.core import Experiment, _row
from mmsim.experiments.pool import Run
from mmsim.experiments.studies import cache_dir, recorded

#: The program's size at full size and at the quick size `make test` runs (real_programs').
MEMLIMIT_SIZES = {"full": "full", "quick": "tiny"}
#: The limits, as fractions of the peak RSS, and those the kernel runs too (as root).
FRACTIONS = (1.0, 0.8, 0.6, 0.45, 1 / 3)
NATIVE_FRACTIONS = (1.0, 0.6, 1 / 3)
#: The swap partition (as `mmsim run --trace --memory-max` gives one by default).
SWAP = "4G"
#: Knobs of both sides: THP never (the host's default; a THP under a tight limit is another study).
KNOBS = {"transparent_hugepage/enabled": "never"}


def memlimit_command(size: str) -> list[str]:
    """The program: real_programs' python3 at `size` ("full" or "tiny")."""
    from mmsim.real_programs import programs

    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    return programs(d, MEMLIMIT_SIZES[size])["python3"]()


def _limit(peak_kb: int, fraction: float) -> int:
    """A limit in bytes: `fraction` of the peak, whole pages."""
    return int(peak_kb * 1024 * fraction) // 4096 * 4096


def _workload(path: str, limit: int | None) -> dict[str, Any]:
    from mmsim import trace

    w = trace.replay_workload(path, memory_max=str(limit) if limit else None, swap=SWAP if limit else None)
    w["knobs"] = dict(KNOBS)
    return w


def peak_rss(path: str) -> int:
    """The replay's peak RSS without a limit (kB: wait4's maxrss of the tree), cached beside
    the trace."""
    from mmsim.validate_trace import simulated
    from mmsim.workload import run_json

    cache = Path(path).with_suffix(".peak.json")
    stamp = os.stat(path).st_mtime_ns
    if cache.is_file():
        c = json.loads(cache.read_text())
        if c.get("trace_mtime") == stamp:
            return int(c["maxrss"])
    maxrss = simulated(json.loads(run_json(_workload(path, None))))["maxrss"]
    cache.write_text(json.dumps({"trace_mtime": stamp, "maxrss": maxrss}))
    return int(maxrss)


def _memlimit_replay(path: str, limit: int) -> dict[str, Any]:
    """The replay under `limit`: its simulated time (the program's, from its exec to its exit),
    major faults, the swap and refault events, peak RSS and the cgroup's peak."""
    from mmsim.validate_trace import PRESSURE_EVENTS, simulated
    from mmsim.workload import run_json

    r = json.loads(run_json(_workload(path, limit)))
    snaps = r["snapshots"]
    start = next(s for s in snaps if s["label"].startswith("execve"))
    end = [s for s in snaps if s["label"].startswith("exit")][-1]
    vm, base = r["vmstat"], r["baseline"]["vmstat"]
    sim = simulated(r)
    out = {k: vm.get(k, 0) - base.get(k, 0) for k in PRESSURE_EVENTS}
    out["swapped_out"] = out["pswpout"] + out["swpout_zero"]
    out.update(
        limit=limit,
        seconds=end["time"] - start["time"],
        majflt=sim["majflt"],
        minflt=sim["minflt"],
        maxrss=sim["maxrss"],
        oom_kill=vm.get("oom_kill", 0) - base.get("oom_kill", 0),
        peak=r["cgroups"]["trace"]["memory.peak"],
    )
    return out


def _kernel_counters(native: dict[str, Any]) -> dict[str, int]:
    """One native run's counters under the replay's keys (`_memlimit_replay`'s)."""
    ev = native["events"]
    return {
        **ev,
        "majflt": native["majflt"],
        "minflt": native["minflt"],
        "maxrss": native["maxrss"],
        "swapped_out": ev["pswpout"] + ev["swpout_zero"],
    }


def _memlimit_native(cmd: list[str], path: str, limits: list[int]) -> dict[str, Any]:
    """The program natively under each limit, `LIMITED_RUNS` times, one run after another (root:
    a memory cgroup and a swap partition for each run; THP as `KNOBS`): {limit: {key: [each
    run's count]}} under the replay's keys; {} where the host cannot. Reclaim varies from run
    to run on the host (pswpin by a fifth at a third of the peak), so one run is not the
    kernel's count: the rows give the runs' median and their range."""
    from mmsim.native_knobs import HostSettings
    from mmsim.native_memcg import memcg_host
    from mmsim.validate_trace import LIMITED_RUNS, run_native, run_native_limited

    if os.geteuid() != 0 or memcg_host().version is None:
        return {}
    out: dict[int, dict[str, list[int]]] = {}
    with HostSettings({k: str(v) for k, v in KNOBS.items()}):
        run_native(cmd, quiet=True)  # its files cached, as the replay's are
        for limit in limits:
            w = _workload(path, limit)
            runs = [_kernel_counters(run_native_limited(cmd, w, quiet=True)) for _ in range(LIMITED_RUNS)]
            out[limit] = {key: [r.get(key, 0) for r in runs] for key in runs[0]}
    return out


def memlimit_runs(size: str = "full") -> list[Run]:
    cmd = memlimit_command(size)
    path = str(recorded(f"memory-limit-{size}", cmd))
    peak = peak_rss(path)
    limits = [_limit(peak, f) for f in FRACTIONS]
    natives = [_limit(peak, f) for f in NATIVE_FRACTIONS]
    return [
        *(Run(_memlimit_replay, (path, lim), 3, f"memory-limit {lim >> 20} MiB") for lim in limits),
        Run(_memlimit_native, (cmd, path, natives), 1, "memory-limit natively"),
    ]


def memlimit_rows(results: list[Any]) -> list[dict[str, Any]]:
    *sims, native = results
    rows = []
    for fraction, m in zip(FRACTIONS, sims, strict=True):
        k = native.get(m["limit"])
        config = f"memory.max {fraction:.0%} of peak RSS ({m['limit'] >> 10} kB)"
        for metric, key, unit in (
            ("simulated time", "seconds", "s"),
            ("major faults", "majflt", "faults"),
            ("minor faults", "minflt", "faults"),
            ("pswpin", "pswpin", "pages"),
            ("pages swapped out (pswpout + swpout_zero)", "swapped_out", "pages"),
            ("pswpout", "pswpout", "pages"),
            ("workingset refaults (anon)", "workingset_refault_anon", "pages"),
            ("workingset refaults (file)", "workingset_refault_file", "pages"),
            ("peak RSS", "maxrss", "kB"),
            ("OOM kills", "oom_kill", "tasks"),
        ):
            v = m[key]
            row = _row(config, metric, None, round(v, 4) if isinstance(v, float) else v, unit)
            if k is not None and key in k:
                ranked = sorted(k[key])
                # The runs' median, and their range (`mmsim reproduce` prints both).
                row.update(kernel=ranked[(len(ranked) - 1) // 2], kernel_min=ranked[0], kernel_max=ranked[-1])
            rows.append(row)
    return rows


MEMORY_LIMIT = Experiment(
    "memory-limit",
    "057",
    "default",
    "A program whose memory.max is below its working set swaps: major faults, swap I/O and refaults grow "
    "as the limit falls from its peak RSS to a third of it, and so does its time.",
    memlimit_runs,
    memlimit_rows,
    [
        "The program: real_programs' python3 (a 128 MiB bytearray and a list of a million ints). Recorded "
        "once and cached; replayed without a limit for its peak RSS, then in a memory cgroup with memory.max "
        "at 100, 80, 60, 45 and 33 % of it and a 4 GiB swap partition on the default profile's block device "
        "(this VM's virtio disk: 58 us reads). THP never on both sides.",
        "The kernel's count (root): the program natively at 100, 60 and 33 %, in a memory cgroup of that "
        "limit with a swap partition of the same size (validate --trace --memory-max's set-up); major and "
        "minor faults and peak RSS from wait4, pswpin, pswpout and the refaults system-wide over the run. "
        "Three runs at each limit: their median, and the range they spanned (reclaim on the host varies "
        "from run to run).",
        "A replay's stores carry no data: a page the program writes holds data from then on, and reclaim "
        "writes it to swap (pswpout). Python fills its bytearray with zeroes, so on the kernel most of those "
        "pages go out as zero-filled pages, recorded without I/O (swpout_zero): the pages swapped out agree, "
        "pswpout does not, and neither do the simulated time's I/O waits. The recorder does not see stored "
        "values (issue 58 asks for each region's measured contents).",
    ],
)
