"""The core every seed's experiments share: an experiment's description and its rows.

Each experiment runs the seed's workload on a profile of the seed's machine under each
configuration the seed compares, and returns rows of ``{config, metric, published, simulated,
unit}``. Published values are the seed's own numbers (``None`` where the seed gives none);
nothing here is tuned to them.
"""

from __future__ import annotations

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


def _row(config: str, metric: str, published: float | None, simulated: float, unit: str) -> dict[str, Any]:
    return {"config": config, "metric": metric, "published": published, "simulated": simulated, "unit": unit}


def _snap(report: dict, label: str) -> dict:
    return next(s for s in report["snapshots"] if s["label"] == label)
