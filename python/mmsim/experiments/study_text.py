"""``gcc-text-thp``: seed 004 on a real binary. GCC's ``cc1`` (a 33 MB non-PIE text at its link
address) compiling a generated C file, recorded once (``mmsim record``, cached) and replayed
under four ways to give its text huge pages, THP ``always``:

- 4 KiB text (``file_text=off``): Linux 6.18 on x86, what the host runs;
- seed 004's prototype (``file_text=seed``): a private PMD copy per mapping (ShmemPmdMapped);
- khugepaged with ``CONFIG_READ_ONLY_THP_FOR_FS`` (``file_text=khugepaged``): the page cache
  collapsed into shared PMD folios (FilePmdMapped), as khugepaged gets to them;
- large folios: the text madvised MADV_HUGEPAGE as it is mapped (``hugepage_text``), so that the
  fault's readahead reads a PMD folio and maps it by the pmd. A warm page cache holds the small
  folios a read() built, which such a fault maps as they are (in Linux too): this configuration
  starts with the program's files uncached.

Each runs once alone and once as two compilations at once on two CPUs (``--trace A --trace A``).
"""

from __future__ import annotations

import json
from typing import Any

from mmsim.experiments.core import Experiment, _row
from mmsim.experiments.pool import Run
from mmsim.experiments.studies import cache_dir, native, recorded

#: Functions in the compiled file at each size (the tree's instructions: 107 M for 1, 600 M
#: for 12, from `mmsim trace info`).
GCC_FUNCTIONS = {"full": 12, "quick": 1}

#: What every configuration shares: THP always (anonymous memory as the host gives it), and
#: khugepaged waking every 100 ms rather than Linux's 10 s, so that it reaches the text within
#: a compilation that lasts under a simulated second.
BASE = {"transparent_hugepage/enabled": "always", "transparent_hugepage/khugepaged/scan_sleep_millisecs": 100}

#: name -> (knobs, hugepage_text and cold).
TEXT_CONFIGS: dict[str, tuple[dict[str, Any], bool]] = {
    "4 KiB text": ({"transparent_hugepage/file_text": "off"}, False),
    "seed 004's prototype": ({"transparent_hugepage/file_text": "seed"}, False),
    "khugepaged (READ_ONLY_THP_FOR_FS)": ({"transparent_hugepage/file_text": "khugepaged"}, False),
    "large folios (MADV_HUGEPAGE, cold)": ({"transparent_hugepage/file_text": "off"}, True),
}


def host_disk() -> dict[str, Any]:
    """This host's block device as knobs (its readahead window and largest request; Linux's
    defaults where the host does not show them). The page cache's folios, and with them how
    many pages a fault maps around, follow the readahead window: the replay reads the files
    ahead as this host's disk does, so that the kernel's count beside it is comparable."""
    from mmsim.native_host import host_knobs, host_settings

    k = host_knobs([], host_settings())
    return {n: k[n] for n in ("block/read_ahead_kb", "block/max_sectors_kb", "fault_around_bytes") if n in k}


def gcc_command(functions: int) -> list[str]:
    """`gcc -O2 -c` of a generated file of `functions` functions (real_programs.big_c), made in
    the studies' cache."""
    from mmsim.real_programs import big_c

    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    src = d / f"text-{functions}.c"
    if not src.is_file():
        src.write_text(big_c(functions))
    return ["gcc", "-O2", "-c", str(src), "-o", str(d / f"text-{functions}.o")]


def cc1_pid(path: str) -> int:
    """The recorded pid that execs cc1 (its first mapping of a file named cc1)."""
    from mmsim import trace

    for pid, kind, d in trace.records(path):
        if kind == "map" and str(d.get("path", "")).endswith("/cc1"):
            return pid
    from mmsim._mmsim import MmsimError

    raise MmsimError(f"gcc-text-thp: {path}: the trace never maps cc1")


def _text_replay(
    path: str, cc1: int, disk: dict[str, Any], knobs: dict[str, Any], huge: bool, copies: int
) -> dict[str, Any]:
    """`copies` replays of `path` at once (one per CPU) under `knobs`: the counters of the
    study, cc1's taken at its (first) exit, its mm still whole."""
    from mmsim import trace
    from mmsim.workload import run_json

    w = trace.replay_workload([path] * copies, cold=huge, hugepage_text=huge)
    w["knobs"] = {**BASE, **disk, **knobs}
    r = json.loads(run_json(w))
    perf, vm, base = r["perf"], r["vmstat"], r["baseline"]
    exit_ = next(s for s in r["snapshots"] if s["label"] == f"exit {cc1}")
    cc1p = next(p for p in exit_["processes"] if p["pid"] == exit_["pid"])
    used = lambda m: m["MemTotal"] - m["MemFree"]  # noqa: E731
    return {
        "iTLB-load-misses": perf["iTLB-load-misses"],
        "dTLB misses": perf["dTLB-load-misses"] + perf["dTLB-store-misses"],
        "page-faults": perf["page-faults"],
        "major-faults": perf["major-faults"],
        "cc1 faults": cc1p["minflt"] + cc1p["majflt"],
        "cycles": perf["cycles"],
        "page-walk-cycles": perf["page-walk-cycles"],
        "ShmemPmdMapped": exit_["meminfo"].get("ShmemPmdMapped", 0),
        "FilePmdMapped": exit_["meminfo"].get("FilePmdMapped", 0),
        "thp_collapse_alloc": vm.get("thp_collapse_alloc", 0) - base["vmstat"].get("thp_collapse_alloc", 0),
        "used": used(exit_["meminfo"]) - used(base["meminfo"]),
        "maxrss": max(p["VmHWM"] for p in r["processes"]),
        "minflt": sum(p["minflt"] for p in r["processes"]),
    }


def _text_native(cmd: list[str]) -> dict[str, Any]:
    """The compilation natively under the study's knobs (BASE; the host's text is 4 KiB:
    Linux 6.18 on x86 without READ_ONLY_THP_FOR_FS); {} where the host cannot set them."""
    return native(cmd, BASE)


def gcc_text_runs(size: str = "full") -> list[Run]:
    cmd = gcc_command(GCC_FUNCTIONS[size])
    path = str(recorded(f"gcc-text-thp-{size}", cmd))
    cc1 = cc1_pid(path)
    disk = host_disk()
    w = 1 if size == "quick" else 30
    return [
        *(Run(_text_replay, (path, cc1, disk, k, h, 1), w, f"gcc-text-thp {c}") for c, (k, h) in TEXT_CONFIGS.items()),
        *(
            Run(_text_replay, (path, cc1, disk, k, h, 2), 2 * w, f"gcc-text-thp 2 at once, {c}")
            for c, (k, h) in TEXT_CONFIGS.items()
        ),
        Run(_text_native, (cmd,), 1, "gcc-text-thp natively"),
    ]


def gcc_text_rows(results: list[Any]) -> list[dict[str, Any]]:
    n = len(TEXT_CONFIGS)
    ones, twos, native = results[:n], results[n : 2 * n], results[2 * n]
    rows = []
    base = ones[0]
    for c, m in zip(TEXT_CONFIGS, ones, strict=True):
        for metric, key, unit in (
            ("iTLB misses", "iTLB-load-misses", ""),
            ("dTLB misses", "dTLB misses", ""),
            ("page faults", "page-faults", "faults"),
            ("major faults", "major-faults", "faults"),
            ("cc1's faults", "cc1 faults", "faults"),
            ("cycles", "cycles", ""),
            ("page-walk cycles", "page-walk-cycles", ""),
            ("ShmemPmdMapped at cc1's exit", "ShmemPmdMapped", "kB"),
            ("FilePmdMapped at cc1's exit", "FilePmdMapped", "kB"),
            ("khugepaged collapses", "thp_collapse_alloc", "folios"),
        ):
            row = _row(c, metric, None, m[key], unit)
            if c == "4 KiB text" and native:
                if key == "page-faults":
                    row["kernel"] = native["minflt"] + native["majflt"]
                if key == "major-faults":
                    row["kernel"] = native["majflt"]
            rows.append(row)
        if c != "4 KiB text":
            for metric, key in (("iTLB misses, 4 KiB / this", "iTLB-load-misses"), ("cycles, 4 KiB / this", "cycles")):
                rows.append(_row(c, metric, None, round(base[key] / max(m[key], 1), 3), "x"))
        row = _row(c, "peak RSS", None, m["maxrss"], "kB")
        if c == "4 KiB text" and native:
            row["kernel"] = native["maxrss"]
        rows.append(row)
    for c, m in zip(TEXT_CONFIGS, twos, strict=True):
        label = f"2 at once, {c}"
        rows.append(_row(label, "page faults (both)", None, m["page-faults"], "faults"))
        rows.append(_row(label, "ShmemPmdMapped", None, m["ShmemPmdMapped"], "kB"))
        rows.append(_row(label, "FilePmdMapped", None, m["FilePmdMapped"], "kB"))
        rows.append(_row(label, "memory in use at cc1's exit", None, m["used"], "kB"))
    return rows


GCC_TEXT_THP = Experiment(
    "gcc-text-thp",
    "004",
    "default",
    "Mapping a program's text with 2 MiB pages cuts its iTLB misses and page faults by more than an order of "
    "magnitude and runs it about 6% faster; the prototype's private PMD copies cost memory per execution, which "
    "khugepaged's and the large-folio page cache's shared folios do not.",
    gcc_text_runs,
    gcc_text_rows,
    [
        "The program: gcc -O2 -c of a generated C file of 12 functions (cc1, 33 MB of text at its link "
        "address; 600 M instructions in the tree). Recorded once (mmsim record) and cached; replayed "
        "under THP always with khugepaged's scan_sleep_millisecs at 100 (Linux: 10 s, longer than the "
        "compilation), alone and as two compilations at once on 2 CPUs.",
        "Large folios: the text is madvised MADV_HUGEPAGE as it is mapped (mmsim run --hugepage-text), so "
        "the fault's readahead reads a PMD folio. It starts with the files uncached: a warm page cache holds "
        "the small folios read() built, which the fault maps as they are. Its major faults are those reads.",
        "The kernel's count: the same compilation natively under THP always, its tree's faults and peak "
        "RSS from wait4. The host is Linux 6.18 on x86 without CONFIG_READ_ONLY_THP_FOR_FS and without "
        "TLB counters (a VM): only the 4 KiB configuration can be measured.",
        "The block device's readahead window and largest request, and fault_around_bytes, are this "
        "host's (block/read_ahead_kb 8192 on the virtio disk this was written on; Linux's default is 128): "
        "the page cache's folios follow the readahead window, and with them how many pages a fault maps.",
        "Memory in use: MemTotal - MemFree at the first cc1's exit less at the start (page cache, PMD "
        "copies, both trees' anonymous memory and page tables).",
    ],
)
