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
    assert report["engine"].get("trace_events_dropped", 0) == 0


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


def _pft(tmp_path):
    from mmsim.experiments.prezero import PREZERO_KNOBS, pft_workload

    w = pft_workload("default", "1G", 2, 8 << 20, 1, 2, PREZERO_KNOBS)
    w["name"] = "prezero-faults"
    path = tmp_path / "pft.json"
    path.write_text(json.dumps(w))
    return path


def test_the_timeline_is_chrome_trace_event_json(tmp_path):
    """prezero-faults, small, with kscrubd: every event of the format's kinds with its required
    fields; kscrubd's bursts and the two threads' runs as slices on the CPUs' tracks."""
    out = tmp_path / "t.json"
    r = run_mmsim("run", _pft(tmp_path), "--timeline", out)
    assert r.returncode == 0, r.stderr
    assert f"timeline written to {out}" in r.stderr and "Performance counter stats" in r.stdout
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    assert trace["displayTimeUnit"] == "ms"
    for e in events:
        assert e["ph"] in ("M", "X", "i") and isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "X":
            assert e["ts"] >= 0 and e["dur"] > 0 and e["name"], e
        if e["ph"] == "i":
            assert e["s"] == "t" and e["ts"] >= 0 and ":" in e["name"], e
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"CPU 0", "CPU 1"}
    slices = [e for e in events if e["ph"] == "X"]
    assert any(e["name"] == "kscrubd 0" for e in slices)
    # The two threads (pids 3 and 4) fault at once, one on each CPU.
    threads = {e["name"]: e["tid"] for e in slices if e["name"] in ("prezero-faults 3", "prezero-faults 4")}
    assert sorted(threads.values()) == [0, 1], threads
    faults = [e for e in events if e["name"] == "exceptions:page_fault_user"]
    assert len(faults) == 2 * (4 << 20) // 16384  # pft's 16 KiB stride over each thread's 4 MiB
    assert (tmp_path / "t.html").is_file()


def test_waits_for_a_lock_and_for_the_device_are_slices_inside_the_tasks(tmp_path):
    """Two threads taking turns at a spinlock, then a cold file read: each wait a slice of its
    length, inside the slice of the task that waited."""
    w = {
        "name": "waits",
        "machine": {"cpus": 2},
        "program": [
            {"op": "mmap", "name": "p", "size": "4K"},
            {"op": "write", "region": "p"},
            {"op": "thread", "count": 2, "program": [{"op": "atomic", "region": "p", "count": 50, "hold": 1000}]},
            {"op": "wait"},
            {"op": "create", "file": "f", "size": "1M"},
            {"op": "pread", "file": "f"},
        ],
    }
    path, out = tmp_path / "w.json", tmp_path / "t.json"
    path.write_text(json.dumps(w))
    assert run_mmsim("run", path, "--timeline", out).returncode == 0
    events = json.loads(out.read_text())["traceEvents"]
    waits = [e for e in events if e.get("cat") == "wait"]
    locks = [e for e in waits if e["name"] == "lock wait"]
    ios = [e for e in waits if e["name"] == "I/O wait"]
    assert len(locks) > 50 and {e["tid"] for e in locks} == {0, 1}
    assert len(ios) == 1 and ios[0]["args"]["fields"].startswith("pages=")
    tasks = [e for e in events if e.get("cat") == "task"]
    for wt in waits:
        assert wt["dur"] > 0
        inside = [
            t
            for t in tasks
            if t["tid"] == wt["tid"]
            and t["ts"] - 1e-3 <= wt["ts"]
            and wt["ts"] + wt["dur"] <= t["ts"] + t["dur"] + 1e-3
        ]
        assert inside, wt


def test_headless_chromium_draws_the_timeline(tmp_path):
    import shutil
    import subprocess

    import pytest

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (make test installs Debian's chromium when run as root)")
    out = tmp_path / "t.json"
    assert run_mmsim("run", _pft(tmp_path), "--timeline", out).returncode == 0
    url = (tmp_path / "t.html").as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<title>mmsim timeline: prezero-faults</title>" in dom.stdout and "<canvas" in dom.stdout
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", "--window-size=1450,400", url], capture_output=True, timeout=120
    )
    assert shot.exists() and shot.stat().st_size > 10000, "the page drew its tracks"


def test_the_html_report_links_each_experiments_timeline(tmp_path):
    """reproduce --report --timelines: hzp-rss's first simulation (THP never: 51,200 read faults)
    drawn, linked from its section; a simulation too long for a timeline says why instead."""
    from mmsim.experiments import write_timelines

    out = tmp_path / "report"
    r = run_mmsim("reproduce", "hzp-rss", "--jobs", "1", "--report", out, "--timelines")
    assert r.returncode == 0, r.stderr
    index = (out / "index.html").read_text()
    assert "<a href='timeline-hzp-rss.html'>Timeline</a> of its first simulation (hzp-rss THP never)" in index
    assert (out / "timeline-hzp-rss.html").is_file()
    trace = json.loads((out / "timeline-hzp-rss.json").read_text())
    faults = [e for e in trace["traceEvents"] if e["name"] == "exceptions:page_fault_user"]
    assert len(faults) == 51_200
    assert write_timelines(["hzp-rss"], tmp_path / "small", max_ops=1000) == {
        "hzp-rss": ("", "its first simulation (hzp-rss THP never) is longer than 1,000 operations")
    }
    bad = run_mmsim("reproduce", "hzp-rss", "--timelines")
    assert bad.returncode == 2 and "--timelines goes with --report DIR" in bad.stderr
