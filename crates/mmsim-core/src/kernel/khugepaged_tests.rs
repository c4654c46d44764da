//! CONFIG_READ_ONLY_THP_FOR_FS (`transparent_hugepage/file_text=khugepaged`): khugepaged's
//! scan and collapse of read-only file text, MADV_COLLAPSE of an ext4 file, and the write
//! denial that makes text read-only (ETXTBSY). Exact counts, every run checked against the
//! reference model and the invariants.

use serde_json::{json, Value};

use super::filemap_tests::{delta, run};
use crate::report::Report;

/// The option on, khugepaged scanning VM_HUGEPAGE vmas (`enabled=madvise`), mmap read-around
/// at Linux's default 128 KiB (order-0 folios: khugepaged has something to collapse).
fn knobs(more: Value) -> Value {
    let mut k = json!({"transparent_hugepage/file_text": "khugepaged", "transparent_hugepage/enabled": "madvise",
                       "block/read_ahead_kb": "128"});
    for (n, v) in more.as_object().expect("knobs") {
        k[n] = v.clone();
    }
    k
}

fn snap(label: &str) -> Value {
    json!({"op": "snapshot", "label": label})
}

fn sleep(ms: f64) -> Value {
    json!({"op": "sleep", "ms": ms})
}

/// An ext4 text of `size` exec'd at a 2 MiB boundary, then `ops`.
fn exec(size: &str, ops: Vec<Value>) -> Value {
    let mut p = vec![
        json!({"op": "create", "file": "t", "size": size}),
        json!({"op": "exec", "file": "t", "name": "text", "text_size": size, "align": "2M"}),
    ];
    p.extend(ops);
    Value::Array(p)
}

/// khugepaged's status at a snapshot: (wake-ups, pages_collapsed, full_scans, results).
fn status(r: &Report, label: &str) -> (u64, u64, u64, Vec<(String, u64)>) {
    let s = r.snapshots.iter().find(|s| s.label == label).expect(label);
    let k = s.kthreads.iter().find(|k| k.name == "khugepaged").expect("khugepaged listed");
    let h = k.khugepaged.as_ref().expect("its counts");
    (h.wakeups, h.pages_collapsed, h.full_scans, h.scan_results.clone().into_iter().collect())
}

/// A system-wide /proc/meminfo or /proc/vmstat value at a snapshot.
fn system(r: &Report, label: &str, name: &str) -> i64 {
    let s = r.snapshots.iter().find(|s| s.label == label).expect(label);
    s.meminfo.0.iter().chain(s.vmstat.0.iter()).find(|(k, _)| k == name).expect(name).1
}

fn ok(n: u64) -> Vec<(String, u64)> {
    vec![("SCAN_SUCCEED".to_string(), n)]
}

/// 32 MiB of text (16 ranges) cached in order-0 folios, then MADV_HUGEPAGE: the madvise
/// registers the mm and wakes khugepaged, whose first scan (`pages_to_scan` 4096: a range
/// costs 512 + 1) collapses 8 ranges into page-cache PMD folios without mapping them; the
/// next 8 wait `scan_sleep_millisecs`; the next faults map each range by its pmd.
#[test]
fn khugepaged_collapses_eight_ranges_a_wake_up_and_faults_map_them() {
    let p = exec(
        "32M",
        vec![
            json!({"op": "fetch", "region": "text"}),
            json!({"op": "madvise", "region": "text", "advice": "hugepage"}),
            snap("a"),
            sleep(100.0),
            snap("b"),
            sleep(9800.0),
            snap("c"),
            sleep(200.0),
            snap("d"),
            json!({"op": "fetch", "region": "text"}),
            snap("e"),
        ],
    );
    let r = run(p, knobs(json!({})));
    let d = |a, b, pid, n| delta(&r, a, b, pid, n);
    // Not yet woken when the madvise returns; not registered before it (no VM_HUGEPAGE).
    assert_eq!(status(&r, "a"), (0, 0, 0, vec![]));
    assert_eq!(status(&r, "b"), (1, 8, 0, ok(8)));
    assert_eq!((d("a", "b", 0, "thp_collapse_alloc"), d("a", "b", 0, "FileHugePages")), (8, 8 * 2048));
    assert_eq!((d("a", "b", 0, "thp_file_mapped"), d("a", "b", 0, "FilePmdMapped")), (0, 0));
    assert_eq!(d("a", "b", 1, "VmPTE"), -8 * 4, "retract_page_tables freed 8 PTE tables");
    assert_eq!(d("a", "b", 1, "RssFile"), -8 * 2048, "the old pages were unmapped");
    assert_eq!(d("a", "b", 0, "Cached"), 0, "the folios replaced the pages");
    // 9.9 s after the wake-up: still asleep.
    assert_eq!(status(&r, "c"), (1, 8, 0, ok(8)));
    assert_eq!(status(&r, "d"), (2, 16, 0, ok(16)));
    assert_eq!(d("c", "d", 0, "thp_collapse_alloc"), 8);
    // One fault per range maps the folio by its pmd.
    assert_eq!((d("d", "e", 1, "minflt"), d("d", "e", 1, "majflt")), (16, 0));
    assert_eq!((d("d", "e", 0, "thp_file_mapped"), d("d", "e", 0, "FilePmdMapped")), (16, 16 * 2048));
    assert_eq!((d("d", "e", 1, "RssFile"), d("d", "e", 1, "VmPTE")), (16 * 2048, 0));
}

/// `max_ptes_none`: khugepaged collapses a range only with at least 512 - max_ptes_none of
/// its pages cached (THP_SCAN_EXCEED_NONE_PTE otherwise), reading the rest itself.
#[test]
fn max_ptes_none_needs_enough_cached_pages() {
    // One page fetched: the read-around leaves some pages of the range cached.
    let prog = exec(
        "4M",
        vec![
            json!({"op": "fetch", "region": "text", "length": 4096}),
            snap("a"),
            json!({"op": "madvise", "region": "text", "advice": "hugepage"}),
            sleep(100.0),
            snap("b"),
        ],
    );
    let cached = {
        let r = run(prog.clone(), knobs(json!({"transparent_hugepage/khugepaged/max_ptes_none": "0"})));
        system(&r, "a", "Cached") / 4
    };
    assert!(cached > 1 && cached < 512, "{cached} pages cached by the read-around");
    let scan = |none: i64| {
        let r = run(prog.clone(), knobs(json!({"transparent_hugepage/khugepaged/max_ptes_none": none.to_string()})));
        (status(&r, "b").3, delta(&r, "a", "b", 0, "thp_scan_exceed_none_pte"), delta(&r, "a", "b", 0, "Cached"))
    };
    let exceed = |n| ("SCAN_EXCEED_NONE_PTE".to_string(), n);
    // Exactly enough: range 0 collapses (the other 512 - cached pages read in); range 1 has
    // none cached.
    assert_eq!(scan(512 - cached), (vec![exceed(1), ("SCAN_SUCCEED".into(), 1)], 1, (512 - cached) * 4));
    assert_eq!(scan(511 - cached), (vec![exceed(2)], 2, 0));
}

/// A dirty page in the range: collapse_file starts its writeback and fails (SCAN_FAIL); the
/// next wake-up finds it clean and collapses.
#[test]
fn a_dirty_page_fails_the_collapse_until_written_back() {
    let p = Value::Array(vec![
        json!({"op": "create", "file": "t", "size": "2M"}),
        json!({"op": "pwrite", "file": "t", "offset": 0, "length": 4096}),
        json!({"op": "exec", "file": "t", "name": "text", "text_size": "2M", "align": "2M"}),
        json!({"op": "fetch", "region": "text"}),
        json!({"op": "madvise", "region": "text", "advice": "hugepage"}),
        sleep(100.0),
        snap("a"),
        sleep(10_000.0),
        snap("b"),
    ]);
    let r = run(p, knobs(json!({})));
    assert_eq!(status(&r, "a").3, vec![("SCAN_FAIL".to_string(), 1)]);
    assert_eq!(system(&r, "a", "Dirty"), 0, "written back");
    assert_eq!(status(&r, "b").3, vec![("SCAN_FAIL".to_string(), 1), ("SCAN_SUCCEED".to_string(), 1)]);
    assert_eq!(delta(&r, "a", "b", 0, "FileHugePages"), 2048);
}

/// Text is not writable while it runs: a write open of an exec'd file is ETXTBSY, and an
/// exec of a file open for write (a shared writable mapping holds it) is too (the process
/// exits). A file someone may write is never collapsed: khugepaged's scan passes over a
/// private r-x mapping of it even with `enabled=always`, MADV_COLLAPSE is EINVAL; after the
/// writer's munmap, MADV_COLLAPSE collapses and maps it at once.
#[test]
fn text_is_write_denied_and_a_writable_file_is_not_collapsed() {
    let p = Value::Array(vec![
        json!({"op": "create", "file": "t", "size": "2M"}),
        json!({"op": "exec", "file": "t", "name": "text", "text_size": "2M", "align": "2M"}),
        json!({"op": "pwrite", "file": "t", "offset": 0, "length": 4096}),
        json!({"op": "munmap", "region": "text"}),
        json!({"op": "mmap", "name": "w", "size": "2M", "file": "t", "flags": ["shared"], "prot": "rw"}),
        json!({"op": "mmap", "name": "r", "size": "2M", "file": "t", "flags": ["private"], "prot": "rx",
               "align": "2M"}),
        json!({"op": "fetch", "region": "r"}),
        json!({"op": "madvise", "region": "r", "advice": "collapse"}),
        json!({"op": "fork", "program": [
            {"op": "exec", "file": "t", "name": "text", "text_size": "2M", "align": "2M"}]}),
        json!({"op": "wait"}),
        sleep(100.0),
        snap("a"),
        json!({"op": "munmap", "region": "w"}),
        json!({"op": "madvise", "region": "r", "advice": "collapse"}),
        snap("b"),
    ]);
    let r = run(p, knobs(json!({"transparent_hugepage/enabled": "always"})));
    let msgs: Vec<(u32, &str)> = r.events.iter().map(|e| (e.pid, e.message.as_str())).collect();
    let busy = |pid, call: &str| msgs.iter().any(|&(p, m)| p == pid && m.starts_with(call) && m.ends_with("ETXTBSY"));
    assert!(busy(1, "pwrite t") && busy(2, "mmap text"), "{msgs:?}");
    assert_eq!(msgs.iter().filter(|(_, m)| m.contains("EINVAL")).count(), 1, "{msgs:?}");
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    // The first exec registered the mm (and woke khugepaged); its scan passed over `r` (1
    // wake-up, 1 full scan, no range scanned).
    assert_eq!(status(&r, "a"), (1, 0, 1, vec![]), "the writer's file is not eligible");
    let d = |n| delta(&r, "a", "b", 0, n);
    assert_eq!((d("thp_collapse_alloc"), d("thp_file_mapped"), d("FilePmdMapped")), (1, 1, 2048));
}

/// MADV_COLLAPSE of ext4 text: EINVAL without the option (6.18's default, measured on the
/// kernel), a synchronous collapse and PMD mapping with it; a range whose aligned 2 MiB is
/// not wholly in the vma is EINVAL; an anonymous (COW) page in the caller's PTE table fails
/// the mapping (EINVAL) after the page cache was collapsed.
#[test]
fn madv_collapse_of_ext4_text() {
    let collapse = |file_text: &str, ops: Vec<Value>| {
        let mut all = vec![json!({"op": "fetch", "region": "text"}), snap("a")];
        all.extend(ops);
        all.push(snap("b"));
        let r = run(exec("4M", all), knobs(json!({"transparent_hugepage/file_text": file_text})));
        let einval = r.events.iter().filter(|e| e.message.contains("EINVAL")).count();
        let d = |n| delta(&r, "a", "b", 0, n);
        (einval, d("thp_collapse_alloc"), d("FileHugePages"), d("FilePmdMapped"), delta(&r, "a", "b", 1, "minflt"))
    };
    let whole = || vec![json!({"op": "madvise", "region": "text", "advice": "collapse"})];
    assert_eq!(collapse("off", whole()), (1, 0, 0, 0, 0));
    assert_eq!(collapse("khugepaged", whole()), (0, 2, 4096, 4096, 0));
    // 1 MiB..3 MiB holds no whole aligned 2 MiB: nothing to do, and no error (Linux's loop
    // is empty).
    let part = vec![json!({"op": "madvise", "region": "text", "offset": "1M", "length": "2M", "advice": "collapse"})];
    assert_eq!(collapse("khugepaged", part), (0, 0, 0, 0, 0));
    // A private write after mprotect: an anonymous copy in the first range's table.
    let cow = vec![
        json!({"op": "mprotect", "region": "text", "prot": "rwx"}),
        json!({"op": "write", "region": "text", "length": 8}),
        json!({"op": "madvise", "region": "text", "advice": "collapse"}),
    ];
    let (einval, alloc, huge, pmd, _) = collapse("khugepaged", cow);
    assert_eq!((einval, alloc, huge, pmd), (1, 2, 4096, 2048), "range 0 cached as a folio but not PMD-mapped");
}

/// No PMD page to be had (`fail_page_alloc/min_order=9`): khugepaged's allocation fails
/// (thp_collapse_alloc_failed), it sleeps `alloc_sleep_millisecs` and tries once more in the
/// same wake-up, then gives up until the next; the text stays in 4 KiB pages.
#[test]
fn khugepaged_allocation_failure_sleeps_then_gives_up() {
    let p = exec(
        "4M",
        vec![
            json!({"op": "fetch", "region": "text"}),
            json!({"op": "madvise", "region": "text", "advice": "hugepage"}),
            sleep(100.0),
            snap("a"),
            sleep(60_000.0),
            snap("b"),
        ],
    );
    let r = run(p, knobs(json!({"fail_page_alloc/min_order": "9"})));
    let fail = |n| vec![("SCAN_ALLOC_HUGE_PAGE_FAIL".to_string(), n)];
    assert_eq!(status(&r, "a"), (1, 0, 0, fail(1)));
    assert_eq!(system(&r, "a", "thp_collapse_alloc_failed"), 1);
    // The allocation sleep (60 s), the retry's failure ends the wake-up.
    assert_eq!(status(&r, "b"), (1, 0, 0, fail(2)));
    assert_eq!(delta(&r, "a", "b", 0, "thp_collapse_alloc_failed"), 1);
    assert_eq!(delta(&r, "a", "b", 0, "FileHugePages"), 0);
}

/// MADV_COLLAPSE of a private tmpfs mapping holding a COW copy: the page cache is collapsed,
/// but the caller's table maps an anonymous page, so the pmd is not installed (EINVAL) and
/// the copy keeps its data (the reference model checks every byte read back).
#[test]
fn madv_collapse_keeps_a_private_copy_of_tmpfs() {
    let r = run(
        json!([{"op": "create", "file": "t", "size": 0, "fs": "tmpfs"},
               {"op": "pwrite", "file": "t", "length": "2M", "value": 3},
               {"op": "mmap", "name": "m", "size": "2M", "file": "t", "flags": ["private"], "prot": "rw", "align": "2M"},
               {"op": "read", "region": "m", "expect": 3},
               {"op": "write", "region": "m", "offset": "1M", "length": 8, "value": 9},
               snap("a"),
               {"op": "madvise", "region": "m", "advice": "collapse"},
               snap("b"),
               {"op": "read", "region": "m", "offset": "1M", "length": 8, "expect": 9},
               {"op": "read", "region": "m", "length": "1M", "expect": 3}]),
        json!({}),
    );
    let einval: Vec<_> = r.events.iter().filter(|e| e.message == "madvise m collapse: EINVAL").collect();
    assert_eq!(einval.len(), 1, "{:?}", r.events);
    let d = |n| delta(&r, "a", "b", 0, n);
    assert_eq!((d("thp_collapse_alloc"), d("ShmemPmdMapped"), d("ShmemHugePages")), (1, 0, 2048));
    assert_eq!(delta(&r, "a", "b", 1, "RssAnon"), 0, "the copy stays");
}

/// Loop fast-forward with khugepaged asleep: whole spans of identical iterations are skipped
/// up to its wake-up, not past it, so it collapses the same ranges as when every iteration is
/// simulated, and the later faults map them the same: the kernel's counts are identical, the
/// cycles too within the quantum at which it preempts the task.
#[test]
fn fast_forward_stops_at_khugepaged_wake_up() {
    use crate::sim::{run_with, RunOptions};
    use crate::workload::spec::parse_workload;
    let w = json!({"name": "ff", "knobs": knobs(json!({"transparent_hugepage/enabled": "always",
            "transparent_hugepage/khugepaged/scan_sleep_millisecs": "100",
            "transparent_hugepage/khugepaged/pages_to_scan": "512"})),
        "program": exec("8M", vec![
            json!({"op": "loop", "count": 3000, "body": [{"op": "fetch", "region": "text", "stride": 4096}]}),
            snap("end")])});
    let w = parse_workload(&w.to_string()).expect("valid");
    let go = |ff: bool| run_with(&w, &[], &RunOptions { fast_forward: Some(ff), ..Default::default() }).expect("runs");
    let (on, off) = (go(true), go(false));
    assert!(on.engine.fast_forwarded_iterations > 1000, "{:?}", on.engine);
    assert_eq!(off.engine.fast_forwarded_iterations, 0);
    let counts = |r: &Report| {
        let n = ["thp_collapse_alloc", "thp_file_mapped", "pgfault", "FilePmdMapped"];
        (n.map(|n| system(r, "end", n)), status(r, "end"))
    };
    assert_eq!(counts(&on), counts(&off));
    assert_eq!(counts(&on).0[0], 2, "one range a wake-up: two wake-ups in the run's simulated time");
    let cycles = |r: &Report| r.perf.get("cycles").expect("cycles");
    assert!((cycles(&on) / cycles(&off) - 1.0).abs() < 1e-3, "{} {}", cycles(&on), cycles(&off));
}
