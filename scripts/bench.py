"""`make bench`: how fast mmsim simulates, beside the native run and cachegrind.

For each access stream in experiments/bench/ it times `mmsim run` step by step (fast-forward
off) and reports simulated memory references per second; it times the same stream natively
(native/stream.c) and under `valgrind --tool=cachegrind --cache-sim=yes`, in the same run, and
prints the ratios. Then it times each seed reproduction of `mmsim reproduce` at full scale
(fast-forward on, as users run them). Wall times only: nothing here is a pass/fail test.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mmsim
from mmsim.experiments import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[1]
STREAM = ROOT / "target" / "native" / "stream"
# The native arguments that match experiments/bench/<name>.json.
NATIVE = {"dense": ["dense", "256", "4"], "sparse": ["sparse", "1024", "8"]}


def timed(fn, repeats: int = 1):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def native(args: list[str], repeats: int = 3) -> float:
    return timed(lambda: subprocess.run([str(STREAM), *args], check=True, capture_output=True), repeats)[0]


def cachegrind(args: list[str]) -> float | None:
    if shutil.which("valgrind") is None:
        return None
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--cachegrind-out-file=/dev/null", str(STREAM), *args]
    return timed(lambda: subprocess.run(cmd, check=True, capture_output=True))[0]


def main() -> int:
    rows = []
    print("Simulation speed (fast-forward off; best of 3):")
    print(
        f"  {'stream':<8} {'refs':>13} {'mmsim s':>9} {'Mrefs/s':>9} {'native s':>9} "
        f"{'cachegrind s':>13} {'mmsim/native':>13} {'mmsim/cachegrind':>17}"
    )
    for name in ("dense", "sparse"):
        wl = ROOT / "experiments" / "bench" / f"{name}.json"
        secs, report = timed(lambda wl=wl: mmsim.run_workload(wl, sets=[("engine.fast_forward", "0")]), 3)
        refs = report["perf"]["memory-references"]
        nat = native(NATIVE[name])
        cg = cachegrind(NATIVE[name])
        cg_s = f"{cg:13.3f}" if cg else f"{'n/a':>13}"
        cg_r = f"{secs / cg:17.2f}" if cg else f"{'n/a':>17}"
        print(
            f"  {name:<8} {refs:>13,} {secs:9.3f} {refs / secs / 1e6:9.1f} {nat:9.3f} {cg_s} {secs / nat:13.1f} {cg_r}"
        )
        rows.append({"stream": name, "refs": refs, "mmsim_s": secs, "native_s": nat, "cachegrind_s": cg})
    print("\nSeed reproductions (`mmsim reproduce NAME`, full scale, fast-forward on):")
    for name, exp in EXPERIMENTS.items():
        secs, _ = timed(exp.run)
        print(f"  {name:<18} {exp.profile:<13} {secs:8.2f} s wall")
        rows.append({"experiment": name, "wall_s": secs})
    out = ROOT / "target" / "bench.json"
    out.write_text(json.dumps(rows, indent=2))
    print(f"\nresults: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
