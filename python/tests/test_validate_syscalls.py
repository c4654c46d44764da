"""`mmsim validate`: the native runner reports every system call of an op that fails, as
mmsim's engine does ("munmap p: EINVAL"), and validate compares the two lists task by task."""

from __future__ import annotations

import os

import pytest
from conftest import run_mmsim

MAP = {"op": "mmap", "name": "p", "size": "4M"}
#: A hole of 1 MiB at offset 1 MiB of the region.
HOLE = {"op": "munmap", "region": "p", "offset": "1M", "length": "1M"}

#: name -> (program, the failed call as both sides word it, its counter)
FAILURES = {
    "munmap-unaligned": (
        [MAP, {"op": "write", "region": "p"}, {"op": "munmap", "region": "p", "offset": 100, "length": 4096}],
        "munmap p: EINVAL",
        "munmap-EINVAL",
    ),
    "mprotect-hole": (
        [MAP, HOLE, {"op": "mprotect", "region": "p", "prot": "r"}],
        "mprotect p: ENOMEM",
        "mprotect-ENOMEM",
    ),
    "mremap-hole": ([MAP, HOLE, {"op": "mremap", "region": "p", "size": "8M"}], "mremap p: EFAULT", "mremap-EFAULT"),
    "mremap-unaligned": (
        [MAP, {"op": "mremap", "region": "p", "size": "4M", "fixed": True, "addr": "0x10000001"}],
        "mremap p: EINVAL",
        "mremap-EINVAL",
    ),
    "mlock-hole": ([MAP, HOLE, {"op": "mlock", "region": "p"}], "mlock p: ENOMEM", "mlock-ENOMEM"),
    "mlock2-onfault-hole": (
        [MAP, HOLE, {"op": "mlock", "region": "p", "onfault": True}],
        "mlock p: ENOMEM",
        "mlock-ENOMEM",
    ),
    "mlockall-onfault-only": ([MAP, {"op": "mlockall", "flags": ["onfault"]}], "mlockall: EINVAL", "mlockall-EINVAL"),
}


def _needs_thp_and_root() -> None:
    from mmsim.native_host import host_settings

    if host_settings()["transparent_hugepage/enabled"] is None:
        pytest.skip("validate needs transparent hugepage support")
    if os.geteuid() != 0:
        pytest.skip("mlock of megabytes needs root (CAP_IPC_LOCK)")


def test_the_runner_reports_each_failed_call_as_the_engine_words_it():
    from mmsim.native_report import native_report
    from mmsim.workload import run_workload

    _needs_thp_and_root()
    for name, (program, message, _) in FAILURES.items():
        # A child's failure is its own: the same call in a forked task.
        program = [*program, {"op": "fork", "program": program[1:] if name != "munmap-unaligned" else program[-1:]}]
        program.append({"op": "wait"})
        native = native_report({"program": program})["events"]
        sim = run_workload({"name": name, "program": program}, sets={"engine.schedule": "serial"})["events"]
        got = [(e["pid"], e["message"]) for e in native if e["kind"] == "syscall"]
        assert got == [(1, message), (2, message)], name
        assert [(e["pid"], e["message"]) for e in sim if e["kind"] == "syscall"] == got, name


def test_failed_calls_agree_with_mmsim_and_the_case_passes(write_workload):
    _needs_thp_and_root()
    files = [write_workload(f"{n}.json", {"name": n, "program": p}) for n, (p, _, _) in FAILURES.items()]
    r = run_mmsim("validate", "--json", *files)
    cases = {c["name"]: c for c in r.json()["cases"]}
    for name, (_, _, counter) in FAILURES.items():
        c = cases[name]
        assert c["status"] == "pass", f"{name}: {c['reason']}"
        got = {x["name"]: (x["kernel"], x["simulated"]) for x in c["counters"]}
        assert got[f"pid 1 {counter}"] == (1, 1), (name, got)
    assert r.returncode == 0, r.stdout[-2000:]


def test_failed_syscall_reads_either_sides_messages():
    from mmsim.native_compare import _event_key, failed_syscall

    def f(message: str, kind: str = "syscall") -> tuple[str, str, str] | None:
        return failed_syscall({"kind": kind, "message": message})

    assert f("munmap p: EINVAL") == ("munmap", "p", "EINVAL")
    assert f("madvise p collapse: EINVAL") == ("madvise", "p collapse", "EINVAL")
    assert f("mmap x (4096 bytes): ENOMEM") == ("mmap", "x", "ENOMEM")
    assert f('mmap x (4096 bytes): ENOENT (no file "f")') == ("mmap", "x", "ENOENT")
    assert f("open f: ENOENT") == ("open", "f", "ENOENT")
    assert f("set vm/ptshare: can only be set before the run (a kernel build, patch or boot parameter)") is None
    assert f("segfault at 0x1000", kind="segfault") is None
    assert _event_key({"kind": "syscall", "message": "mlock p: ENOMEM"}) == "mlock-ENOMEM"
    assert _event_key({"kind": "syscall", "message": "mremap q: EFAULT"}) == "mremap-EFAULT"


def _ev(pid: int, message: str) -> dict:
    return {"pid": pid, "kind": "syscall", "message": message}


def test_a_difference_in_failed_calls_names_the_first():
    from mmsim.native_compare import compare_syscalls

    same = [_ev(1, "munmap p: EINVAL"), _ev(2, "mlock q: ENOMEM")]
    assert compare_syscalls(same, list(reversed(same))) == "", "per task, not across tasks"
    assert compare_syscalls([_ev(1, "munmap p: EINVAL")], []) == (
        "pid 1: failed system calls differ: failure 1 is `munmap p: EINVAL` on the kernel, none in mmsim "
        "(1 failed on the kernel, 0 in mmsim)"
    )
    got = compare_syscalls(
        [_ev(1, "munmap p: EINVAL"), _ev(1, "mprotect p: ENOMEM")],
        [_ev(1, "munmap p: EINVAL"), _ev(1, "mprotect p: EINVAL")],
    )
    assert "failure 2 is `mprotect p: ENOMEM` on the kernel, `mprotect p: EINVAL` in mmsim" in got
    got = compare_syscalls([_ev(3, "mremap p: EFAULT")], [_ev(3, "mremap q: EFAULT")])
    assert got.startswith("pid 3: failed system calls differ: failure 1 is `mremap p: EFAULT`"), got
    # Not system calls of the workload's ops: a set op's refusal, a fatal signal.
    assert compare_syscalls([], [_ev(1, "set init_on_alloc: can only be set before the run")]) == ""


def test_a_case_whose_failed_calls_differ_fails_with_the_message(monkeypatch):
    """Fabricated reports: the counts of each error agree, the region does not; then an error
    only the kernel had. Both fail, naming the first difference; equal lists pass."""
    from mmsim import native

    rows = [{"label": lbl, "pid": 1, "minflt": 0} for lbl in ("__begin", "__end")]
    sim = {
        "snapshots": [{"label": lbl, "pid": 1, "processes": [{"pid": 1, "minflt": 0}]} for lbl in ("__begin", "__end")]
    }
    host = {"transparent_hugepage/enabled": "never"}
    w = {"name": "fabricated", "program": [MAP]}

    def verdict(kernel: list[dict], mmsim: list[dict]) -> dict:
        monkeypatch.setattr(native, "run_both", lambda name, program, h: (rows, kernel, {**sim, "events": mmsim}))
        return native.validate_workload(w, host)

    r = verdict([_ev(1, "munmap p: EINVAL")], [_ev(1, "munmap p: EINVAL")])
    assert r["status"] == "pass", r["reason"]
    r = verdict([_ev(1, "munmap p: EINVAL")], [_ev(1, "munmap q: EINVAL")])
    assert r["status"] == "fail"
    assert r["reason"] == (
        "pid 1: failed system calls differ: failure 1 is `munmap p: EINVAL` on the kernel, `munmap q: EINVAL` in "
        "mmsim (1 failed on the kernel, 1 in mmsim)"
    )
    r = verdict([_ev(1, "mlock p: ENOMEM")], [])
    assert r["status"] == "fail"
    assert r["reason"].startswith("pid 1: failed system calls differ: failure 1 is `mlock p: ENOMEM` on the kernel")
    assert "pid 1 mlock-ENOMEM: kernel 1, mmsim 0" in r["reason"], "the count differs too"
    case = native.Case("fabricated", "pins", [MAP], counters=("minflt",))
    rows[:] = [{**r, "label": lbl} for r, lbl in zip(rows, ("before", "after"), strict=True)]
    sim["snapshots"] = [{**s, "label": lbl} for s, lbl in zip(sim["snapshots"], ("before", "after"), strict=True)]
    monkeypatch.setattr(native, "run_both", lambda name, program, h: (rows, [_ev(1, "munmap p: EINVAL")], sim))
    r = native.validate_case(case, host)
    assert r["status"] == "fail" and "failure 1 is `munmap p: EINVAL` on the kernel, none in mmsim" in r["reason"]
