"""The Python API: run_workload, load_workload, knobs, MmsimError, and the modules' doctests."""

from __future__ import annotations

import doctest
import importlib
import json

import pytest
from conftest import HZP_RSS

import mmsim
from mmsim import MmsimError, load_workload, run_workload

SMALL = {
    "name": "small",
    "program": [
        {"op": "mmap", "name": "p", "size": "2M", "align": "2M"},
        {"op": "read", "region": "p"},
        {"op": "snapshot", "label": "read"},
    ],
}


def test_exports():
    assert set(mmsim.__all__) >= {"run_workload", "load_workload", "MmsimError", "__version__"}
    assert issubclass(MmsimError, ValueError)
    assert mmsim.__version__.count(".") == 2


@pytest.mark.parametrize(
    "module",
    [
        "mmsim",
        "mmsim.workload",
        "mmsim.knobs",
        "mmsim.report",
        "mmsim.config",
        "mmsim.result",
        "mmsim.sweep",
        "mmsim.nesting",
    ],
)
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_run_workload_takes_a_dict_a_path_or_json_text():
    from_dict = run_workload(load_workload(HZP_RSS))
    from_path = run_workload(HZP_RSS)
    from_str_path = run_workload(str(HZP_RSS))
    from_text = run_workload(HZP_RSS.read_text())
    assert from_dict == from_path == from_str_path == from_text
    assert from_path["workload"] == "hzp-rss"


def test_sets_as_mapping_pairs_or_strings():
    never = {"transparent_hugepage/enabled": "never"}
    a = run_workload(SMALL, sets=never)
    b = run_workload(SMALL, sets=[("transparent_hugepage/enabled", "never")])
    c = run_workload(SMALL, sets=["transparent_hugepage/enabled=never"])
    assert a == b == c
    assert a["knobs"]["transparent_hugepage/enabled"] == "never"
    assert a["snapshots"][0]["vmstat"]["pgfault"] == 512


def test_boolean_and_integer_knob_values():
    r = run_workload(SMALL, sets={"transparent_hugepage/use_zero_page": False, "fail_page_alloc/every": 0})
    assert r["knobs"]["transparent_hugepage/use_zero_page"] == "0"


def test_check_flag():
    r = run_workload(SMALL, check=True)
    assert r["check"]["enabled"] is True
    assert r["check"]["reads_checked"] == 512
    assert r["check"]["mismatches"] == 0


def test_errors_are_one_line_and_name_the_field():
    bad = {"program": [{"op": "mmap", "name": "p", "size": 0}]}
    with pytest.raises(MmsimError, match=r"program\[0\]\.size") as e:
        run_workload(bad)
    assert "\n" not in str(e.value)
    with pytest.raises(MmsimError, match="unknown knob"):
        run_workload(SMALL, sets={"no/such": 1})


def test_load_workload_yaml(tmp_path):
    p = tmp_path / "w.yaml"
    p.write_text("program:\n  - {op: mmap, name: p, size: 2M}\n")
    w = load_workload(p)
    assert w == {"name": "w", "program": [{"op": "mmap", "name": "p", "size": "2M"}]}


def test_load_workload_keeps_an_explicit_name(tmp_path):
    p = tmp_path / "w.json"
    p.write_text(json.dumps(SMALL))
    assert load_workload(p)["name"] == "small"


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("a.json", '{\n  "program": [,]\n}', "a.json:2:"),
        ("b.yaml", "program: [\n", "b.yaml:"),
        ("c.yml", "", "c.yml: a workload must be a mapping"),
        ("d.json", "[]", "d.json: a workload must be a mapping"),
    ],
)
def test_load_workload_errors_name_the_file(tmp_path, name, text, needle):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(MmsimError) as e:
        load_workload(p)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(str(tmp_path))
    assert needle in msg


def test_knobs():
    names = [k["name"] for k in mmsim.knobs()]
    assert "transparent_hugepage/enabled" in names
    assert len(names) == len(set(names))


def test_builder_has_every_op_and_runs_them():
    """mremap, mlock (and mlock2's onfault), munlock, mlockall, munlockall, sleep, hugetlb
    mappings and random access from the builder, run."""
    w = mmsim.Workload("builder-ops", knobs={"vm/nr_hugepages": 4})
    h = w.mmap("h", "4M", hugetlb=True)
    p = w.mmap("p", "1M")
    w.write(h, pattern="random", count=10, seed=3, stride=4096)
    w.mlock(p)
    w.munlock(p, length="4K")
    w.mlock(p, length="8K", onfault=True)
    w.mlockall("current", "onfault")
    w.munlockall()
    w.mlockall("future")
    w.mremap(p, "2M")
    w.read(p, pattern="random", count=5, seed=1, block=128)
    w.sleep(1)
    w.sleep(until_ms=5)
    w.snapshot("end")
    d = w.to_dict()
    assert mmsim.Workload.from_dict(d).to_dict() == d
    assert d["program"][0]["flags"] == ["private", "anonymous", "hugetlb"]
    r = mmsim.run(w)
    s = r.snapshot("end")
    assert s.meminfo["HugePages_Total"] == 4 and s.meminfo["HugePages_Free"] < 4
    assert r.processes[0]["HugetlbPages"] > 0


def test_builder_declares_cgroups_and_swap_and_reports_them():
    """A machine with swap, a cgroup the first process runs in, a child forked into a second
    one, memory.reclaim and a cgroup_write from the builder; the result's cgroups, swaps and
    flattened columns (cgroups.NAME.memory.stat.KEY)."""
    w = mmsim.Workload(
        "builder-memcg",
        machine=mmsim.Machine(memory="512M", swap=[{"size": "256M", "kind": "partition"}]),
        knobs={"transparent_hugepage/enabled": "never"},
        cgroups={"box": {"memory.max": "64M"}, "other": {}},
        cgroup="box",
    )
    p = w.mmap("p", "96M")
    w.write(p, value=5)
    w.fork(program=[{"op": "read", "region": "p", "expect": 5}], cgroup="other")
    w.wait()
    w.memory_reclaim("8M", swappiness=200)
    w.cgroup_write("box", "memory.max", "max")
    w.snapshot("end")
    d = w.to_dict()
    assert mmsim.Workload.from_dict(d).to_dict() == d
    assert d["machine"]["swap"] == [{"size": "256M", "kind": "partition"}]
    assert d["program"][2]["cgroup"] == "other"
    r = mmsim.run(w)
    box = r.snapshot("end").cgroups["box"]
    assert box["memory.peak"] <= 64 << 20
    assert box["memory.max"] == -1, "the cgroup_write lifted the limit"
    assert box["memory.stat"]["pgsteal_proactive"] >= 2048
    assert r.vmstat["pswpout"] >= (96 - 64) << 8
    assert r.swaps[0]["Type"] == "partition"
    assert "cgroups.box.memory.stat.pgscan" in r.to_pandas().columns
