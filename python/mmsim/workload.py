"""Workloads: load them from JSON or YAML files and run them on the engine.

A workload is a plain ``dict`` in the format the README documents (``name``, ``machine``,
``knobs``, ``program``). The engine validates it and names the field of any error; this
module only reads files and converts Python values to the JSON text the engine takes.

```python
>>> report = run_workload({
...     "name": "touch",
...     "program": [
...         {"op": "mmap", "name": "p", "size": "64K"},
...         {"op": "write", "region": "p"},
...     ],
... })
>>> report["perf"]["minor-faults"]
16

```
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from mmsim import _mmsim
from mmsim._mmsim import MmsimError
from mmsim.nesting import check_data, check_json_text, check_yaml_text

__all__ = ["load_workload", "resolve", "run", "run_json", "run_workload", "workload_json"]

#: File suffixes :func:`load_workload` understands, and the parser of each.
FORMATS = {".json": "JSON", ".yaml": "YAML", ".yml": "YAML"}

#: How the engine's messages about the workload text begin (others are about --set values).
WORKLOAD_ERRORS = ("workload:", "knobs.")

Workload = Mapping[str, Any] | str | os.PathLike[str]
Sets = Mapping[str, Any] | Iterable[tuple[str, Any]] | None


def load_workload(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a workload from a ``.json``, ``.yaml`` or ``.yml`` file.

    A workload without a ``name`` is named after the file (its stem). Any problem reading or
    parsing the file raises :class:`MmsimError` with one line naming the file, the position
    and the problem.
    """
    p = Path(path)
    kind = FORMATS.get(p.suffix.lower())
    if kind is None:
        raise MmsimError(f"{p}: unknown workload format {p.suffix or '(no suffix)'!r} (expected {', '.join(FORMATS)})")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise MmsimError(f"{p}: cannot read: {_reason(e)}") from None
    # The parsers recurse: refuse what is nested too deep first, naming the field.
    err = check_json_text(text) if kind == "JSON" else check_yaml_text(text)
    if err:
        raise MmsimError(f"{p}: workload: {err}")
    data = _parse_json(p, text) if kind == "JSON" else _parse_yaml(p, text)
    if not isinstance(data, dict):
        raise MmsimError(
            f'{p}: a workload must be a mapping with a "program" list at the top level, not {_type_name(data)}'
        )
    data.setdefault("name", p.stem)
    return data


def workload_json(workload: Workload) -> tuple[str, str | None]:
    """The engine's JSON text of a workload, and the file it came from (or ``None``).

    ``workload`` is a mapping, a path (``str`` or :class:`os.PathLike`) of a workload file,
    or a ``str`` of JSON text (one that starts with ``{``).
    """
    source = None
    if isinstance(workload, str) and workload.lstrip().startswith("{"):
        return workload, None
    if isinstance(workload, str | os.PathLike):
        source = os.fspath(workload)
        workload = load_workload(source)
    if not isinstance(workload, Mapping):
        raise MmsimError(f"a workload must be a mapping, a file path or JSON text, not {_type_name(workload)}")
    err = check_data(workload)  # json.dumps recurses
    if err:
        raise MmsimError(f"{source + ': ' if source else ''}workload: {err}")
    try:
        return json.dumps(workload, allow_nan=False), source
    except (TypeError, ValueError) as e:
        where = f"{source}: " if source else ""
        raise MmsimError(f"{where}workload: {e}") from None


def run_json(workload: Workload, sets: Sets = None, check: bool = False, progress: bool = False) -> str:
    """Run a workload and return the engine's report as JSON text (see :func:`run_workload`);
    with ``progress``, a run longer than two seconds shows a progress line on stderr."""
    text, source = workload_json(workload)
    try:
        return _mmsim.run(text, _knob_sets(sets), check, progress)
    except MmsimError as e:
        # Name the file when the error is in it (not in a --set override).
        if source is None or not str(e).startswith(WORKLOAD_ERRORS):
            raise
        raise MmsimError(f"{source}: {e}") from None


def run_workload(workload: Workload, sets: Sets = None, check: bool = False) -> dict[str, Any]:
    """Run a workload on the simulator and return its report.

    ``workload`` is a mapping, a path to a ``.json``/``.yaml``/``.yml`` file, or JSON text.
    ``sets`` overrides knobs after the workload's own ``knobs`` (as ``mmsim run --set``
    does): a mapping or pairs of knob name and value. ``check`` runs the reference model
    beside the simulator and verifies every read.

    The report is a dict with ``workload``, ``machine``, ``knobs`` (effective values),
    ``perf``, ``profile``, ``vmstat``, ``meminfo`` (the end of the run), ``baseline`` (the
    state before the first op), ``processes``, ``snapshots``, ``events``, ``check`` and
    ``failed``. A bad workload or knob raises :class:`MmsimError` naming the field.

    ```python
    >>> r = run_workload({"program": [{"op": "mmap", "name": "p", "size": "2M"},
    ...                               {"op": "read", "region": "p"}]},
    ...                  sets={"transparent_hugepage/enabled": "never"})
    >>> r["knobs"]["transparent_hugepage/enabled"], r["perf"]["minor-faults"]
    ('never', 512)
    >>> run_workload({"program": [{"op": "read", "region": "q"}]})
    Traceback (most recent call last):
    ...
    mmsim.MmsimError: workload: program[0].region: no region named "q" is mapped before this op

    ```
    """
    return json.loads(run_json(workload, sets, check))


def resolve(workload: Any, machine: Any = None, knobs: Sets = None) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A workload (a :class:`mmsim.Workload`, mapping, file path or JSON text) as a dict with
    ``machine`` applied, and the ``--set`` pairs of the machine's overrides and ``knobs``."""
    from mmsim.config import Machine, Workload

    if isinstance(workload, Workload):
        d = workload.to_dict()
    elif isinstance(workload, Mapping):
        d = dict(workload)
    else:
        text, source = workload_json(workload)
        err = check_json_text(text)  # json.loads recurses
        if err:
            raise MmsimError(f"workload: {err}")
        d = json.loads(text)
        if source is not None:
            d.setdefault("name", Path(source).stem)
    sets: list[tuple[str, str]] = []
    if machine is not None:
        m = machine if isinstance(machine, Machine) else Machine(**machine)
        d["machine"] = {**(d.get("machine") or {}), **m.to_dict()}
        sets += m.sets()
    sets += _knob_sets(knobs)
    return d, sets


def run(
    workload: Any,
    machine: Any = None,
    knobs: Sets = None,
    check: bool = False,
    sets: Sets = None,
    sample: str | None = None,
    events: str | None = None,
) -> Any:
    """Run a workload on the simulator.

    Parameters
    ----------
    workload : Workload, dict, path or JSON text
        A :class:`mmsim.Workload`, a mapping in the workload format, a ``.json``/``.yaml``
        file or JSON text.
    machine : Machine, optional
        Replaces the workload's machine fields and adds its profile overrides.
    knobs : mapping, optional
        Knobs by their Linux names, applied after the workload's own.
    check : bool, default False
        Run the reference model beside the simulator and verify every read.
    sets : mapping or pairs, optional
        Further ``--set`` pairs (``hw.PATH``, ``engine.*``).
    sample : str, optional
        ``"UNITS[:WARMUP]"``: sample loops as ``mmsim run --sample`` does (``engine.sample``);
        ``Result.sampling`` then has the 95% interval of each extrapolated counter.
    events : str, optional
        Globs of the kernel's events to record, as ``mmsim run --events`` takes them
        (``"exceptions:*,kmem:mm_page_alloc"``; ``engine.events``): ``Result.trace_events``
        lists them and ``Result.events_frame()`` gives them as a DataFrame.

    Returns
    -------
    Result
        Counters at the end, every snapshot, the per-function cycle profile, events and the
        check; ``Result.to_dict()`` is what ``mmsim run --json`` prints.

    Raises
    ------
    MmsimError
        A bad workload, knob or override; the message names the field.

    Examples
    --------
    ```python
    >>> import mmsim
    >>> w = mmsim.Workload()
    >>> p = w.mmap("p", "4M", align="2M")
    >>> w.read(p)
    >>> mmsim.run(w, knobs={"transparent_hugepage/enabled": "always"}).vmstat.thp_zero_page_alloc
    1
    >>> mmsim.run(w, machine=mmsim.Machine(profile="nope"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mmsim.MmsimError: workload: machine.profile: unknown profile "nope" (known: default, ...)

    ```
    """
    from mmsim.result import Result

    d, pairs = resolve(workload, machine, knobs)
    pairs += _knob_sets(sets)
    if sample is not None:
        pairs.append(("engine.sample", str(sample)))
    if events is not None:
        pairs.append(("engine.events", events))
    return Result(json.loads(run_json(d, pairs, check)))


def _knob_sets(sets: Sets) -> list[tuple[str, str]]:
    """Knob overrides as the engine takes them: (name, text value) pairs."""
    if sets is None:
        return []
    pairs = sets.items() if isinstance(sets, Mapping) else sets
    out = []
    for pair in pairs:
        if isinstance(pair, str):
            name, eq, value = pair.partition("=")
            if not eq:
                raise MmsimError(f"--set expects KNOB=VALUE, got {pair!r}")
        else:
            name, value = pair
        out.append((str(name), _knob_text(value)))
    return out


def _knob_text(value: Any) -> str:
    """A knob value as sysfs text (booleans as 1/0, as the workload format takes them)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _parse_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise MmsimError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None


def _parse_yaml(path: Path, text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = " ".join(x for x in (e.context, e.problem) if x)
        raise MmsimError(f"{where}: invalid YAML: {problem or 'parse error'}") from None
    except yaml.YAMLError as e:
        raise MmsimError(f"{path}: invalid YAML: {' '.join(str(e).split())}") from None


def _reason(e: BaseException) -> str:
    return e.strerror if isinstance(e, OSError) and e.strerror else str(e)


def _type_name(value: Any) -> str:
    return {list: "a list", str: "a string", type(None): "empty"}.get(type(value), f"a {type(value).__name__}")
