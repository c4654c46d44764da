"""Linux's own selftests (tools/testing/selftests/mm) as mmsim workloads:
`experiments/validate/selftests/*.json`, one per scenario of cow.c, khugepaged.c,
mlock2-tests.c, mremap_test.c, madv_populate.c and hugetlb-madvise.c (the table in
docs/validation.md says what each translates and what it leaves out).

Each case asserts what its selftest asserts, twice: in mmsim (the tests below, on mmsim's
report, under the reference model's check) and on this machine's kernel (`mmsim validate`,
which runs the same program through the native runner and compares every counter and every
failed call). A `read` with `expect` is the selftests' memcmp: a wrong byte fails the run on
either side."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from conftest import run_mmsim

SELFTESTS = Path(__file__).resolve().parents[2] / "experiments" / "validate" / "selftests"


def _run(name: str) -> dict[str, Any]:
    from mmsim.workload import run_workload

    r = run_workload(SELFTESTS / f"{name}.json", check=True)
    assert not r["failed"], (name, r["events"])
    assert r["check"]["mismatches"] == 0, (name, r["check"])
    return r


def _syscalls(r: dict[str, Any]) -> list[str]:
    return [e["message"] for e in r["events"] if e["kind"] == "syscall"]


def _proc(r: dict[str, Any], label: str, pid: int) -> dict[str, Any]:
    (snap,) = [s for s in r["snapshots"] if s["label"] == label]
    (p,) = [p for p in snap["processes"] if p["pid"] == pid]
    return p


def _meminfo(r: dict[str, Any], label: str) -> dict[str, Any]:
    (snap,) = [s for s in r["snapshots"] if s["label"] == label]
    return snap["meminfo"]


def _cases(prefix: str) -> list[str]:
    return sorted(p.stem for p in SELFTESTS.glob(f"{prefix}*.json"))


@pytest.mark.parametrize("name", _cases("cow-"))
def test_cow_no_leak_between_parent_and_child(name):
    """cow.c: "No leak from parent into child" / "Other mapping not modified". The writer's
    memset(0xff) and the other side's memcmp are the cases' write and read ops; a leak is a
    failed expect, and no call may fail."""
    r = _run(name)
    assert _syscalls(r) == [], name
    assert not [e for e in r["events"] if e["kind"] != "syscall"], r["events"]


#: check_huge_anon per snapshot of khugepaged.c's madvise context: label -> (pid, AnonHugePages kB)
KHUGEPAGED = {
    "khugepaged-alloc-at-fault": {"fault": (1, 2048), "split": (1, 0)},
    "khugepaged-collapse-full": {"collapsed": (1, 8192)},
    "khugepaged-collapse-empty": {"not-collapsed": (1, 0)},
    "khugepaged-collapse-single-pte-entry": {"collapsed": (1, 2048)},
    "khugepaged-collapse-max-ptes-none": {"collapsed": (1, 2048)},
    "khugepaged-collapse-single-pte-entry-compound": {
        "alloc-hpage": (1, 2048),
        "split": (1, 0),
        "collapsed": (1, 2048),
    },
    "khugepaged-collapse-full-of-compound": {"alloc-hpage": (1, 2048), "split": (1, 0), "collapsed": (1, 2048)},
    "khugepaged-collapse-fork": {"small-page": (1, 0), "child-collapsed": (2, 2048), "parent-small-page": (1, 0)},
    "khugepaged-collapse-fork-compound": {
        "child-shares-thp": (2, 2048),
        "child-split": (2, 0),
        "child-collapsed": (2, 2048),
        "parent-thp": (1, 2048),
    },
    "khugepaged-collapse-max-ptes-shared": {
        "child-shares-thp": (2, 2048),
        "child-cow": (2, 0),
        "child-collapsed": (2, 2048),
        "parent-thp": (1, 2048),
    },
    "khugepaged-madvise-collapse-existing-thps": {"alloc-hpage": (1, 2048), "collapsed-again": (1, 2048)},
}


@pytest.mark.parametrize("name", _cases("khugepaged-"))
def test_khugepaged_madvise_collapse(name):
    """khugepaged.c in its madvise context: MADV_COLLAPSE's result and check_huge_anon after
    it; only an empty PTE table is refused (EINVAL), the pte-scan limits do not apply."""
    r = _run(name)
    for label, (pid, kb) in KHUGEPAGED[name].items():
        assert _proc(r, label, pid)["AnonHugePages"] == kb, (name, label)
    failed = ["madvise p collapse: EINVAL"] if name == "khugepaged-collapse-empty" else []
    assert _syscalls(r) == failed


def test_mlock2_tests():
    """mlock2-tests.c: lock_check (VM_LOCKED, every page present and locked),
    onfault_check (VM_LOCKONFAULT, only the touched page locked), their unlock checks, and the
    vma splits of test_vma_management seen in VmLck."""
    lock = _run("mlock2-tests-mlock-lock")
    assert [_proc(lock, s, 1)["VmLck"] for s in ("lock-check", "unlock-lock-check")] == [8, 0]
    assert [_meminfo(lock, s)["Mlocked"] for s in ("lock-check", "unlock-lock-check")] == [8, 0]
    for name in ("mlock2-tests-mlock-onfault", "mlock2-tests-lock-onfault-of-present"):
        r = _run(name)
        label = "onfault-check" if name.endswith("onfault") else "onfault-of-present"
        assert _proc(r, label, 1)["VmLck"] == 8, name
        assert _meminfo(r, label)["Mlocked"] == 4, f"{name}: only the touched page"
    onfault = _run("mlock2-tests-mlock-onfault")
    assert _proc(onfault, "unlock-onfault-check", 1)["VmLck"] == 0
    for name in ("mlock2-tests-munlockall0", "mlock2-tests-munlockall1"):
        r = _run(name)
        locked = _proc(r, "lock-check", 1)["VmLck"]
        assert locked >= 8 and _meminfo(r, "lock-check")["Mlocked"] == locked, "every page present and locked"
        assert _proc(r, "unlock-lock-check", 1)["VmLck"] == 0
        assert _meminfo(r, "unlock-lock-check")["Mlocked"] == 0
    r = _run("mlock2-tests-munlockall1")
    assert _meminfo(r, "onfault-check")["Mlocked"] < _proc(r, "onfault-check", 1)["VmLck"], "onfault: not populated"
    assert _proc(r, "unlock-onfault-check", 1)["VmLck"] == 0
    vma = _run("mlock2-tests-vma-management")
    assert [_proc(vma, s, 1)["VmLck"] for s in ("locked", "split", "merged")] == [12, 8, 0]
    every = _run("mlock2-tests-mlockall")
    base = _proc(every, "locked", 1)["VmLck"]
    assert [_proc(every, s, 1)["VmLck"] for s in ("split", "merged", "unlocked")] == [base - 4, base - 12, 0]


def test_mremap_test():
    """mremap_test.c: expand-merge (in place, the range then mapped whole), moves of shared
    anonymous memory at its alignments with the content following, a move within a range that
    leaves the rest intact, shrinks across holes, and the refused moves (overlap, an unaligned
    destination: EINVAL)."""
    for name in _cases("mremap-test-"):
        r = _run(name)
        failed = ["mremap ov: EINVAL"] * 2 if name == "mremap-test-move" else []
        assert _syscalls(r) == failed, name


def test_madv_populate():
    """madv_populate.c: EINVAL without the access's permission, ENOMEM at any hole, and a
    populated range that a later touch does not fault."""
    assert _syscalls(_run("madv-populate-prot-read")) == ["madvise addr populate_write: EINVAL"]
    assert _syscalls(_run("madv-populate-prot-write")) == ["madvise addr populate_read: EINVAL"]
    holes = _run("madv-populate-holes")
    assert _syscalls(holes) == [f"madvise addr populate_{a}: ENOMEM" for _ in range(3) for a in ("read", "write")]
    for name in ("madv-populate-read", "madv-populate-write"):
        r = _run(name)
        before, populated, touched = (_proc(r, s, 1)["minflt"] for s in ("not-populated", "populated", "touched"))
        assert populated - before == 512, name
        assert touched == populated, f"{name}: range is populated"


def test_hugetlb_madvise():
    """hugetlb-madvise.c's validate_free_pages after each call, on a pool of 20 (the parts
    that map the hugetlb file privately are not modelled)."""
    r = _run("hugetlb-madvise")
    free = [s["meminfo"]["HugePages_Free"] for s in r["snapshots"]]
    # A DONTNEED starting in the hole before the mapping zaps what it covers, rounded down to
    # a huge page, and says ENOMEM; the selftest asserts only the error.
    assert free == [10, 19, 20, 10, 10, 19, 20, 10, 20, 10, 10, 10, 20]
    assert _syscalls(r) == ["madvise a dontneed: ENOMEM"] * 2 + ["madvise b dontneed: EINVAL"]


def test_every_selftest_case_agrees_with_the_kernel():
    """The same programs on this machine's kernel: every counter and every failed call."""
    from mmsim.native_host import host_settings

    if host_settings()["transparent_hugepage/enabled"] is None:
        pytest.skip("validate needs transparent hugepage support")
    if os.geteuid() != 0:
        pytest.skip("the cases set THP knobs and size the hugetlb pool: root")
    files = sorted(SELFTESTS.glob("*.json"))
    r = run_mmsim("validate", "--json", *files)
    cases = r.json()["cases"]
    assert len(cases) == len(files) >= 42
    for c in cases:
        if c["status"] == "skip" and "hugetlb pool" in c["reason"]:
            print(f"skipped {c['name']}: {c['reason']}")
            continue
        assert c["status"] == "pass", f"{c['name']}: {c['reason']}"
        assert all(x["tolerance"] == 0 for x in c["counters"]), c["name"]
    assert r.returncode == 0
