"""The core every seed's experiments share: an experiment's description and its rows.

Each experiment runs the seed's workload on a profile of the seed's machine under each
configuration the seed compares, and returns rows of ``{config, metric, published, simulated,
unit}``. Published values are the seed's own numbers (``None`` where the seed gives none);
nothing here is tuned to them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mmsim.experiments.pool import Run, run_all

GIB = 1 << 30


@dataclass
class Experiment:
    """A seed experiment: what it shows, and how to run it: its simulations (`runs`, each
    independent of the others), and its rows from their results (`rows`, given the results in
    the order of `runs`)."""

    name: str
    seed: str
    profile: str
    claim: str
    runs: Callable[..., list[Run]]
    rows: Callable[[list[Any]], list[dict[str, Any]]]
    notes: list[str] = field(default_factory=list)

    def run(self, workers: int = 1) -> list[dict[str, Any]]:
        """Run the experiment (its simulations `workers` at a time) and return its rows."""
        return self.rows(run_all(self.runs(), workers))


def ratio(row: dict[str, Any]) -> float | None:
    """simulated / published, when both are there and published is not zero."""
    p, s = row.get("published"), row.get("simulated")
    if p in (None, 0) or s is None:
        return None
    return s / p


#: A figure in an experiment's note, taken from its rows when the note is printed, so that a note
#: cannot go stale: ``{sim:CONFIG|METRIC}``, ``{pub:CONFIG|METRIC}`` or ``{ratio:CONFIG|METRIC}``
#: (simulated / published), with an optional Python format spec after a third ``|``.
NOTE_FIGURE = re.compile(r"\{(sim|pub|ratio):([^{}|]+)\|([^{}|]+)(?:\|([^{}|]*))?\}")


def _figure(v: float, spec: str | None) -> str:
    """A figure for prose: thousands separated, four significant digits below 1,000 (20.91,
    0.0052), or by `spec`."""
    if spec:
        return format(v, spec)
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return f"{int(v):,}"


def resolve_notes(name: str, notes: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """`notes` with each ``{sim|pub|ratio:CONFIG|METRIC}`` replaced by that row's figure; a
    reference to a row the experiment does not have, or to a figure it lacks, is an error naming
    the experiment and the reference."""
    by = {(r["config"], r["metric"]): r for r in rows}

    def sub(m: re.Match[str]) -> str:
        kind, config, metric, spec = m.groups()
        r = by.get((config, metric))
        if r is None:
            raise ValueError(f"{name}: note refers to {m.group(0)}, but the experiment has no such row")
        if kind == "ratio":
            v, spec = ratio(r), spec or ".2f"
        else:
            v = r.get("simulated" if kind == "sim" else "published")
        if v is None:
            raise ValueError(f"{name}: note refers to {m.group(0)}, which that row does not give")
        return _figure(v, spec)

    return [NOTE_FIGURE.sub(sub, n) for n in notes]


def _row(config: str, metric: str, published: float | None, simulated: float, unit: str) -> dict[str, Any]:
    return {"config": config, "metric": metric, "published": published, "simulated": simulated, "unit": unit}


def _snap(report: dict, label: str) -> dict:
    return next(s for s in report["snapshots"] if s["label"] == label)
