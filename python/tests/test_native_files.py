"""The native runner's files (issue 16): create, pwrite, pread, fadvise, fsync, file mappings,
madvise's new advice and vm/drop_caches, run on this machine's kernel. Exact counts are asserted
only where the kernel is deterministic (major faults, PMD maps of order-9 folios, a cold file
read with MADV_RANDOM); the readahead-driven minor faults of docs/research/
page-cache-kernel-measurements.md depend on read_ahead_kb and on I/O timing, and are bounded."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from conftest import run_mmsim

from mmsim import MmsimError, native, native_compare
from mmsim.native import compile_program, run_native, with_baselines
from mmsim.native_host import host_settings


def _kernel_at_least(major: int, minor: int) -> bool:
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (major, minor)


@pytest.fixture
def kernel() -> Iterator[dict[str, Any]]:
    """Skip unless the runner builds and this host has an ext4 and a tmpfs directory for files;
    the host's settings otherwise. Leaves no run directory behind."""
    try:
        native.runner_path()
    except MmsimError as e:
        pytest.skip(f"the native runner cannot run here: {e}")
    host = host_settings()
    missing = [fs for fs, d in host["file_dirs"].items() if not d]
    if missing:
        pytest.skip(f"no {' or '.join(missing)} directory for the workload's files")
    before = {fs: set(Path(d).glob("mmsim-*")) for fs, d in host["file_dirs"].items()}
    yield host
    for fs, d in host["file_dirs"].items():
        assert set(Path(d).glob("mmsim-*")) <= before[fs], f"a run left its {fs} directory behind"


def _span(rows: list[dict[str, Any]], a: str, b: str, pid: int = 1) -> dict[str, int]:
    """Per-process and system-wide changes between two snapshots of one process."""
    s0 = next(r for r in rows if r["label"] == a and r["pid"] == pid)
    s1 = next(r for r in rows if r["label"] == b and r["pid"] == pid)
    out = {k: s1[k] - s0[k] for k in ("minflt", "majflt", "RssFile", "RssShmem")}
    for group in ("vmstat", "meminfo"):
        out.update({k: v - s0[group].get(k, 0) for k, v in s1[group].items()})
    return out


def _events(rows: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return [(r["pid"], r["kind"], r["message"]) for r in rows if r["label"] == native.EVENT]


def test_compile_program_writes_the_file_ops_and_refuses_what_the_runner_cannot_do():
    prog = [
        {"op": "create", "file": "f", "size": "64M"},
        {"op": "create", "file": "t.1", "size": "2M", "fs": "tmpfs"},
        {"op": "mmap", "name": "p", "size": "64M", "file": "f", "align": "2M", "prot": "r"},
        {"op": "mmap", "name": "q", "size": "1M", "file": "t.1", "file_offset": "1M", "flags": ["shared"]},
        {"op": "madvise", "region": "p", "advice": "collapse"},
        {
            "op": "fork",
            "program": [
                {"op": "pwrite", "file": "f", "offset": "4K", "length": "8K", "chunk": "2M", "value": 7},
                {"op": "pread", "file": "f", "expect": 0},
                {"op": "pread", "file": "f", "chunk": "1M"},
            ],
        },
        {"op": "fadvise", "file": "f", "advice": "willneed", "offset": "1M"},
        {"op": "fsync", "file": "t.1"},
        {"op": "set", "knob": "vm/drop_caches", "value": 3},
    ]
    assert compile_program(prog).splitlines() == [
        "create f 67108864 ext4",
        "create t.1 2097152 tmpfs",
        "mmap p 67108864 2097152 1 4 0 0 f 0",  # PROT_READ
        "mmap q 1048576 0 3 5 0 0 t.1 1048576",  # PROT_READ | PROT_WRITE
        "madvise p 0 -1 collapse 25",  # MADV_COLLAPSE
        "fork 1",
        "pwrite f 4096 8192 2097152 7",
        "pread f 0 -1 4096 0",
        "pread f 0 -1 1048576 -1",
        "end",
        "fadvise f 1048576 0 willneed",
        "fsync t.1",
        "drop_caches 3",
    ]
    create = {"op": "create", "file": "f", "size": "4K"}
    bad = [
        ([create, {"op": "pread", "file": "f", "chunk": "4M"}], "at most 2097152 bytes"),
        ([create, {"op": "pwrite", "file": "f", "chunk": 0}], "at most 2097152 bytes"),
        ([{"op": "pread", "file": "g"}], "no create op of the workload makes the file 'g'"),
        ([create, {"op": "mmap", "name": "m", "size": "4K", "file": "g"}], "mmap m: no create op"),
        ([create, {"op": "mmap", "name": "m", "size": "4K", "file": "f", "flags": ["private", "anonymous"]}], "anon"),
        ([{"op": "create", "file": "..", "size": 1}], "A-Za-z0-9"),
        ([{"op": "create", "file": "a/b", "size": 1}], "A-Za-z0-9"),
        ([{"op": "create", "file": "f", "size": 1, "fs": "xfs"}], "'xfs' is not one of ext4, tmpfs"),
        ([create, {"op": "fadvise", "file": "f", "advice": "noreuse"}], "dontneed, willneed"),
        (
            [{"op": "mmap", "name": "m", "size": "4K"}, {"op": "madvise", "region": "m", "advice": "mergeable"}],
            "mergeable",
        ),
        ([{"op": "set", "knob": "vm/drop_caches", "value": 4}], "1, 2 or 3"),
        ([{"op": "set", "knob": "vm/dirty_ratio", "value": 1}], "cannot run the 'set' op"),
    ]
    for program, message in bad:
        with pytest.raises(MmsimError, match=re.escape(message)):
            compile_program(program)


def test_failed_madvise_and_file_ops_are_compared_as_events():
    key = native_compare._event_key
    assert key({"kind": "syscall", "message": "madvise p collapse: EINVAL"}) == "madvise-collapse-EINVAL"
    assert key({"kind": "syscall", "message": "mmap x (4096 bytes): ENOMEM"}) == "mmap-ENOMEM"
    assert key({"kind": "syscall", "message": "pread f: ENOENT"}) == "pread-ENOENT"
    assert key({"kind": "syscall", "message": "fadvise f willneed: EINVAL"}) == "fadvise-EINVAL"
    assert key({"kind": "expect", "message": "pread f at 0x1000: expected 1, found 0"}) == "pread-expect"
    assert key({"kind": "expect", "message": "read at 0x1000: expected 1, found 0"}) is None
    assert key({"kind": "not-cold", "message": "create f: 3 of its 4 pages stayed in the page cache"}) is None
    got = native_compare.compare_events(
        [{"pid": 1, "kind": "syscall", "message": "madvise p collapse: EINVAL"}],
        [{"pid": 1, "kind": "syscall", "message": "madvise p collapse: EINVAL"}],
    )
    assert got == [{"name": "pid 1 madvise-collapse-EINVAL", "kernel": 1, "simulated": 1, "tolerance": 0}]
    assert {"majflt", "RssFile"} <= set(native_compare.FIELDS)
    assert native_compare.not_cold([{"kind": "not-cold", "message": "create f: 1 of its 1 pages stayed"}])


def test_file_directories_are_checked_and_dir_overrides_them(tmp_path, write_workload):
    if native.fs_type("/dev/shm") == "tmpfs":
        with pytest.raises(MmsimError, match="is on tmpfs, not ext4"):
            native.parse_dir_options(["ext4=/dev/shm"])
        with native.file_dirs_override({"tmpfs": "/dev/shm"}):
            assert native.file_dirs()["tmpfs"] == "/dev/shm"
    for bad in ("xfs=/tmp", "ext4", f"tmpfs={tmp_path / 'none' / 'x'}"):
        with pytest.raises(MmsimError, match="--dir"):
            native.parse_dir_options([bad])
    program = [{"op": "create", "file": "f", "size": "4K", "fs": "tmpfs"}]
    with pytest.raises(MmsimError, match=r"creates tmpfs files .* --dir tmpfs=PATH"):
        native._run_dirs(program, {"ext4": None, "tmpfs": None})
    w = write_workload("files.json", {"program": program})
    r = run_mmsim("validate", "--dir", "tmpfs=/nonexistent-mmsim-dir/x", w)
    assert r.returncode == 2 and "--dir tmpfs=/nonexistent-mmsim-dir/x" in r.stderr, r.stderr
    if os.geteuid() != 0:
        with pytest.raises(MmsimError, match=r"set op of vm/drop_caches .* needs root"):
            run_native({"program": [{"op": "set", "knob": "vm/drop_caches", "value": 1}]})


def test_a_cold_ext4_file_mapped_and_read_faults_as_measured(kernel):
    """docs/research/page-cache-kernel-measurements.md, experiments 1 and 2: a cold 64 MiB ext4
    file, mapped private read-only 2 MiB-aligned and read a byte per 4 KiB, takes one major
    fault (the read-around); with MADV_HUGEPAGE, order-9 folios from page 0: 32 faults in all,
    every 2 MiB PMD-mapped."""
    if not _kernel_at_least(6, 16):
        pytest.skip("ext4 has large folios from Linux 6.16")

    def run(advice: list[dict[str, Any]]) -> dict[str, int]:
        rows = run_native(
            {
                "program": [
                    {"op": "create", "file": "f", "size": "64M"},
                    {"op": "mmap", "name": "p", "size": "64M", "file": "f", "align": "2M", "prot": "r"},
                    *advice,
                    {"op": "snapshot", "label": "a"},
                    {"op": "read", "region": "p"},
                    {"op": "snapshot", "label": "b"},
                ]
            }
        )
        assert _events(rows) == []
        return _span(rows, "a", "b")

    plain = run([])
    assert plain["majflt"] == 1, plain
    assert plain["RssFile"] == 65536
    if kernel["read_ahead_kb"] == 8192:
        assert 430 <= plain["minflt"] <= 450, plain  # 436 + a few where I/O was in flight
        assert plain["nr_file_pmdmapped"] == plain["thp_file_mapped"] == 12, plain
    huge = run([{"op": "madvise", "region": "p", "advice": "hugepage"}])
    assert (huge["minflt"], huge["majflt"], huge["RssFile"]) == (31, 1, 65536), huge
    assert huge["FilePmdMapped"] == 65536 and huge["thp_file_mapped"] == 32, huge


def test_a_created_file_is_cold_and_collapse_works_on_tmpfs_only(kernel):
    """create leaves no page of an ext4 file cached: with MADV_RANDOM every page read is a
    major fault of its own. MADV_COLLAPSE of a tmpfs mapping gives a PMD; of an ext4 one, this
    kernel says EINVAL (an event worded as mmsim's)."""
    if kernel["transparent_hugepage/enabled"] is None:
        pytest.skip("the host kernel has no transparent hugepage support (MADV_COLLAPSE)")
    rows = run_native(
        {
            "program": [
                {"op": "create", "file": "f", "size": "64K"},
                {"op": "mmap", "name": "p", "size": "64K", "file": "f", "prot": "r"},
                {"op": "madvise", "region": "p", "advice": "random"},
                {"op": "snapshot", "label": "a"},
                {"op": "read", "region": "p", "expect": 0},
                {"op": "snapshot", "label": "b"},
                {"op": "create", "file": "e", "size": "2M"},
                {"op": "mmap", "name": "x", "size": "2M", "file": "e", "align": "2M", "prot": "r"},
                {"op": "read", "region": "x"},
                {"op": "madvise", "region": "x", "advice": "collapse"},
                {"op": "create", "file": "t", "size": "2M", "fs": "tmpfs"},
                {"op": "mmap", "name": "s", "size": "2M", "file": "t", "align": "2M", "flags": ["shared"]},
                {"op": "write", "region": "s", "value": 5},
                {"op": "snapshot", "label": "c"},
                {"op": "madvise", "region": "s", "advice": "collapse"},
                {"op": "snapshot", "label": "d"},
                {"op": "pread", "file": "t", "length": 1, "expect": 5},
                {"op": "pread", "file": "t", "offset": 1, "length": 1, "expect": 5},
            ]
        }
    )
    cold = _span(rows, "a", "b")
    assert (cold["minflt"], cold["majflt"], cold["RssFile"]) == (0, 16, 64), cold
    collapse = _span(rows, "c", "d")
    assert collapse["ShmemPmdMapped"] == 2048 and collapse["thp_collapse_alloc"] == 1, collapse
    events = _events(rows)
    assert (1, "expect", "pread t at 0x1: expected 5, found 0") in events, "one byte per 4 KiB was written"
    for e in events:
        assert e[2] in ("madvise x collapse: EINVAL", "pread t at 0x1: expected 5, found 0"), events


def test_the_runner_is_invisible_to_file_reads_in_forked_children(kernel):
    """A process and 20 forked children each pread a cached file (a thread too): no task takes
    a fault, minor or major. The children map the runner's code again after fork (its file
    mappings are not copied) before their first snapshot, and read into the runner's buffer
    whose copy-on-write they broke there too."""
    for fs in ("ext4", "tmpfs"):
        pread = {"op": "pread", "file": "f", "expect": 3}
        prog = with_baselines(
            [
                {"op": "create", "file": "f", "size": "1M", "fs": fs},
                {"op": "pwrite", "file": "f", "value": 3, "chunk": "64K"},
                {"op": "snapshot", "label": "cached"},
                pread,
                {"op": "snapshot", "label": "read"},
                {"op": "fork", "count": 20, "program": [{**pread, "chunk": "2M"}, {"op": "snapshot", "label": "kid"}]},
                {"op": "wait"},
                {"op": "thread", "program": [pread]},
            ]
        )
        rows = run_native({"program": prog})
        assert _events(rows) == []
        tasks = sorted({r["pid"] for r in rows if r["label"] == native.BEGIN})
        assert tasks == list(range(1, 23))
        for pid in tasks:
            snaps = [r for r in rows if r["pid"] == pid and r["label"] not in ("__start", "__maps")]
            for a, b in pairwise(snaps):
                d = _span(rows, a["label"], b["label"], pid)
                assert (d["minflt"], d["majflt"], d["RssFile"]) == (0, 0, 0), (fs, pid, a["label"], b["label"], d)
            if pid > 1:
                assert {(s["minflt"], s["majflt"]) for s in snaps} == {(0, 0)}, "a child's counters start at fork"
                assert {s["perf"].get("minor-faults", 0) for s in snaps} == {0}
        assert max(r["runner_minflt"] for r in rows if r["pid"] == 2) > 0, "the child did map the runner again"


def test_written_pages_leave_the_cache_by_fsync_and_dontneed_or_drop_caches(kernel):
    """pwrite, fsync and fadvise(DONTNEED) make a file cold again (every page a major fault
    under MADV_RANDOM, the data read back from the disk); WILLNEED reads it in (no major
    fault); with root, fsync and vm/drop_caches do what DONTNEED does."""
    root = os.geteuid() == 0

    def cold_read(file: str, name: str) -> list[dict[str, Any]]:
        return [
            {"op": "mmap", "name": name, "size": "64K", "file": file, "prot": "r"},
            {"op": "madvise", "region": name, "advice": "random"},
            {"op": "snapshot", "label": f"{name}0"},
            {"op": "read", "region": name, "expect": 2},
            {"op": "snapshot", "label": f"{name}1"},
        ]

    prog: list[dict[str, Any]] = []
    for f in ("a", "b", "c"):
        prog += [
            {"op": "create", "file": f, "size": "64K"},
            {"op": "pwrite", "file": f, "value": 2},
            {"op": "fsync", "file": f},
        ]
    prog += [{"op": "fadvise", "file": "a", "advice": "dontneed"}, *cold_read("a", "p")]
    prog += [
        {"op": "fadvise", "file": "b", "advice": "dontneed"},
        {"op": "fadvise", "file": "b", "advice": "willneed"},
        *cold_read("b", "q"),
    ]
    if root:
        prog += [{"op": "set", "knob": "vm/drop_caches", "value": 1}, *cold_read("c", "r")]
    rows = run_native({"program": prog})
    assert _events(rows) == []
    dontneed = _span(rows, "p0", "p1")
    assert (dontneed["minflt"], dontneed["majflt"]) == (0, 16), dontneed
    assert _span(rows, "q0", "q1")["majflt"] == 0, "WILLNEED put every page in the cache"
    if root:
        dropped = _span(rows, "r0", "r1")
        assert (dropped["minflt"], dropped["majflt"]) == (0, 16), dropped
