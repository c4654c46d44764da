"""Sweeps: one workload over a grid of knobs, machine fields and hardware parameters.

A grid maps a key to the values it takes; every combination is one point:

- a knob by its Linux name (``transparent_hugepage/enabled``),
- a machine field (``machine.profile``, ``machine.memory``, ``machine.cpus``),
- a profile parameter (``hw.tlb.dtlb_4k.entries``, as ``--set hw.PATH=VALUE`` takes it),
- an engine option (``engine.fast_forward``).

Points run on a local process pool (no set-up), or as Ray tasks on a cluster
(``cluster="ray"`` for the cluster ``ray.init()`` finds, or ``"ray://host:port"``; needs
``pip install mmsim[ray]``). The simulator is deterministic, so both give the same table.

```python
>>> import mmsim
>>> w = mmsim.Workload()
>>> p = w.mmap("p", "8M", align="2M")
>>> w.read(p)
>>> df = mmsim.sweep(w, {"transparent_hugepage/enabled": ["always", "never"]}, processes=1, progress=False)
>>> print(df[["transparent_hugepage/enabled", "perf.page-faults", "vmstat.thp_zero_page_alloc"]].to_string())
  transparent_hugepage/enabled  perf.page-faults  vmstat.thp_zero_page_alloc
0                       always                 4                           1
1                        never              2048                           0

```
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from mmsim._mmsim import MmsimError
from mmsim.result import flatten
from mmsim.workload import Sets, _knob_sets, resolve, run_json

__all__ = ["load_spec", "points", "sweep"]

MACHINE_KEYS = ("profile", "memory", "cpus")


def points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in order (the last key varies fastest).

    ```python
    >>> points({"a": [1, 2], "b": ["x"]})
    [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'x'}]

    ```
    """
    if not isinstance(grid, Mapping) or not grid:
        raise MmsimError("sweep: grid must be a non-empty mapping of key -> list of values")
    for k, v in grid.items():
        if isinstance(v, str | bytes) or not isinstance(v, Sequence) or len(v) == 0:
            raise MmsimError(f"sweep: grid.{k}: must be a non-empty list of values")
        if k.startswith("machine.") and k.removeprefix("machine.") not in MACHINE_KEYS:
            raise MmsimError(f"sweep: grid.{k}: unknown machine field (known: {', '.join(MACHINE_KEYS)})")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid[k] for k in keys))]


def _point_job(base: dict[str, Any], base_sets: list[tuple[str, str]], point: dict[str, Any], check: bool) -> str:
    """The workload text and sets of one point (done in the parent: errors surface early)."""
    d = json.loads(json.dumps(base))
    sets = list(base_sets)
    for k, v in point.items():
        if k.startswith("machine."):
            d.setdefault("machine", {})[k.removeprefix("machine.")] = v
        else:
            sets += _knob_sets([(k, v)])
    return json.dumps({"workload": d, "sets": sets, "check": check})


def _run_point(job: str) -> dict[str, Any]:
    """Run one point (in a worker process or a Ray task): its flattened counters, or
    ``{"error": message}`` for a bad knob, override or machine field."""
    j = json.loads(job)
    try:
        report = json.loads(run_json(j["workload"], [tuple(s) for s in j["sets"]], j["check"]))
    except MmsimError as e:
        return {"error": str(e)}
    row: dict[str, Any] = flatten(report)
    row["failed"] = report.get("failed", False)
    return row


def _raise_if_error(row: dict[str, Any], point: dict[str, Any]) -> None:
    if "error" in row:
        where = ", ".join(f"{k}={v}" for k, v in point.items())
        raise MmsimError(f"sweep point {where}: {row['error']}")


def sweep(
    workload: Any,
    grid: Mapping[str, Sequence[Any]],
    machine: Any = None,
    knobs: Sets = None,
    repeats: int = 1,
    check: bool = False,
    processes: int | None = None,
    cluster: str | None = None,
    progress: bool | None = None,
    parquet: str | os.PathLike[str] | None = None,
) -> Any:
    """Run a workload at every point of a grid.

    Parameters
    ----------
    workload : Workload, dict, path or JSON text
        The workload every point runs.
    grid : mapping of str to list
        Key -> values; every combination is a point. Keys are knobs by their Linux names,
        ``machine.profile``/``machine.memory``/``machine.cpus``, profile parameters
        ``hw.PATH`` or engine options ``engine.*``.
    machine : Machine, optional
        Applied to every point before the grid's values.
    knobs : mapping, optional
        Knobs applied to every point before the grid's values.
    repeats : int, default 1
        Runs of each point (the simulator is deterministic: their rows are equal).
    check : bool, default False
        Run the reference model beside the simulator at every point.
    processes : int, optional
        Size of the local process pool (default: the CPUs).
    cluster : str, optional
        ``"ray"`` (the cluster ``ray.init()`` finds) or ``"ray://host:port"``: run the points
        as Ray tasks instead of the local pool.
    progress : bool, optional
        Show a progress bar once the sweep has run a second (default: when stderr is a
        terminal).
    parquet : path, optional
        Also write the table to this Parquet file.

    Returns
    -------
    pandas.DataFrame
        A row per point and repeat: a column per grid key, ``repeat``, every counter as
        ``perf.<name>``, ``vmstat.<name>``, ``meminfo.<name>``, and ``failed``.

    Raises
    ------
    MmsimError
        A bad grid, or a point whose knob, override or machine field the engine refuses
        (the message names the point and the field).

    Examples
    --------
    ```python
    >>> import mmsim
    >>> w = mmsim.Workload()
    >>> p = w.mmap("p", "64K")
    >>> w.write(p)
    >>> mmsim.sweep(w, {"machine.cpus": [1, 2]}, processes=1, progress=False)["perf.minor-faults"].tolist()
    [16, 16]

    ```
    """
    import pandas as pd

    if repeats < 1:
        raise MmsimError("sweep: repeats must be at least 1")
    base, base_sets = resolve(workload, machine, knobs)
    pts = points(grid)
    jobs = [_point_job(base, base_sets, p, check) for p in pts for _ in range(repeats)]
    show = sys.stderr.isatty() if progress is None else progress
    if cluster is not None:
        rows = _run_ray(jobs, pts, repeats, cluster, show)
    else:
        rows = _run_local(jobs, pts, repeats, processes, show)
    table = []
    for i, row in enumerate(rows):
        p = pts[i // repeats]
        table.append({**p, "repeat": i % repeats, **row})
    df = pd.DataFrame(table)
    if parquet is not None:
        df.to_parquet(Path(parquet), index=False)
    return df


def _bar(total: int, show: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, disable=not show, delay=1.0, unit="point", file=sys.stderr)


def _run_local(
    jobs: list[str], pts: list[dict[str, Any]], repeats: int, processes: int | None, show: bool
) -> list[dict[str, Any]]:
    n = min(len(jobs), processes or os.cpu_count() or 1)
    rows: list[dict[str, Any]] = []
    with _bar(len(jobs), show) as bar:
        if n <= 1:
            for i, j in enumerate(jobs):
                row = _run_point(j)
                _raise_if_error(row, pts[i // repeats])
                rows.append(row)
                bar.update()
            return rows
        with ProcessPoolExecutor(max_workers=n, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_run_point, j) for j in jobs]
            try:
                for i, f in enumerate(futures):
                    row = f.result()
                    _raise_if_error(row, pts[i // repeats])
                    rows.append(row)
                    bar.update()
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    return rows


def _run_ray(
    jobs: list[str], pts: list[dict[str, Any]], repeats: int, cluster: str, show: bool
) -> list[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise MmsimError("sweep: cluster needs Ray: pip install 'mmsim[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=None if cluster == "ray" else cluster, ignore_reinit_error=True, log_to_driver=False)
    task = ray.remote(_run_point)
    refs = [task.remote(j) for j in jobs]
    rows: list[dict[str, Any] | None] = [None] * len(refs)
    index = {r: i for i, r in enumerate(refs)}
    pending = list(refs)
    with _bar(len(refs), show) as bar:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                row = ray.get(r)
                _raise_if_error(row, pts[index[r] // repeats])
                rows[index[r]] = row
                bar.update()
    return [r for r in rows if r is not None]


def load_spec(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A sweep spec file (``.json``/``.yaml``): ``workload`` (a path, relative to the spec, or
    an inline workload), ``grid``, and optionally ``machine``, ``knobs``, ``repeats``,
    ``check``."""
    from mmsim.workload import load_workload

    spec = load_workload(path)
    spec.pop("name", None)
    unknown = set(spec) - {"workload", "grid", "machine", "knobs", "repeats", "check"}
    if unknown:
        raise MmsimError(
            f"{path}: unknown field {sorted(unknown)[0]!r} (expected workload, grid, machine, knobs, repeats, check)"
        )
    if "workload" not in spec or "grid" not in spec:
        raise MmsimError(f"{path}: a sweep spec needs `workload` and `grid`")
    w = spec["workload"]
    if isinstance(w, str) and not w.lstrip().startswith("{"):
        p = Path(w)
        spec["workload"] = str(p if p.is_absolute() else Path(path).parent / p)
    return spec
