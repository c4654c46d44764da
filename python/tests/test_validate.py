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
        "set.json",
        {"program": [{"op": "set", "knob": "transparent_hugepage/enabled", "value": "never"}]},
    )
    e = run_mmsim("validate", w)
    assert e.returncode == 2 and "cannot run the 'set' op" in e.stderr, e.stderr


VALIDATE_DIR = Path(__file__).resolve().parents[2] / "experiments" / "validate"


def test_workloads_as_users_write_them_agree_with_the_kernel():
    """experiments/validate: one snapshot or none, fork, threads, THP, COW, partial unmaps,
    shared regions: every process is compared from its start to its end, exactly."""
    files = sorted(VALIDATE_DIR.glob("*.json"))
    assert len(files) >= 10
    r = run_mmsim("validate", "--json", *files)
    cases = r.json()["cases"]
    assert len(cases) == len(files)
    for c in cases:
        assert c["status"] == "pass", f"{c['name']}: {c['reason']}"
        assert all(x["tolerance"] == 0 for x in c["counters"])
        assert any("__begin->" in x["name"] for x in c["counters"]), "compared from the implicit start"
    assert r.returncode == 0


def test_a_workload_without_snapshots_is_compared_from_start_to_exit(write_workload):
    w = write_workload(
        "none.json",
        {
            "program": [
                {"op": "mmap", "name": "p", "size": "4M"},
                {"op": "madvise", "region": "p", "advice": "nohugepage"},
                {"op": "write", "region": "p"},
                {"op": "fork", "program": [{"op": "write", "region": "p", "length": "64K", "value": 2}]},
                {"op": "wait"},
            ]
        },
    )
    r = run_mmsim("validate", "--json", w)
    (case,) = r.json()["cases"]
    assert case["status"] == "pass", case["reason"]
    got = {x["name"]: (x["kernel"], x["simulated"]) for x in case["counters"]}
    assert got["pid 1 __begin->__end minflt"] == (1024, 1024)
    assert got["pid 2 __begin->__end minflt"] == (16, 16), "a child's counters start at fork"
    assert got["pid 2 __begin->__end RssAnon"] == (0, 0), "COW copies replace shared pages in the child's RSS"


def test_the_runner_is_invisible_on_the_kernel():
    """100 children that only snapshot take no fault, and neither does their parent: the
    runner's own copy-on-write faults after each fork are not reported."""
    from mmsim.native import run_native, with_baselines

    prog = with_baselines([{"op": "fork", "count": 100, "program": [{"op": "snapshot", "label": "only"}]}])
    rows = run_native({"program": prog})
    kids = [r for r in rows if r["pid"] > 1 and r["label"] == "only"]
    assert len(kids) == 100
    assert {r["minflt"] for r in kids} == {0}
    assert {r["perf"].get("minor-faults", 0) for r in kids} == {0}
    parent = [r for r in rows if r["pid"] == 1 and r["label"] in ("__begin", "__end")]
    assert [r["label"] for r in parent] == ["__begin", "__end"]
    assert parent[1]["minflt"] - parent[0]["minflt"] == 0
    assert parent[1]["runner_minflt"] > 0, "the runner did break copy-on-write on its own pages"
    assert {r["RssAnon"] for r in parent} == {parent[0]["RssAnon"]}


def test_threads_run_on_the_kernel_one_after_the_other():
    """The thread op runs on the kernel (clone with CLONE_VM): each thread's faults are its
    own (RUSAGE_THREAD), its pid is the next logical one, and it sees the creator's memory."""
    from mmsim.native import run_native

    prog = [
        {"op": "mmap", "name": "p", "size": "1M"},
        {"op": "madvise", "region": "p", "advice": "nohugepage"},
        {"op": "write", "region": "p", "length": "64K", "value": 5},
        {
            "op": "thread",
            "count": 2,
            "program": [
                {"op": "snapshot", "label": "t0"},
                {"op": "read", "region": "p", "length": "64K", "expect": 5},
                {"op": "write", "region": "p", "offset": "512K", "length": "64K"},
                {"op": "snapshot", "label": "t1"},
            ],
        },
        {"op": "snapshot", "label": "main"},
    ]
    rows = run_native({"program": prog})
    by = {(r["pid"], r["label"]): r for r in rows}
    assert by[(2, "t1")]["minflt"] - by[(2, "t0")]["minflt"] == 16, "the first thread's writes fault"
    assert by[(3, "t1")]["minflt"] - by[(3, "t0")]["minflt"] == 0, "the second finds them mapped"
    assert by[(3, "t1")]["RssAnon"] == by[(1, "main")]["RssAnon"], "one address space"


def test_with_baselines_adds_a_snapshot_at_every_start_and_end():
    from mmsim.native import BEGIN, END, with_baselines

    snap = {"op": "snapshot", "label": BEGIN}, {"op": "snapshot", "label": END}
    prog = [{"op": "loop", "count": 2, "body": [{"op": "exit"}]}, {"op": "thread", "program": []}]
    assert with_baselines(prog) == [
        snap[0],
        {"op": "loop", "count": 2, "body": [snap[1], {"op": "exit"}]},
        {"op": "thread", "program": [snap[0], snap[1]]},
        snap[1],
    ]


def test_mmsim_starts_from_the_runners_layout():
    """Stand-ins at the runner's addresses: mmsim's top-down mmap puts a region where the kernel
    did, beside tables that already exist (an unaligned 64 MiB region's VmPTE agrees)."""
    from mmsim.native import TASK_SIZE, host_layout

    maps = [
        [0x555555554000, 0x555555556000, "r-xp", "file"],
        [0x7FFFF7FBF000, 0x7FFFF7FC0000, "rw-s", ""],
        [0x7FFFF7FC0000, 0x7FFFF7FC2000, "rw-p", ""],
        [0x7FFFFFF00000, TASK_SIZE, "rw-p", "stack"],
    ]
    ops = host_layout(maps)
    mmaps = [o for o in ops if o["op"] == "mmap"]
    assert mmaps[0] == {
        "op": "mmap",
        "name": "__host0",
        "size": 0x2000,
        "addr": 0x555555554000,
        "fixed": True,
        "flags": ["private", "anonymous", "dontexpand"],
    }, "a file mapping's stand-in never merges with a workload's region"
    assert mmaps[1]["flags"] == ["shared", "anonymous"], "a shared mapping's stand-in is shared"
    assert mmaps[2]["flags"] == ["private", "anonymous"], "an anonymous one is anonymous"
    assert mmaps[3]["size"] == TASK_SIZE - 132 * 1024 - 0x7FFFFFF00000, "mmsim's own stack vma is the top"
    text = [o for o in ops if o.get("region") == "__host0"]
    assert [o["op"] for o in text] == ["write", "mprotect"] and text[-1]["prot"] == "rx", text
    rw = [o for o in ops if o.get("region") == "__host2"]
    assert [o.get("advice") for o in rw] == [None, "nohugepage"], "writable memory is MADV_NOHUGEPAGE"


def test_every_validate_holds_the_host_lock_reentrantly():
    """A --host-set run and a campaign exclude each other (HostSettings takes the same lock as
    a campaign), and the campaign inside HostSettings takes it again without waiting."""
    import fcntl

    from mmsim.native import LOCK, HostSettings, host_lock

    def free() -> bool:
        fd = os.open(LOCK, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    with HostSettings({}):
        assert not free(), "held by HostSettings"
        with host_lock(lambda: pytest.fail("waited for its own lock")):
            assert not free()
        assert not free(), "still held after the inner block"
    assert free(), "released"


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


def test_pt_reclaim_is_mirrored_from_the_host_kernel():
    """mmsim starts with the host's CONFIG_PT_RECLAIM (MADV_DONTNEED freeing emptied PTE
    tables): read from /proc/config.gz, else from the version."""
    import gzip

    from mmsim.native import _host_workload, host_settings

    host = host_settings()
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            want = "1" if "CONFIG_PT_RECLAIM=y\n" in f.read() else "0"
    except OSError:
        want = host["kernel/pt_reclaim"]
    assert host["kernel/pt_reclaim"] == want
    assert _host_workload("x", [], host)["knobs"]["kernel/pt_reclaim"] == want
