"""The seeds' experiments, reproduced at their own parameters (``mmsim reproduce``): one
module per seed (``hzp`` for seeds 000 and 001, ``prezero`` for 002, ``ptshare`` for 003, ``textthp`` for 004)
over a small core (``core``: the experiment, its rows, the ratio).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mmsim.experiments.core import GIB, Experiment, _row, _snap, ratio, resolve_notes
from mmsim.experiments.hzp import (
    hzp_memcmp_rows,
    hzp_memcmp_runs,
    hzp_rss_rows,
    hzp_rss_runs,
    hzp_rss_workload,
    hzp_stride_rows,
    hzp_stride_runs,
    hzp_usemem_rows,
    hzp_usemem_runs,
    memcmp_workload,
    stride_workload,
    usemem_workload,
)
from mmsim.experiments.pool import Run, default_workers, run_all
from mmsim.experiments.prezero import (
    CACHELINES_KNOBS,
    PFT_KERNEL,
    PREZERO_KNOBS,
    pft_cachelines_workload,
    pft_metrics,
    pft_workload,
    prezero_cachelines_rows,
    prezero_cachelines_runs,
    prezero_faults_rows,
    prezero_faults_runs,
    prezero_init_rows,
    prezero_init_runs,
)
from mmsim.experiments.ptshare import PTSHARE_EXPERIMENTS
from mmsim.experiments.studies import ZERO_PAGE_REAL
from mmsim.experiments.study_memlimit import MEMORY_LIMIT
from mmsim.experiments.study_pgbench import PGBENCH_PTSHARE
from mmsim.experiments.study_prezero import PREZERO_REAL
from mmsim.experiments.study_text import GCC_TEXT_THP
from mmsim.experiments.textthp import TEXT_THP

__all__ = [
    "CACHELINES_KNOBS",
    "EXPERIMENTS",
    "GIB",
    "PFT_KERNEL",
    "PREZERO_KNOBS",
    "SEED_EXPERIMENTS",
    "STUDIES",
    "Experiment",
    "Run",
    "_row",
    "_snap",
    "default_workers",
    "hzp_rss_workload",
    "memcmp_workload",
    "pft_cachelines_workload",
    "pft_metrics",
    "pft_workload",
    "ratio",
    "run_all",
    "run_experiments",
    "stride_workload",
    "usemem_workload",
]

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in [
        Experiment(
            "hzp-rss",
            "000",
            "default",
            "With THP, a read fault maps the huge zero page instead of allocating a huge page: "
            "RSS stays as small as with THP off.",
            hzp_rss_runs,
            hzp_rss_rows,
            ["The seed reports RSS ~400 kB (never, hzp) and 200 MB (always): the growth is 0 and 204800 kB."],
        ),
        Experiment(
            "hzp-memcmp",
            "000",
            "westmere-ex",
            "memcmp over the huge zero page: the virtual huge zero page (4 KiB zero page) stays in the "
            "L1 cache and takes 6.3% fewer cycles despite more TLB misses.",
            hzp_memcmp_runs,
            hzp_memcmp_rows,
            [
                "stalled-cycles-frontend is what Linux counts on Westmere: the cycles in which no uop issued "
                "(UOPS_ISSUED.STALLED_CYCLES, cpu.frontend_event = no-issue), cycles - instructions / 4 "
                "(cpu.issue_width, the RAT's 4 uops a cycle).",
                "What decides it is the caches. With the huge zero page both halves of the memcmp are the same "
                "2 MiB of physical memory, which does not fit the 32 KiB L1 ({sim:hzp|L1-dcache-load-misses} L1 "
                "misses, served by the L2 and the streamer); with the virtual one they are the same 4 KiB, which "
                "stays in the L1 ({sim:vhzp|L1-dcache-load-misses} misses). vhzp's {sim:vhzp|dTLB-load-misses} "
                "dTLB misses (one walk per 4 KiB of each half) cost it almost nothing: each hides behind the 256 "
                "loads of the page before it ({sim:vhzp|stalled-cycles-backend} % of cycles stalled in the back "
                "end, against {sim:hzp|stalled-cycles-backend} % for hzp's L1 misses).",
                "What misses is the time ({ratio:hzp|seconds} and {ratio:vhzp|seconds} of the seed's seconds): "
                "mmsim's loop runs at an IPC of {sim:hzp|IPC} ({sim:vhzp|IPC} with "
                "vhzp) against {pub:hzp|IPC} ({pub:vhzp|IPC}), its instructions at cpu.base_cpi bounded by "
                "Westmere's one load a cycle (cpu.loads_per_cycle), with no model of the compare's dependency "
                "chain or of the branches (13.5 G in the seed, 1 M mispredicted); the front-end share follows "
                "from the IPC. The saving with vhzp is then a larger share of fewer cycles: "
                "{sim:vhzp vs hzp|fewer cycles with vhzp} % against {pub:vhzp vs hzp|fewer cycles with vhzp} %.",
            ],
        ),
        Experiment(
            "hzp-stride",
            "000",
            "westmere-ex",
            "One read per 4 KiB: here the TLB decides, and the virtual huge zero page is several times slower.",
            hzp_stride_runs,
            hzp_stride_rows,
            [
                "What decides it is the TLB: one access per 4 KiB page of each half, so vhzp takes 2 walks per "
                "step ({sim:vhzp|dTLB-load-misses} in all) where hzp hits two 2 MiB entries. Nothing hides "
                "those walks: each load needs one, Westmere's one page walker does them one at a time, and each "
                "costs about 24 cycles (the STLB lookup, tlb.walk_overhead and a pte read that mostly hits the "
                "L1; walk_overhead is from 7-cpu.com's measured Westmere TLB miss, not from this result): "
                "{sim:vhzp|seconds} s against the posting's {pub:vhzp|seconds} s.",
                "hzp pays instead for the 2 MiB page's 512 lines at a 4 KiB stride, which fall into one L1 set "
                "and eight L2 sets and so come from the LLC every time: its task-clock is {ratio:hzp|task-clock} "
                "of seed 000's {pub:hzp|task-clock} ms, but {ratio:hzp|seconds} of the {pub:hzp|seconds} s in "
                "the virtual huge zero page's posting (LKML, 2012-09-29), which is where the published ratio "
                "{pub:vhzp vs hzp|time ratio vhzp/hzp} comes from. The two postings' hzp runs of what is taken "
                "to be the same test differ by 29 %; against seed 000's hzp time the published ratio would be "
                "5.89, and the model's is {sim:vhzp vs hzp|time ratio vhzp/hzp}.",
            ],
        ),
        Experiment(
            "hzp-usemem",
            "001",
            "haswell-ep",
            "72 processes faulting in the huge zero page contend on its global refcount; taking it once "
            "per mm removes the contention.",
            hzp_usemem_runs,
            hzp_usemem_rows,
            [
                "Throughput is usemem's, summed over the 72 processes as the LKP harness does: each process "
                "reports (100 GiB / 8 + 8 bytes per 2 MiB step) / its time since usemem started, in KB/s "
                "(vm-scalability usemem.c). Runtime is the slowest process's time.",
                "global is decided by one shared line: every fault's get_huge_zero_page (atomic_inc_not_zero, a "
                "read and a cmpxchg, so a contended line moves twice) queues for the refcount line across 72 "
                "CPUs, each move costed by the two CPUs' distance (smp.c2c_smt, c2c_socket, c2c_remote: measured "
                "core-to-core latencies of a dual Haswell-EP): get_huge_zero_page takes "
                "{sim:global|cycles in get_huge_zero_page} % of the cycles against "
                "{pub:global|cycles in get_huge_zero_page} %. The summed throughput is {ratio:global|throughput} "
                "of the published, but the slowest process ends after {sim:global|runtime} us against "
                "{pub:global|runtime}: the seed's runtime is 1.34 times the mean time per process its throughput "
                "implies (1.52 for per_mm), so its processes finished far apart, where mmsim's CPUs take the "
                "refcount line and the memory channel in equal turns (no unfairness between sockets) and finish "
                "together.",
                "per_mm takes the line once per process, and what is left is each fault's own cost: the exception "
                "(cost.fault_entry_exit, Linus Torvalds' 2014 Haswell timing), the handler (cost.fault_handler, "
                "an estimate), clearing the deposited page table (a cold 4 KiB), the order-0 allocation from the "
                "per-CPU list refilled under the zone lock (page_alloc/pcp_batch=legacy: the seed's kernel is "
                "4.8), two hyper-threads sharing each core, and 72 processes' clears (about 30 GB with the reads "
                "for ownership) on two nodes' 68 GB/s channels (Intel ARK's peak for the E5-2699 v3). Runtime "
                "{ratio:per_mm|runtime} and throughput {ratio:per_mm|throughput} of the published; the gain "
                "{sim:per_mm vs global|throughput ratio} x against {pub:per_mm vs global|throughput ratio} x.",
                "per_mm's mm_get_huge_zero_page share is 0: its fast path (a test_bit on mm->flags) has no cost "
                "of its own in the model, being part of cost.fault_handler; its few instructions would give about "
                "0.03 % at this fault cost, still short of the published {pub:per_mm|cycles in "
                "mm_get_huge_zero_page} %.",
            ],
        ),
        Experiment(
            "prezero-faults",
            "002",
            "piii-450",
            "Zeroing free memory ahead of time, in large blocks on the idle CPU, makes sparse page faults "
            "several times faster; the gain halves when 10 repetitions use the zeroed pages up.",
            prezero_faults_runs,
            prezero_faults_rows,
            [
                "pft.c (Christoph Lameter's page-fault test): per repetition, fork; the child's threads each "
                "map 256,000,000 / threads bytes and write one byte per 4 KiB page (62,500 faults per "
                "repetition); the parent waits. flt/cpu/s = pages / (User + System) and fault/wsec = pages / "
                "Wall, where pages = 62,500 x repetitions is computed as pft does (bytes / getpagesize()). The "
                'posted source steps by 16384 (ia64\'s page size, "tweaking for 32 bit" left to the reader); '
                "pft_workload(stride=16384) runs it as posted (15,625 faults per repetition).",
                "The published Wall column is mis-printed by pft (tv_nsec / 10^7 printed with %03ld): the "
                "published User+System and Wall rows are derived as pages / the published rates.",
                "The machine is idle for 2 s before the test; with the patch kscrubd (scrub_start 7, "
                "scrub_stop 2: the V3 code's defaults) zeroes free memory then, and again after every exit.",
                "mmsim builds x86-64 4-level tables where the PIII had 2-level ones: a 32-bit PTE table maps "
                "4 MiB against x86-64's 2 MiB, so the run allocates 128 PTE tables per repetition instead of 64 "
                "(0.2% of its 62,500 page allocations) and a TLB miss reads the two levels the PIII reads (the "
                "profile's upper paging-structure caches always hit): the difference is below the figures' "
                "precision.",
                "Without the patch each fault clears 4 KiB, and what bounds it is the front-side bus: a P6 "
                "fast-string clear reads nothing for ownership (SDM vol. 3 8.2.4) but its 4 KiB go back to "
                "memory, 2,304 cycles of the 800 MB/s bus against 2,048 of stores ({sim:without, 1 rep, 1 "
                "thr|memory bus use} % of the bus busy with one thread). Two threads share the bus "
                "({sim:without, 1 rep, 2 thr|memory bus use} % busy), so each thread's faults slow down "
                "(flt/cpu/s {ratio:without, 1 rep, 2 thr|flt/cpu/s} of the seed's) while the pair gets more done "
                "(fault/wsec {ratio:without, 1 rep, 2 thr|fault/wsec}).",
                "What the misses come from, by the counters. Every fault pays the profile's estimated "
                "fault_entry_exit + fault_handler, 1,200 cycles (2.67 us). No measurement of a PIII with 2.6.10 "
                "was found; the nearest are lmbench 2.0 runs on a PIII at 859-868 MHz with 2.4.19 posted to LKML "
                "(P. K. Reddy, October and November 2002): a protection fault (the #PF, do_page_fault's checks, "
                "force_sig and the return, net of the signal's delivery) 0.780 us, 677 cycles, and a read fault "
                "of a page-cache page 2-3 us (whole microseconds, one gettimeofday included), 1,700-2,600 "
                "cycles. 'with, 1 rep, 1 thr' takes prezeroed pages only "
                "({sim:with, 1 rep, 1 thr|pages zeroed in the fault} cleared in the fault) and takes "
                "{sim:with, 1 rep, 1 thr|User+System} s for its 62,500 faults against the published "
                "{pub:with, 1 rep, 1 thr|User+System} s, so the 2.6.10 fault path took at most about 670 cycles "
                "on the PIII, its touch included: what lmbench gives a fault that maps nothing. The estimate "
                "(not fitted to this figure) is about twice that and sits between lmbench's two faults; the same "
                "1,200 cycles sit in every row, which is why the 'without' rows with one thread are "
                "{ratio:without, 1 rep, 1 thr|flt/cpu/s} of the seed's and the prezeroed rows lower still. For the "
                "same reason the drop from 1 to 2 threads with prezeroing (mmap_sem and page_table_lock line "
                "transfers and waits) is a smaller share of mmsim's fault than of the seed's.",
                "With 10 repetitions the front-side bus bounds the run: the 244 MiB each repetition frees must be "
                "zeroed again while the next one runs, {sim:with, 10 rep, 1 thr|pages zeroed by kscrubd} pages by "
                "kscrubd in {sim:with, 10 rep, 1 thr|kscrubd CPU time} s of the other CPU and "
                "{sim:with, 10 rep, 1 thr|pages zeroed in the fault} in the faults "
                "({sim:with, 10 rep, 1 thr|memory traffic} MB of writes, 'memory traffic'), and the bus is "
                "{sim:with, 10 rep, 1 thr|memory bus use} % busy; the published 1.89 s would need 1.15 GB/s of "
                "the 800 MB/s bus. The channel arbitrates per transaction (processor sharing between kscrubd's "
                "blocks and the faults' lines). Both 10-repetition runs are bus-bound "
                "({sim:with, 10 rep, 1 thr|memory bus use} and {sim:with, 10 rep, 2 thr|memory bus use} % busy), "
                "so 1 and 2 threads come out within a few % of each other, 2 threads ahead, where the published "
                "2 threads are 3-7 % behind: those 4 directions are lost.",
            ],
        ),
        Experiment(
            "prezero-cachelines",
            "002",
            "ia64-altix",
            "With prezeroed pages a fault costs only what the program touches: touching 1 of a 16 KiB "
            "page's 128 lines is 5 times faster than touching all of them; without prezeroing the "
            "clear in the fault loads every line whatever the program touches.",
            prezero_cachelines_runs,
            prezero_cachelines_rows,
            [
                "pft.c with -c (LKML 2006-08-29 version): one child, one thread, 1 GiB, and per 16 KiB page "
                "the first LINES 128-byte lines written (the workload's write op with block = LINES x 128 and "
                "block_stride = 128). pages = 65,536 = faults. mmsim runs ia64-altix with 16 KiB base pages "
                "(memory.page_size) and 128-byte lines.",
                "The seed publishes only the 'with' column; the 'without' rows are mmsim's, the contrast the "
                "seed argues from. The machine around the test (2 CPUs, 4 GiB) is not in the seed.",
                "With the patch nearly every fault takes a page kscrubd zeroed with the BTE in the idle time "
                "before, so the fault costs only itself and the lines the program writes, each a miss to memory: "
                "flt/cpu/s falls from {sim:1 line, with|flt/cpu/s} at 1 line to {sim:128 lines, with|flt/cpu/s} "
                "at 128, in the seed's direction at every step. Without it the rate is flat at about "
                "{sim:1 line, without|flt/cpu/s} whatever the program touches, because the clear in the fault "
                "already loaded every line of the page for ownership ({sim:1 line, without|memory traffic} MB "
                "of traffic at any line count).",
                "What misses: the time at 1 line, {ratio:1 line, with|User+System} of the seed's, is nearly all "
                "the fault itself, the profile's estimated cost.fault_entry_exit + cost.fault_handler (no "
                "measurement of this machine's fault was found); and past 32 lines mmsim's written lines are too cheap "
                "({ratio:128 lines, with|User+System} of the seed's time at 128, "
                "{ratio:128 lines, with|flt/cpu/s} of its rate): the profile lets 8 line misses "
                "overlap (memory.mlp, an estimate: no figure for Itanium 2's outstanding store misses was "
                "found), while the seed's User column, 0.48 s more for 65,536 x 127 more lines, puts a written "
                "line at 58 ns. The lines' fills and write-backs are booked on the 6.4 GB/s bus "
                "({sim:128 lines, with|memory traffic} MB at 128 lines), far from its limit.",
            ],
        ),
        Experiment(
            "prezero-init",
            "002",
            "zen4-epyc",
            "Seed 002's prezeroing beside its upstream successors on a current server: init_on_alloc clears "
            "every allocation once, init_on_free clears at free and (Linux 6.18's anonymous fault still "
            "clearing) twice in all; only prezeroing takes the clear out of the fault.",
            prezero_init_runs,
            prezero_init_rows,
            [
                "Not a seed measurement (no published numbers): a process maps 1 GiB, writes one byte per 4 KiB "
                "(4 KiB faults, or 2 MiB THP faults under MADV_HUGEPAGE), and exits, after 2 s of idle time.",
                "Linux 6.18's anonymous fault allocates without __GFP_ZERO and clears unless init_on_alloc is set "
                "(user_alloc_needs_zeroing); with prezeroing on, mmsim's fault asks for __GFP_ZERO as the seed's "
                "patch does.",
                "A 4 KiB fault takes {sim:4 KiB: Linux 6.18|time per fault (touch)} us under Linux 6.18, "
                "{sim:4 KiB: init_on_alloc=1|time per fault (touch)} us with init_on_alloc=1 (the clear moves from "
                "the fault to the allocator), {sim:4 KiB: init_on_free=1|time per fault (touch)} us with "
                "init_on_free=1 (the fault still clears, and exit takes {sim:4 KiB: init_on_free=1|exit and wait} "
                "ms instead of {sim:4 KiB: Linux 6.18|exit and wait} clearing the same pages again), and "
                "{sim:4 KiB: prezero (kscrubd, cpu)|time per fault (touch)} us with prezeroing. A THP fault takes "
                "{sim:THP: Linux 6.18|time per fault (touch)} us against "
                "{sim:THP: prezero (kscrubd, cpu)|time per fault (touch)} us with prezeroing, its 2 MiB clear "
                "done by kscrubd in the idle time before.",
            ],
        ),
        *PTSHARE_EXPERIMENTS,
        TEXT_THP,
    ]
}
#: The seeds' own experiments: what `mmsim reproduce` runs when no name is given.
SEED_EXPERIMENTS = list(EXPERIMENTS)
#: Studies of real programs (recorded, cached, replayed; issue 39): run by name.
STUDIES: dict[str, Experiment] = {
    e.name: e for e in [ZERO_PAGE_REAL, GCC_TEXT_THP, PREZERO_REAL, PGBENCH_PTSHARE, MEMORY_LIMIT]
}
EXPERIMENTS.update(STUDIES)


def run_experiments(
    names: list[str] | None = None,
    progress: Callable[[Run, float, int, int], None] | None = None,
    workers: int | None = None,
    quick: bool = False,
) -> list[dict[str, Any]]:
    """Run the named experiments (all by default); returns the ``--json`` experiment list.

    Every experiment's simulations are independent: they run together, ``workers`` at a time
    (default: one per CPU), heaviest first (``pool.run_all``). ``progress(run, seconds, done,
    total)`` is called as each simulation finishes, with the host seconds it took. ``quick``:
    the studies of real programs at their small size."""
    names = names or SEED_EXPERIMENTS
    for name in names:
        if name not in EXPERIMENTS:
            from mmsim._mmsim import MmsimError

            raise MmsimError(f"reproduce: unknown experiment {name!r} (known: {', '.join(EXPERIMENTS)})")
    plans = [(EXPERIMENTS[n], EXPERIMENTS[n].runs(*(["quick"] if quick and n in STUDIES else []))) for n in names]
    runs = [r for _, rs in plans for r in rs]
    done = 0

    def finished(r: Run, secs: float) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(r, secs, done, len(runs))

    results = iter(run_all(runs, default_workers() if workers is None else workers, finished))
    out = []
    for e, rs in plans:
        rows = e.rows([next(results) for _ in rs])
        out.append(
            {
                "name": e.name,
                "seed": e.seed,
                "profile": e.profile,
                "claim": e.claim,
                "notes": resolve_notes(e.name, e.notes, rows),
                "rows": rows,
            }
        )
    return out


def source_commit() -> tuple[str | None, bool]:
    """The git commit the package's sources are at, and whether the tree has changes beyond it
    (``None, False`` outside a git checkout, e.g. installed from a wheel)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None, False
    return commit, bool(dirty)


def provenance(source: tuple[str | None, bool] | None = None) -> dict[str, Any]:
    """Where a results file's numbers come from: mmsim's version, the commit and whether its tree
    had changes (``source``, default: as it is now), the date and the host."""
    import datetime
    import os
    import platform

    import mmsim

    commit, dirty = source if source is not None else source_commit()
    return {
        "mmsim": mmsim.__version__,
        "commit": commit,
        "dirty": dirty,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "kernel": platform.release()},
    }


def write_results(
    path: str,
    results: list[dict[str, Any]],
    wall_seconds: float,
    jobs: int | None,
    source: tuple[str | None, bool] | None = None,
) -> None:
    """``mmsim reproduce --results PATH``: the experiments' results with where they came from
    (the commit, whether its tree had changes, the date, the host and the wall time), the file
    the docs' Seed reproductions page is generated from (``mmsim.docgen``). ``source``: the
    commit and its tree's state as they were when the run began (default: now)."""
    import json
    from pathlib import Path

    doc = {
        **provenance(source),
        "jobs": jobs if jobs is not None else default_workers(),
        "wall_seconds": round(wall_seconds, 1),
        "experiments": results,
    }
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


#: Two published numbers of one metric closer than this (a fraction of the larger) give no
#: direction: the seeds publish single runs, and their own repeats differ by this much (seed
#: 002's pft: 157,071 and 157,077 fault/wsec for 1 and 10 repetitions of the same test).
DIRECTION_MIN = 0.01


def directions(e: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None, bool]]:
    """The directions one experiment's published numbers give, and whether the simulated ones
    keep them: every two rows of one metric (and unit) whose published numbers differ by more
    than `DIRECTION_MIN` of the larger, kept when the simulated numbers differ the same way;
    and a metric published once as a ratio (unit ``x``) or a gain (unit ``%``), kept when the
    simulated number is on the same side of 1 (of 0). Returns (row, the other row or ``None``
    for a lone ratio, kept) for each."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in e["rows"]:
        if r.get("published") is not None and r.get("simulated") is not None:
            groups.setdefault((r["metric"], r["unit"]), []).append(r)
    out: list[tuple[dict[str, Any], dict[str, Any] | None, bool]] = []
    for (_, unit), rows in groups.items():
        if len(rows) == 1:
            ref = {"x": 1.0, "%": 0.0}.get(unit)
            r = rows[0]
            if ref is not None and r["published"] != ref:
                out.append((r, None, _sign(r["published"] - ref) == _sign(r["simulated"] - ref)))
            continue
        for i, a in enumerate(rows):
            for b in rows[i + 1 :]:
                pa, pb = a["published"], b["published"]
                if abs(pb - pa) > DIRECTION_MIN * max(abs(pa), abs(pb)):
                    kept = _sign(b["published"] - a["published"]) == _sign(b["simulated"] - a["simulated"])
                    out.append((a, b, kept))
    return out


def _off(row: dict[str, Any]) -> float | None:
    """How far a row's simulated number is from its published one: |ratio - 1|, or for a
    published zero, 0 when the simulated number is zero too and infinity otherwise."""
    p, s = row.get("published"), row.get("simulated")
    if p is None or s is None:
        return None
    return abs(s / p - 1) if p else (0.0 if s == 0 else float("inf"))


def _score(rows: list[dict[str, Any]], dirs: list[tuple[Any, Any, bool]]) -> dict[str, int]:
    offs = [d for r in rows if (d := _off(r)) is not None]
    return {
        "published": len(offs),
        "within_10": sum(d <= 0.10 for d in offs),
        "within_25": sum(d <= 0.25 for d in offs),
        "directions": len(dirs),
        "directions_kept": sum(k for *_, k in dirs),
    }


def scoreboard(results: list[dict[str, Any]]) -> dict[str, Any]:
    """How the simulated numbers compare with the published ones, in total and per experiment
    (``experiments``: name -> the same counts): how many rows have a published number, how many
    of them are within 10 % and within 25 % of it (a published zero: only zero is), and how many
    of the directions the published numbers give (`directions`) the simulated ones keep."""
    per = {e["name"]: _score(e["rows"], directions(e)) for e in results}
    total = {k: sum(s[k] for s in per.values()) for k in _score([], [])}
    return {**total, "experiments": per}


def scoreboard_lines(score: dict[str, Any]) -> list[str]:
    """`scoreboard` as the plain-text table ``mmsim reproduce`` ends with."""
    head = f"{'experiment':<19} {'published':>9} {'within 10%':>10} {'within 25%':>10} {'directions kept':>16}"
    out = ["scoreboard (simulated / published):", head]

    def line(name: str, s: dict[str, Any]) -> str:
        d = f"{s['directions_kept']}/{s['directions']}"
        return f"{name:<19} {s['published']:>9} {s['within_10']:>10} {s['within_25']:>10} {d:>16}"

    out += [line(n, s) for n, s in score["experiments"].items() if s["published"]]
    out.append(line("total", score))
    return out


#: The most operations (pages touched and system calls) a timeline's run may take: a run with
#: events is not fast-forwarded, so a seed-scale loop would run for hours.
TIMELINE_MAX_OPS = 2_000_000


def write_timelines(names: list[str], out: Any, max_ops: int = TIMELINE_MAX_OPS) -> dict[str, tuple[str, str]]:
    """``mmsim reproduce --report DIR --timelines``: each experiment's first simulation again,
    with every event, as a timeline in ``out`` (``timeline-NAME.json`` and its page, ``.html``).
    Returns name -> (the page's file name, the simulation's label), or for an experiment without
    one, (``""``, why: its first simulation passes `max_ops` operations, or is not a workload)."""
    from pathlib import Path

    from mmsim import timeline
    from mmsim._mmsim import MmsimError
    from mmsim.experiments.pool import report_metrics
    from mmsim.workload import run_workload

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    done: dict[str, tuple[str, str]] = {}
    for name in names:
        first = next((r for r in EXPERIMENTS[name].runs() if r.fn is report_metrics), None)
        if first is None:
            done[name] = ("", "its simulations are replays of recorded programs")
            continue
        workload, sets = first.args[0], list(first.args[1] or [])
        sets += [("engine.events", "*"), ("engine.max_ops", str(max_ops))]
        try:
            report = run_workload(workload, sets=sets)
        except MmsimError as e:
            if "limit" not in str(e):
                raise
            done[name] = ("", f"its first simulation ({first.label}) is longer than {max_ops:,} operations")
            continue
        _, page = timeline.write(report, out / f"timeline-{name}.json")
        done[name] = (page.name, first.label)
    return done
