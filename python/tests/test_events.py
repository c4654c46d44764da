"""`mmsim run --events` end to end, and the events in the Python API."""

from __future__ import annotations

import json

from conftest import HZP_RSS, run_mmsim
from test_cli import assert_one_line_error

import mmsim

LINE = r"^\s+(\S+)\s+(\d+) \[(\d{3})\]\s+(\d+\.\d{6}): ([a-z_]+:[a-z_]+): (.*)$"


def test_run_events_prints_them_as_perf_script_does(tmp_path):
    import re

    r = run_mmsim("run", str(HZP_RSS), "--events", "exceptions:*,kmem:mm_page_alloc")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    parsed = [re.match(LINE, ln) for ln in lines]
    assert all(parsed), [ln for ln, m in zip(lines, parsed, strict=True) if not m][:3]
    names = [m.group(5) for m in parsed]
    # 101 faults (100 reads mapping the huge zero page, the write), 102 allocations.
    assert names.count("exceptions:page_fault_user") == 101
    assert names.count("kmem:mm_page_alloc") == 102
    assert names[:3] == ["exceptions:page_fault_user", "kmem:mm_page_alloc", "kmem:mm_page_alloc"]
    assert parsed[0].group(1, 2, 3) == ("hzp-rss", "1", "000")
    assert r.stderr.strip() == "mmsim: 203 events"


def test_run_events_json_keeps_the_report_and_lists_them():
    r = run_mmsim("run", str(HZP_RSS), "--events", "--json")
    report = json.loads(r.stdout)
    events = {e["event"] for e in report["trace_events"]}
    assert {"exceptions:page_fault_user", "kmem:mm_page_free", "mmsim:huge_zero_page_map"} <= events
    assert report["perf"]["page-faults"] == 101
    assert report["engine"]["trace_events_dropped"] == 0


def test_a_glob_that_selects_nothing_is_a_one_line_error():
    r = run_mmsim("run", str(HZP_RSS), "--events", "kmem:nosuch*")
    assert_one_line_error(r, "engine.events", '"kmem:nosuch*" selects no event', "known: exceptions:page_fault_user")


def test_the_python_api_gives_the_events_as_a_dataframe():
    w = mmsim.load_workload(HZP_RSS)
    r = mmsim.run(w, events="exceptions:page_fault_user")
    df = r.events_frame()
    assert list(df.columns) == ["comm", "pid", "cpu", "time", "event", "fields"]
    assert len(df) == 101 and set(df["event"]) == {"exceptions:page_fault_user"}
    assert df["time"].is_monotonic_increasing
    assert mmsim.run(w).events_frame().empty
