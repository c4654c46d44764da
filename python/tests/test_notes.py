"""Experiments' notes take their figures from the run's rows (mmsim.experiments.core.resolve_notes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsim.experiments import EXPERIMENTS, SEED_EXPERIMENTS, _row
from mmsim.experiments.core import resolve_notes

ROWS = [
    _row("hzp", "seconds", 32.41, 24.298875, "s"),
    _row("hzp", "page faults", None, 4096, "faults"),
    _row("vhzp vs hzp", "gain", 6.19, 7.36, "%"),
]


def test_a_note_takes_simulated_published_and_ratio_from_the_rows():
    [note] = resolve_notes(
        "x", ["{sim:hzp|seconds} s against {pub:hzp|seconds} ({ratio:hzp|seconds}); {sim:hzp|page faults} faults"], ROWS
    )
    assert note == "24.3 s against 32.41 (0.75); 4,096 faults"


def test_a_format_spec_after_a_third_bar_overrides_the_default():
    assert resolve_notes("x", ["{sim:hzp|seconds|.1f} {ratio:hzp|seconds|.3f}"], ROWS) == ["24.3 0.750"]


def test_braces_that_are_not_a_figure_stay():
    text = "a dynamically linked int main(){return 0;} and {sim: not a row}"
    assert resolve_notes("x", [text], ROWS) == [text]


def test_a_figure_of_a_row_the_experiment_lacks_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"hzp-memcmp: note refers to \{sim:hzp\|cycles\}"):
        resolve_notes("hzp-memcmp", ["{sim:hzp|cycles}"], ROWS)
    # A row without a published number has no published figure and no ratio.
    with pytest.raises(ValueError, match="does not give"):
        resolve_notes("x", ["{ratio:hzp|page faults}"], ROWS)


def test_every_seed_experiments_notes_resolve_against_the_committed_results():
    """Each figure a note names is a row the experiment printed at the commit of
    docs/results/reproduce.json (make reproduce writes it, so a renamed row fails here)."""
    results = Path(__file__).resolve().parents[2] / "docs" / "results" / "reproduce.json"
    doc = json.loads(results.read_text())
    by_name = {e["name"]: e for e in doc["experiments"]}
    for name in SEED_EXPERIMENTS:
        notes = resolve_notes(name, EXPERIMENTS[name].notes, by_name[name]["rows"])
        for n in notes:
            for kind in ("{sim:", "{pub:", "{ratio:"):
                assert kind not in n, f"{name}: an unresolved figure in {n!r}"


def test_reproduce_prints_the_notes_with_the_runs_figures():
    """End to end: `mmsim reproduce --json` carries the notes resolved against that run's rows."""
    import subprocess
    import sys

    mmsim = Path(sys.executable).parent / "mmsim"
    run = subprocess.run([str(mmsim), "reproduce", "hzp-stride", "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    [e] = json.loads(run.stdout)["experiments"]
    walks = next(r for r in e["rows"] if (r["config"], r["metric"]) == ("vhzp", "dTLB-load-misses"))
    assert f"({walks['simulated']:,} in all)" in e["notes"][0]
    assert not any("{sim:" in n or "{pub:" in n or "{ratio:" in n for n in e["notes"])
