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
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mmsim import trace
from mmsim.native_host import host_settings
from mmsim.validate_trace import run_native, simulated

MEMCMP_C = r"""
/* Seed 000's memcmp microbenchmark, small: two calloc'd buffers of N MiB compared (both read
 * before written: the huge zero page's case), then a fork whose child compares them again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	size_t n = (size_t)(argc > 1 ? atoi(argv[1]) : 64) << 20;
	char *a = calloc(n, 1), *b = calloc(n, 1);
	int r = memcmp(a, b, n);
	pid_t c = fork();
	if (c == 0)
		_exit(memcmp(a, b, n) != 0);
	waitpid(c, NULL, 0);
	printf("%d\n", r);
	return 0;
}
"""

SQL = """
CREATE TABLE t(a INTEGER, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {rows})
INSERT INTO t SELECT x, hex(randomblob(16)) FROM c;
"""


def big_c(functions: int) -> str:
    """A C file of `functions` functions with loops, switches and arithmetic (cc1's work)."""
    out = ["#include <stddef.h>\n"]
    for i in range(functions):
        out.append(
            f"int f{i}(int *a, size_t n, int k) {{\n"
            f"  int s = {i};\n"
            "  for (size_t j = 0; j < n; j++) {\n"
            f"    switch ((a[j] + k) % 5) {{ case 0: s += a[j] * {i % 7 + 1}; break; case 1: s ^= a[j] << 2; break;\n"
            f"    case 2: s -= (a[j] >> 1) + {i}; break; case 3: s = s * 3 + j; break; default: s += k; }}\n"
            "    if (s > 100000) s = s / 3 + (int)(j & 7);\n"
            "  }\n"
            f"  return s + (k > 0 ? f{max(i - 1, 0)}(a, n / 2, k - 1) : 0);\n"
            "}\n"
        )
    return "".join(out)


def programs(d: Path, size: str) -> dict[str, Callable[[], list[str]]]:
    """Each program's command, set up in `d` when asked for (`size`: full or quick)."""
    full = size == "full"

    def memcmp() -> list[str]:
        exe = d / "memcmp"
        if not exe.exists():
            (d / "memcmp.c").write_text(MEMCMP_C)
            subprocess.run(["gcc", "-O2", "-o", str(exe), str(d / "memcmp.c")], check=True)
        return [str(exe), "256" if full else "16"]

    def python3() -> list[str]:
        n = (128, 1_000_000) if full else (16, 100_000)
        code = f"x = bytearray({n[0]} << 20); y = list(range({n[1]})); print(len(x), len(y))"
        return [sys.executable, "-S", "-c", code]

    def sqlite3() -> list[str]:
        db = d / ("rows.db" if full else "rows-quick.db")
        if not db.exists():
            rows = 400_000 if full else 20_000
            subprocess.run(["sqlite3", str(db)], input=SQL.format(rows=rows), text=True, check=True)
        return ["sqlite3", str(db), "SELECT count(*), max(b) FROM (SELECT b FROM t ORDER BY b);"]

    def gcc() -> list[str]:
        src = d / ("big.c" if full else "small.c")
        if not src.exists():
            src.write_text(big_c(3000 if full else 60))
        return ["gcc", "-O2", "-c", "-o", str(d / "out.o"), str(src)]

    return {"memcmp": memcmp, "python3": python3, "sqlite3": sqlite3, "gcc": gcc}


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
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--keep", action="store_true", help="keep the traces (the gcc one is about 6 GB)")
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("bench_programs: Valgrind is not installed: skipped", file=sys.stderr)
        return 0
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    host = host_settings()
    progs = programs(d, "quick" if args.quick else "full")
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
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
