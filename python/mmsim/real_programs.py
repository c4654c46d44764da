"""The real programs mmsim's replay is shown on (docs/replay.md, issue 38): seed 000's memcmp
microbenchmark, python3 with a large heap, sqlite3 sorting a generated table, and gcc -O2 -c of
a generated C file, each at a size: "full" (make bench), "quick", "tiny" (the tests)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

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
    """Each program's command, set up in `d` when asked for: `size` "full" (make bench),
    "quick", or "tiny" (the tests)."""
    full = size == "full"
    tiny = size == "tiny"

    def memcmp() -> list[str]:
        exe = d / "memcmp"
        if not exe.exists():
            (d / "memcmp.c").write_text(MEMCMP_C)
            subprocess.run(["gcc", "-O2", "-o", str(exe), str(d / "memcmp.c")], check=True)
        return [str(exe), "256" if full else "4" if tiny else "16"]

    def python3() -> list[str]:
        n = (128, 1_000_000) if full else (2, 10_000) if tiny else (16, 100_000)
        code = f"x = bytearray({n[0]} << 20); y = list(range({n[1]})); print(len(x), len(y))"
        return [sys.executable, "-S", "-c", code]

    def sqlite3() -> list[str]:
        rows = 400_000 if full else 2_000 if tiny else 20_000
        db = d / f"rows-{rows}.db"
        if not db.exists():
            subprocess.run(["sqlite3", str(db)], input=SQL.format(rows=rows), text=True, check=True)
        return ["sqlite3", str(db), "SELECT count(*), max(b) FROM (SELECT b FROM t ORDER BY b);"]

    def gcc() -> list[str]:
        # 300 functions: about 12 G instructions (60: 2.75 G; the recursive calls make -O2 work hard).
        n = 300 if full else 3 if tiny else 60
        src = d / f"funcs-{n}.c"
        if not src.exists():
            src.write_text(big_c(n))
        return ["gcc", "-O2", "-c", "-o", str(d / "out.o"), str(src)]

    return {"memcmp": memcmp, "python3": python3, "sqlite3": sqlite3, "gcc": gcc}
