"""``prezero-real``: seed 002 on a real program. A Python script that allocates and frees large
buffers, as allocator-heavy scripts do: each repetition makes a ``bytearray`` (calloc, which
glibc serves from a fresh mmap for a buffer this large), writes one byte per 4 KiB page (C's
extended-slice assignment: a page fault per page, as seed 002's pft does), and frees it
(munmap). Recorded once (``mmsim record``, cached) and replayed after the machine has been idle
for 2 s, without prezeroing and with kscrubd (seed 002's V3 defaults: ``scrub_start`` 7,
``scrub_stop`` 2, zeroing on the CPU), on 2 CPUs so that kscrubd has an idle one.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mmsim.experiments.core import Experiment, _row
from mmsim.experiments.pool import Run
from mmsim.experiments.studies import native, recorded

#: (repetitions, MiB per buffer) at each size.
PREZERO_SIZES = {"full": (16, 64), "quick": (2, 40)}

#: The machine idles this long before the program (kscrubd has zeroed free memory since boot,
#: as in seed 002's runs).
IDLE_MS = 2000

#: Configurations: name -> knobs (seed 002's V3 defaults for kscrubd, as prezero-faults).
KSCRUBD = {"vm/scrub_start": 7, "vm/scrub_stop": 2, "vm/scrub_merge": "separate", "vm/scrub_engine": "cpu"}

#: Configurations: name -> (profile, memory, knobs). The build machine's profile, and seed
#: 002's own machine (2 x PIII 450, 384 MiB), where clearing a page costs what it cost the seed.
PREZERO_CONFIGS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "without prezeroing": ("default", "16G", {}),
    "with kscrubd": ("default", "16G", KSCRUBD),
    "piii-450, without prezeroing": ("piii-450", "384M", {}),
    "piii-450, with kscrubd": ("piii-450", "384M", KSCRUBD),
}


def prezero_command(reps: int, mib: int) -> list[str]:
    """The program: this Python, `reps` times a `mib` MiB bytearray written a byte per page."""
    code = (
        f"for i in range({reps}):\n"
        f"    a = bytearray({mib} << 20)\n"
        "    a[::4096] = b'\\1' * (len(a) // 4096)\n"
        "    del a\n"
        "print('done')\n"
    )
    return [sys.executable, "-S", "-c", code]


def _prezero_replay(path: str, profile: str, memory: str, knobs: dict[str, Any]) -> dict[str, Any]:
    """The replay after `IDLE_MS` of idle time, 2 CPUs: the program's faults, its time (from its
    exec to its exit, on its CPU), and the allocator's zeroing counts over that time."""
    from mmsim import trace
    from mmsim.workload import run_json

    w = trace.replay_workload(path, cpus=2, profile=profile, memory=memory)
    w["program"].insert(0, {"op": "sleep", "ms": IDLE_MS})
    w["knobs"] = knobs
    r = json.loads(run_json(w))
    snaps = r["snapshots"]
    start = next(s for s in snaps if s["label"].startswith("execve"))
    end = [s for s in snaps if s["label"].startswith("exit")][-1]
    d = {k: v - start["vmstat"].get(k, 0) for k, v in end["vmstat"].items()}
    seconds = end["time"] - start["time"]
    proc = next(p for p in end["processes"] if p["pid"] == end["pid"])
    faults = proc["minflt"] + proc["majflt"]
    idle = sum(c["kscrubd-seconds"] for c in start["cpus"])
    clear = sum(v - start["profile"].get(k, 0) for k, v in end["profile"].items() if k.startswith("clear_page"))
    return {
        "clear-cycles": clear,
        "dram-busy": sum(n["dram-busy-seconds"] for n in end["memory"])
        - sum(n["dram-busy-seconds"] for n in start["memory"]),
        "cycles": end["perf"]["cycles"] - start["perf"]["cycles"],
        "faults": faults,
        "seconds": seconds,
        "faults/s": faults / seconds if seconds > 0 else 0.0,
        "prezeroed": d.get("mmsim_pgalloc_prezeroed", 0),
        "fault-zeroed": d.get("mmsim_pgzero_alloc", 0) + d.get("mmsim_pgzero_user", 0),
        "kscrubd-zeroed": d.get("mmsim_pgzero_kscrubd", 0),
        "kscrubd-idle": idle,
        "kscrubd-run": sum(c["kscrubd-seconds"] for c in end["cpus"]) - idle,
        "maxrss": max(p["VmHWM"] for p in r["processes"]),
        "minflt": sum(p["minflt"] for p in r["processes"]),
    }


def _prezero_native(cmd: list[str]) -> dict[str, Any]:
    """The program natively (Linux has no kscrubd: the configuration without)."""
    return native(cmd)


def prezero_runs(size: str = "full") -> list[Run]:
    cmd = prezero_command(*PREZERO_SIZES[size])
    path = str(recorded(f"prezero-real-{size}", cmd))
    return [
        *(Run(_prezero_replay, (path, *a), 2, f"prezero-real {c}") for c, a in PREZERO_CONFIGS.items()),
        Run(_prezero_native, (cmd,), 1, "prezero-real natively"),
    ]


def prezero_rows(results: list[Any]) -> list[dict[str, Any]]:
    *sims, native = results
    rows = []
    for c, m in zip(PREZERO_CONFIGS, sims, strict=True):
        kernel = native if c == "without prezeroing" else {}
        for metric, key, unit in (
            ("page faults (the program)", "faults", "faults"),
            ("faults per second", "faults/s", "faults/s"),
            ("program time", "seconds", "s"),
            ("cycles", "cycles", "cycles"),
            ("of those, clearing pages (clear_page)", "clear-cycles", "cycles"),
            ("memory channel busy (all traffic)", "dram-busy", "s"),
            ("pages zeroed in the fault", "fault-zeroed", "pages"),
            ("zeroed hits (prezeroed pages taken)", "prezeroed", "pages"),
            ("pages zeroed by kscrubd while it ran", "kscrubd-zeroed", "pages"),
            ("kscrubd CPU time in the idle 2 s", "kscrubd-idle", "s"),
            ("kscrubd CPU time while it ran", "kscrubd-run", "s"),
            ("peak RSS", "maxrss", "kB"),
        ):
            v = m[key]
            row = _row(c, metric, None, round(v, 4) if isinstance(v, float) else v, unit)
            if key == "faults" and kernel:
                row["kernel"] = kernel["minflt"] + kernel["majflt"]
            if key == "maxrss" and kernel:
                row["kernel"] = kernel["maxrss"]
            rows.append(row)
    names = list(PREZERO_CONFIGS)
    for c, without, with_ in zip(names[1::2], sims[::2], sims[1::2], strict=True):
        gain = round(with_["faults/s"] / without["faults/s"], 3)
        rows.append(_row(c, "faults per second, with / without", None, gain, "x"))
    return rows


PREZERO_REAL = Experiment(
    "prezero-real",
    "002",
    "default",
    "Zeroing free memory ahead of time on an idle CPU makes page faults faster: a fault takes a prezeroed "
    "page instead of clearing one, until the program has used the zeroed pages up.",
    prezero_runs,
    prezero_rows,
    [
        "The program: this Python, 16 times a 64 MiB bytearray (calloc: a fresh mmap) written one byte per "
        "4 KiB page and freed (16,384 faults a repetition). Recorded once and cached; replayed on the "
        "default profile (2 CPUs, 16 GiB) and on seed 002's machine (piii-450: 2 CPUs, 384 MiB) after 2 s "
        "idle, without prezeroing and with kscrubd.",
        "The kernel's count: the program natively (no kscrubd in Linux: the configuration without), its "
        "tree's faults and peak RSS from wait4, beside the replay's of the program's own process (the "
        "tree is that one process).",
        "Faults per second: the program's faults over its simulated time from exec to exit.",
    ],
)
