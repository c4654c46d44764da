"""Real programs recorded, replayed and checked against the kernel (`make bench`, issue 38).

Each program runs natively (`runner --spawn`: wall time, and the minor and major faults and
peak RSS of its tree from wait4), under `mmsim record` (wall time, trace size), and replayed
by `mmsim run --trace` with exact fast-forward off (wall time, instructions per second), under
the host's knobs; the replay's faults and peak RSS are printed beside the kernel's.

    python scripts/bench_programs.py [--programs memcmp,python3,sqlite3,gcc] [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from mmsim import trace
from mmsim.native_host import host_settings
from mmsim.real_programs import programs
from mmsim.validate_trace import run_native, simulated


def bench_one(name: str, cmd: list[str], d: Path, host: dict) -> dict:
    """Native, record, replay and the kernel's counts for one program."""
    from mmsim.native_host import host_knobs
    from mmsim.workload import run_json

    run_native(cmd)  # warm the page cache, as the replay's default assumes
    t0 = time.perf_counter()
    native = run_native(cmd)
    native_s = time.perf_counter() - t0
    out = d / f"{name}.trace"
    t0 = time.perf_counter()
    trace.record(cmd, out, quiet=True)
    record_s = time.perf_counter() - t0
    info = trace.info(out)
    w = trace.replay_workload(out)
    w["knobs"] = host_knobs([], host)
    t0 = time.perf_counter()
    report = json.loads(run_json(w, [("engine.fast_forward", "0")]))
    replay_s = time.perf_counter() - t0
    sim = simulated(report)
    rep = report["replay"][0]
    return {
        "program": name,
        "native_s": native_s,
        "record_s": record_s,
        "slowdown": record_s / native_s,
        "instructions": info["instructions"],
        "trace_bytes": out.stat().st_size,
        "replay_s": replay_s,
        "replay_ips": rep["instructions"] / replay_s,
        "kernel": {k: native[k] for k in ("minflt", "majflt", "maxrss")},
        "mmsim": {k: sim[k] for k in ("minflt", "majflt", "maxrss")},
        "unmodelled": rep["unmodelled"],
        "trace": str(out),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default="memcmp,python3,sqlite3,gcc")
    ap.add_argument("--dir", default="target/bench-programs", help="where programs and traces go")
    ap.add_argument("--size", default="full", choices=["full", "quick", "tiny"], help="the programs' sizes")
    ap.add_argument("--keep", action="store_true", help="keep the traces (the gcc one is about 6 GB)")
    ap.add_argument(
        "--json",
        metavar="PATH",
        help="also write the rows as JSON with the commit and host (make bench: docs/results/bench-programs.json)",
    )
    args = ap.parse_args()
    from mmsim.experiments import provenance

    source = provenance()  # the tree as the run begins
    if shutil.which("valgrind") is None:
        print("bench_programs: Valgrind is not installed: skipped", file=sys.stderr)
        return 0
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    host = host_settings()
    progs = programs(d, args.size)
    rows = []
    print("Real programs (native, recorded, replayed with fast-forward off; faults and peak RSS of the tree):")
    head = f"  {'program':<9} {'native s':>8} {'record s':>9} {'x':>5} {'instr':>9} {'B/instr':>8} {'replay s':>9} "
    print(head + f"{'Minstr/s':>9}   {'minflt kernel/mmsim':>21} {'majflt':>9} {'maxrss kB':>17}")
    for name in [p for p in args.programs.split(",") if p]:
        if name not in progs:
            raise SystemExit(f"bench_programs: unknown program {name!r} (known: {', '.join(progs)})")
        r = bench_one(name, progs[name](), d, host)
        rows.append(r)
        k, m = r["kernel"], r["mmsim"]
        print(
            f"  {name:<9} {r['native_s']:>8.2f} {r['record_s']:>9.1f} {r['slowdown']:>5.0f} "
            f"{r['instructions'] / 1e6:>8.0f}M {r['trace_bytes'] / r['instructions']:>8.3f} {r['replay_s']:>9.1f} "
            f"{r['replay_ips'] / 1e6:>9.1f}   {k['minflt']:>10,}/{m['minflt']:<10,} {k['majflt']:>4}/{m['majflt']:<4} "
            f"{k['maxrss']:>8,}/{m['maxrss']:<8,}",
            flush=True,
        )
        if not args.keep:
            os.unlink(r["trace"])
    if args.json:
        for r in rows:
            del r["trace"]
        doc = {**source, "size": args.size, "programs": rows}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
