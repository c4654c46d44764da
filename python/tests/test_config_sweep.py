"""The config API (Workload, Program, Machine), Result, and sweeps (local pool, Parquet, CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, run_mmsim

import mmsim
from mmsim import Machine, MmsimError, Program, Workload
from mmsim.experiments import hzp_rss_workload, memcmp_workload, stride_workload, usemem_workload

SHIPPED = sorted((ROOT / "experiments").rglob("*.json"))
BUILT = [
    hzp_rss_workload({"transparent_hugepage/enabled": "always"}),
    memcmp_workload({"transparent_hugepage/huge_zero_page": "vhzp"}),
    stride_workload({}),
    usemem_workload("per_mm"),
]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_workload_round_trips_exactly(path: Path):
    d = json.loads(path.read_text())
    w = Workload.from_file(path)
    assert w.to_dict() == {"name": path.stem, **d} if "name" not in d else w.to_dict() == d
    assert json.dumps(Workload.from_dict(d).to_dict()) == json.dumps(d), "same keys in the same order"


@pytest.mark.parametrize("d", BUILT, ids=lambda d: d["name"])
def test_experiment_workloads_round_trip_exactly(d):
    assert json.dumps(Workload.from_dict(d).to_dict()) == json.dumps(d)


def test_builder_gives_the_same_workload_as_the_file():
    w = Workload("hzp-rss", machine=Machine(profile="default", memory="16G", cpus=1))
    w.knobs = {"transparent_hugepage/enabled": "always", "transparent_hugepage/use_zero_page": 1}
    p = w.mmap("p", "200M", align="2M", prot="rw", flags=["private", "anonymous"])
    w.madvise(p, "hugepage")
    w.read(p, offset=0, length="200M", stride=4096)
    w.snapshot("after-read")
    w.write(p, offset=0, length=1)
    w.snapshot("after-write")
    from_file = mmsim.run(ROOT / "experiments" / "workloads" / "hzp-rss.json")
    built = mmsim.run(w)
    assert built.to_dict() == from_file.to_dict()


def test_nested_programs_from_builders_lists_and_functions():
    w = Workload()
    s = w.mmap("s", "16K", shared=True)
    child = Program()
    child.write(s, length=1, value=3)
    w.fork(2, child)
    w.thread(1, lambda t: t.read(s))
    w.loop(3, [{"op": "read", "region": "s"}])
    w.wait()
    d = w.to_dict()
    assert d["program"][1] == {
        "op": "fork",
        "count": 2,
        "program": [{"op": "write", "region": "s", "length": 1, "value": 3}],
    }
    assert d["program"][2]["program"] == [{"op": "read", "region": "s"}]
    r = mmsim.run(w, check=True)
    assert r.check["mismatches"] == 0 and not r.failed
    assert [p["state"] for p in r.processes] == ["exited"] * 4


def test_result_counters_snapshots_and_dataframe():
    w = Workload(knobs={"transparent_hugepage/enabled": "never"})
    p = w.mmap("p", "1M")
    w.write(p)
    w.snapshot("written")
    r = mmsim.run(
        w, machine=Machine(profile="westmere-ex", overrides={"tlb.dtlb_4k.entries": 4, "tlb.dtlb_4k.ways": 4})
    )
    assert r.machine["profile"] == "westmere-ex"
    assert r.perf.minor_faults == 256 and r.perf["minor-faults"] == 256
    assert r.vmstat.pgfault == 256 and r.meminfo.AnonPages == 0, "all exited: end of run"
    assert r.snapshot("written").meminfo.AnonPages >= 1024
    assert r.snapshot("written").processes[0]["RssAnon"] >= 1024
    assert r.profile.do_anonymous_page > 0
    df = r.to_pandas()
    assert list(df.index) == ["written", "end"]
    assert df.loc["written", "vmstat.pgfault"] == 256
    with pytest.raises(AttributeError, match="no counter"):
        _ = r.perf.no_such_counter
    with pytest.raises(KeyError, match="no snapshot"):
        r.snapshot("nope")


def test_errors_are_python_exceptions_naming_the_field():
    w = Workload()
    w.read("q")
    with pytest.raises(MmsimError, match=r"program\[0\]\.region"):
        mmsim.run(w)
    with pytest.raises(MmsimError, match="knob"):
        mmsim.run(Workload(program=[{"op": "exit"}]), knobs={"transparent_hugepage/enabled": "sometimes"})
    with pytest.raises(MmsimError, match=r"hw\.tlb\.nope"):
        mmsim.run(Workload(program=[{"op": "exit"}]), machine=Machine(overrides={"tlb.nope": 1}))


def _grid_workload() -> Workload:
    w = Workload()
    p = w.mmap("p", "16M", align="2M")
    w.read(p)
    w.loop(3, lambda b: b.read(p, length="512K", stride=64))
    return w


GRID = {"transparent_hugepage/enabled": ["always", "never"], "hw.tlb.stlb.entries": [32, 512]}


def test_sweep_on_a_local_pool_is_deterministic_and_writes_parquet(tmp_path):
    pq = tmp_path / "sweep.parquet"
    west = Machine(profile="westmere-ex")
    df = mmsim.sweep(_grid_workload(), GRID, machine=west, processes=2, progress=False, parquet=pq, repeats=2)
    assert len(df) == 8
    assert list(df.columns[:3]) == ["transparent_hugepage/enabled", "hw.tlb.stlb.entries", "repeat"]
    assert {"perf.cycles", "vmstat.pgfault", "meminfo.AnonHugePages"} <= set(df.columns)
    # Repeats are identical; a pool and one process give the same table.
    a, b = df[df.repeat == 0].drop(columns="repeat"), df[df.repeat == 1].drop(columns="repeat")
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
    serial = mmsim.sweep(_grid_workload(), GRID, machine=west, processes=1, progress=False)
    pd.testing.assert_frame_equal(a.reset_index(drop=True), serial.drop(columns="repeat"))
    # The grid did what it says: THP off faults per 4 KiB; 128 pages thrash a 32-entry STLB.
    never = df[(df["transparent_hugepage/enabled"] == "never") & (df.repeat == 0)]
    assert set(never["perf.page-faults"]) == {4096}
    small, big = (never[never["hw.tlb.stlb.entries"] == n]["perf.dTLB-load-misses"].item() for n in (32, 512))
    # The first read misses all 4096 pages; the loop's 128 pages then miss once with a
    # 512-entry STLB (it holds the last 512 pages read), every pass with a 32-entry one.
    assert (small, big) == (4096 + 3 * 128, 4096 + 128)
    pd.testing.assert_frame_equal(pd.read_parquet(pq), df)


def test_sweep_names_the_bad_point():
    with pytest.raises(MmsimError, match=r"sweep point transparent_hugepage/enabled=sometimes: .*knob"):
        mmsim.sweep(_grid_workload(), {"transparent_hugepage/enabled": ["always", "sometimes"]}, progress=False)
    with pytest.raises(MmsimError, match=r"sweep point hw.tlb.dtlb_4k.entries=16: .*ways"):
        mmsim.sweep(_grid_workload(), {"hw.tlb.dtlb_4k.entries": [16]}, processes=2, progress=False)
    with pytest.raises(MmsimError, match=r"grid\.machine\.colour"):
        mmsim.sweep(_grid_workload(), {"machine.colour": ["red"]}, progress=False)
    with pytest.raises(MmsimError, match="non-empty list"):
        mmsim.sweep(_grid_workload(), {"machine.cpus": 2}, progress=False)


def test_cli_sweep_prints_a_table_and_writes_csv(tmp_path, write_workload):
    wl = write_workload("w.json", _grid_workload().to_dict())
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"workload: {wl.name}\ngrid:\n  transparent_hugepage/enabled: [always, never]\n"
        "  machine.profile: [default, westmere-ex]\n"
    )
    csv = tmp_path / "out.csv"
    r = run_mmsim("sweep", spec, "--csv", csv, "--processes", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["transparent_hugepage/enabled", "machine.profile"]
    assert len(lines) == 5
    assert "4 rows" in r.stderr
    assert len(pd.read_csv(csv)) == 4
    j = run_mmsim("sweep", spec, "--json")
    assert j.returncode == 0, j.stderr
    rows = json.loads(j.stdout)
    assert {r["machine.profile"] for r in rows} == {"default", "westmere-ex"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: w.json\ngrid: {}\nextra: 1\n")
    e = run_mmsim("sweep", bad)
    assert e.returncode == 2 and "extra" in e.stderr and "Traceback" not in e.stderr


def test_sweep_on_a_local_ray_instance_equals_the_local_pool():
    """`cluster="ray"`: the points run as Ray tasks on the Ray instance this test starts; the
    table is the local pool's, row for row (the simulator is deterministic)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'mmsim[ray]')")
    grid = {"transparent_hugepage/enabled": ["always", "never"], "machine.cpus": [1, 2]}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = mmsim.sweep(_grid_workload(), grid, cluster="ray", progress=False)
    finally:
        ray.shutdown()
    local = mmsim.sweep(_grid_workload(), grid, processes=2, progress=False)
    pd.testing.assert_frame_equal(on_ray, local)
    assert len(on_ray) == 4 and not on_ray["failed"].any()
