"""Hostile sizes and counts: refused with one clear line, or run within a documented limit
(--max-memory, --max-ops); never a crash, a hang or the host's memory exhausted."""

from __future__ import annotations

from conftest import run_mmsim


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
