"""`mmsim validate` under memory pressure (issue 57): where the host's memory controller is, the
cgroup v1/v2 file mapping, what v1 cannot express, swap devices, the runner's line format of
cgroups and their ops, the comparison of cgroup files and the spread of several native runs;
and, on a host that has them (root, a memory controller, no swap on), the runner itself with a
cgroup and a small swap file, and the host as it was afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mmsim.native_compare import compare_cgroups, compare_snapshots, compare_swaps, differs, format_counter, merge_runs
from mmsim.native_memcg import (
    NEEDS_V2,
    CgroupRun,
    MemcgHost,
    _swap_without_limit,
    cgroup_order,
    memcg_host,
    memcg_unsupported,
    uses_memcg,
    uses_pressure,
    v1_limit_writes,
    v2_limit_writes,
)
from mmsim.native_swap import auto_priorities, parse_proc_swaps, swap_unsupported
from mmsim.runner_program import ADVICE_VALUE, SCHEMA, compile_program, compile_workload

V1_MOUNTS = """sysfs /sys sysfs rw 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
V1_SELF = "8:pids:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
V1 = MemcgHost("v1", Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/memory/process_api/abc"))
V2 = MemcgHost("v2", Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/user.slice"))

ANON = [{"op": "mmap", "name": "p", "size": "4M"}, {"op": "write", "region": "p"}]


# -- where the memory controller is ------------------------------------------------------------


def test_the_memory_controller_on_v1_is_found_with_this_process_cgroup():
    assert memcg_host(V1_MOUNTS, V1_SELF) == V1


def test_the_memory_controller_on_v2_is_found_from_cgroup_controllers(tmp_path: Path):
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    mounts = f"cgroup2 {tmp_path} cgroup2 rw,nosuid 0 0\n"
    assert memcg_host(mounts, "0::/user.slice/x\n") == MemcgHost("v2", tmp_path, tmp_path / "user.slice" / "x")
    # A cgroup2 mount without the memory controller (this machine's /sys/fs/cgroup/unified).
    (tmp_path / "cgroup.controllers").write_text("cpu pids\n")
    assert memcg_host(mounts, "0::/\n") == MemcgHost(None)


def test_the_host_record_round_trips_through_json():
    assert MemcgHost.from_dict(json.loads(json.dumps(V1.as_dict()))) == V1


# -- the v1 and v2 files of a cgroup's limits ---------------------------------------------------


def test_v1_memsw_is_memory_plus_swap_written_in_an_order_the_kernel_takes():
    # A new cgroup (both unlimited): memsw shrinks, so the limit first.
    assert v1_limit_writes({"memory.max": "128M", "memory.swap.max": 0}) == [
        ("memory.limit_in_bytes", str(128 << 20)),
        ("memory.memsw.limit_in_bytes", str(128 << 20)),
    ]
    # No swap limit: memsw stays unlimited (nothing to write for it).
    assert v1_limit_writes({"memory.max": "64M"}) == [("memory.limit_in_bytes", str(64 << 20))]
    # Raised from 64M + 0: memsw grows, so it goes first (memsw >= limit at every step).
    assert v1_limit_writes({"memory.max": "128M", "memory.swap.max": "32M"}, 64 << 20, 64 << 20) == [
        ("memory.memsw.limit_in_bytes", str(160 << 20)),
        ("memory.limit_in_bytes", str(128 << 20)),
    ]
    # Lowered: the limit first, then memsw.
    assert v1_limit_writes({"memory.max": "32M", "memory.swap.max": 0}, 64 << 20, 64 << 20) == [
        ("memory.limit_in_bytes", str(32 << 20)),
        ("memory.memsw.limit_in_bytes", str(32 << 20)),
    ]
    # Back to max: memsw (unlimited) first, then the limit, as -1.
    assert v1_limit_writes({}, 64 << 20, 64 << 20) == [
        ("memory.memsw.limit_in_bytes", "-1"),
        ("memory.limit_in_bytes", "-1"),
    ]


def test_v2_writes_the_files_a_declaration_sets_as_the_files_take_them():
    spec = {"memory.max": "max", "memory.high": "64M", "memory.swap.max": 0, "memory.oom.group": True}
    assert v2_limit_writes(spec) == [
        ("memory.high", str(64 << 20)),
        ("memory.swap.max", "0"),
        ("memory.oom.group", "1"),
    ]


def test_parents_are_made_before_their_children():
    assert cgroup_order({"b/c/d": {}, "b": {}, "a": {}, "b/c": {}}) == ["a", "b", "b/c", "b/c/d"]


def test_a_run_makes_its_cgroups_with_their_limits_and_removes_them_v1(tmp_path: Path):
    root, home = tmp_path / "memory", tmp_path / "memory" / "home"
    home.mkdir(parents=True)
    host = MemcgHost("v1", root, home)
    cgroups = {"box": {"memory.max": "128M", "memory.swap.max": "64M"}, "box/a": {"memory.max": "32M"}}
    with CgroupRun(cgroups, host) as run:
        assert run.parent.parent == root and run.parent.name.startswith(f"mmsim-{os.getpid()}-")
        assert run.runner_args() == [f"memcg=v1:{run.parent}", f"memcg-home={home}"]
        box = run.parent / "box"
        assert (box / "memory.limit_in_bytes").read_text() == str(128 << 20)
        assert (box / "memory.memsw.limit_in_bytes").read_text() == str(192 << 20)
        assert (box / "a" / "memory.limit_in_bytes").read_text() == str(32 << 20)
        assert not (box / "a" / "memory.memsw.limit_in_bytes").exists()
        # cgroupfs removes a cgroup's files with it; a plain directory needs them gone first.
        for f in run.parent.rglob("memory.*"):
            f.unlink()
    assert not run.parent.exists(), "removed"


def test_a_run_makes_its_cgroups_with_their_limits_and_removes_them_v2(tmp_path: Path):
    root, home = tmp_path / "unified", tmp_path / "unified" / "session"
    home.mkdir(parents=True)
    host = MemcgHost("v2", root, home)
    cgroups = {"box": {"memory.max": "128M", "memory.high": "96M", "memory.oom.group": True}, "box/a": {}}
    with CgroupRun(cgroups, host) as run:
        assert run.runner_args() == [f"memcg=v2:{run.parent}", f"memcg-home={home}"]
        box = run.parent / "box"
        # The memory controller is enabled for the children of the run's directory and of box.
        assert (run.parent / "cgroup.subtree_control").read_text() == "+memory"
        assert (box / "cgroup.subtree_control").read_text() == "+memory"
        assert (box / "memory.max").read_text() == str(128 << 20)
        assert (box / "memory.high").read_text() == str(96 << 20)
        assert (box / "memory.oom.group").read_text() == "1"
        for f in [*run.parent.rglob("memory.*"), *run.parent.rglob("cgroup.*")]:
            f.unlink()
    assert not run.parent.exists()


def test_a_failed_setup_removes_what_it_made(tmp_path: Path):
    root = tmp_path / "memory"
    root.mkdir()
    host = MemcgHost("v1", root, root)
    run = CgroupRun({"box": {"memory.max": "lots"}}, host)
    with pytest.raises(Exception, match="lots"):
        run.__enter__()
    assert not run.parent.exists()


# -- what a host cannot check ---------------------------------------------------------------------


def _w(program: list[dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    return {"name": "w", **top, "program": program or ANON}


@pytest.mark.parametrize(
    ("workload", "feature"),
    [
        (_w(cgroups={"box": {"memory.high": "64M"}}, cgroup="box"), "memory.high of box"),
        (_w(cgroups={"box": {"memory.low": "1M"}}), "memory.low of box"),
        (_w(cgroups={"box": {"memory.min": "1M"}}), "memory.min of box"),
        (_w(cgroups={"box": {"memory.swap.high": "1M"}}), "memory.swap.high of box"),
        (_w(cgroups={"box": {"memory.oom.group": True}}), "memory.oom.group of box"),
        (_w(cgroups={"box": {"memory.swap.max": "1M"}}), "memory.swap.max of box without memory.max"),
        (
            _w([{"op": "memory_reclaim", "cgroup": "box", "bytes": "1M"}], cgroups={"box": {}}),
            "memory_reclaim: memory.reclaim",
        ),
        (
            _w([{"op": "cgroup_write", "cgroup": "box", "file": "memory.peak", "value": 0}], cgroups={"box": {}}),
            "a cgroup_write of memory.peak to box",
        ),
        (
            _w(
                [{"op": "cgroup_write", "cgroup": "box", "file": "memory.max", "value": "max"}],
                cgroups={"box": {"memory.max": "64M", "memory.swap.max": 0}},
            ),
            "memory.swap.max of box without memory.max (after a cgroup_write of memory.max)",
        ),
    ],
)
def test_what_cgroup_v1_cannot_express_is_not_checkable_naming_it(workload, feature):
    why = memcg_unsupported(workload, V1)
    assert why == f"{NEEDS_V2} ({feature}: v1 limits memory+swap, memsw)" or why == f"{NEEDS_V2} ({feature})"
    # The same workload is checkable where the controller is on v2 (memory_reclaim of a cgroup).
    assert memcg_unsupported(workload, V2) == ""


def test_what_cgroup_v1_expresses_is_checkable(tmp_path: Path):
    (tmp_path / "memory.memsw.limit_in_bytes").write_text("0")
    host = MemcgHost("v1", tmp_path, tmp_path)
    w = _w(
        [
            {"op": "fork", "cgroup": "box", "program": ANON},
            {"op": "cgroup_write", "cgroup": "box", "file": "memory.max", "value": "32M"},
            {"op": "cgroup_write", "cgroup": "box", "file": "memory.swap.max", "value": "max"},
        ],
        cgroups={"box": {"memory.max": "64M", "memory.swap.max": 0, "memory.high": "max", "memory.low": 0}},
    )
    assert memcg_unsupported(w, host) == ""
    # Without swap accounting (no memsw files) a swap limit cannot be set.
    (tmp_path / "memory.memsw.limit_in_bytes").unlink()
    assert "does not account swap" in memcg_unsupported(w, host)


def test_the_hierarchy_a_workload_names_must_be_the_hosts():
    w = _w(cgroups={"box": {}}, cgroup="box")
    assert memcg_unsupported(w, V1, knob="v2") == f"{NEEDS_V2} (cgroup/memory=v2)"
    assert "cgroup v1" in memcg_unsupported(w, V2, knob="v1")
    assert memcg_unsupported(w, V1, knob="v1") == ""
    assert memcg_unsupported(w, MemcgHost(None)) == "not checkable on this host: it has no memory cgroup controller"
    assert memcg_unsupported(_w(), MemcgHost(None)) == "", "no cgroups, nothing to check"


def test_proactive_reclaim_of_the_root_cgroup_is_the_whole_hosts():
    w = _w([{"op": "memory_reclaim", "bytes": "1M"}], cgroups={"box": {}})
    assert "whole host" in memcg_unsupported(w, V2)
    assert memcg_unsupported({**w, "cgroup": "box"}, V2) == "", "the process's own cgroup"


def test_cgroup_v2_has_no_process_in_a_cgroup_with_children():
    w = _w(cgroups={"box": {}, "box/a": {}}, cgroup="box")
    assert "no internal processes" in memcg_unsupported(w, V2)
    assert memcg_unsupported({**w, "cgroup": "box/a"}, V2) == ""
    assert memcg_unsupported(w, V1) == "", "v1 has no such rule"


def test_pressure_is_swap_cgroups_or_reclaiming_advice():
    assert not uses_pressure(_w())
    assert uses_pressure(_w(machine={"swap": [{"size": "64M"}]}))
    assert uses_pressure(_w(cgroups={"box": {}}))
    assert uses_memcg(_w([{"op": "fork", "cgroup": "box", "program": []}]))
    assert uses_pressure(_w([*ANON, {"op": "madvise", "region": "p", "advice": "pageout"}]))
    assert uses_pressure(
        _w([*ANON, {"op": "loop", "count": 2, "body": [{"op": "madvise", "region": "p", "advice": "cold"}]}])
    )


# -- swap devices ----------------------------------------------------------------------------


def test_proc_swaps_rows_and_automatic_priorities():
    text = (
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/target/mmsim-swap-1-0-0                  file\t\t1048572\t\t0\t\t-2\n"
        "/dev/loop3                              partition\t262140\t\t128\t\t5\n"
    )
    assert parse_proc_swaps(text) == [
        {"Filename": "/target/mmsim-swap-1-0-0", "Type": "file", "Size": 1048572, "Used": 0, "Priority": -2},
        {"Filename": "/dev/loop3", "Type": "partition", "Size": 262140, "Used": 128, "Priority": 5},
    ]
    assert auto_priorities([{"priority": None}, {"priority": -3}, {"priority": 0}, {"priority": None}]) == [
        -2,
        -3,
        0,
        -4,
    ]


def test_swap_the_workload_does_not_declare_makes_it_not_checkable():
    other = [{"Filename": "/swapfile", "Type": "file", "Size": 1, "Used": 0, "Priority": -2}]
    w = _w(cgroups={"box": {}})
    assert "/swapfile" in swap_unsupported(w, pressure=True, active=other)
    assert swap_unsupported(w, pressure=True, active=[], euid=0) == "", "cgroups without swap need no root"
    assert swap_unsupported(_w(), pressure=False, active=other) == "", "a workload without pressure"
    sw = _w(machine={"swap": [{"size": "64M"}]})
    assert "needs root" in swap_unsupported(sw, pressure=True, active=[], euid=1000)
    bad = _w(machine={"swap": [{"size": "64M", "priority": -5}]})
    assert "priority -5" in swap_unsupported(bad, pressure=True, active=[], euid=0)


# -- the runner's line format -----------------------------------------------------------------------


def test_reclaiming_advice_reaches_the_runner_as_linuxs_numbers():
    assert ADVICE_VALUE["cold"] == 20 and ADVICE_VALUE["pageout"] == 21
    declared = {a["word"]: a["value"] for a in SCHEMA["advice"]}
    for word in ("cold", "pageout"):
        assert declared.get(word, ADVICE_VALUE[word]) == ADVICE_VALUE[word], "the engine's number is Linux's"
    prog = compile_program([*ANON, {"op": "madvise", "region": "p", "advice": "pageout"}])
    assert prog.splitlines()[-1] == "madvise p 0 -1 pageout 21"


def test_cgroups_and_their_ops_compile_to_the_runner_format():
    w = {
        "cgroups": {"box/a": {}, "box": {"memory.max": "128M"}},
        "cgroup": "box",
        "program": [
            {"op": "fork", "cgroup": "box/a", "count": 2, "program": [{"op": "memory_reclaim", "bytes": "1M"}]},
            {"op": "memory_reclaim", "cgroup": "box", "bytes": "64M", "swappiness": 60},
            {"op": "cgroup_write", "cgroup": "box", "file": "memory.max", "value": "max"},
            {"op": "cgroup_write", "cgroup": "box", "file": "memory.swap.max", "value": "32M"},
            {"op": "cgroup_write", "cgroup": "box", "file": "memory.oom.group", "value": True},
            {"op": "cgroup_write", "cgroup": "box", "file": "memory.peak", "value": "reset"},
            {"op": "cgroup_write", "cgroup": "box", "file": "memory.reclaim", "value": "2M swappiness=max"},
        ],
    }
    assert compile_workload(w).splitlines() == [
        "cgroup box",
        "cgroup box/a",
        "join box",
        "fork 2 box/a",
        "memory_reclaim - 1048576 -1",
        "end",
        f"memory_reclaim box {64 << 20} 60",
        "cgroup_write box memory.max -1",
        f"cgroup_write box memory.swap.max {32 << 20}",
        "cgroup_write box memory.oom.group 1",
        "cgroup_write box memory.peak 0",
        f"memory_reclaim box {2 << 20} 201",
    ]


@pytest.mark.parametrize(
    ("workload", "error"),
    [
        ({"cgroup": "nope", "program": []}, "not one of the workload's cgroups"),
        ({"cgroups": {"a": {}}, "program": [{"op": "fork", "cgroup": "b", "program": []}]}, "'b'"),
        (
            {"cgroups": {"a": {}}, "program": [{"op": "cgroup_write", "cgroup": "a", "file": "memory.x", "value": 1}]},
            "not one of memory.max",
        ),
        (
            {
                "cgroups": {"a": {}},
                "program": [{"op": "cgroup_write", "cgroup": "a", "file": "memory.max", "value": "x"}],
            },
            'expected "max" or a size',
        ),
        (
            {"cgroups": {"a": {}}, "program": [{"op": "memory_reclaim", "cgroup": "a", "bytes": 1, "swappiness": 300}]},
            "expected 0..200",
        ),
    ],
)
def test_the_runner_format_refuses_what_it_cannot_run(workload, error):
    from mmsim._mmsim import MmsimError

    with pytest.raises(MmsimError, match=error):
        compile_workload(workload)


# -- comparing cgroup files, and the spread of several runs ---------------------------------------------


def _v1(usage: int, rss: int, pgpgin: int, failcnt: int, oom_kill: int = 0) -> dict[str, Any]:
    return {
        "memory.usage_in_bytes": usage,
        "memory.failcnt": failcnt,
        "memory.kmem.usage_in_bytes": 4096,
        "memory.stat": {"rss": rss, "pgpgin": pgpgin, "total_pgpgin": pgpgin, "hierarchical_memory_limit": 1 << 27},
        "memory.oom_control": {"oom_kill_disable": 0, "under_oom": 0, "oom_kill": oom_kill},
    }


def test_cgroup_sizes_are_compared_as_values_and_events_as_changes():
    n0 = {"cgroups": {"box": _v1(0, 0, 10, 2)}}
    n1 = {"cgroups": {"box": _v1(1 << 20, 1 << 19, 266, 5, 1)}}
    s0 = {"cgroups": {"box": _v1(0, 0, 0, 0)}}
    s1 = {"cgroups": {"box": _v1(1 << 20, 1 << 19, 256, 3, 1)}}
    got = {c["name"]: (c["kernel"], c["simulated"]) for c in compare_cgroups(n0, n1, s0, s1, "a->b")}
    assert got == {
        "a->b cgroup box memory.usage_in_bytes": (1 << 20, 1 << 20),
        "a->b cgroup box memory.failcnt": (3, 3),
        "a->b cgroup box memory.stat rss": (1 << 19, 1 << 19),
        "a->b cgroup box memory.stat pgpgin": (256, 256),
        "a->b cgroup box memory.stat total_pgpgin": (256, 256),
        "a->b cgroup box memory.stat hierarchical_memory_limit": (1 << 27, 1 << 27),
        "a->b cgroup box memory.oom_control oom_kill_disable": (0, 0),
        "a->b cgroup box memory.oom_control under_oom": (0, 0),
        "a->b cgroup box memory.oom_control oom_kill": (1, 1),
    }, "kmem is the runner's report only; a cgroup mmsim lacks counts as 0"
    # The first snapshot: its values only.
    first = compare_cgroups(None, n0, None, s0, "__begin")
    assert {c["name"] for c in first} == {
        "__begin cgroup box memory.usage_in_bytes",
        "__begin cgroup box memory.stat rss",
        "__begin cgroup box memory.stat hierarchical_memory_limit",
        "__begin cgroup box memory.oom_control oom_kill_disable",
        "__begin cgroup box memory.oom_control under_oom",
    }


def test_v2_memory_stat_events_are_its_non_size_keys():
    v2 = {"memory.current": 8192, "memory.stat": {"anon": 4096, "pgscan_direct": 5, "workingset_refault_anon": 1}}
    n0, n1 = {"cgroups": {"b": v2}}, {"cgroups": {"b": {**v2, "memory.events": {"max": 3, "oom": 0}}}}
    n1["cgroups"]["b"]["memory.stat"] = {"anon": 4096, "pgscan_direct": 9, "workingset_refault_anon": 4}
    got = {c["name"]: c["kernel"] for c in compare_cgroups(n0, n1, {}, {}, "s")}
    assert got == {
        "s cgroup b memory.current": 8192,
        "s cgroup b memory.stat anon": 4096,
        "s cgroup b memory.stat pgscan_direct": 4,
        "s cgroup b memory.stat workingset_refault_anon": 3,
        "s cgroup b memory.events max": 3,
        "s cgroup b memory.events oom": 0,
    }


def _snap(label: str, pid: int, vm: dict[str, int], cg: dict[str, Any], **proc: int) -> dict[str, Any]:
    row = {"label": label, "pid": pid, "vmstat": vm, "meminfo": {}, "cgroups": cg, **proc}
    return {**row, "processes": [{"pid": pid, **proc}]}


def test_a_workload_under_pressure_compares_reclaim_cgroups_and_swaps():
    cg0, cg1 = {"box": {"memory.usage_in_bytes": 0}}, {"box": {"memory.usage_in_bytes": 1 << 20}}
    rows = [
        {"Filename": "/t/mmsim-swap-1-0-0", "Type": "file", "Size": 1048572, "Used": 0, "Priority": -2},
    ]
    native = [
        {**_snap("__begin", 1, {"pswpout": 10}, cg0, VmSwap=0), "swaps": rows},
        {**_snap("__end", 1, {"pswpout": 16394}, cg1, VmSwap=65536), "swaps": [{**rows[0], "Used": 65536}]},
    ]
    sim = [_snap("__begin", 1, {"pswpout": 0}, cg0, VmSwap=0), _snap("__end", 1, {"pswpout": 16384}, cg1, VmSwap=65536)]
    plain = compare_snapshots(native, sim)
    assert "__begin->__end pswpout" not in {c["name"] for c in plain}
    got = {c["name"]: (c["kernel"], c["simulated"]) for c in compare_snapshots(native, sim, pressure=True, swaps=rows)}
    assert got["__begin->__end pswpout"] == (16384, 16384)
    assert got["pid 1 __begin->__end VmSwap"] == (65536, 65536)
    assert got["__begin cgroup box memory.usage_in_bytes"] == (0, 0)
    assert got["__begin->__end cgroup box memory.usage_in_bytes"] == (1 << 20, 1 << 20)
    # mmsim's report's rows (no Used: the end's), matched by position.
    assert got["__end swap 0 Size"] == (1048572, 1048572) and got["__end swap 0 Priority"] == (-2, -2)
    assert got["__end swap 0 Type file"] == (1, 1) and "__end swap 0 Used" not in got
    assert {c["name"]: c["simulated"] for c in compare_swaps(rows, [{**rows[0], "Type": "partition", "Used": 3}])} == {
        "swap 0 Size": 1048572,
        "swap 0 Used": 3,
        "swap 0 Priority": -2,
        "swap 0 Type file": 0,
    }


def _c(kernel: int, simulated: int, tolerance: int = 0, name: str = "pswpout") -> dict[str, Any]:
    return {"name": name, "kernel": kernel, "simulated": simulated, "tolerance": tolerance}


def test_mmsim_passes_inside_the_hosts_spread_widened_by_the_tolerance():
    runs = [[_c(16724, 16750)], [_c(16802, 16750)], [_c(16760, 16750)]]
    (c,) = merge_runs(runs)
    assert (c["kernel_min"], c["kernel_max"], c["kernel"], c["kernel_runs"]) == (
        16724,
        16802,
        16760,
        [16724, 16802, 16760],
    )
    assert not differs(c)
    assert differs({**c, "simulated": 16700}) and differs({**c, "simulated": 16803})
    assert not differs({**c, "simulated": 16700, "tolerance": 24}) and differs(
        {**c, "simulated": 16699, "tolerance": 24}
    )
    assert format_counter(c).endswith("(host 16,724..16,802, 3 runs)")


def test_a_counter_the_runs_agree_on_stays_exact():
    (c,) = merge_runs([[_c(16384, 16384)]] * 5)
    assert (c["kernel_min"], c["kernel_max"]) == (16384, 16384) and not differs(c)
    (c,) = merge_runs([[_c(16384, 16383)]] * 5)
    assert differs(c), "no spread: exact"


def test_a_counter_a_run_lacks_counts_as_zero_there():
    runs = [[_c(1, 1, name="pid 2 killed")], [], [_c(1, 1, name="pid 2 killed")]]
    (c,) = merge_runs(runs)
    assert c["kernel_runs"] == [1, 0, 1] and c["kernel_min"] == 0 and not differs(c)


def test_the_io_timing_allowance_widens_the_spread_on_its_side_only():
    c = {**_c(440, 435, name="minflt"), "kernel_excess": 16}
    (m,) = merge_runs([[c], [{**c, "kernel": 451}]])
    assert not differs(m), "mmsim 435 within 440 - 16 .. 451"
    assert differs({**m, "simulated": 452}), "above the kernel: no allowance there"


# -- knobs --------------------------------------------------------------------------------------------


def test_reclaim_and_swap_knobs_are_the_hosts_files():
    from mmsim.native_host import swap_knob_value
    from mmsim.native_knobs import host_knob_file

    assert host_knob_file("vm/swappiness") == Path("/proc/sys/vm/swappiness")
    assert host_knob_file("vm/page-cluster") == Path("/proc/sys/vm/page-cluster")
    assert host_knob_file("vm/min_free_kbytes") == Path("/proc/sys/vm/min_free_kbytes")
    assert host_knob_file("vm/watermark_scale_factor") == Path("/proc/sys/vm/watermark_scale_factor")
    f = host_knob_file("swap/vma_ra_enabled")
    assert f == Path("/sys/kernel/mm/swap/vma_ra_enabled") or "no /sys/kernel/mm/swap" in str(f)
    assert swap_knob_value("swap/vma_ra_enabled", "true\n") == "1"
    assert swap_knob_value("swap/vma_ra_enabled", "false\n") == "0"
    assert "build or boot" in str(host_knob_file("cgroup/memory"))


def test_a_workload_under_pressure_gives_mmsim_the_hosts_hierarchy_and_swap_knobs():
    from mmsim.native_host import host_knobs

    host = {
        "transparent_hugepage/enabled": "madvise",
        "cgroup/memory": "v1",
        "vm/swappiness": "60",
        "vm/page-cluster": "3",
        "swap/vma_ra_enabled": "1",
        "vm/min_free_kbytes": "67584",
    }
    plain = host_knobs([], host)
    assert "cgroup/memory" not in plain and "vm/swappiness" not in plain, "existing workloads unchanged"
    knobs = host_knobs([], host, pressure=True)
    assert {k: knobs[k] for k in ("cgroup/memory", "vm/swappiness", "vm/page-cluster", "swap/vma_ra_enabled")} == {
        "cgroup/memory": "v1",
        "vm/swappiness": "60",
        "vm/page-cluster": "3",
        "swap/vma_ra_enabled": "1",
    }
    assert "vm/min_free_kbytes" not in knobs, "the host's watermarks are for its memory, not mmsim's machine's"


def test_a_workload_under_pressure_runs_on_the_hosts_cpus_pinned_as_the_runner_is():
    """The kernel's memcg statistics flush waits for MEMCG_CHARGE_BATCH updates a CPU online:
    mmsim gets the host's CPUs, the first process pinned to one (its children inherit it, as
    the runner's do); a declared machine keeps its own count; a workload without pressure is
    unchanged."""
    import os

    from mmsim.native import _host_workload

    host = {"transparent_hugepage/enabled": "madvise", "cgroup/memory": "v1"}
    prog = [{"op": "mmap", "name": "p", "size": "4M"}]
    w = _host_workload("w", prog, host, {"cgroups": {"box": {}}, "machine": {"swap": [{"size": "64M"}]}})
    assert w["machine"] == {"swap": [{"size": "64M"}], "cpus": os.cpu_count()} and w["cpu"] == 0
    w = _host_workload("w", prog, host, {"cgroups": {"box": {}}, "machine": {"cpus": 3}})
    assert w["machine"]["cpus"] == 3
    w = _host_workload("w", prog, host, {})
    assert "machine" not in w and "cpu" not in w


# -- the runner on this host ------------------------------------------------------------------------------


def _needs_root_memcg_and_no_swap() -> MemcgHost:
    host = memcg_host()
    if os.geteuid() != 0:
        pytest.skip("needs root (cgroups, swapon)")
    if host.version is None:
        pytest.skip("the host has no memory cgroup controller")
    if parse_proc_swaps(Path("/proc/swaps").read_text()):
        pytest.skip("the host has swap on: the test's swap file would not be the only one")
    if any(shutil.which(t) is None for t in ("mkswap", "swapon", "swapoff")):
        pytest.skip("needs util-linux's mkswap, swapon and swapoff")
    return host


def _host_clean(host: MemcgHost) -> None:
    assert subprocess.run(["swapon", "--show"], capture_output=True, text=True).stdout == "", "swap is off again"
    assert not list(host.root.glob(f"mmsim-{os.getpid()}-*")), "no cgroup of the run is left"
    from mmsim.native_swap import swap_dir

    d = swap_dir()
    assert d is None or not list(d.glob(f"mmsim-swap-{os.getpid()}-*")), "no swap file is left"


def test_the_runner_reports_a_cgroup_and_swap_and_the_host_is_restored():
    """A 64 MiB cgroup (v1: limit and memsw; v2: memory.max and memory.swap.max) with a 128 MiB
    swap file: 32 MiB written, MADV_PAGEOUT (every page written to swap: pswpout, VmSwap), read
    back; a cgroup_write of the limits; a child in a second cgroup that may not swap is
    OOM-killed. Then no swap is on and no cgroup is left."""
    from mmsim.native import run_native

    host = _needs_root_memcg_and_no_swap()
    w = {
        "name": "memcg-e2e",
        "cgroups": {"box": {"memory.max": "64M"}, "box/tight": {"memory.max": "16M", "memory.swap.max": 0}},
        "cgroup": "box",
        "machine": {"swap": [{"size": "128M"}]},
        "program": [
            {"op": "snapshot", "label": "start"},
            {"op": "mmap", "name": "p", "size": "32M", "align": "2M"},
            {"op": "madvise", "region": "p", "advice": "nohugepage"},
            {"op": "write", "region": "p", "value": 7},
            {"op": "snapshot", "label": "written"},
            {"op": "madvise", "region": "p", "advice": "pageout"},
            {"op": "snapshot", "label": "paged"},
            {"op": "read", "region": "p", "expect": 7},
            {"op": "cgroup_write", "cgroup": "box", "file": "memory.max", "value": "48M"},
            {"op": "cgroup_write", "cgroup": "box", "file": "memory.swap.max", "value": "16M"},
            {"op": "snapshot", "label": "read"},
            {
                "op": "fork",
                "cgroup": "box/tight",
                "program": [
                    {"op": "mmap", "name": "q", "size": "32M"},
                    {"op": "madvise", "region": "q", "advice": "nohugepage"},
                    {"op": "write", "region": "q"},
                ],
            },
            {"op": "wait"},
            {"op": "snapshot", "label": "killed"},
        ],
    }
    try:
        rows = run_native(w)
    finally:
        _host_clean(host)
    snaps = {r["label"]: r for r in rows if r["pid"] == 1 and r["label"] not in ("__maps", "__event")}
    events = [r for r in rows if r["label"] == "__event"]
    start, written, paged, read, killed = (snaps[x] for x in ("start", "written", "paged", "read", "killed"))
    box = {k: s["cgroups"]["box"] for k, s in snaps.items()}
    v1 = host.version == "v1"
    usage = "memory.usage_in_bytes" if v1 else "memory.current"
    rss = "rss" if v1 else "anon"
    # The runner's own memory is charged to its own cgroup: box starts without user memory.
    # (Making box/tight charged box for the child's per-CPU statistics, kernel memory:
    # mem_cgroup_css_alloc allocates them as the parent; the charge took a stock of 64 pages.)
    assert box["start"]["memory.stat"][rss] == 0 and box["start"][usage] <= 64 * 4096
    assert box["written"][usage] >= 32 << 20
    assert {"memory.stat", "memory.failcnt" if v1 else "memory.events"} <= set(box["written"])
    for key in ("rss", "swap", "swapcached", "pgpgin", "inactive_anon", "hierarchical_memory_limit", "total_rss"):
        assert key in box["written"]["memory.stat"] or not v1, key
    # MADV_PAGEOUT wrote every page to swap, and left it in the swap cache.
    assert paged["vmstat"]["pswpout"] - written["vmstat"]["pswpout"] == 8192
    assert paged["VmSwap"] - written["VmSwap"] == 32768
    assert paged["meminfo"]["SwapCached"] - written["meminfo"]["SwapCached"] == 32768
    assert read["VmSwap"] == start["VmSwap"] == 0
    (dev,) = paged["swaps"]
    assert (dev["Type"], dev["Size"], dev["Used"], dev["Priority"]) == ("file", 131068, 32768, -2)
    # The cgroup_writes: v1 keeps memsw = memory + swap.
    if v1:
        assert box["read"]["memory.limit_in_bytes"] == 48 << 20
        assert box["read"]["memory.memsw.limit_in_bytes"] == 64 << 20
    # The child in box/tight could not swap: the cgroup's OOM killer killed it.
    assert [e["kind"] for e in events if e["pid"] == 2] == ["killed"]
    assert killed["vmstat"]["oom_kill"] - read["vmstat"]["oom_kill"] == 1
    tight = killed["cgroups"]["box/tight"]
    assert (tight["memory.oom_control"]["oom_kill"] if v1 else tight["memory.events"]["oom_kill"]) == 1


# -- random workloads under memory pressure ---------------------------------------------------------


def _ops(ops: list[dict[str, Any]]):
    for op in ops:
        yield op
        yield from _ops(op.get("program", []) or op.get("body", []))


def test_random_workloads_without_pressure_are_the_ones_drawn_before_it():
    from mmsim import random_workloads as rw

    assert rw.PRESSURE == 0.0, "off until the model lands"
    for seed in range(30):
        w = rw.generate_case(seed, 0).workload
        assert w == rw.generate_case(seed, 0, pressure=0.0, memcg_v2=True).workload
        assert not {"cgroups", "cgroup", "machine"} & set(w)
        assert not any(op["op"] in ("memory_reclaim", "cgroup_write") or "cgroup" in op for op in _ops(w["program"]))


@pytest.mark.parametrize("v2", [False, True])
def test_random_workloads_under_pressure_are_safe_and_use_every_new_op(v2: bool):
    from collections import Counter

    from mmsim import random_workloads as rw

    seen: Counter[str] = Counter()
    for seed in range(80):
        w = rw.generate_case(seed, 0, pressure=1.0, memcg_v2=v2, parse=False).workload
        assert rw.check_workload(w) == [], (seed, w)
        assert w["machine"]["swap"] and "box" in w["cgroups"]
        # What cgroup v1 cannot express is never drawn (a swap limit without a memory limit),
        # nor, for a v2 host, a process in a cgroup with children.
        assert _swap_without_limit(w) == "", (seed, w)
        assert not v2 or "internal" not in memcg_unsupported(w, V2), (seed, w)
        seen["own cgroup"] += "cgroup" in w
        for op in _ops(w["program"]):
            seen[op["op"]] += op["op"] in ("memory_reclaim", "cgroup_write")
            seen["fork into a cgroup"] += op["op"] == "fork" and "cgroup" in op
            seen[str(op.get("advice"))] += op.get("advice") in ("pageout", "cold")
    assert seen["own cgroup"] and seen["cgroup_write"] and seen["fork into a cgroup"], seen
    assert seen["pageout"] and seen["cold"], seen
    assert bool(seen["memory_reclaim"]) == v2, "memory.reclaim is cgroup v2's"


def test_the_checker_refuses_unsafe_pressure_workloads():
    from mmsim import random_checker as rc

    base = {"cgroups": {"box": {"memory.max": "64M"}}, "machine": {"swap": [{"size": "512M"}]}}
    ok = {**base, "program": [*ANON, {"op": "madvise", "region": "p", "advice": "pageout"}]}
    assert rc.check_workload(ok) == []
    bad = [
        ({**base, "program": [{"op": "fork", "cgroup": "nope", "program": []}]}, "not declared"),
        ({**base, "cgroups": {"box": {"memory.max": "1M"}}, "program": []}, "below"),
        ({**base, "cgroups": {"a/b": {}}, "program": []}, "without its parent"),
        ({**base, "cgroups": {"box": {"memory.high": "1M"}}, "program": []}, "sets a file"),
        ({**base, "machine": {"swap": [{"size": "4G"}]}, "program": []}, "machine.swap"),
        ({**base, "program": [{"op": "memory_reclaim", "bytes": "1M"}]}, "root cgroup"),
        (
            {**base, "program": [{"op": "cgroup_write", "cgroup": "box", "file": "memory.high", "value": 1}]},
            "does not make",
        ),
        (
            {
                **base,
                "program": [*ANON, {"op": "mlock", "region": "p"}, {"op": "madvise", "region": "p", "advice": "cold"}],
            },
            "locked",
        ),
    ]
    for w, why in bad:
        problems = rc.check_workload(w)
        assert any(why in x for x in problems), (why, problems)


def test_a_shrink_keeps_the_workloads_cgroups_and_swap():
    from mmsim import validate_random as vr

    setup = {"cgroups": {"box": {"memory.max": "64M"}}, "cgroup": "box", "machine": {"swap": [{"size": "512M"}]}}
    program = [
        *ANON,
        {"op": "madvise", "region": "p", "advice": "pageout"},
        {"op": "memory_reclaim", "cgroup": "box", "bytes": "8M", "swappiness": 60},
        {"op": "read", "region": "p"},
    ]
    seen = []

    def run(w: dict[str, Any], knobs: dict[str, str]) -> dict[str, Any]:
        seen.append(w)
        fails = any(op.get("advice") == "pageout" for op in w["program"])
        counters = [{"name": "pid 1 a->b VmSwap", "kernel": 4 if fails else 0, "simulated": 0, "tolerance": 0}]
        return {"status": "fail" if fails else "pass", "reason": "", "counters": counters}

    s = vr.shrink(program, {}, run, frozenset({"VmSwap"}), parse=False, setup=setup)
    assert all({k: w[k] for k in setup} == setup for w in seen)
    assert [op["op"] for op in s.program] == ["mmap", "madvise"], s.program


def test_validate_a_pageout_workload_in_a_cgroup_over_native_runs(tmp_path: Path):
    """`mmsim validate --native-runs 2` of a workload that pages 8 MiB out in a cgroup with a
    swap file: it passes, each counter carries both runs, and pswpout is exact (2048)."""
    from conftest import run_mmsim

    host = _needs_root_memcg_and_no_swap()
    w = {
        "name": "pageout-e2e",
        "cgroups": {"box": {}},
        "cgroup": "box",
        "machine": {"swap": [{"size": "64M"}]},
        "program": [
            {"op": "mmap", "name": "p", "size": "8M", "align": "2M"},
            {"op": "madvise", "region": "p", "advice": "nohugepage"},
            {"op": "write", "region": "p", "value": 7},
            {"op": "snapshot", "label": "before"},
            {"op": "madvise", "region": "p", "advice": "pageout"},
            {"op": "snapshot", "label": "after"},
            {"op": "read", "region": "p", "expect": 7},
        ],
    }
    path = tmp_path / "w.json"
    path.write_text(json.dumps(w))
    r = run_mmsim("validate", "--native-runs", "2", "--json", str(path))
    report = r.json()
    (case,) = report["cases"]
    assert case["status"] == "pass", case["reason"]
    by_name = {c["name"]: c for c in case["counters"]}
    pswpout = by_name["before->after pswpout"]
    assert pswpout["kernel_runs"] == [2048, 2048] and pswpout["simulated"] == 2048
    assert any(n.startswith("before->after cgroup box memory.stat") for n in by_name)
    _host_clean(host)
