"""The result of a run: counters as attributes, snapshots, and the report as data.

```python
>>> import mmsim
>>> w = mmsim.Workload(knobs={"transparent_hugepage/enabled": "never"})
>>> p = w.mmap("p", "4M")
>>> w.read(p)
>>> w.snapshot("read")
>>> r = mmsim.run(w)
>>> r.perf.page_faults, r.vmstat.pgfault, r.snapshot("read").processes[0]["VmPTE"] > 0
(1024, 1024, True)
>>> r.to_pandas().loc["end", "perf.minor-faults"]
np.float64(1024.0)

```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["Counters", "Result", "Snapshot", "flatten"]


class Counters(Mapping[str, Any]):
    """Counters by their Linux names (``dTLB-load-misses``, ``thp_fault_alloc``,
    ``AnonHugePages``), also as attributes with ``_`` for ``-`` (``c.dTLB_load_misses``)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._v = dict(values)

    def __getitem__(self, name: str) -> Any:
        return self._v[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._v)

    def __len__(self) -> int:
        return len(self._v)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        for name in (attr, attr.replace("_", "-")):
            if name in self._v:
                return self._v[name]
        raise AttributeError(f"no counter {attr!r} (known: {', '.join(self._v)})")

    def __repr__(self) -> str:
        return f"Counters({self._v!r})"


class Snapshot:
    """The machine's counters at a ``snapshot`` op (or at the end of the run)."""

    def __init__(self, d: Mapping[str, Any]) -> None:
        self._d = d
        self.label: str = d.get("label", "")
        self.pid: int = d.get("pid", 0)
        self.perf = Counters(d.get("perf", {}))
        self.vmstat = Counters(d.get("vmstat", {}))
        self.meminfo = Counters(d.get("meminfo", {}))
        self.profile = Counters(d.get("profile", {}))
        self.processes: list[dict[str, Any]] = list(d.get("processes", []))
        #: The workload's memory cgroups by name: their files (``memory.current``,
        #: ``memory.peak``, ``memory.stat`` and ``memory.events`` as mappings, ...).
        self.cgroups: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (d.get("cgroups") or {}).items()}
        #: The swap areas, as /proc/swaps lists them (``Filename``, ``Type``, ``Size``, ``Used``,
        #: ``Priority``; sizes in kB).
        self.swaps: list[dict[str, Any]] = list(d.get("swaps") or [])

    def to_dict(self) -> dict[str, Any]:
        return dict(self._d)

    def __repr__(self) -> str:
        return f"Snapshot({self.label!r})"


class Result(Snapshot):
    """A whole run: the counters at the end, every snapshot, the per-function cycle profile,
    events and the reference-model check. ``to_dict()`` is exactly what ``mmsim run --json``
    prints."""

    def __init__(self, report: Mapping[str, Any]) -> None:
        super().__init__({**report, "label": "end"})
        self._report = dict(report)
        self.workload: str = report.get("workload", "")
        self.machine: dict[str, Any] = dict(report.get("machine", {}))
        self.knobs: dict[str, Any] = dict(report.get("knobs", {}))
        self.baseline = Snapshot(report.get("baseline", {}))
        self.snapshots = [Snapshot(s) for s in report.get("snapshots", [])]
        self.events: list[dict[str, Any]] = list(report.get("events", []))
        self.check: dict[str, Any] = dict(report.get("check", {}))
        self.engine: dict[str, Any] = dict(report.get("engine", {}))
        #: With ``sample``: the extrapolation and ``ci95``, each counter's 95% half-width.
        self.sampling: dict[str, Any] | None = report.get("sampling")
        self.failed: bool = bool(report.get("failed", False))
        #: With ``events``: the kernel's events, each ``{comm, pid, cpu, time, event, fields}``.
        self.trace_events: list[dict[str, Any]] = list(report.get("trace_events", []))

    def snapshot(self, label: str) -> Snapshot:
        """The first snapshot with this label."""
        for s in self.snapshots:
            if s.label == label:
                return s
        raise KeyError(f"no snapshot {label!r} (taken: {', '.join(s.label for s in self.snapshots) or 'none'})")

    def to_dict(self) -> dict[str, Any]:
        return dict(self._report)

    def to_pandas(self) -> Any:
        """One row per snapshot, then ``end`` (indexed by label), a column per counter:
        ``perf.<name>``, ``vmstat.<name>``, ``meminfo.<name>``."""
        import pandas as pd

        rows = [flatten(s.to_dict()) for s in [*self.snapshots, self]]
        labels = [s.label for s in [*self.snapshots, self]]
        return pd.DataFrame(rows, index=pd.Index(labels, name="label"), dtype=float)

    def events_frame(self) -> Any:
        """The recorded events (``run(..., events=...)``) as a DataFrame: a row each, in the
        order they happened, columns ``comm, pid, cpu, time, event, fields``."""
        import pandas as pd

        return pd.DataFrame(self.trace_events, columns=["comm", "pid", "cpu", "time", "event", "fields"])

    def __repr__(self) -> str:
        return f"Result({self.workload!r}, failed={self.failed})"


def flatten(report: Mapping[str, Any]) -> dict[str, float]:
    """Every counter of a report or snapshot as ``{"perf.<name>": v, "vmstat.<name>": v,
    "meminfo.<name>": v}``, and each memory cgroup's files as ``cgroups.<cgroup>.<file>``
    (``cgroups.box.memory.peak``; a keyed file's keys ``cgroups.box.memory.stat.pgscan``)."""
    out: dict[str, float] = {}
    for section in ("perf", "vmstat", "meminfo"):
        for k, v in (report.get(section) or {}).items():
            out[f"{section}.{k}"] = v
    for name, files in (report.get("cgroups") or {}).items():
        for f, v in files.items():
            if isinstance(v, Mapping):
                out.update({f"cgroups.{name}.{f}.{k}": x for k, x in v.items()})
            else:
                out[f"cgroups.{name}.{f}"] = v
    return out
