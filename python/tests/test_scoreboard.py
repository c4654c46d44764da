"""`experiments.scoreboard`: within 10 % / 25 % and directions kept, counted exactly."""

from __future__ import annotations

from mmsim.experiments import directions, scoreboard, scoreboard_lines


def _row(config, metric, published, simulated, unit="s"):
    return {"config": config, "metric": metric, "published": published, "simulated": simulated, "unit": unit}


def _experiment(name, rows):
    return {"name": name, "seed": "000", "profile": "default", "claim": "", "notes": [], "rows": rows}


def test_within_and_directions_are_counted_per_experiment_and_in_total():
    a = _experiment(
        "a",
        [
            _row("old", "time", 10.0, 10.5),  # within 10 %
            _row("new", "time", 5.0, 6.0),  # within 25 % (1.2), direction kept (down)
            _row("old", "fork", 30.0, 0.0),  # far off
            _row("new", "fork", 10.0, 0.0),  # far off, direction lost (no difference)
            _row("x", "unpublished", None, 3.0),
        ],
    )
    b = _experiment(
        "b",
        [
            _row("vs", "ratio", 2.1, 1.07, "x"),  # a lone ratio: same side of 1, kept
            _row("vs", "gain", 25.0, -3.0, "%"),  # a lone gain: other side of 0, lost
            _row("only", "seconds", 4.0, 4.0),  # a lone plain number: no direction
        ],
    )
    score = scoreboard([a, b])
    assert score["experiments"]["a"] == {
        "published": 4,
        "within_10": 1,
        "within_25": 2,
        "directions": 2,
        "directions_kept": 1,
    }
    assert score["experiments"]["b"] == {
        "published": 3,
        "within_10": 1,
        "within_25": 1,
        "directions": 2,
        "directions_kept": 1,
    }
    assert {k: score[k] for k in ("published", "within_10", "within_25", "directions", "directions_kept")} == {
        "published": 7,
        "within_10": 2,
        "within_25": 3,
        "directions": 4,
        "directions_kept": 2,
    }
    lost = [(r["config"], o and o["config"]) for r, o, kept in directions(a) if not kept]
    assert lost == [("old", "new")]
    lines = scoreboard_lines(score)
    assert lines[-1].split() == ["total", "7", "2", "3", "2/4"]


def test_equal_published_numbers_give_no_direction():
    e = _experiment("c", [_row("p", "m", 1.0, 1.0), _row("q", "m", 1.0, 2.0)])
    assert directions(e) == []
    # Closer than 1 % of the larger: a single run's noise, no direction either way.
    e = _experiment("d", [_row("p", "m", 157_071.0, 2.0), _row("q", "m", 157_077.0, 1.0)])
    assert directions(e) == []
    e = _experiment("e", [_row("p", "m", 100.0, 2.0), _row("q", "m", 101.5, 1.0)])
    assert [kept for *_, kept in directions(e)] == [False]
