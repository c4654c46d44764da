"""`mmsim validate`: the same workloads on this machine's kernel and in mmsim, compared."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import HZP_RSS, run_mmsim

ZERO_PAGE = Path("/sys/kernel/mm/transparent_hugepage/use_zero_page")
NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")
NR_OVERCOMMIT = Path("/proc/sys/vm/nr_overcommit_hugepages")
MAP_HUGETLB = 0x40000  # x86-64's (Python's mmap module does not export it)


def _pool() -> tuple[str, str]:
    return NR_HUGEPAGES.read_text().strip(), NR_OVERCOMMIT.read_text().strip()


def _needs_a_free_pool() -> None:
    """Skip unless this test may size the host's hugetlb pool: root, hugetlb, nobody using it."""
    from mmsim.native_host import hugetlb_meminfo, pool_in_use

    if os.geteuid() != 0 or not NR_HUGEPAGES.exists():
        pytest.skip("needs root and hugetlb to size the pool")
    busy = pool_in_use(hugetlb_meminfo())
    if busy:
        pytest.skip(busy)


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
            # kernel_excess / kernel_deficit: the one-sided allowances (I/O timing of file cases,
            # the runner's own pages a fork copies in a cgroup); kernel_min/max/runs: the spread
            # of a pressure case's native runs.
            assert {"name", "kernel", "simulated", "tolerance"} <= set(x)
            assert set(x) <= {
                "name", "kernel", "simulated", "tolerance", "kernel_excess", "kernel_deficit",
                "kernel_min", "kernel_max", "kernel_runs",
            }  # fmt: skip
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
    e = run_mmsim("validate", "--suite", "--host-set", "vm/dirty_ratio=1")
    assert e.returncode == 2 and "not a knob the runner may set" in e.stderr
    e = run_mmsim("validate")
    assert e.returncode == 2 and "--suite" in e.stderr
    w = write_workload(
        "set.json",
        {"program": [{"op": "set", "knob": "transparent_hugepage/enabled", "value": "never"}]},
    )
    e = run_mmsim("validate", w)
    assert e.returncode == 2 and "cannot run the 'set' op" in e.stderr, e.stderr
    # A malformed op is refused by the engine's checks before anything runs, naming its field
    # (it was a traceback from the runner's compiler).
    w = write_workload("label.json", {"program": [{"op": "snapshot", "name": "a"}]})
    e = run_mmsim("validate", w)
    assert e.returncode == 2 and "program[0].name: unknown field" in e.stderr, e.stderr
    assert "Traceback" not in e.stderr


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
        if c["status"] == "skip" and ("hugetlb pool" in c["reason"] or "debugfs" in c["reason"]):
            # Not root, another process's pool, or a knob in debugfs (madvise-populate's
            # fault_around_bytes) where debugfs is not mounted.
            print(f"skipped {c['name']}: {c['reason']}")
            continue
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
        "flags": ["private", "anonymous", "nomerge"],
    }, "a file mapping's stand-in never merges with a workload's region, and mlockall locks it"
    assert mmaps[1]["flags"] == ["shared", "anonymous"], "a shared mapping's stand-in is shared"
    assert mmaps[2]["flags"] == ["private", "anonymous"], "an anonymous one is anonymous"
    assert mmaps[3]["size"] == TASK_SIZE - 0x7FFFFFF00000, "the whole stack, written: it replaces mmsim's own"
    text = [o for o in ops if o.get("region") == "__host0"]
    # Read: the zero page stands for the page cache's pages, which no mlock of the runner counts.
    assert [o["op"] for o in text] == ["read", "mprotect"] and text[-1]["prot"] == "rx", text
    vdso = host_layout([[0x7FFFF7FC5000, 0x7FFFF7FC7000, "r-xp", "special"]])
    assert vdso[0]["flags"] == ["private", "anonymous", "dontexpand"], "a special mapping is VM_SPECIAL"
    rw = [o for o in ops if o.get("region") == "__host2"]
    assert [o.get("advice") for o in rw] == [None, "nohugepage"], "writable memory is MADV_NOHUGEPAGE"


def test_every_validate_holds_the_host_lock_reentrantly():
    """A --host-set run and a campaign exclude each other (HostSettings takes the same lock as
    a campaign), and the campaign inside HostSettings takes it again without waiting."""
    import fcntl

    from mmsim.native_host import LOCK, host_lock
    from mmsim.native_knobs import HostSettings

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

    from mmsim.native import _host_workload
    from mmsim.native_host import host_settings

    host = host_settings()
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            want = "1" if "CONFIG_PT_RECLAIM=y\n" in f.read() else "0"
    except OSError:
        want = host["kernel/pt_reclaim"]
    assert host["kernel/pt_reclaim"] == want
    assert _host_workload("x", [], host)["knobs"]["kernel/pt_reclaim"] == want


def test_compile_program_maps_hugetlb_and_names_an_unknown_flag():
    from mmsim import MmsimError
    from mmsim.native import compile_program

    prog = [{"op": "mmap", "name": "h", "size": "3M", "align": "1G", "flags": ["shared", "anonymous", "hugetlb"]}]
    assert compile_program(prog) == "mmap h 3145728 1073741824 3 3 0 0\n", (
        "PROT_READ | PROT_WRITE; bit 0 shared, bit 1 MAP_HUGETLB"
    )
    with pytest.raises(MmsimError, match=r"mmap h: flags: 'huge' is not a flag"):
        compile_program([{"op": "mmap", "name": "h", "size": "2M", "flags": ["private", "anonymous", "huge"]}])


def test_compile_program_mlock2_mlockall_and_munlockall():
    from mmsim import MmsimError
    from mmsim.native import compile_program

    prog = [
        {"op": "mmap", "name": "p", "size": "1M"},
        {"op": "mlock", "region": "p", "onfault": True},
        {"op": "mlock", "region": "p", "length": "4K"},
        {"op": "munlock", "region": "p"},
        {"op": "mlockall", "flags": ["onfault", "current", "future"]},
        {"op": "munlockall"},
    ]
    lines = compile_program(prog).splitlines()[1:]
    assert lines == ["mlock p 0 -1 1", "mlock p 0 4096 0", "munlock p 0 -1", "mlockall 7", "munlockall"]
    with pytest.raises(MmsimError, match="mlockall: flags"):
        compile_program([{"op": "mlockall", "flags": ["now"]}])
    with pytest.raises(MmsimError, match="nomerge flag"):
        compile_program([{"op": "mmap", "name": "p", "size": "1M", "flags": ["private", "anonymous", "nomerge"]}])


def test_compile_program_memfd_create_and_fallocate():
    from mmsim import MmsimError
    from mmsim.native import compile_program

    prog = [
        {"op": "memfd_create", "file": "m", "size": "1M"},
        {"op": "memfd_create", "file": "h", "size": "4M", "hugetlb": True},
        {"op": "fallocate", "file": "m", "length": "1M"},
        {"op": "fallocate", "file": "h", "offset": "2M", "length": "2M", "mode": ["punch_hole", "keep_size"]},
        {"op": "mmap", "name": "s", "size": "3M", "flags": ["shared"], "file": "h"},
    ]
    assert compile_program(prog).splitlines() == [
        "memfd_create m 1048576 0",
        "memfd_create h 4194304 1",
        "fallocate m 0 1048576 0",
        "fallocate h 2097152 2097152 3",
        "mmap s 3145728 0 3 7 0 0 h 0",
    ], "FALLOC_FL_PUNCH_HOLE | KEEP_SIZE; a hugetlb memfd's mapping has the MAP_HUGETLB bit (its length rounds)"
    with pytest.raises(MmsimError, match="fallocate of an ext4 file"):
        compile_program([{"op": "create", "file": "e", "size": 4096}, {"op": "fallocate", "file": "e", "length": 1}])


def test_hugetlb_counters_mmsim_does_not_report_count_as_zero():
    """HugetlbPages, HugePages_* and nr_hugetlb are compared; a report without them (mmsim
    before it modelled hugetlb) compares as 0 and nothing breaks. Events are compared per task."""
    from mmsim.native_compare import HUGETLB_COUNTERS, compare_events, compare_snapshots

    def row(label: str, hp: int, free: int) -> dict:
        return {
            "label": label,
            "pid": 1,
            "minflt": 0,
            "HugetlbPages": hp,
            "vmstat": {"nr_hugetlb": hp // 4},
            "meminfo": {"HugePages_Free": free, "HugePages_Rsvd": 0, "HugePages_Surp": 0},
        }

    sim = [{"label": x, "pid": 1, "vmstat": {}, "meminfo": {}, "processes": [{"pid": 1}]} for x in ("a", "b")]
    counters = compare_snapshots([row("a", 0, 4), row("b", 4096, 2)], sim)
    got = {c["name"].split()[-1]: (c["kernel"], c["simulated"]) for c in counters}
    assert got["HugetlbPages"] == (4096, 0)
    assert got["HugePages_Free"] == (-2, 0) and got["nr_hugetlb"] == (1024, 0)
    assert set(HUGETLB_COUNTERS) <= set(got)
    events = compare_events(
        [{"pid": 2, "kind": "segfault", "signal": "SIGBUS", "message": "SIGBUS at 0x7ffff7400000"}],
        [{"pid": 2, "kind": "segfault", "message": "SIGBUS at 0x7ffff7400000"}, {"pid": 1, "kind": "expect"}],
    )
    assert events == [{"name": "pid 2 SIGBUS", "kernel": 1, "simulated": 1, "tolerance": 0}]


def test_the_runner_survives_a_fatal_signal_and_reports_it():
    """A task killed by SIGSEGV says so before it dies, the first process too (the run then ends
    with it), and a failed mmap ends its task with an event, as mmsim reports them."""
    from mmsim.native_report import native_report

    rep = native_report(
        {
            "program": [
                {"op": "mmap", "name": "p", "size": "4K", "prot": "none"},
                {"op": "fork", "program": [{"op": "read", "region": "p"}]},
                {"op": "fork", "program": [{"op": "mmap", "name": "x", "size": "4K", "addr": "0x1001", "fixed": True}]},
                {"op": "wait"},
                {"op": "snapshot", "label": "alive"},
                {"op": "read", "region": "p"},
                {"op": "snapshot", "label": "never"},
            ]
        }
    )
    assert [s["label"] for s in rep["snapshots"]] == ["alive"]
    kinds = [(e["pid"], e["kind"], e["message"].split(" at ")[0]) for e in rep["events"]]
    assert kinds == [
        (2, "segfault", "segfault"),
        (3, "syscall", "mmap x (4096 bytes): EINVAL"),
        (1, "segfault", "segfault"),
    ]


def test_the_runner_maps_hugetlb_from_a_pool_it_sizes_and_restores():
    """MAP_HUGETLB from the pool the workload's knobs ask for, as Linux 6.18 counts it: the
    reservation at mmap (the runner aligns in 2 MiB units: a shared mapping's trimmed padding
    stays reserved with its file, a private one's is released), faults from the pool, the file
    freed with its last mapping, a SIGBUS when a copy-on-write finds no unreserved page; the
    host's pool is restored."""
    from mmsim.native_report import native_report

    _needs_a_free_pool()
    before = _pool()
    rep = native_report(
        {
            "knobs": {"vm/nr_hugepages": 8},
            "program": [
                {"op": "snapshot", "label": "start"},
                {"op": "mmap", "name": "h", "size": "3M", "align": "8M", "flags": ["shared", "anonymous", "hugetlb"]},
                {"op": "snapshot", "label": "mapped"},
                {"op": "write", "region": "h"},
                {"op": "snapshot", "label": "written"},
                {"op": "munmap", "region": "h"},
                {"op": "snapshot", "label": "unmapped"},
                {"op": "mmap", "name": "p", "size": "2M", "align": "4M", "flags": ["private", "anonymous", "hugetlb"]},
                {"op": "snapshot", "label": "private"},
                {"op": "write", "region": "p"},
                {"op": "mmap", "name": "f", "size": "14M", "flags": ["shared", "anonymous", "hugetlb"]},
                {"op": "fork", "program": [{"op": "write", "region": "p", "value": 2}]},
                {"op": "wait"},
                {"op": "snapshot", "label": "end"},
            ],
        }
    )
    assert _pool() == before, "the host's pool is restored"
    s = {x["label"]: x for x in rep["snapshots"]}

    def d(a: str, b: str, key: str) -> int:
        if key == "HugetlbPages":
            return s[b]["processes"][0][key] - s[a]["processes"][0][key]
        where = "vmstat" if key == "nr_hugetlb" else "meminfo"
        return s[b][where][key] - s[a][where][key]

    assert s["start"]["meminfo"]["HugePages_Total"] == 8 and rep["knobs"]["vm/nr_hugepages"] == 8
    assert s["start"]["meminfo"]["Hugetlb"] == 8 * 2048, "Hugetlb: the pool's size in kB"
    assert d("start", "mapped", "HugePages_Rsvd") == 2, "3M in 2 MiB pages; the 8M of padding is PROT_NONE"
    assert d("mapped", "written", "HugePages_Free") == -2 and d("mapped", "written", "HugePages_Rsvd") == -2
    assert d("mapped", "written", "HugetlbPages") == 4096 and d("mapped", "written", "nr_hugetlb") == 1024
    assert d("written", "unmapped", "HugePages_Rsvd") == 0, "every reserved page was faulted in"
    assert d("written", "unmapped", "HugePages_Free") == 2 and d("written", "unmapped", "HugetlbPages") == -4096
    assert d("unmapped", "private", "HugePages_Rsvd") == 1, "a private mapping reserves its own page only"
    assert [(e["pid"], e["message"].split(" at ")[0]) for e in rep["events"]] == [(2, "SIGBUS")], (
        "the child's copy-on-write finds every free page reserved"
    )


def test_validate_sizes_the_pool_for_a_case_and_skips_a_pool_in_use():
    """A workload's vm/nr_hugepages is written for its case and the host's value restored; a pool
    another process holds (here, this one's reservation) skips the case with the reason."""
    import mmap

    from mmsim.native import validate_workload
    from mmsim.native_host import host_settings
    from mmsim.native_knobs import HostSettings

    _needs_a_free_pool()
    before = _pool()
    w = {
        "name": "hugetlb-small",
        "knobs": {"vm/nr_hugepages": 2},
        "program": [
            {"op": "mmap", "name": "h", "size": "4M", "flags": ["shared", "anonymous", "hugetlb"]},
            {"op": "write", "region": "h"},
            {"op": "fork", "program": [{"op": "read", "region": "h", "expect": 1}]},
            {"op": "wait"},
        ],
    }
    r = validate_workload(w, host_settings())
    assert _pool() == before
    assert r["status"] == "pass", r["reason"]
    got = {c["name"]: (c["kernel"], c["simulated"]) for c in r["counters"]}
    assert got["pid 1 __begin->__end HugetlbPages"] == (4096, 4096)
    assert got["__begin->__end HugePages_Free"] == (-2, -2)
    with HostSettings({"vm/nr_hugepages": "1"}):
        held = mmap.mmap(-1, 2 << 20, flags=mmap.MAP_SHARED | MAP_HUGETLB)
        try:
            r = validate_workload(w, host_settings())
        finally:
            held.close()
    assert _pool() == before, "restored after the --host-set too"
    assert r["status"] == "skip" and "in use by another process" in r["reason"], r


def _reruns(monkeypatch, sim: dict, validate: Callable[[], dict]) -> Callable[[list[list[dict]]], tuple[dict, int]]:
    """``verdict(runs)``: ``validate()`` with the kernel's side faked, each run the snapshot
    lines of the next of `runs` and mmsim's report `sim`; the result and how many runs it took."""
    from mmsim import native

    def verdict(runs: list[list[dict]]) -> tuple[dict, int]:
        calls = iter(runs)
        seen = []

        def run_both(name, program, h):
            seen.append(1)
            return next(calls), [], sim

        monkeypatch.setattr(native, "run_both", run_both)
        return validate(), len(seen)

    return verdict


def test_system_wide_noise_is_run_again_not_tolerated(monkeypatch):
    """A workload that differs only in a system-wide counter (another process on the host
    mlocked a page) is run again and passes when a run agrees exactly; one whose difference
    stays, or reaches a task's own counters, fails: nothing is widened."""
    from mmsim import native

    def rows(mlocked: int, minflt: int) -> list[dict]:
        return [
            {"label": "__begin", "pid": 1, "minflt": 0, "vmstat": {"unevictable_pgs_mlocked": 0}},
            {"label": "__end", "pid": 1, "minflt": minflt, "vmstat": {"unevictable_pgs_mlocked": mlocked}},
        ]

    sim = {
        "snapshots": [
            {"label": lbl, "pid": 1, "processes": [{"pid": 1, "minflt": 0}], "vmstat": {}}
            for lbl in ("__begin", "__end")
        ]
    }
    host = {"transparent_hugepage/enabled": "never"}
    w = {"name": "noise", "program": [{"op": "mmap", "name": "p", "size": "4K"}]}
    verdict = _reruns(monkeypatch, sim, lambda: native.validate_workload(w, host))
    r, n = verdict([rows(1, 0), rows(0, 0)])
    assert (r["status"], n) == ("pass", 2) and "another process" in r["reason"]
    r, n = verdict([rows(1, 0)] * 3)
    assert (r["status"], n) == ("fail", 3) and "unevictable_pgs_mlocked: kernel 1, mmsim 0" in r["reason"]
    r, n = verdict([rows(1, 1), rows(0, 0)])
    assert (r["status"], n) == ("fail", 1)


def test_a_suite_case_whose_kernel_counts_vary_runs_again(monkeypatch):
    """A failing suite case runs again (mmsim is deterministic: the kernel's counts are what
    may vary, a system-wide `vmstat` counter moved by another process's disk reads, or a
    process's own faults through a rare kernel race) and passes if a run agrees exactly, naming
    the earlier difference; a difference that stays fails after SYSTEM_RERUNS more runs."""
    from mmsim import native

    def rows(pgpgin: int, minflt: int) -> list[dict]:
        return [
            {"label": "before", "pid": 1, "minflt": 0, "vmstat": {"pgpgin": 0}},
            {"label": "after", "pid": 1, "minflt": minflt, "vmstat": {"pgpgin": pgpgin}},
        ]

    sim = {
        "snapshots": [
            {"label": lbl, "pid": 1, "processes": [{"pid": 1, "minflt": 0}], "vmstat": {"pgpgin": 0}}
            for lbl in ("before", "after")
        ]
    }
    case = native.Case(
        "noise", "pins", [{"op": "mmap", "name": "p", "size": "4K"}], counters=("minflt",), vmstat=("pgpgin",)
    )
    host = {"transparent_hugepage/enabled": "never"}
    verdict = _reruns(monkeypatch, sim, lambda: native.validate_case(case, host))
    r, n = verdict([rows(32, 0), rows(0, 0)])
    assert (r["status"], n) == ("pass", 2) and "another process" in r["reason"]
    r, n = verdict([rows(32, 0)] * 3)
    assert (r["status"], n) == ("fail", 3) and "pgpgin: kernel 32, mmsim 0" in r["reason"]
    r, n = verdict([rows(0, 1), rows(0, 1), rows(0, 0)])
    assert (r["status"], n) == ("pass", 3) and "minflt: kernel 1, mmsim 0" in r["reason"]
    r, n = verdict([rows(0, 1)] * 3)
    assert (r["status"], n) == ("fail", 3) and "minflt: kernel 1, mmsim 0" in r["reason"]
    assert n == 1 + native.SYSTEM_RERUNS
