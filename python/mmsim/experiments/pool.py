"""Running the experiments' simulations: each experiment lists its runs (``Run``: a module-level
function and its arguments, whose result is what the experiment's rows need), and
``run_all`` runs them here one after the other or, with ``workers`` > 1 (``mmsim reproduce
--jobs N``), in that many worker processes at once. Every run is a simulation of its own and
deterministic: where it runs changes only the wall time, never a number.

With workers, the runs go out heaviest first (their ``weight``: the host seconds a run took
at full scale on the build machine, which only orders the work), so that the longest run
starts at once and the short ones fill the other workers around it (longest-processing-time
first list scheduling).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from mmsim.workload import run_workload


@dataclass(frozen=True)
class Run:
    """One simulation of an experiment: ``fn(*args)`` (``fn`` a module-level function, so that
    a worker process can import it) returns what the experiment's rows need."""

    fn: Callable[..., Any]
    args: tuple
    #: Host seconds the run took at full scale on the build machine (scheduling only).
    weight: float = 1.0
    #: What the progress bar shows while it runs.
    label: str = ""


def report_metrics(workload: dict[str, Any], sets: Any, check: bool, extract: Callable[[dict[str, Any]], Any]) -> Any:
    """Run `workload` and return `extract(report)` (in the worker: only the metrics travel back)."""
    return extract(run_workload(workload, sets=sets, check=check))


def simulate(
    workload: dict[str, Any],
    extract: Callable[[dict[str, Any]], Any],
    sets: Any = None,
    check: bool = False,
    weight: float = 1.0,
    label: str = "",
) -> Run:
    """The run of one workload whose rows need `extract(report)`."""
    return Run(report_metrics, (workload, sets, check, extract), weight, label or workload.get("name", ""))


def timed(fn: Callable[..., Any], args: tuple) -> tuple[Any, float]:
    """`fn(*args)` and the host seconds it took (where it ran)."""
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def default_workers() -> int:
    """Worker processes `mmsim reproduce` uses by default: one per CPU this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def run_all(runs: list[Run], workers: int = 1, progress: Callable[[Run, float], None] | None = None) -> list[Any]:
    """Each run's result, in the order of `runs`. `progress(run, seconds)` is called as each
    finishes, with the host seconds it took."""
    if workers <= 1 or len(runs) <= 1:
        out = []
        for r in runs:
            result, secs = timed(r.fn, r.args)
            out.append(result)
            if progress:
                progress(r, secs)
        return out
    results: list[Any] = [None] * len(runs)
    order = sorted(range(len(runs)), key=lambda i: -runs[i].weight)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, len(runs)), mp_context=ctx) as pool:
        pending: dict[Future, int] = {pool.submit(timed, runs[i].fn, runs[i].args): i for i in order}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    i = pending.pop(f)
                    results[i], secs = f.result()
                    if progress:
                        progress(runs[i], secs)
        except BaseException:
            for f in pending:
                f.cancel()
            raise
    return results
