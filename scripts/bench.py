"""`make bench`: how fast mmsim simulates, beside the native run and cachegrind.

For each access stream in experiments/bench/ it times `mmsim run` with exact fast-forward off
(the engine's own speed, what a stream no loop repeats gets) and on, and reports simulated
memory references per second; it times the same access stream natively (native/stream.c) and
under `valgrind --tool=cachegrind --cache-sim=yes`, in the same run, and prints the ratios.
It first runs each seed reproduction of `mmsim reproduce` at full scale (fast-forward on, as
users run them) in a process of its own, and reports its wall time and its peak host memory
(the child's maximum resident set, from wait4). The seeds run first because a child's maximum
resident set starts from its parent's when it is spawned (Linux carries the spawning process's
high-water mark across exec): after the streams, which run in this process, it would be this
process's. Nothing here is a pass/fail test.

    scripts/bench.py [--streams NAME,...] [--seeds NAME,...] [--no-seeds] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mmsim
from mmsim.experiments import EXPERIMENTS, SEED_EXPERIMENTS

ROOT = Path(__file__).resolve().parents[1]
STREAM = ROOT / "target" / "native" / "stream"
# Each stream: experiments/bench/<name>.json, the native/stream.c arguments that run the same
# access stream, and what it is.
STREAMS = {
    "stride64": (
        ["stride64", "256", "16"],
        "(a) L1-missing stride-64 reads of 256 MiB of written 4 KiB pages, x16",
    ),
    "random": (["random", "1024", "4194304", "4", "1"], "(b) uniform random 8-byte reads over 1 GiB, 4 x 4 Mi"),
    "text": (["text", "64", "4194304", "4", "1"], "(c) random instruction fetches over 64 MiB of text, 4 x 4 Mi"),
    "dense": (["dense", "256", "4"], "(d) 8-byte loads over 256 MiB, 4 passes"),
    "sparse": (["sparse", "1024", "8"], "(d) one load per 4 KiB page over 1 GiB, 8 passes"),
    "faults": (
        ["faults", "1024", "4"],
        "(extra) 1 GiB shared, written, read by 4 children (mmsim: fault_around_bytes=4096; native: the host's)",
    ),
}


def timed(fn, repeats: int = 1):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def native(args: list[str], repeats: int) -> float:
    return timed(lambda: subprocess.run([str(STREAM), *args], check=True, capture_output=True), repeats)[0]


def cachegrind(args: list[str]) -> float | None:
    if shutil.which("valgrind") is None:
        return None
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--cachegrind-out-file=/dev/null", str(STREAM), *args]
    return timed(lambda: subprocess.run(cmd, check=True, capture_output=True))[0]


def reproduce(name: str) -> tuple[float, float]:
    """Wall time and peak resident set (MB) of `mmsim reproduce NAME` in a child process."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "mmsim", "reproduce", name], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"bench: mmsim reproduce {name} failed (exit {p.returncode})")
    return secs, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default=",".join(STREAMS), help="comma-separated streams to time")
    ap.add_argument("--no-seeds", action="store_true", help="skip the seed reproductions")
    ap.add_argument(
        "--seeds",
        default=",".join(SEED_EXPERIMENTS),
        help="comma-separated experiments to run (default: the seeds'; a study of a real program by name)",
    )
    ap.add_argument("--repeats", type=int, default=3, help="runs of each timing (the best is kept)")
    ap.add_argument(
        "--results",
        default=str(ROOT / "target" / "bench.json"),
        help="where the results go, as JSON with the commit and host (make bench: docs/results/bench.json, "
        "from which docs/benchmarks.md's tables are generated)",
    )
    args = ap.parse_args()
    from mmsim.experiments import provenance

    source = provenance()  # the tree as the run begins
    seeds, streams = [], []
    names = [s for s in args.streams.split(",") if s]
    unknown = [s for s in names if s not in STREAMS]
    if unknown:
        raise SystemExit(f"bench: unknown stream {unknown[0]!r} (known: {', '.join(STREAMS)})")
    if names and not STREAM.exists():
        raise SystemExit(f"bench: {STREAM.relative_to(ROOT)} is not built: run `make bench` (it builds it)")
    if not args.no_seeds:
        print("Seed reproductions (`mmsim reproduce NAME`, full scale, fast-forward on, one process each):")
        print(f"  {'experiment':<18} {'profile':<13} {'wall s':>9} {'peak host MB':>13}")
        for name in [n for n in args.seeds.split(",") if n]:
            if name not in EXPERIMENTS:
                raise SystemExit(f"bench: unknown experiment {name!r} (known: {', '.join(EXPERIMENTS)})")
            secs, peak_mb = reproduce(name)
            print(f"  {name:<18} {EXPERIMENTS[name].profile:<13} {secs:9.2f} {peak_mb:13.0f}", flush=True)
            seeds.append(
                {"experiment": name, "profile": EXPERIMENTS[name].profile, "wall_s": secs, "peak_host_mb": peak_mb}
            )
        print()
    print(f"Simulation speed (best of {args.repeats}; refs: the workload's accesses and the page walker's reads):")
    print(
        f"  {'stream':<9} {'refs':>12} {'FF-off s':>9} {'Mrefs/s':>8} {'FF-on s':>8} {'Mrefs/s':>8} "
        f"{'native s':>9} {'cachegrind s':>13} {'off/native':>11} {'off/cachegrind':>15}"
    )
    for name in names:
        nat_args, what = STREAMS[name]
        wl = ROOT / "experiments" / "bench" / f"{name}.json"
        off, report = timed(lambda wl=wl: mmsim.run_workload(wl, sets=[("engine.fast_forward", "0")]), args.repeats)
        on, report_on = timed(lambda wl=wl: mmsim.run_workload(wl), args.repeats)
        refs = report["perf"]["memory-references"]
        assert report_on["perf"]["memory-references"] == refs, "fast-forward is exact"
        nat = native(nat_args, args.repeats)
        cg = cachegrind(nat_args)
        cg_s = f"{cg:13.3f}" if cg else f"{'n/a':>13}"
        cg_r = f"{off / cg:15.3f}" if cg else f"{'n/a':>15}"
        print(
            f"  {name:<9} {refs:>12,} {off:9.3f} {refs / off / 1e6:8.1f} {on:8.3f} {refs / on / 1e6:8.1f} "
            f"{nat:9.3f} {cg_s} {off / nat:11.1f} {cg_r}"
        )
        streams.append(
            {
                "stream": name,
                "what": what,
                "refs": refs,
                "mmsim_ff_off_s": off,
                "mmsim_ff_on_s": on,
                "native_s": nat,
                "cachegrind_s": cg,
            }
        )
    for name in names:
        print(f"  {name:<9} {STREAMS[name][1]}")
    out = Path(args.results)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {**source, "repeats": args.repeats, "seeds": seeds, "streams": streams}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
