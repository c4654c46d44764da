"""mmsim run --trace and mmsim validate --trace, end to end: test_trace.py's program (mmap, a
page-stride write, fork, a thread) recorded, replayed, and checked against the kernel."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import HZP_RSS
from test_trace import needs_valgrind, prog, recorded  # noqa: F401 (fixtures)

from mmsim.cli import main


def _run_json(capfd, *args: str) -> dict:
    assert main(["run", *args, "--json"]) == 0
    return json.loads(capfd.readouterr().out)


@needs_valgrind
def test_run_trace_replays_the_fork_the_thread_and_the_exits(recorded, capfd):  # noqa: F811
    path, _ = recorded
    r = _run_json(capfd, "--trace", str(path), "--set", "transparent_hugepage/enabled=never")
    assert r["events"] == [], r["events"]
    rep = r["replay"][0]
    assert (rep["processes"], rep["threads"]) == (2, 3)
    assert sorted(s for _, s in rep["exit_status"]) == [3, 5]
    tids = {p["Tgid"] for p in r["processes"]}
    assert len(r["processes"]) == 3 and len(tids) == 2, "a process, its thread, and the child"
    # The 256 pages the parent writes are its faults, at least; the child's write is a COW.
    assert r["processes"][0]["minflt"] >= 256
    assert rep["instructions"] > 0 and rep["loads"] > 0 and rep["stores"] >= 256
    labels = [s["label"] for s in r["snapshots"]]
    assert labels[0].startswith("execve ") and any(x.startswith("exit ") for x in labels)


@needs_valgrind
def test_the_same_trace_replays_to_the_same_report(recorded, capfd):  # noqa: F811
    path, _ = recorded
    a = _run_json(capfd, "--trace", str(path))
    b = _run_json(capfd, "--trace", str(path))
    assert a == b


@needs_valgrind
def test_thp_always_and_cold_change_the_replay(recorded, capfd):  # noqa: F811
    path, _ = recorded
    never = _run_json(capfd, "--trace", str(path), "--set", "transparent_hugepage/enabled=never")
    cold = _run_json(capfd, "--trace", str(path), "--cold", "--set", "transparent_hugepage/enabled=never")
    assert never["replay"][0]["warmed_bytes"] > 0 and cold["replay"][0]["warmed_bytes"] == 0
    assert cold["perf"]["major-faults"] > 0 == never["perf"]["major-faults"]
    # On another profile the same recording runs too.
    zen = _run_json(capfd, "--trace", str(path), "--profile", "zen4-epyc", "--cpus", "2")
    assert zen["machine"]["profile"] == "zen4-epyc" and zen["replay"][0]["processes"] == 2


@needs_valgrind
def test_validate_trace_compares_the_tree_with_the_kernel(recorded, prog, capfd):  # noqa: F811
    path, _ = recorded
    code = main(["validate", "--trace", str(path), "--json", "--", str(prog)])
    out = json.loads(capfd.readouterr().out)
    (case,) = out["cases"]
    assert code == (1 if case["status"] == "fail" else 0)
    c = {x["name"]: x for x in case["counters"]}
    assert {"minflt", "majflt", "maxrss"} <= set(c)
    assert all(x["tolerance"] == 0 for x in case["counters"])
    # The recorder's layout (Valgrind places the libraries, heap and stack) moves a few faults.
    assert abs(c["minflt"]["simulated"] - c["minflt"]["kernel"]) <= 0.05 * c["minflt"]["kernel"]
    assert c["majflt"]["kernel"] == c["majflt"]["simulated"] == 0


def test_run_trace_of_a_file_that_is_no_trace_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"hello")
    assert main(["run", "--trace", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"mmsim: error: {bad}: byte 0") and "\n" not in err


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ([], "give a WORKLOAD file or --trace FILE"),
        (["w.json", "--trace", "x"], "not both"),
        (["w.json", "--cold"], "apply to --trace only"),
        (["w.json", "--hugepage-text"], "--hugepage-text apply to --trace only"),
    ],
)
def test_run_trace_arguments_are_checked(args, want, capsys):
    assert main(["run", *args]) == 2
    assert want in capsys.readouterr().err


@needs_valgrind
@pytest.mark.parametrize("name", ["memcmp", "python3", "sqlite3", "gcc"])
def test_a_real_program_replays_to_the_kernels_faults(name, tmp_path_factory):
    """Each of docs/benchmarks.md's programs, tiny: recorded, replayed under the host's knobs,
    and run natively. Minor faults agree within 5 % (the recorder's layout: Valgrind's loader,
    stack, brk page and preload library move a few), major faults exactly (all files cached).
    Peak RSS is the replay's larger: Valgrind's layout maps more pages (up to 21 % of memcmp's
    1.3 MB; 7 % of gcc's 30 MB), never fewer than the kernel's peak less its run-to-run
    variation (python3's: 10,812 to 10,896 kB against the replay's 10,884)."""
    from mmsim import trace
    from mmsim.native_host import host_knobs, host_settings
    from mmsim.real_programs import programs
    from mmsim.validate_trace import run_native, simulated
    from mmsim.workload import run_json

    d = tmp_path_factory.mktemp("programs")
    cmd = programs(d, "tiny")[name]()
    run_native(cmd)  # the files cached, as the replay assumes
    kernel = run_native(cmd)
    out = d / f"{name}.trace"
    trace.record(cmd, out)
    w = trace.replay_workload(out)
    w["knobs"] = host_knobs([], host_settings())
    report = json.loads(run_json(w))
    assert report["events"] == [], report["events"][:3]
    sim = simulated(report)
    assert abs(sim["minflt"] - kernel["minflt"]) <= 0.05 * kernel["minflt"], (sim, kernel)
    assert sim["majflt"] == kernel["majflt"] == 0
    # The kernel's own peak varies by about 1 % from run to run (where ASLR puts things).
    assert 0.98 * kernel["maxrss"] <= sim["maxrss"] <= 1.25 * kernel["maxrss"], (sim, kernel)


THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@needs_valgrind
def test_under_thp_always_the_kernel_places_what_valgrind_placed(tmp_path, capfd):
    """memcmp's calloc'd 2 MiB-multiple buffers: Valgrind mapped them unaligned, Linux maps
    them PMD-aligned. Placed by the simulated kernel (the default), the replay's faults and THP
    events are the kernel's; at Valgrind's addresses they are not (measured here: 612 minor
    faults and a huge page against the kernel's 1,116 and none)."""
    if os.geteuid() != 0 or not THP_ENABLED.exists():
        pytest.skip("needs root and transparent hugepages to set THP always")
    from mmsim import trace
    from mmsim.real_programs import programs

    cmd = programs(tmp_path, "tiny")["memcmp"]()
    out = tmp_path / "memcmp.trace"
    trace.record(cmd, out)
    before = THP_ENABLED.read_text()

    def validate(place: str) -> dict:
        args = ["validate", "--trace", str(out), "--json", "--place", place]
        main([*args, "--host-set", "transparent_hugepage/enabled=always", "--", *cmd])
        text = capfd.readouterr().out
        # The program's own output (its native run's) comes first.
        (case,) = json.loads(text[text.index("{\n") :])["cases"]
        return case

    kernel, at_valgrinds = validate("kernel"), validate("recorded")
    assert THP_ENABLED.read_text() == before, "restored"
    c = {x["name"]: x for x in kernel["counters"]}
    assert abs(c["minflt"]["simulated"] - c["minflt"]["kernel"]) <= 0.02 * c["minflt"]["kernel"], c
    thp = [x for x in kernel["counters"] if x["name"].startswith("thp_")]
    assert all(x["kernel"] == x["simulated"] for x in thp), thp
    assert kernel["replay"]["place"] == "kernel" and kernel["replay"]["relocated"] > 0
    r = {x["name"]: x for x in at_valgrinds["counters"]}
    assert r["minflt"]["simulated"] < 0.8 * r["minflt"]["kernel"], r


@needs_valgrind
def test_run_trace_under_a_memory_limit_swaps(recorded, capfd):  # noqa: F811
    """`--memory-max` puts the replay in a cgroup `trace` with that limit and a swap partition
    (`--swap`): the program's 1 MiB of writes goes through a 512 KiB limit by swapping, the
    report has the cgroup's files, and no task is killed."""
    path, _ = recorded
    base = ["--trace", str(path), "--set", "transparent_hugepage/enabled=never"]
    free = _run_json(capfd, *base)
    assert "cgroups" not in free and free["vmstat"]["pswpout"] == 0
    r = _run_json(capfd, *base, "--memory-max", "512K", "--swap", "64M")
    cg = r["cgroups"]["trace"]
    assert cg["memory.max"] == 512 << 10 and cg["memory.peak"] <= 512 << 10
    # A replay's stores carry no data (the trace has addresses, not values): a page it writes
    # holds data from then on, and swap writes it out (pswpout) as the kernel writes the
    # program's pages; only pages it never wrote would be zero-filled (swpout_zero).
    assert r["vmstat"]["pswpout"] > 0 and r["vmstat"]["oom_kill"] == 0
    # Its files were cached before it ran, charged to the root cgroup (as a host's libraries
    # are): the limit never reclaims them (Linux 6.18 here: no file refault either).
    assert cg["memory.stat"]["workingset_refault_file"] == 0
    assert cg["memory.stat"]["workingset_refault_anon"] > 0, "its anonymous memory thrashes at 512K"
    assert [(s["Type"], s["Size"]) for s in r["swaps"]] == [("partition", (64 << 10) - 4)]
    assert sorted(s for _, s in r["replay"][0]["exit_status"]) == [3, 5], "both processes exit as recorded"


def test_memory_max_and_swap_are_for_trace_replays(capsys):
    assert main(["run", str(HZP_RSS), "--memory-max", "64M"]) == 2
    assert "--memory-max apply to --trace only" in capsys.readouterr().err


@needs_valgrind
def test_validate_trace_under_a_memory_limit(recorded, prog, capfd):  # noqa: F811
    """`validate --trace --memory-max` runs the command natively in a memory cgroup with that
    limit and a swap partition, 3 times, beside the replay under the same limit: the reclaim
    and swap events and the cgroup's peak are compared too, inside the runs' spread. The
    program's libraries were cached before it ran, charged elsewhere on both sides: no file
    refaults (mmsim charged its warm page cache to the cgroup before, and thrashed it)."""
    if os.geteuid() != 0:
        pytest.skip("a memory cgroup and a swap device need root")
    path, _ = recorded
    code = main(["validate", "--trace", str(path), "--json", "--memory-max", "512K", "--swap", "64M", "--", str(prog)])
    (case,) = json.loads(capfd.readouterr().out)["cases"]
    assert code == (1 if case["status"] == "fail" else 0)
    assert case["name"].endswith("in memory.max 512K")
    c = {x["name"]: x for x in case["counters"]}
    assert {"pswpin", "pswpout", "workingset_refault_file", "cgroup trace peak"} <= set(c)
    assert all(len(x.get("kernel_runs", [])) == 3 for x in case["counters"]), "three native runs"
    peak = c["cgroup trace peak"]
    assert 0 < peak["kernel"] <= (512 << 10) + peak["kernel_excess"] and peak["simulated"] == 512 << 10
    # System-wide: another process's file refault can land in a run (seen once: 0..1).
    assert c["workingset_refault_file"]["kernel_min"] == c["workingset_refault_file"]["simulated"] == 0
    assert c["pswpout"]["kernel_min"] > 0, "the program's 1 MiB of writes goes through 512K by swapping"
    # Within 10 % of the host's (250..280 against mmsim's 284 on this machine).
    assert c["pswpout"]["simulated"] > 0.9 * c["pswpout"]["kernel_min"]


def test_validate_memory_max_goes_with_trace(capsys):
    assert main(["validate", str(HZP_RSS), "--memory-max", "64M"]) == 2
    assert "--memory-max and --swap go with --trace" in capsys.readouterr().err
    assert main(["validate", "--trace", str(HZP_RSS), "--swap", "64M", "--", "true"]) == 2
    assert "--swap applies with --trace --memory-max only" in capsys.readouterr().err
