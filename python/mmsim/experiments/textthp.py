"""Seed 004: huge pages for read-only program text (the 2018 prototype), beside the two ways
Linux went afterwards (CONFIG_READ_ONLY_THP_FOR_FS with khugepaged, and 6.18's large-folio
page cache under MADV_HUGEPAGE).

The seed measured one program, ``perf stat -r10`` of a binary whose text segment is
483,138,032 bytes at 0x400000 (aligned 0x200000) and "thrashes the data and instruction
caches", with 4 KiB pages and with its prototype's 2 MiB pages. mmsim's program is derived
from the seed's *input* figures only (TEXT, INSTRUCTIONS, and the L1-icache and L1-dcache
load misses per instruction); every other figure of the table is a prediction.
"""

from __future__ import annotations

import math
from typing import Any

from mmsim.experiments.core import Experiment, _row, _snap
from mmsim.experiments.pool import Run
from mmsim.workload import run_workload

# ---- the seed's input figures -------------------------------------------------------------

#: The text segment (its ELF header: FileSiz of the r-x LOAD at 0x400000, aligned 0x200000).
TEXT = 483_138_032
TEXT_ADDR = 0x400000
#: perf stat's instructions, L1-icache-load-misses, L1-dcache-loads and -load-misses (4 KiB
#: column; the program is the same under 2 MiB pages).
INSTRUCTIONS = 562_704_668_718
L1I_MISSES = 74_897_499_234
L1D_LOADS = 180_885_880_185
L1D_MISSES = 40_374_420_279
LINE = 64
HPAGE = 2 << 20
L1D_LINES = 32 * 1024 // LINE  # desktop-2018's 32 KiB L1d

# ---- the program derived from them --------------------------------------------------------

#: "Thrashes the instruction cache": every line of the text is an L1i miss each time the text
#: runs, so a pass executes the whole text once and the passes are the misses over the lines.
TEXT_LINES = math.ceil(TEXT / LINE)
PASSES = round(L1I_MISSES / TEXT_LINES)
#: Instructions that are not loads, per fetched line: the text's instruction density.
FETCH_INSTRUCTIONS_PER_LINE = (INSTRUCTIONS - L1D_LOADS) / L1I_MISSES
INSTRUCTION_BYTES = LINE / FETCH_INSTRUCTIONS_PER_LINE
#: Loads: random 8-byte reads, one line each, over a data array whose misses in a 512-line
#: L1d (fully used, random replacement of a uniform set) give the published miss ratio:
#: F = 512 / (1 - misses / loads) lines.
DATA_LINES = math.ceil(L1D_LINES / (1 - L1D_MISSES / L1D_LOADS))
LOADS_PER_PASS = L1D_LOADS / PASSES
#: The loads are spread over the text: after each 2 MiB of it, its share.
RANGES = math.ceil(TEXT / HPAGE)

#: Published, `perf stat -r10` (4 KiB, 2 MiB under the prototype).
PUBLISHED: dict[str, tuple[float, float | None]] = {
    "seconds": (307.09, 289.55),
    "page-faults": (7_728, 598),
    "cycles": (1_401_295_823_265, 1_323_835_488_984),
    "instructions": (562.7e9, 562.7e9),
    "iTLB-load-misses": (1_219_514_499, 51_929_869),
    "dTLB-load-misses": (707_373, 835),
    "LLC-loads": (232e6, 136e6),
    "LLC-load-misses": (24.0e6, 6.7e6),
}
PUBLISHED_SHMEM_PMD_KB = 471_040

#: 6.18 desktop defaults for what the seed's kernel (4.x) did not have: THP madvise (the seed's
#: machine ran "always" for anonymous memory; its text under 4 KiB was not THP either way).
BASE_KNOBS = {"transparent_hugepage/enabled": "madvise"}
#: The configurations: mmsim's knobs, and whether the text is madvised MADV_HUGEPAGE.
CONFIGS: dict[str, tuple[dict[str, Any], bool]] = {
    "4K": ({"transparent_hugepage/file_text": "off"}, False),
    "2M seed": ({"transparent_hugepage/file_text": "seed"}, False),
    "2M khugepaged": (
        {"transparent_hugepage/file_text": "khugepaged", "transparent_hugepage/enabled": "always"},
        False,
    ),
    "2M large folios": ({"transparent_hugepage/file_text": "off"}, True),
    "seed, order-9 fails": ({"transparent_hugepage/file_text": "seed", "fail_page_alloc/min_order": 9}, False),
}
#: `mmsim run --sample`: units and warm-up passes after every change of kernel state.
SAMPLE = "5:1"
#: khugepaged changes the kernel's state every scan_sleep_millisecs (26 times in the run):
#: after each wake-up the pass that faults the collapsed ranges in is the warm-up, and two
#: passes are the units.
SAMPLE_BETWEEN_WAKEUPS = "2:0"
#: The hardware parameters the input figures fix (the rest is desktop-2018's profile), and
#: room for the 2 G steps khugepaged's row simulates.
HW_SETS = [
    ("hw.cost.instruction_bytes", f"{INSTRUCTION_BYTES:.4f}"),
    ("hw.cost.access_instructions", "1"),
    ("engine.max_ops", str(20 * 10**9)),
]


def text_workload(
    knobs: dict[str, Any], madvise: bool, passes: int = PASSES, executions: int = 1, memory: str = "16G"
) -> dict[str, Any]:
    """The seed's program: exec its text, then PASSES times run it through, with its share
    of random data loads after each 2 MiB; with `executions` 2, a second copy runs at once
    (forked after exec, on the second CPU)."""
    body: list[dict[str, Any]] = []
    for i in range(RANGES):
        off = i * HPAGE
        length = min(HPAGE, TEXT - off)
        body.append({"op": "fetch", "region": "text", "offset": off, "length": length})
        loads = round(LOADS_PER_PASS * length / TEXT)
        body.append(
            {"op": "read", "region": "data", "pattern": "random", "stride": LINE, "count": loads, "seed": i + 1}
        )
    run = [{"op": "loop", "count": passes, "body": body}, {"op": "snapshot", "label": "end"}]
    exec_text: list[dict[str, Any]] = [
        {"op": "exec", "file": "testr", "name": "text", "text_size": TEXT, "align": "2M", "addr": hex(TEXT_ADDR)},
    ]
    if madvise:
        exec_text.append({"op": "madvise", "region": "text", "advice": "hugepage"})
    # perf stat -r10 runs the program ten times: a run finds the page cache as the one before
    # left it (every page of the text read in by its faults). The run before is a child that
    # executes the text once through, a page at a time.
    before = [*exec_text, {"op": "fetch", "region": "text", "stride": 4096}]
    program: list[dict[str, Any]] = [
        {"op": "create", "file": "testr", "size": TEXT},
        {"op": "fork", "program": before},
        {"op": "wait"},
        {"op": "snapshot", "label": "exec"},
        *exec_text,
    ]
    program += [
        {"op": "mmap", "name": "data", "size": DATA_LINES * LINE},
        {"op": "write", "region": "data"},
    ]
    if executions == 2:
        # Both copies have run their passes, and still run (the child lingers), at "both".
        child = [*run, {"op": "sleep", "ms": 2000}]
        parent = [*run, {"op": "sleep", "ms": 500}, {"op": "snapshot", "label": "both"}, {"op": "wait"}]
        program += [{"op": "fork", "program": child, "cpu": 1}, *parent]
    else:
        program += run
    return {
        "name": "text-thp",
        "machine": {"profile": "desktop-2018", "memory": memory, "cpus": executions},
        "knobs": dict(BASE_KNOBS, **knobs),
        "program": program,
    }


def text_metrics(r: dict[str, Any]) -> dict[str, Any]:
    """perf stat's figures of the run (the program's own process), and the PMD mappings."""
    start, end = _snap(r, "exec"), _snap(r, "end")
    ci = (r.get("sampling") or {}).get("ci95", {})
    out = {m: end["perf"].get(m, 0) - start["perf"].get(m, 0) for m in PUBLISHED}
    out["seconds"] = end["time"] - start["time"]
    out["ci95"] = {m: ci[m] for m in PUBLISHED if m in ci}
    for k in ("ShmemPmdMapped", "FilePmdMapped"):
        out[k] = end["meminfo"].get(k, 0)
    for k in ("thp_collapse_alloc", "thp_file_fallback"):
        out[k] = end["vmstat"].get(k, 0) - start["vmstat"].get(k, 0)
    return out


def _run_config(config: str, passes: int, sample: str | None) -> dict[str, Any]:
    """One configuration's run: its metrics (a worker process's job)."""
    knobs, madvise = CONFIGS[config]
    if sample and config == "2M khugepaged":
        sample = SAMPLE_BETWEEN_WAKEUPS
    sets = list(HW_SETS) + ([("engine.sample", sample)] if sample else [])
    return text_metrics(run_workload(text_workload(knobs, madvise, passes), sets=sets))


def two_metrics(r: dict[str, Any]) -> dict[str, Any]:
    """Two executions at once: the page faults of both, their PMD mappings, and the memory
    the text takes (MemTotal - MemFree at "both" less at "exec")."""
    start, both = _snap(r, "exec"), _snap(r, "both")
    return {
        "faults": sum(p["minflt"] + p.get("majflt", 0) for p in both["processes"] if p["pid"] != 2),
        **{k: both["meminfo"].get(k, 0) for k in ("ShmemPmdMapped", "FilePmdMapped")},
        "used": _used_kb(both) - _used_kb(start),
    }


def _run_two(config: str) -> dict[str, Any]:
    """Two executions at once under `config`, two passes: their metrics."""
    knobs, madvise = CONFIGS[config]
    return two_metrics(run_workload(text_workload(knobs, madvise, 2, executions=2), sets=list(HW_SETS)))


TWO = ("2M seed", "2M khugepaged", "2M large folios")

#: Host seconds of each run at full scale (scheduling only): `mmsim reproduce` on the build
#: machine, a8a10ea.
WEIGHTS = {"2M khugepaged": 128, "4K": 8.4, "seed, order-9 fails": 7.6, "2M seed": 8.8, "2M large folios": 7.6}


def text_thp_runs(passes: int = PASSES, sample: str | None = SAMPLE) -> list[Run]:
    """Every configuration's run, then the two-execution runs."""
    return [
        *(Run(_run_config, (c, passes, sample), WEIGHTS[c], f"text-thp {c}") for c in CONFIGS),
        *(Run(_run_two, (c,), 5, f"text-thp 2 executions {c}") for c in TWO),
    ]


def text_thp_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows from `text_thp_runs`' results, in its order."""
    metrics = dict(zip(CONFIGS, results[: len(CONFIGS)], strict=True))
    twos = dict(zip(TWO, results[len(CONFIGS) :], strict=True))
    rows = []
    for config in CONFIGS:
        knobs, _ = CONFIGS[config]
        m = metrics[config]
        col = 0 if config == "4K" else 1 if config == "2M seed" else None
        for metric, pub in PUBLISHED.items():
            published = pub[col] if col is not None else None
            row = _row(config, metric, published, m[metric], "s" if metric == "seconds" else "")
            if metric in m["ci95"]:
                row["ci95"] = m["ci95"][metric]
            rows.append(row)
        pmd = "ShmemPmdMapped" if knobs.get("transparent_hugepage/file_text") == "seed" else "FilePmdMapped"
        pub_pmd = PUBLISHED_SHMEM_PMD_KB if config == "2M seed" else (0 if config == "4K" else None)
        rows.append(_row(config, pmd, pub_pmd, m[pmd], "kB"))
        if config == "2M khugepaged":
            rows.append(_row(config, "thp_collapse_alloc", None, m["thp_collapse_alloc"], "folios"))
        if config == "seed, order-9 fails":
            rows.append(_row(config, "thp_file_fallback", None, m["thp_file_fallback"], "faults"))
    # Two executions at once: the memory each way takes (the mappings do not change after
    # the first pass).
    for config in TWO:
        m = twos[config]
        label = f"2 executions, {config.removeprefix('2M ')}"
        rows.append(_row(label, "page-faults (both)", None, m["faults"], ""))
        for k in ("ShmemPmdMapped", "FilePmdMapped"):
            rows.append(_row(label, k, None, m[k], "kB"))
        rows.append(_row(label, "memory in use (page cache + PMD copies)", None, m["used"], "kB"))
    return rows


def _used_kb(snap: dict[str, Any]) -> int:
    """Memory in use at a snapshot: MemTotal - MemFree."""
    return snap["meminfo"]["MemTotal"] - snap["meminfo"]["MemFree"]


TEXT_THP = Experiment(
    "text-thp",
    "004",
    "desktop-2018",
    "Mapping a 483 MB program text with 2 MiB pages cuts page faults and iTLB misses by more than an "
    "order of magnitude and runs about 6% faster; the prototype's private PMD copies cost memory per "
    "execution, which khugepaged's and the large-folio page cache's shared folios do not.",
    text_thp_runs,
    text_thp_rows,
    [
        f"Inputs (the seed's figures the program is derived from): the text's size and address, "
        f"instructions, L1-icache-load-misses, L1-dcache-loads and L1-dcache-load-misses. A pass runs "
        f"the whole text once, each line an L1i miss (the text 'thrashes' the I$): {PASSES:,} passes of "
        f"{TEXT_LINES:,} lines; {FETCH_INSTRUCTIONS_PER_LINE:.3f} non-load instructions per line "
        f"(hw.cost.instruction_bytes = {INSTRUCTION_BYTES:.3f}) and one per load; {LOADS_PER_PASS:,.0f} "
        f"random 8-byte loads per pass over {DATA_LINES} lines ({DATA_LINES * LINE:,} bytes: a 512-line "
        "L1d then misses in the published ratio), a 2 MiB share after each 2 MiB of text.",
        "Predictions: seconds, page faults, cycles, iTLB and dTLB misses, LLC loads and misses, and "
        "ShmemPmdMapped. Instructions are an input (they equal the published count by construction).",
        f"Sampled (mmsim run --sample {SAMPLE}): after each change of kernel state one warm-up pass, then "
        "5 measured passes; the rest are their mean. Faults and memory are exact; the interval of each "
        "extrapolated counter is in the ci95 column (0 when every measured pass counts the same). "
        f"khugepaged's row samples between its wake-ups with --sample {SAMPLE_BETWEEN_WAKEUPS}.",
        "The published page faults include the dynamic loader's, libc's, the stack's and the heap's "
        "(a few hundred under either page size); mmsim's process has only the text and its data array.",
        "2M khugepaged: enabled=always makes the text eligible without madvise; khugepaged wakes every "
        "scan_sleep_millisecs (10 s) and collapses pages_to_scan (4096 = 8 ranges) per wake-up, so the "
        "text is PMD-mapped gradually over the run.",
        "The rows '2 executions' run two copies at once (2 CPUs) for two passes: the memory the text "
        "takes, which stops changing after the first pass.",
        "Beside the seed's configurations: under khugepaged (file_text=khugepaged, enabled=always, default "
        "knobs) {sim:2M khugepaged|thp_collapse_alloc} collapses over the run leave "
        "{sim:2M khugepaged|FilePmdMapped} kB PMD-mapped at the end, and the run gets part of the "
        "prototype's benefit ({sim:2M khugepaged|iTLB-load-misses} iTLB misses); Linux 6.18's large folios "
        "(MADV_HUGEPAGE on the text) give the prototype's result from the page cache "
        "({sim:2M large folios|iTLB-load-misses} iTLB misses, {sim:2M large folios|FilePmdMapped} kB "
        "FilePmdMapped); the prototype with every order-9 allocation failing (fail_page_alloc/min_order=9) "
        "falls back in all {sim:seed, order-9 fails|thp_file_fallback} ranges and counts as 4 KiB does. Two "
        "executions at once: the prototype takes {sim:2 executions, seed|ShmemPmdMapped} kB of private PMD "
        "pages (one copy each), large folios one shared copy.",
        "What the model misses, read from the counters. (1) 2 MiB page faults "
        "{sim:2M seed|page-faults} against {pub:2M seed|page-faults}: the difference is about the same in "
        "the 4 KiB column ({sim:4K|page-faults} against {pub:4K|page-faults}), faults of the real process "
        "that mmsim's (text and data array only) does not take; a dynamically linked `int main(){return "
        "0;}` takes 47 page-faults:u on this machine (perf stat, Linux 6.18), and nothing the seed says about "
        "its program explains the other ~300. (2) 2 MiB iTLB misses {sim:2M seed|iTLB-load-misses} against "
        "{pub:2M seed|iTLB-load-misses}: in mmsim the 230 PMD translations all fit the 1,536-entry STLB, so "
        "only the first pass walks. The seed's are 5,234 walks a pass, where its 4 KiB run walks 1.04 "
        "times per 4 KiB page per pass, which mmsim reproduces ({ratio:4K|iTLB-load-misses}). Its own "
        "counters rule out a flush per timer tick (the data's pages would walk again after every tick, not "
        "835 times in all) and show 6.39 M STLB hits (iTLB-loads, ITLB_MISSES.STLB_HIT on Skylake-family "
        "cores) beside the 51.9 M walks, though the STLB has room for all 230 entries. Two candidates, "
        "neither confirmed and neither modelled: an STLB that does not keep all 230 2 MiB entries (how "
        "Coffee Lake indexes 2 MiB entries in its 12-way STLB is undocumented; a profile may not assume "
        "it), with a fetch path that moves between 2 MiB pages more often than a straight pass; and walks "
        "for fetches down mispredicted paths. (3) Cycles are {ratio:4K|cycles} and "
        "{ratio:2M seed|cycles} of the seed's: mmsim's data array stays in the LLC "
        "({sim:4K|LLC-load-misses} LLC misses against {pub:4K|LLC-load-misses}), so its loads cost less "
        "than the real program's, and its LLC-loads ({sim:4K|LLC-loads} against {pub:4K|LLC-loads}) count "
        "the data's reloads after the text stream evicts the array from the L2, where the real L2 kept more "
        "of it; its dTLB misses are 0 against {pub:4K|dTLB-load-misses} for the same reason (the array's 11 "
        "pages stay in the TLB). The workload is a model of the program's access pattern, not the program: "
        "the two directions of dTLB and LLC misses are lost with it.",
    ],
)
