"""Hostile sizes and counts: refused with one clear line, or run within a documented limit
(--max-memory, --max-ops, engine.max_host_memory, kernel/pid_max, the nesting depth); never a
crash, a traceback, a hang or the host's memory exhausted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conftest import Result, run_mmsim


def test_hostile_inputs_are_refused_or_bounded(write_workload):
    cases = [
        ({"machine": {"memory": "1T"}, "program": []}, ["machine.memory", "over the limit", "--max-memory"]),
        ({"machine": {"memory": "64T"}, "program": []}, ["machine.memory", "16T"]),
        ({"program": [{"op": "mmap", "name": "p", "size": "0x1000000000000000"}]}, ["program[0].size"]),
        ({"program": [{"op": "fork", "count": 1000000}]}, ["program[0].count", "100000"]),
        ({"program": [{"op": "mmap", "name": "p", "size": 4096, "align": 3}]}, ["program[0]"]),
        ({"machine": {"cpus": 100000}, "program": []}, ["machine.cpus"]),
    ]
    for i, (w, needles) in enumerate(cases):
        r = run_mmsim("run", write_workload(f"h{i}.json", w))
        assert r.returncode == 2, (w, r.stdout[-500:], r.stderr)
        assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr and "panicked" not in r.stderr
        for n in needles:
            assert n in r.stderr, (n, r.stderr)


def test_a_runaway_loop_stops_at_max_ops_and_a_repeating_one_is_fast_forwarded(write_workload):
    syscalls = [{"op": "mmap", "name": "p", "size": "4K"}, {"op": "munmap", "region": "p"}]
    w = write_workload("runaway.json", {"program": [{"op": "loop", "count": 10**18, "body": syscalls}]})
    r = run_mmsim("run", w, "--max-ops", "100000")
    assert r.returncode == 2 and "exceeded --max-ops (100000 operations)" in r.stderr, r.stderr
    reads = [
        {"op": "mmap", "name": "p", "size": "4K"},
        {"op": "loop", "count": 10**18, "body": [{"op": "read", "region": "p"}]},
    ]
    r = run_mmsim("run", "--json", write_workload("repeat.json", {"program": reads}))
    assert r.returncode == 0, r.stderr
    assert r.json()["engine"]["fast_forwarded_iterations"] > 10**17


def test_max_memory_raises_the_limit(write_workload):
    w = write_workload("big.json", {"machine": {"memory": "300G"}, "program": []})
    assert run_mmsim("run", w).returncode == 2
    r = run_mmsim("run", w, "--max-memory", "100G")
    assert r.returncode == 2 and "over the limit of 100 GiB" in r.stderr


def _deep_loops(depth: int) -> dict:
    """A workload whose second op is ``depth`` loops one inside another."""
    op: dict = {"op": "read", "region": "p"}
    for _ in range(depth):
        op = {"op": "loop", "count": 1, "body": [op]}
    return {"program": [{"op": "mmap", "name": "p", "size": 4096}, op]}


def _deep_loops_yaml(depth: int) -> str:
    """The same as block-style YAML (each level indented two more spaces)."""
    lines = ["program:", "- op: mmap", "  name: p", "  size: 4096"]
    for d in range(depth):
        pad = "  " * d
        lines += [f"{pad}- op: loop", f"{pad}  count: 1", f"{pad}  body:"]
    pad = "  " * depth
    lines += [f"{pad}- op: read", f"{pad}  region: p"]
    return "\n".join(lines) + "\n"


DEEP_FIELD = "program[1](.body[0] x64): nesting deeper than 64 levels (loop, fork, thread)"


def _json_text(depth: int) -> str:
    """``_deep_loops`` as JSON text, written without json.dumps (which recurses)."""
    op = '{"op": "read", "region": "p"}'
    for _ in range(depth):
        op = '{"op": "loop", "count": 1, "body": [' + op + "]}"
    return '{"program": [{"op": "mmap", "name": "p", "size": 4096}, ' + op + "]}"


def test_deep_nesting_is_refused_naming_the_field(write_workload):
    """3,000 levels of loops (the issue's input) in JSON and in YAML: one line naming the field,
    exit status 2, before any recursive parser sees the file; 64 levels run."""
    for name, text in [
        ("deep.json", _json_text(3000)),
        ("deep.yaml", _deep_loops_yaml(3000)),
        ("deep-flow.yml", _json_text(3000)),
        ("deep-array.json", '{"name": ' + "[" * 3000 + "]" * 3000 + ', "program": []}'),
    ]:
        path = write_workload(name, text)
        r = run_mmsim("run", path)
        assert r.returncode == 2, (name, r.stdout[-300:], r.stderr[-300:])
        assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr[-500:]
        want = "name[0]([0] x134): nested deeper than 136 levels" if "array" in name else DEEP_FIELD
        assert r.stderr.startswith(f"mmsim: error: {path}: workload: {want}"), r.stderr
    r = run_mmsim("run", write_workload("ok.yaml", _deep_loops_yaml(64)))
    assert r.returncode == 0, r.stderr


def test_deep_nesting_through_the_api():
    """The Python API checks before json.dumps, json.loads and the builder recurse."""
    import sys

    import mmsim

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(20000)  # to build the dict at all
    try:
        deep = _deep_loops(3000)
    finally:
        sys.setrecursionlimit(old)
    for run in (
        lambda: mmsim.run(deep),
        lambda: mmsim.run_workload(deep),
        lambda: mmsim.run(_json_text(3000)),
        lambda: mmsim.Workload.from_dict(deep),
    ):
        try:
            run()
        except mmsim.MmsimError as e:
            assert str(e) == f"workload: {DEEP_FIELD}"
        else:
            raise AssertionError("not refused")
    # A builder's program nested in itself, or 65 deep: refused when it is written out.
    p = mmsim.Program()
    p.loop(1, p)
    w = mmsim.Workload()
    w.fork(1, p)
    try:
        mmsim.run(w)
    except mmsim.MmsimError as e:
        assert str(e) == "program[0].program[0](.body[0] x63): nesting deeper than 64 levels (loop, fork, thread)"
    else:
        raise AssertionError("not refused")
    assert mmsim.run(mmsim.Workload.from_dict(_deep_loops(64))).perf.minor_faults == 1


NESTED_FORKS = Path(__file__).parent / "workloads" / "nested-forks.json"


def test_nested_forks_stay_bounded(write_workload):
    """The issue's fork storm (fork 100 -> 100 -> 100 -> 100, each process writing 1 GiB):
    kernel/pid_max bounds the processes (the forks beyond fail with EAGAIN), the simulator's
    memory stays bounded, and the run ends with one clear line, never a traceback. Simulated
    to its end on the default machine it takes over a minute (every page of 32,767 processes'
    writes is faulted, cleared and OOM-killed in turn); here --max-ops stops it."""
    r, peak_kb = _run_timed("run", NESTED_FORKS, "--max-ops", "400000")
    assert r.returncode == 2, (r.stdout[-300:], r.stderr[-300:])
    assert r.stderr.splitlines() == ["mmsim: error: limit: the run exceeded --max-ops (400000 operations)"]
    assert peak_kb < 1_500_000, f"{peak_kb} kB"  # 32,767 processes (they took 7 GB and more before)
    # On a small machine with fewer pids it runs to its end: EAGAINs and OOM kills, exit 0.
    w = json.loads(NESTED_FORKS.read_text())
    w["machine"] = {"memory": "64M"}
    w["knobs"] = {"kernel/pid_max": 1000}
    r, _ = _run_timed("run", "--json", write_workload("small.json", w))
    assert r.returncode == 0, r.stderr[-500:]
    report = r.json()
    # Forks fail while 999 pids are in use and the writers are OOM-killed in turn (the events
    # beyond the first 200 are counted); each kill and reap frees a pid for a later fork.
    messages = {e["message"] for e in report["events"]}
    assert "fork: EAGAIN (kernel/pid_max 1000: 999 pids in use)" in messages
    assert any(m.startswith("Out of memory: Killed process") for m in messages)
    assert report["engine"]["events_dropped"] > 0 and report["vmstat"]["oom_kill"] > 0
    assert len(report["processes"]) >= 999


def _run_timed(*args: str | Path) -> tuple[Result, int]:
    """`mmsim ARGS` within the 60 s a hostile input may take, and its peak RSS (kB)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([sys.executable, "-m", "mmsim", *map(str, args)], stdout=out, stderr=err, text=True)
        deadline = time.monotonic() + 60
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                p.wait()
                raise AssertionError(f"mmsim {' '.join(map(str, args))} took more than 60 s")
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Result(p.returncode, out.read(), err.read()), usage.ru_maxrss


def test_pid_max_and_max_host_memory_are_checked(write_workload, hzp_rss):
    """kernel/pid_max outside 301..4194304 and bad engine.max_host_memory values are refused
    naming the knob; a host-memory limit below what the machine takes stops the run."""
    for value in ("300", "4194305", "lots"):
        r = run_mmsim("run", hzp_rss, "--set", f"kernel/pid_max={value}")
        assert r.returncode == 2 and "kernel/pid_max" in r.stderr and "301..4194304" in r.stderr, r.stderr
    w = write_workload("pid.json", {"knobs": {"kernel/pid_max": 0}, "program": []})
    r = run_mmsim("run", w)
    assert r.returncode == 2 and r.stderr.startswith(f"mmsim: error: {w}: workload: knobs.kernel/pid_max:"), r.stderr
    r = run_mmsim("run", hzp_rss, "--set", "kernel/pid_maxx=5")
    assert r.returncode == 2 and 'unknown knob "kernel/pid_maxx"' in r.stderr, r.stderr
    r = run_mmsim("run", hzp_rss, "--set", "engine.max_host_memory=lots")
    assert r.returncode == 2 and "engine.max_host_memory" in r.stderr, r.stderr
    # A machine whose frame metadata alone passes the limit is refused before it boots.
    r = run_mmsim("run", hzp_rss, "--set", "engine.max_host_memory=64M")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr == (
        "mmsim: error: limit: machine.memory: 16.0 GiB of simulated memory takes 256 MiB of frame metadata,"
        " over engine.max_host_memory (64M); raise it with --set engine.max_host_memory=SIZE\n"
    )
    # A fork storm of a parent with 64 MiB written stops when its page tables pass the limit.
    storm = {
        "machine": {"memory": "1G"},
        "program": [
            {"op": "mmap", "name": "p", "size": "64M"},
            {"op": "write", "region": "p"},
            {"op": "fork", "count": 100000, "program": [{"op": "wait"}]},
        ],
    }
    r = run_mmsim("run", write_workload("storm.json", storm), "--set", "engine.max_host_memory=256M")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    limit = "mmsim: error: limit: the simulator's own memory would pass engine.max_host_memory (256M): about 256 MiB"
    assert r.stderr.startswith(limit), r.stderr
    assert r.stderr.rstrip().endswith("raise it with --set engine.max_host_memory=SIZE")
    assert "kernel/pid_max" in {k["name"] for k in run_mmsim("knobs", "--json").json()}
