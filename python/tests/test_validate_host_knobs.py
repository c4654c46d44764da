"""`mmsim validate`: a workload's own knobs are set on the host for its case (and given to mmsim),
restored after it; a knob the host cannot take skips the case, naming it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run_mmsim

THP = Path("/sys/kernel/mm/transparent_hugepage")
ENABLED = THP / "enabled"
MAX_PTES_NONE = THP / "khugepaged" / "max_ptes_none"

#: A 2 MiB-aligned anonymous region of 4 MiB, every page written: 2 THPs where THP is "always".
WRITTEN = [{"op": "mmap", "name": "p", "size": "4M", "align": "2M"}, {"op": "write", "region": "p"}]


def _needs_root_and_thp() -> None:
    from mmsim.native_host import host_settings, unmirrored

    if os.geteuid() != 0 or not ENABLED.exists():
        pytest.skip("needs root and transparent hugepages to write transparent_hugepage/enabled")
    own = THP / "hugepages-2048kB" / "enabled"
    if own.exists() and "[inherit]" not in own.read_text():
        pytest.skip("hugepages-2048kB/enabled overrides transparent_hugepage/enabled on this host")
    why = unmirrored({"program": WRITTEN}, host_settings())
    if why:
        pytest.skip(why)


def _case(write_workload, knobs: dict, program: list | None = None) -> tuple[dict, dict]:
    w = write_workload("w.json", {"name": "knobs", "knobs": knobs, "program": program or WRITTEN})
    r = run_mmsim("validate", "--json", w)
    assert r.returncode in (0, 1), r.stderr
    (case,) = r.json()["cases"]
    return case, {c["name"]: (c["kernel"], c["simulated"]) for c in case["counters"]}


def test_a_workloads_thp_enabled_is_set_on_the_host_for_its_case(write_workload):
    """ "never": no THP on either side, whatever the host's setting; "always": THPs on both,
    without MADV_HUGEPAGE; the host's setting is back after each."""
    _needs_root_and_thp()
    before = ENABLED.read_text()
    case, got = _case(write_workload, {"transparent_hugepage/enabled": "never"})
    assert ENABLED.read_text() == before, "restored"
    assert case["status"] == "pass", case["reason"]
    assert got["pid 1 __begin->__end AnonHugePages"] == (0, 0)
    assert got["pid 1 __begin->__end minflt"] == (1024, 1024)

    case, got = _case(write_workload, {"transparent_hugepage/enabled": "always"})
    assert ENABLED.read_text() == before, "restored"
    assert case["status"] == "pass", case["reason"]
    assert got["pid 1 __begin->__end AnonHugePages"] == (4096, 4096), "two THPs on the kernel and in mmsim"
    assert got["pid 1 __begin->__end minflt"] == (2, 2)


def test_a_knob_the_host_has_already_needs_no_write_and_no_root(write_workload, monkeypatch):
    """A knob at the host's value is not written (no root needed), and mmsim gets it."""
    from mmsim import native
    from mmsim.native_host import host_settings
    from mmsim.native_knobs import HostSettings

    host = host_settings()
    if host["transparent_hugepage/enabled"] is None:
        pytest.skip("the host kernel has no transparent hugepage support")
    written = []
    monkeypatch.setattr(HostSettings, "__enter__", lambda self: written.append(dict(self.changes)) or self)
    seen = []

    def run_both(name, program, h):
        seen.append(native._host_workload(name, program, h)["knobs"])
        return [], [], {"snapshots": [], "events": []}

    monkeypatch.setattr(native, "run_both", run_both)
    knobs = {"transparent_hugepage/enabled": host["transparent_hugepage/enabled"], "vm/ptshare": "0"}
    r = native.validate_workload({"name": "same", "knobs": knobs, "program": WRITTEN}, host)
    assert r["status"] == "pass", r["reason"]
    assert written == [{}], "nothing to write"
    assert seen[0]["transparent_hugepage/enabled"] == host["transparent_hugepage/enabled"]
    assert seen[0]["vm/ptshare"] == "off", "mmsim's spelling of its default"


def test_a_knob_the_host_cannot_take_skips_the_case_naming_it(write_workload):
    """mmsim's own knobs at other than their defaults, a boot parameter other than the host's,
    a debugfs knob without debugfs: skipped, the knob named; at the host's value: run."""
    from mmsim.native_host import _boot_flag, host_settings, unmirrored
    from mmsim.native_knobs import host_knob_file

    if unmirrored({"program": WRITTEN}, host_settings()):
        pytest.skip(unmirrored({"program": WRITTEN}, host_settings()))
    for knob, value in (
        ("transparent_hugepage/huge_zero_page", "vhzp"),
        ("vm/ptshare", "pte"),
        ("vm/scrub_start", "9"),
    ):
        case, _ = _case(write_workload, {knob: value})
        assert case["status"] == "skip", case
        assert f"knob {knob}={value}" in case["reason"] and "mmsim's own knob" in case["reason"], case["reason"]
    case, _ = _case(write_workload, {"transparent_hugepage/huge_zero_page": "hzp"})
    assert case["status"] == "pass", case["reason"]

    host = _boot_flag("init_on_alloc")
    case, _ = _case(write_workload, {"init_on_alloc": "0" if host == "1" else "1"})
    assert case["status"] == "skip" and "init_on_alloc" in case["reason"], case
    if host is not None:
        case, _ = _case(write_workload, {"init_on_alloc": host})
        assert case["status"] == "pass", case["reason"]

    if not isinstance(host_knob_file("fault_around_bytes"), Path):
        case, _ = _case(write_workload, {"fault_around_bytes": "16384"})
        assert case["status"] == "skip", case
        assert "fault_around_bytes=16384" in case["reason"] and "debugfs" in case["reason"], case["reason"]
        case, _ = _case(write_workload, {"fault_around_bytes": "64K"})
        assert case["status"] == "pass", "Linux's default, the host's without debugfs: " + case["reason"]


def test_fault_around_bytes_is_written_in_debugfs_where_it_is_mounted(write_workload):
    """Where debugfs is mounted: a tmpfs file read through a shared mapping with 16 KiB of
    fault-around takes 4 times the faults of 64 KiB, on the kernel and in mmsim."""
    from mmsim.native_knobs import DEBUGFS, host_knob_file

    where = host_knob_file("fault_around_bytes")
    if os.geteuid() != 0 or not isinstance(where, Path):
        pytest.skip(f"needs root and debugfs's fault_around_bytes ({where})")
    if not os.path.isdir("/dev/shm"):
        pytest.skip("needs a tmpfs at /dev/shm")
    before = (DEBUGFS / "fault_around_bytes").read_text()
    program = [
        {"op": "create", "file": "t", "size": "4M", "fs": "tmpfs"},
        {"op": "pwrite", "file": "t", "chunk": "1M"},
        {"op": "mmap", "name": "m", "size": "4M", "align": "2M", "file": "t", "flags": ["shared"], "prot": "r"},
        {"op": "read", "region": "m"},
    ]
    case, got = _case(write_workload, {"fault_around_bytes": "16384"}, program)
    assert (DEBUGFS / "fault_around_bytes").read_text() == before, "restored"
    if case["status"] == "skip":
        pytest.skip(case["reason"])
    assert case["status"] == "pass", case["reason"]
    assert got["pid 1 __begin->__end minflt"] == (256, 256), "1024 pages, 4 a fault"


def test_khugepaged_knobs_are_set_during_the_case_and_given_to_mmsim(monkeypatch):
    from mmsim import native
    from mmsim.native_host import host_settings

    if os.geteuid() != 0 or not MAX_PTES_NONE.exists():
        pytest.skip("needs root and khugepaged's max_ptes_none")
    before = MAX_PTES_NONE.read_text()
    other = "100" if before.strip() != "100" else "200"
    during = []

    def run_both(name, program, h):
        during.append((MAX_PTES_NONE.read_text().strip(), native._host_workload(name, program, h)["knobs"]))
        return [], [], {"snapshots": [], "events": []}

    monkeypatch.setattr(native, "run_both", run_both)
    knob = "transparent_hugepage/khugepaged/max_ptes_none"
    r = native.validate_workload({"name": "k", "knobs": {knob: other}, "program": []}, host_settings())
    assert MAX_PTES_NONE.read_text() == before, "restored"
    assert r["status"] == "pass", r["reason"]
    assert during[0][0] == other, "the host's during the case"
    assert during[0][1][knob] == other, "mmsim's"


def test_the_hosts_knobs_are_restored_on_errors_and_ctrl_c(monkeypatch):
    from mmsim import MmsimError, native
    from mmsim.native_host import host_settings
    from mmsim.native_knobs import HostSettings

    _needs_root_and_thp()
    before = ENABLED.read_text()
    other = "never" if "[never]" not in before else "always"

    def interrupted(name, program, h):
        assert f"[{other}]" in ENABLED.read_text()
        raise KeyboardInterrupt

    monkeypatch.setattr(native, "run_both", interrupted)
    w = {"name": "ctrl-c", "knobs": {"transparent_hugepage/enabled": other}, "program": WRITTEN}
    with pytest.raises(KeyboardInterrupt):
        native.validate_workload(w, host_settings())
    assert ENABLED.read_text() == before, "restored after Ctrl-C"

    # A failed write after one that succeeded: the first is written back too.
    bad = HostSettings({"transparent_hugepage/enabled": other, "transparent_hugepage/khugepaged/max_ptes_none": "9999"})
    with pytest.raises(MmsimError, match="max_ptes_none: Invalid argument"), bad:
        pass
    assert ENABLED.read_text() == before, "restored after a failed write"


def test_host_set_takes_the_knobs_a_host_has():
    from mmsim import MmsimError
    from mmsim.native_knobs import HostSettings, host_knob_file

    assert host_knob_file("transparent_hugepage/khugepaged/pages_to_scan") == THP / "khugepaged" / "pages_to_scan"
    assert host_knob_file("vm/nr_hugepages") == Path("/proc/sys/vm/nr_hugepages")
    assert "mmsim's own knob" in str(host_knob_file("vm/ptshare"))
    assert "build or boot" in str(host_knob_file("init_on_alloc"))
    with pytest.raises(MmsimError, match="not a knob the runner may set"):
        HostSettings({"vm/dirty_ratio": "1"})
    with pytest.raises(MmsimError, match="vm/ptshare: not a knob the runner may set"):
        HostSettings({"vm/ptshare": "pte"})
