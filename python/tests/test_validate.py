"""`mmsim validate`: the same workloads on this machine's kernel and in mmsim, compared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import HZP_RSS, run_mmsim

ZERO_PAGE = Path("/sys/kernel/mm/transparent_hugepage/use_zero_page")


def test_validate_suite_agrees_with_the_kernel():
    r = run_mmsim("validate", "--suite", "--json")
    report = r.json()
    assert set(report["host"]) >= {"transparent_hugepage/enabled", "transparent_hugepage/use_zero_page", "page_size"}
    cases = {c["name"]: c for c in report["cases"]}
    assert len(cases) >= 14
    for c in cases.values():
        assert set(c) >= {"name", "status", "reason", "counters"}
        assert c["status"] in ("pass", "skip"), f"{c['name']}: {c['reason']}"
        if c["status"] == "skip":
            assert c["reason"], "a skipped case says why"
            print(f"skipped {c['name']}: {c['reason']}")
        for x in c["counters"]:
            assert set(x) == {"name", "kernel", "simulated", "tolerance"}
    assert r.returncode == 0, r.stderr
    if cases["anon-4k-write"]["status"] == "pass":
        faults = next(x for x in cases["anon-4k-write"]["counters"] if x["name"] == "minflt")
        assert faults["kernel"] == faults["simulated"] == 1024


def test_validate_a_workload_file_compares_its_snapshots():
    r = run_mmsim("validate", HZP_RSS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS  hzp-rss" in r.stdout
    assert "after-read->after-write AnonHugePages" in r.stdout
    assert r.stdout.rstrip().endswith(
        "skipped (host: Linux " + os.uname().release + ", THP " + r.stdout.rstrip().split(", THP ")[1]
    )


def test_validate_refuses_unknown_host_knobs_and_bad_input(write_workload):
    e = run_mmsim("validate", "--suite", "--host-set", "vm/swappiness=1")
    assert e.returncode == 2 and "not a knob the runner may set" in e.stderr
    e = run_mmsim("validate")
    assert e.returncode == 2 and "--suite" in e.stderr
    w = write_workload(
        "thread.json",
        {
            "program": [
                {"op": "mmap", "name": "p", "size": "4K"},
                {"op": "thread", "program": [{"op": "read", "region": "p"}]},
            ]
        },
    )
    e = run_mmsim("validate", w)
    assert e.returncode == 2 and "cannot run the 'thread' op" in e.stderr, e.stderr


def test_host_set_changes_the_host_for_the_run_and_restores_it():
    if os.geteuid() != 0 or not ZERO_PAGE.exists():
        pytest.skip("needs root and transparent hugepages to change use_zero_page")
    before = ZERO_PAGE.read_text().strip()
    other = "0" if before == "1" else "1"
    r = run_mmsim("validate", "--suite", "--json", "--host-set", f"transparent_hugepage/use_zero_page={other}")
    assert ZERO_PAGE.read_text().strip() == before, "restored"
    assert r.returncode == 0, r.stdout[-3000:]
    cases = {c["name"]: c for c in r.json()["cases"]}
    ran = "thp-read-no-zero-page" if other == "0" else "thp-read-zero-page"
    assert cases[ran]["status"] == "pass", cases[ran]


def test_run_native_reports_what_the_kernel_did_in_the_run_json_schema():
    r = run_mmsim("run", "--native", "--json", HZP_RSS)
    assert r.returncode == 0, r.stderr
    rep = r.json()
    assert rep["native"] is True and rep["machine"]["host"] == f"Linux {os.uname().release}"
    # A fixed layout: with ASLR a 64 MiB region lands in a 1 GiB slot of its own one run in
    # 16, and its first fault needs a PMD table mmsim's layout does not (VmPTE +4 kB).
    assert rep["machine"]["aslr"] is False, "the runner runs with ADDR_NO_RANDOMIZE"
    assert {"page-faults", "minor-faults", "cycles"} <= set(rep["perf_unsupported"]) | set(rep["baseline"]["perf"])
    read, write = rep["snapshots"]
    assert [read["label"], write["label"]] == ["after-read", "after-write"]
    if "task-clock" in write["perf"]:
        # In ms, as mmsim's own runs report it (the kernel counts ns): 100 faults take well
        # under a second, and more than a microsecond.
        assert 0.001 < write["perf"]["task-clock"] < 1000, write["perf"]
    base = rep["baseline"]["processes"][0]
    p_read, p_write = read["processes"][0], write["processes"][0]
    if rep["knobs"]["transparent_hugepage/enabled"] != "never":
        assert p_read["minflt"] - base["minflt"] == 100, "one fault per 2 MiB (MADV_HUGEPAGE)"
        assert p_write["AnonHugePages"] - p_read["AnonHugePages"] == 2048
    assert {"thp_fault_alloc", "nr_page_table_pages"} <= set(write["vmstat"])
    assert {"MemFree", "PageTables"} <= set(write["meminfo"])
    text = run_mmsim("run", "--native", HZP_RSS)
    assert text.returncode == 0 and "after-write" in text.stdout and "Native run of 'hzp-rss'" in text.stdout
    bad = run_mmsim("run", "--native", "--check", HZP_RSS)
    assert bad.returncode == 2 and "simulator only" in bad.stderr


def test_make_calibrate_workloads_run_and_are_timed_per_fault():
    """`make calibrate`'s two workloads, at a small size, in mmsim: one time per fault for
    each pass after the first, and every pass takes the same number of faults."""
    import importlib.util
    import json

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("calibrate_fault", root / "scripts" / "calibrate_fault.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    small = [
        (cal.workload("hzp-read", "64M", "2M", True, "read"), 32),
        (cal.workload("anon-write", "4M", "4K", False, "write"), 1024),
    ]
    for w, faults in small:
        report = cal.run(w, native=False)
        times = cal.per_fault_ns(report)
        assert len(times) == cal.PASSES - 1 and all(t > 0 for t in times), times
        pairs = zip(report["snapshots"][::2], report["snapshots"][1::2], strict=True)
        assert {a["perf"]["page-faults"] - b["perf"]["page-faults"] for b, a in pairs} == {faults}
        assert json.loads((root / "target" / f"calibrate-{w['name']}.json").read_text()) == w


def test_the_native_runner_runs_atomics_and_refuses_a_spinlock_hold():
    """The `atomic` op runs on the kernel as locked adds of 0 (memory unchanged, as in mmsim);
    `hold` (a spinlock) has no native form and is refused by name."""
    from mmsim import MmsimError
    from mmsim.native import compile_program, run_native

    prog = [
        {"op": "mmap", "name": "s", "size": "4K", "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "length": 8, "value": 7},
        {"op": "fork", "count": 2, "program": [{"op": "atomic", "region": "s", "count": 1000}]},
        {"op": "wait"},
        {"op": "read", "region": "s", "length": 8, "expect": 7},
        {"op": "snapshot", "label": "end"},
    ]
    assert "atomic s 0 1000" in compile_program(prog)
    rows = run_native({"program": prog})
    assert [r["label"] for r in rows if r["label"] == "end"] == ["end"], "the read after the atomics saw 7"
    with pytest.raises(MmsimError, match="hold"):
        compile_program([{"op": "atomic", "region": "s", "hold": 100}])
