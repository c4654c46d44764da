//! The page cache against what Linux 6.18.44 did on this machine
//! (docs/research/page-cache-kernel-measurements.md): exact fault counts, folio sizes and
//! counters of file mappings, read(2), write(2), MADV_COLLAPSE and COW of a PMD-mapped file
//! folio. Every run is also checked against the reference model and the invariants.

use serde_json::{json, Value};

use crate::report::{Report, Snapshot};
use crate::sim::{run_with, RunOptions};
use crate::workload::spec::parse_workload;

/// Run `program` with this machine's vda (read_ahead_kb 8192, max_sectors_kb 4096) and THP
/// `never`, plus `knobs`; with the reference model and the invariants after every op.
pub(super) fn run(program: Value, knobs: Value) -> Report {
    let mut k = json!({"block/read_ahead_kb": "8192", "block/max_sectors_kb": "4096",
                       "transparent_hugepage/enabled": "never"});
    for (n, v) in knobs.as_object().expect("knobs") {
        k[n] = v.clone();
    }
    let w = json!({"name": "files", "knobs": k, "program": program});
    let w = parse_workload(&w.to_string()).expect("valid");
    let r =
        run_with(&w, &[], &RunOptions { check: true, invariants_each_op: true, ..Default::default() }).expect("runs");
    assert!(!r.events.iter().any(|e| e.kind == "invariant" || e.kind == "mismatch"), "{:?}", r.events);
    assert_eq!(r.check.mismatches, 0);
    r
}

fn snap<'a>(r: &'a Report, label: &str) -> &'a Snapshot {
    r.snapshots.iter().find(|s| s.label == label).expect(label)
}

/// Change of a process field (`minflt`, `majflt`, `RssFile`, ...) or, for pid 0, of a
/// system-wide /proc/meminfo or /proc/vmstat counter, between two snapshots.
pub(super) fn delta(r: &Report, a: &str, b: &str, pid: u32, name: &str) -> i64 {
    let get = |s: &Snapshot| -> i64 {
        if pid == 0 {
            let m = s.meminfo.0.iter().chain(s.vmstat.0.iter()).find(|(k, _)| k == name);
            return m.unwrap_or_else(|| panic!("{name}")).1;
        }
        let p = s.processes.iter().find(|p| p.pid == pid).expect("pid");
        let v = serde_json::to_value(p).expect("json");
        v[name].as_i64().unwrap_or_else(|| panic!("{name}"))
    };
    get(snap(r, b)) - get(snap(r, a))
}

fn create(size: &str) -> Value {
    json!({"op": "create", "file": "f", "size": size})
}

fn map_private(prot: &str) -> Value {
    json!({"op": "mmap", "name": "m", "size": "64M", "file": "f", "flags": ["private"], "prot": prot})
}

/// A cold 64 MiB file read one byte per page through a private mapping: one major fault
/// (the sync read-around of 2048 pages), then async windows of growing order, each started
/// by a fault on its marked page; 16 pages per fault at order 0, one fault per folio above,
/// one PMD per order-9 folio. At read_ahead_kb 128: windows of 32, the end-of-file folio
/// mapped in 16-page windows.
#[test]
fn cold_mapping_read_faults_as_readahead_makes_them() {
    let mut prog = vec![create("64M"), map_private("r"), json!({"op": "snapshot", "label": "s0"})];
    for i in 0..32 {
        prog.push(json!({"op": "read", "region": "m", "offset": format!("{}M", 2 * i), "length": "2M"}));
        prog.push(json!({"op": "snapshot", "label": format!("s{}", i + 1)}));
    }
    let r = run(json!(prog), json!({}));
    let per_block: Vec<i64> =
        (0..32).map(|i| delta(&r, &format!("s{i}"), &format!("s{}", i + 1), 1, "minflt")).collect();
    let mut want = vec![31, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 8, 8, 8, 8, 2, 2, 2, 2];
    want.extend([1; 12]);
    assert_eq!(per_block, want);
    assert_eq!(delta(&r, "s0", "s32", 1, "majflt"), 1);
    assert_eq!(delta(&r, "s0", "s32", 0, "pgmajfault"), 1);
    assert_eq!(delta(&r, "s0", "s32", 0, "thp_file_mapped"), 12);
    assert_eq!(delta(&r, "s0", "s32", 0, "nr_file_hugepages"), 12);
    assert_eq!(delta(&r, "s0", "s32", 0, "FilePmdMapped"), 24576);
    assert_eq!(delta(&r, "s0", "s32", 0, "Cached"), 65536);
    assert_eq!(delta(&r, "s0", "s32", 0, "pgpgin"), 65536);
    assert_eq!(delta(&r, "s0", "s32", 1, "RssFile"), 65536);

    let r = run(json!(prog), json!({"block/read_ahead_kb": "128"}));
    let per_block: Vec<i64> =
        (0..32).map(|i| delta(&r, &format!("s{i}"), &format!("s{}", i + 1), 1, "minflt")).collect();
    let mut want = vec![19];
    want.extend([16; 30]);
    want.push(17);
    assert_eq!(per_block, want);
    assert_eq!(delta(&r, "s0", "s32", 0, "thp_file_mapped"), 0);
}

/// madvise advice on the cold read: MADV_HUGEPAGE reads PMD folios from the start (31 minor
/// faults and 1 major, all PMD-mapped, whatever THP `enabled` says), MADV_RANDOM reads each page alone
/// (16384 major faults), MADV_NOHUGEPAGE keeps the folios but maps no PMD.
#[test]
fn madvise_advice_changes_the_cold_read() {
    let run_with_advice = |advice: &str, enabled: &str| {
        run(
            json!([create("64M"), map_private("r"), {"op": "madvise", "region": "m", "advice": advice},
                   {"op": "snapshot", "label": "a"}, {"op": "read", "region": "m"},
                   {"op": "snapshot", "label": "b"}]),
            json!({"transparent_hugepage/enabled": enabled}),
        )
    };
    for enabled in ["never", "always"] {
        let r = run_with_advice("hugepage", enabled);
        assert_eq!((delta(&r, "a", "b", 1, "minflt"), delta(&r, "a", "b", 1, "majflt")), (31, 1), "{enabled}");
        assert_eq!(delta(&r, "a", "b", 0, "FilePmdMapped"), 65536);
        assert_eq!(delta(&r, "a", "b", 0, "thp_file_mapped"), 32);
    }
    let r = run_with_advice("random", "never");
    assert_eq!((delta(&r, "a", "b", 1, "minflt"), delta(&r, "a", "b", 1, "majflt")), (0, 16384));
    let r = run_with_advice("nohugepage", "always");
    assert_eq!(delta(&r, "a", "b", 1, "minflt"), 435);
    assert_eq!((delta(&r, "a", "b", 0, "thp_file_mapped"), delta(&r, "a", "b", 0, "nr_file_hugepages")), (0, 12));
}

/// write(2) sizes the folios: 1 MiB writes make 256-page folios, each mapped by one fault
/// (the last, holding the end of the file, in 16-page windows); 4 KiB writes order 0.
#[test]
fn buffered_writes_size_the_folios() {
    for (chunk, faults) in [("1M", 79), ("4K", 1024)] {
        let r = run(
            json!([{"op": "create", "file": "f", "size": 0}, {"op": "snapshot", "label": "a"},
                   {"op": "pwrite", "file": "f", "length": "64M", "chunk": chunk, "value": 3},
                   {"op": "snapshot", "label": "b"}, map_private("r"),
                   {"op": "read", "region": "m", "expect": 3}, {"op": "snapshot", "label": "c"}]),
            json!({}),
        );
        assert_eq!((delta(&r, "a", "b", 0, "Cached"), delta(&r, "a", "b", 0, "Dirty")), (65536, 65536), "{chunk}");
        assert_eq!((delta(&r, "b", "c", 1, "minflt"), delta(&r, "b", "c", 1, "majflt")), (faults, 0), "{chunk}");
        assert_eq!(delta(&r, "b", "c", 0, "Cached"), 0, "mapping reads no page");
    }
}

/// A tmpfs file's pages are order 0: read faults map 16 at a time (1024 faults for 64 MiB
/// aligned, 1025 at the default unaligned address).
#[test]
fn tmpfs_faults_around_sixteen_pages() {
    for (align, faults) in [(Some("2M"), 1024), (None, 1025)] {
        let mut m = json!({"op": "mmap", "name": "m", "size": "64M", "file": "t", "flags": ["shared"], "prot": "r"});
        if let Some(a) = align {
            m["align"] = json!(a);
        }
        let r = run(
            json!([{"op": "create", "file": "t", "size": 0, "fs": "tmpfs"},
                   {"op": "pwrite", "file": "t", "length": "64M", "chunk": "1M"},
                   {"op": "snapshot", "label": "a"}, m, {"op": "read", "region": "m", "expect": 1},
                   {"op": "snapshot", "label": "b"}]),
            json!({}),
        );
        assert_eq!(delta(&r, "a", "b", 1, "minflt"), faults, "{align:?}");
        assert_eq!(delta(&r, "a", "b", 1, "RssShmem"), 65536);
        assert_eq!(delta(&r, "a", "b", 0, "Mapped"), 65536);
    }
}

/// MADV_COLLAPSE: EINVAL on ext4 (no CONFIG_READ_ONLY_THP_FOR_FS); on tmpfs 32 PMD folios
/// replace the 16384 pages and map the range by PMDs.
#[test]
fn madvise_collapse_on_ext4_and_tmpfs() {
    for fs in ["ext4", "tmpfs"] {
        let flags = if fs == "tmpfs" { json!(["shared"]) } else { json!(["private"]) };
        let r = run(
            json!([{"op": "create", "file": "t", "size": "64M", "fs": fs},
                   {"op": "pwrite", "file": "t", "length": "64M", "chunk": "1M"},
                   {"op": "mmap", "name": "m", "size": "64M", "file": "t", "flags": flags, "prot": "rw", "align": "2M"},
                   {"op": "read", "region": "m"}, {"op": "snapshot", "label": "a"},
                   {"op": "madvise", "region": "m", "advice": "collapse"}, {"op": "snapshot", "label": "b"},
                   {"op": "read", "region": "m", "expect": 1}, {"op": "snapshot", "label": "c"}]),
            json!({}),
        );
        let einval = r.events.iter().any(|e| e.message == "madvise m collapse: EINVAL");
        if fs == "ext4" {
            assert!(einval, "{:?}", r.events);
            assert_eq!(delta(&r, "a", "b", 0, "thp_collapse_alloc"), 0);
        } else {
            assert!(!einval);
            assert_eq!(delta(&r, "a", "b", 0, "thp_collapse_alloc"), 32);
            assert_eq!(delta(&r, "a", "b", 0, "ShmemPmdMapped"), 65536);
            assert_eq!(delta(&r, "a", "b", 0, "thp_file_mapped"), 32);
            assert_eq!(delta(&r, "b", "c", 1, "minflt"), 0, "PMD-mapped: no fault");
        }
    }
}

/// MADV_COLLAPSE of a range inside one PMD that reaches neither of its ends is EINVAL on
/// Linux 6.18 (madvise_collapse's hstart > hend), one from a PMD boundary to the next PMD
/// boundary's page before (hstart == hend) succeeds with nothing to do. Found by `validate
/// --random` (seed 20261124, case 45: 12 KiB at 5.19 MiB of a private tmpfs mapping).
#[test]
fn madvise_collapse_of_a_range_inside_one_pmd() {
    let r = run(
        json!([{"op": "create", "file": "t", "size": "10M", "fs": "tmpfs"},
               {"op": "mmap", "name": "m", "size": "6M", "file": "t", "file_offset": "4M", "flags": ["private"],
                "align": "2M"},
               {"op": "madvise", "region": "m", "advice": "collapse", "offset": 5439488, "length": 12288},
               {"op": "madvise", "region": "m", "advice": "collapse", "offset": "2052K", "length": "2044K"}]),
        json!({}),
    );
    let einval: Vec<_> = r.events.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(einval, ["madvise m collapse: EINVAL"]);
}

/// A write to a private writable mapping of a PMD-mapped file folio: the pmd is zapped
/// (thp_split_pmd), one page is copied; a later read maps the folio's other 510 pages.
#[test]
fn cow_of_a_pmd_mapped_file_folio() {
    let r = run(
        json!([create("64M"), {"op": "mmap", "name": "m", "size": "64M", "file": "f", "flags": ["private"],
                                "prot": "rw", "align": "2M"},
               {"op": "read", "region": "m"}, {"op": "snapshot", "label": "a"},
               {"op": "write", "region": "m", "offset": "60M", "length": "1", "value": 7},
               {"op": "snapshot", "label": "b"},
               {"op": "write", "region": "m", "offset": "61M", "length": "1", "value": 8},
               {"op": "snapshot", "label": "c"},
               {"op": "read", "region": "m", "offset": "60M", "length": "2M"}, {"op": "snapshot", "label": "d"},
               {"op": "read", "region": "m", "offset": "60M", "length": "1", "expect": 7},
               {"op": "pread", "file": "f", "offset": "60M", "length": "1", "expect": 0}]),
        json!({}),
    );
    assert_eq!(delta(&r, "a", "b", 1, "minflt"), 1);
    assert_eq!(delta(&r, "a", "b", 0, "thp_split_pmd"), 1);
    assert_eq!(delta(&r, "a", "b", 0, "FilePmdMapped"), -2048);
    assert_eq!(delta(&r, "a", "b", 0, "Mapped"), -2048);
    assert_eq!((delta(&r, "a", "b", 1, "RssFile"), delta(&r, "a", "b", 1, "RssAnon")), (-2048, 4));
    assert_eq!(delta(&r, "b", "c", 1, "RssAnon"), 4);
    assert_eq!((delta(&r, "c", "d", 1, "minflt"), delta(&r, "c", "d", 0, "Mapped")), (1, 2040));
    assert_eq!(r.check.expect_failures, 0);
}

/// read(2) of a cold file: the windows ramp up to PMD folios (30 at 4 KiB reads, 17 at
/// 1 MiB), no fault, every page read once.
#[test]
fn pread_of_a_cold_file_reads_ahead() {
    for (chunk, thps) in [("4K", 30), ("1M", 17)] {
        let r = run(
            json!([create("64M"), {"op": "snapshot", "label": "a"},
                   {"op": "pread", "file": "f", "chunk": chunk, "expect": 0}, {"op": "snapshot", "label": "b"}]),
            json!({}),
        );
        assert_eq!(delta(&r, "a", "b", 0, "nr_file_hugepages"), thps, "{chunk}");
        assert_eq!((delta(&r, "a", "b", 0, "Cached"), delta(&r, "a", "b", 0, "pgpgin")), (65536, 65536));
        assert_eq!(delta(&r, "a", "b", 1, "minflt") + delta(&r, "a", "b", 1, "majflt"), 0);
    }
}

/// Two processes map one file: the second takes as many faults, all minor, and adds nothing
/// to Mapped; every process's RssFile counts the pages.
#[test]
fn two_processes_share_the_cached_folios() {
    let r = run(
        json!([create("64M"), {"op": "mmap", "name": "m", "size": "64M", "file": "f", "flags": ["shared"], "prot": "r"},
               {"op": "snapshot", "label": "a"}, {"op": "read", "region": "m"}, {"op": "snapshot", "label": "b"},
               {"op": "fork", "program": [{"op": "snapshot", "label": "c"}, {"op": "read", "region": "m"},
                                          {"op": "snapshot", "label": "d"}]},
               {"op": "wait"}, {"op": "snapshot", "label": "e"}]),
        json!({}),
    );
    assert_eq!((delta(&r, "a", "b", 1, "minflt"), delta(&r, "a", "b", 1, "majflt")), (435, 1));
    assert_eq!((delta(&r, "c", "d", 2, "minflt"), delta(&r, "c", "d", 2, "majflt")), (436, 0));
    assert_eq!(delta(&r, "c", "d", 2, "RssFile"), 65536);
    assert_eq!(delta(&r, "c", "d", 0, "Mapped"), 0);
    assert_eq!(delta(&r, "c", "d", 0, "thp_file_mapped"), 12);
}

/// drop_caches evicts the clean unmapped page cache only; fadvise(DONTNEED) a range; a
/// written file's data survives eviction once written back (fsync), read back from the device.
#[test]
fn eviction_keeps_dirty_and_mapped_folios_and_data() {
    let r = run(
        json!([{"op": "create", "file": "f", "size": "8M"},
               {"op": "pwrite", "file": "f", "length": "4M", "chunk": "1M", "value": 9},
               {"op": "pread", "file": "f", "offset": "4M", "length": "4M", "chunk": "1M"},
               {"op": "snapshot", "label": "a"},
               {"op": "set", "knob": "vm/drop_caches", "value": 3}, {"op": "snapshot", "label": "b"},
               {"op": "fsync", "file": "f"}, {"op": "snapshot", "label": "c"},
               {"op": "fadvise", "file": "f", "advice": "dontneed"}, {"op": "snapshot", "label": "d"},
               {"op": "pread", "file": "f", "length": "4M", "expect": 9},
               {"op": "pread", "file": "f", "offset": "4M", "expect": 0}]),
        json!({}),
    );
    assert_eq!(delta(&r, "a", "b", 0, "Cached"), -4096, "the clean half goes, the dirty half stays");
    assert_eq!(delta(&r, "b", "c", 0, "Dirty"), -4096);
    assert_eq!(delta(&r, "c", "d", 0, "Cached"), -4096, "written back, now clean: evicted");
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
}

/// Memory short, an allocation reclaims clean page cache instead of killing: a 48 MiB file
/// cached on a 64 MiB machine, then 40 MiB of anonymous memory written; the file's data is
/// read back from the device.
#[test]
fn reclaim_evicts_clean_page_cache_before_the_oom_killer() {
    let w = json!({"name": "reclaim", "machine": {"memory": "64M"},
        "knobs": {"transparent_hugepage/enabled": "never"},
        "program": [
            {"op": "create", "file": "f", "size": "48M"},
            {"op": "pwrite", "file": "f", "length": "48M", "chunk": "1M", "value": 5},
            {"op": "fsync", "file": "f"}, {"op": "snapshot", "label": "a"},
            {"op": "mmap", "name": "p", "size": "40M"}, {"op": "write", "region": "p"},
            {"op": "snapshot", "label": "b"},
            {"op": "pread", "file": "f", "offset": "47M", "expect": 5}]});
    let w = parse_workload(&w.to_string()).expect("valid");
    let r = run_with(&w, &[], &RunOptions { check: true, ..Default::default() }).expect("runs");
    assert!(!r.events.iter().any(|e| e.kind == "oom-kill" || e.kind == "invariant"), "{:?}", r.events);
    assert!(delta(&r, "a", "b", 0, "Cached") < -16384, "the page cache shrank");
    assert_eq!(r.check.expect_failures + r.check.mismatches, 0, "{:?}", r.events);
}

/// Writeback write-protects a shared mapping (`folio_mkclean`): after fsync, a write through
/// it faults again (16 for 64 KiB), dirties the folios again, and the data written then is
/// what the file holds once the mapping is gone and the cache dropped. On PMD-mapped folios
/// the write splits the pmd and maps the folio by a writable pmd again (2 faults for 4 MiB).
#[test]
fn writeback_write_protects_shared_mappings() {
    let prog = json!([
        {"op": "create", "file": "f", "size": "64K"},
        {"op": "mmap", "name": "m", "size": "64K", "file": "f", "flags": ["shared"]},
        {"op": "write", "region": "m", "value": 5, "stride": 1},
        {"op": "fsync", "file": "f"},
        {"op": "snapshot", "label": "a"},
        {"op": "write", "region": "m", "value": 9, "stride": 1},
        {"op": "snapshot", "label": "b"},
        {"op": "munmap", "region": "m"},
        {"op": "fsync", "file": "f"},
        {"op": "fadvise", "file": "f", "advice": "dontneed"},
        {"op": "snapshot", "label": "c"},
        {"op": "pread", "file": "f", "length": "64K", "expect": 9},
    ]);
    let r = run(prog, json!({}));
    assert!(r.events.is_empty(), "{:?}", r.events);
    assert_eq!(delta(&r, "a", "b", 1, "minflt"), 16);
    assert_eq!(delta(&r, "a", "b", 0, "Dirty"), 64);
    assert_eq!(delta(&r, "b", "c", 0, "Cached"), -64);

    let prog = json!([
        {"op": "create", "file": "f", "size": "4M"},
        {"op": "mmap", "name": "m", "size": "4M", "file": "f", "flags": ["shared"], "align": "2M"},
        {"op": "madvise", "region": "m", "advice": "hugepage"},
        {"op": "write", "region": "m", "value": 5},
        {"op": "fsync", "file": "f"},
        {"op": "snapshot", "label": "a"},
        {"op": "write", "region": "m", "value": 6},
        {"op": "snapshot", "label": "b"},
    ]);
    let r = run(prog, json!({}));
    assert_eq!(delta(&r, "a", "b", 1, "minflt"), 2);
    assert_eq!(delta(&r, "a", "b", 0, "thp_split_pmd"), 2);
    assert_eq!(delta(&r, "a", "b", 0, "thp_file_mapped"), 2);
    assert_eq!(delta(&r, "a", "b", 1, "AnonHugePages"), 0);
    assert_eq!(delta(&r, "a", "b", 0, "Dirty"), 4096);
}

/// read(2) marks the folios it copies from accessed (`filemap_read`), once a folio when
/// reads go on in it (`pos_same_folio`); a tmpfs read marks a folio it reads from the start
/// (`shmem_file_read_iter`), a tmpfs write the folio it finds (`SGP_WRITE`: a new one is
/// only referenced). So a file read twice, or a memfd written twice, is activated whole
/// (pgactivate 1024 for 4 MiB; Linux 6.18: 3747 for a 15 MiB memfd written twice, `validate
/// --random` seed 777 case 7), and 200 bytes read in 100-byte steps are one access.
#[test]
fn reads_and_tmpfs_writes_mark_folios_accessed() {
    let snapshot = |l: &str| json!({"op": "snapshot", "label": l});
    let r = run(
        json!([
            create("4M"),
            {"op": "fadvise", "file": "f", "advice": "dontneed"},
            snapshot("a"),
            {"op": "pread", "file": "f", "chunk": "1M"},
            snapshot("read"),
            {"op": "pread", "file": "f", "chunk": "1M"},
            snapshot("again"),
            {"op": "pread", "file": "f", "offset": "8K", "length": 200, "chunk": 100},
            snapshot("small"),
            {"op": "memfd_create", "file": "m", "size": "4M"},
            {"op": "pwrite", "file": "m", "chunk": "1M"},
            snapshot("written"),
            {"op": "pwrite", "file": "m", "chunk": "12K"},
            snapshot("rewritten"),
        ]),
        json!({}),
    );
    assert_eq!(delta(&r, "a", "read", 0, "pgactivate"), 0, "first read: referenced");
    assert_eq!(delta(&r, "read", "again", 0, "pgactivate"), 1024);
    assert_eq!(delta(&r, "read", "again", 0, "nr_active_file"), 1024);
    assert_eq!(delta(&r, "again", "small", 0, "pgactivate"), 0, "an active folio stays");
    assert_eq!(delta(&r, "small", "written", 0, "pgactivate"), 0, "new tmpfs folios: referenced");
    assert_eq!(delta(&r, "written", "rewritten", 0, "pgactivate"), 1024);
    assert_eq!(delta(&r, "written", "rewritten", 0, "nr_active_anon"), 1024);
}

/// A tmpfs page fallocate(2) added is not uptodate until written: read(2) finds it with
/// SGP_READ as a hole (zeroes, not marked accessed), so reading a fallocated file twice
/// activates only the pages written (Linux 6.18: pgactivate 246 for 243 pages written in a
/// file of 2921 fallocated, `validate --random` seed 4322 case 160; mmsim had 2536).
#[test]
fn reads_of_fallocated_tmpfs_pages_are_holes() {
    let snapshot = |l: &str| json!({"op": "snapshot", "label": l});
    let r = run(
        json!([
            {"op": "memfd_create", "file": "m", "size": "4M"},
            {"op": "fallocate", "file": "m", "offset": 0, "length": "4M"},
            {"op": "pwrite", "file": "m", "offset": 0, "length": "64K", "value": 3},
            snapshot("a"),
            {"op": "pread", "file": "m", "chunk": "1M"},
            {"op": "pread", "file": "m", "chunk": "1M", "expect": 0, "offset": "64K"},
            snapshot("b"),
        ]),
        json!({}),
    );
    assert_eq!(delta(&r, "a", "b", 0, "pgactivate"), 16, "only the 16 pages written");
    assert_eq!(delta(&r, "a", "b", 0, "nr_shmem"), 0, "the holes stay fallocated, unread");
}

/// Two reads of 100 bytes in one page mark it once: referenced, not activated; a third read
/// that starts elsewhere (and comes back) activates it.
#[test]
fn reads_in_one_folio_mark_it_once() {
    let snapshot = |l: &str| json!({"op": "snapshot", "label": l});
    let r = run(
        json!([
            create("1M"),
            {"op": "fadvise", "file": "f", "advice": "dontneed"},
            {"op": "pread", "file": "f", "chunk": "4K", "length": "8K", "offset": "16K"},
            snapshot("a"),
            {"op": "pread", "file": "f", "offset": 0, "length": 200, "chunk": 100},
            snapshot("b"),
            {"op": "pread", "file": "f", "offset": "64K", "length": 100},
            {"op": "pread", "file": "f", "offset": 0, "length": 100},
            snapshot("c"),
        ]),
        json!({}),
    );
    assert_eq!(delta(&r, "a", "b", 0, "pgactivate"), 0);
    assert_eq!(delta(&r, "b", "c", 0, "pgactivate"), 1);
}

/// The unmap of a file mapping marks each folio accessed once, however many of its pages
/// were mapped (zap_present_folio_ptes takes a folio's ptes as one batch): a 16 MiB file read
/// whole through a shared mapping leaves its readahead folios referenced, not active; only
/// the folio a read(2) had marked already is activated (Linux 6.18 on this machine: pgactivate
/// 1, nr_inactive_file 4024 of the 4025 pages cached, random campaign seed 4325 case 129).
#[test]
fn an_unmap_marks_each_mapped_folio_accessed_once() {
    let snapshot = |l: &str| json!({"op": "snapshot", "label": l});
    let r = run(
        json!([
            {"op": "create", "file": "f", "size": 16486400},
            {"op": "fadvise", "file": "f", "advice": "dontneed"},
            snapshot("a"),
            {"op": "pread", "file": "f", "offset": 14225408, "length": 1, "chunk": 100},
            {"op": "mmap", "name": "m", "size": 16486400, "file": "f", "flags": ["shared"], "prot": "r"},
            {"op": "read", "region": "m"},
            {"op": "munmap", "region": "m"},
            snapshot("b"),
        ]),
        json!({}),
    );
    assert_eq!(delta(&r, "a", "b", 0, "pgactivate"), 1);
    assert_eq!(delta(&r, "a", "b", 0, "nr_active_file"), 1);
    assert_eq!(delta(&r, "a", "b", 0, "nr_inactive_file"), 4024);
}
