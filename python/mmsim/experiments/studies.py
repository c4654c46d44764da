"""Studies of real programs under the seeds' mechanisms (issue 39): each records its program
once (``mmsim record``; the trace is cached), replays it under each configuration, and, where
the host can measure the same thing, runs the program natively under the same knobs for the
kernel's own count.

``zero-page-real`` (seed 000 on a real program): Python with numpy reads a ``numpy.zeros``
array (calloc'd: fresh anonymous memory) one byte per 4 KiB page, and writes nothing to it. Under
THP a read fault maps the huge zero page; without it (``use_zero_page=0``) it allocates a huge
page; the virtual huge zero page (seed 000's alternative) maps the 4 KiB zero page under a
page table of its own.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mmsim.experiments.core import Experiment, _row
from mmsim.experiments.pool import Run

#: The array's size (MiB) at full size and at the quick size `make test` runs.
ZERO_PAGE_MIB = {"full": 512, "quick": 32}

#: Configurations: name -> the knobs of the replay (and of the native run where Linux has them).
ZERO_PAGE_CONFIGS: dict[str, dict[str, Any]] = {
    "THP never": {"transparent_hugepage/enabled": "never"},
    "THP always, huge zero page": {
        "transparent_hugepage/enabled": "always",
        "transparent_hugepage/use_zero_page": 1,
    },
    "THP always, no zero page": {
        "transparent_hugepage/enabled": "always",
        "transparent_hugepage/use_zero_page": 0,
    },
    "THP always, virtual HZP": {
        "transparent_hugepage/enabled": "always",
        "transparent_hugepage/use_zero_page": 1,
        "transparent_hugepage/huge_zero_page": "vhzp",
    },
}
#: The configurations the host's kernel can run (the virtual huge zero page is not in Linux).
NATIVE = ("THP never", "THP always, huge zero page", "THP always, no zero page")


def cache_dir() -> Path:
    """Where studies keep their programs and traces: ``$MMSIM_CACHE`` or
    ``$XDG_CACHE_HOME/mmsim/studies`` (``~/.cache/mmsim/studies``)."""
    if os.environ.get("MMSIM_CACHE"):
        return Path(os.environ["MMSIM_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mmsim" / "studies"


def zero_page_command(mib: int) -> list[str]:
    """The program: this Python (with numpy) reading a zeroed array a byte per page (a sparse
    array's read before any write: the case the huge zero page is for)."""
    code = f"import numpy as np\na = np.zeros({mib} << 20, dtype=np.uint8)\nprint(int(a[::4096].sum()))\n"
    return [sys.executable, "-c", code]


def recorded(name: str, cmd: list[str]) -> Path:
    """The cached trace of `cmd` (recorded now if it is not cached, or if the command changed)."""
    from mmsim import trace

    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    out, meta = d / f"{name}.trace", d / f"{name}.json"
    if out.is_file() and meta.is_file() and json.loads(meta.read_text()).get("command") == cmd:
        return out
    # The program's output goes to stderr: stdout is the report's (`reproduce --json`).
    summary = trace.record(cmd, out, stdout=2)
    if summary.get("exit_status") != 0:
        from mmsim._mmsim import MmsimError

        raise MmsimError(f"{name}: the recorded program failed (exit {summary.get('exit_status')})")
    meta.write_text(json.dumps({"command": cmd}))
    return out


def _replay(path: str, knobs: dict[str, Any]) -> dict[str, Any]:
    """A replay of `path` under `knobs`: peak RSS (the largest VmHWM, as wait4's maxrss), minor
    faults of the tree, THP faults."""
    from mmsim import trace
    from mmsim.workload import run_json

    w = trace.replay_workload(path)
    w["knobs"] = knobs
    r = json.loads(run_json(w))
    vm, base = r["vmstat"], r["baseline"]["vmstat"]
    return {
        "maxrss": max(x["VmHWM"] for x in r["processes"]),
        "minflt": sum(x["minflt"] for x in r["processes"]),
        "thp_fault_alloc": vm.get("thp_fault_alloc", 0) - base.get("thp_fault_alloc", 0),
    }


def native(cmd: list[str], knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the studies measure of the kernel: `cmd` run natively (wait4's faults and peak
    RSS of its tree) after a first run that caches its files, as the replay assumes, under
    `knobs` (the host's set and restored: root); {} where the host cannot take them."""
    from mmsim.native_knobs import HostSettings
    from mmsim.validate_trace import run_native

    if not knobs:
        run_native(cmd, quiet=True)
        return run_native(cmd, quiet=True)
    if os.geteuid() != 0 or not Path("/sys/kernel/mm/transparent_hugepage/enabled").exists():
        return {}
    with HostSettings({k: str(v) for k, v in knobs.items()}):
        run_native(cmd, quiet=True)
        return run_native(cmd, quiet=True)


def _native(cmd: list[str], configs: tuple[str, ...]) -> dict[str, Any]:
    """The program run natively under each configuration's knobs, one after another; {}
    where the host cannot."""
    out = {c: native(cmd, ZERO_PAGE_CONFIGS[c]) for c in configs}
    return out if all(out.values()) else {}


def zero_page_runs(size: str = "full") -> list[Run]:
    cmd = zero_page_command(ZERO_PAGE_MIB[size])
    path = str(recorded(f"zero-page-real-{size}", cmd))
    return [
        *(Run(_replay, (path, knobs), 2, f"zero-page-real {c}") for c, knobs in ZERO_PAGE_CONFIGS.items()),
        Run(_native, (cmd, NATIVE), 2, "zero-page-real natively"),
    ]


def zero_page_rows(results: list[Any]) -> list[dict[str, Any]]:
    *sims, native = results
    rows = []
    for (c, _), sim in zip(ZERO_PAGE_CONFIGS.items(), sims, strict=True):
        k = native.get(c, {})
        for metric, key, unit in (
            ("peak RSS", "maxrss", "kB"),
            ("minor faults", "minflt", "faults"),
            ("THP faults", "thp_fault_alloc", "faults"),
        ):
            row = _row(c, metric, None, sim[key], unit)
            kv = k.get(key) if key != "thp_fault_alloc" else k.get("thp", {}).get("thp_fault_alloc")
            if kv is not None:
                row["kernel"] = kv
            rows.append(row)
    return rows


ZERO_PAGE_REAL = Experiment(
    "zero-page-real",
    "000",
    "default",
    "On a real program (numpy.zeros read before written), THP's read faults map the huge zero page: "
    "peak RSS stays as with THP off, where without the zero page every read allocates a huge page.",
    zero_page_runs,
    zero_page_rows,
    [
        "The program: this Python with numpy, a numpy.zeros array of 512 MiB (calloc: fresh anonymous "
        "memory) read one byte per 4 KiB page and summed. Recorded once (mmsim "
        "record) and cached; replayed under each configuration; run natively under the same knobs where "
        "the host allows (root), its kernel counts beside (wait4's minflt and maxrss of the tree; THP "
        "faults system-wide). The virtual huge zero page is not in Linux: no kernel count.",
        "Page-table memory is not shown: Python frees the array before it exits, so the exit snapshot "
        "has none of its tables, and neither Linux nor the replay keeps a peak of VmPTE.",
    ],
)
