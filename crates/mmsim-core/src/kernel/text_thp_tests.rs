//! Seed 004's prototype (`transparent_hugepage/file_text=seed`, `kernel/text_thp.rs`): exact
//! counts of every path, each run checked against the reference model and the invariants.

use serde_json::{json, Value};

use super::filemap_tests::{delta, run};

const SEED: &str = "seed";

fn text(size: &str) -> Vec<Value> {
    vec![
        json!({"op": "create", "file": "t", "size": size}),
        json!({"op": "mmap", "name": "m", "size": size, "file": "t", "flags": ["private"], "prot": "rx",
               "align": "2M"}),
    ]
}

fn prog(mut ops: Vec<Value>, more: Vec<Value>) -> Value {
    ops.extend(more);
    Value::Array(ops)
}

fn snap(label: &str) -> Value {
    json!({"op": "snapshot", "label": label})
}

/// The first fault of each aligned 2 MiB range allocates a PMD page, reads the range into it
/// (a major fault) and maps it by the pmd; the rest of the range takes no fault. Counted as
/// the seed saw it: ShmemPmdMapped and RssShmem, not FilePmdMapped or RssFile. The range's
/// PAGESIZE pages leave the page cache.
#[test]
fn the_first_fault_maps_a_pmd_page() {
    let p = prog(
        text("8M"),
        vec![
            snap("a"),
            json!({"op": "fetch", "region": "m", "length": 4096}),
            snap("b"),
            json!({"op": "fetch", "region": "m"}),
            snap("c"),
        ],
    );
    let r = run(p, json!({"transparent_hugepage/file_text": SEED}));
    let d = |a, b, pid, n| delta(&r, a, b, pid, n);
    assert_eq!((d("a", "b", 1, "minflt"), d("a", "b", 1, "majflt")), (0, 1));
    assert_eq!((d("a", "b", 0, "thp_file_alloc"), d("a", "b", 0, "thp_file_mapped")), (1, 1));
    assert_eq!((d("a", "b", 0, "ShmemPmdMapped"), d("a", "b", 0, "FilePmdMapped")), (2048, 0));
    assert_eq!((d("a", "b", 1, "RssShmem"), d("a", "b", 1, "RssFile")), (2048, 0));
    // The whole text: one fault per range, four PMD pages.
    assert_eq!(d("a", "c", 1, "minflt") + d("a", "c", 1, "majflt"), 4);
    assert_eq!((d("a", "c", 0, "thp_file_alloc"), d("a", "c", 0, "ShmemPmdMapped")), (4, 8192));
    assert_eq!(d("a", "c", 1, "VmPTE"), 0, "no PTE table: the pmds map the text");
}

/// Counters of a run, for the tests to compare (printed on failure).
fn counts(r: &crate::report::Report, names: &[(&str, u32)]) -> Vec<i64> {
    names.iter().map(|&(n, pid)| delta(r, "a", "b", pid, n)).collect()
}

const WHOLE: [(&str, u32); 9] = [
    ("minflt", 1),
    ("majflt", 1),
    ("RssFile", 1),
    ("RssShmem", 1),
    ("thp_file_alloc", 0),
    ("thp_file_fallback", 0),
    ("thp_file_mapped", 0),
    ("ShmemPmdMapped", 0),
    ("FilePmdMapped", 0),
];

fn fetch_all(knobs: Value) -> Vec<i64> {
    let p = prog(text("8M"), vec![snap("a"), json!({"op": "fetch", "region": "m"}), snap("b")]);
    counts(&run(p, knobs), &WHOLE)
}

/// An allocation failure falls through to the PAGESIZE paths: the text is mapped as it is
/// with the policy off (16 pages per fault), each try counting a thp_file_fallback.
#[test]
fn an_allocation_failure_falls_back_to_pagesize() {
    let off = fetch_all(json!({}));
    let failed = fetch_all(json!({"transparent_hugepage/file_text": SEED, "fail_page_alloc/min_order": "9"}));
    println!("off {off:?}\nfailed {failed:?}");
    // One per range, and one more for the first fault's retry after its read
    // (VM_FAULT_RETRY: the retried fault finds the pmd still none and tries again).
    assert_eq!(failed[5], 5);
    let mut same = failed.clone();
    same[5] = 0;
    assert_eq!(same, off);
    assert_eq!(off[0] + off[1], 128, "8 MiB in 64 KiB fault-around windows");
}

/// Two executions of one text at once: under the prototype each reads and maps PMD pages of
/// its own (twice the memory: 16 MiB ShmemPmdMapped for 8 MiB of text); with 6.18's large
/// folios (MADV_HUGEPAGE: readahead at PMD order) both map the same page-cache folios.
#[test]
fn each_execution_copies_under_seed_and_shares_the_page_cache_otherwise() {
    let two = |knobs: Value, advise: bool| {
        let mut ops = text("8M");
        if advise {
            ops.push(json!({"op": "madvise", "region": "m", "advice": "hugepage"}));
        }
        let p = prog(
            ops,
            vec![
                snap("a"),
                json!({"op": "fetch", "region": "m"}),
                json!({"op": "fork", "program": [{"op": "fetch", "region": "m"}, snap("b")]}),
                json!({"op": "wait"}),
            ],
        );
        let r = run(p, knobs);
        let names = ["thp_file_alloc", "thp_file_mapped", "ShmemPmdMapped", "FilePmdMapped", "nr_file_hugepages"];
        names.map(|n| delta(&r, "a", "b", 0, n))
    };
    assert_eq!(two(json!({"transparent_hugepage/file_text": SEED}), false), [8, 8, 16384, 0, 0]);
    assert_eq!(two(json!({}), true), [0, 8, 0, 8192, 4]);
}

/// The seed's mixed mappings: a PAGESIZE mapping of a range this process holds a PMD page of
/// (here a second, read-only and unaligned mapping of the same file) maps pages at their
/// offsets in that PMD page: no read, no page-cache page, one fault per page. The PMD page
/// lives while either mapping maps it.
#[test]
fn a_pagesize_mapping_of_a_pmd_mapped_range_maps_into_the_pmd_page() {
    let p = prog(
        text("4M"),
        vec![
            json!({"op": "mmap", "name": "n", "size": "64K", "file": "t", "file_offset": "4K",
                   "flags": ["private"], "prot": "r"}),
            json!({"op": "fetch", "region": "m", "length": 4096}),
            snap("a"),
            json!({"op": "read", "region": "n"}),
            snap("b"),
            json!({"op": "munmap", "region": "m"}),
            json!({"op": "read", "region": "n"}),
            snap("c"),
            json!({"op": "munmap", "region": "n"}),
            snap("d"),
        ],
    );
    let r = run(p, json!({"transparent_hugepage/file_text": SEED}));
    let d = |a, b, pid, n| delta(&r, a, b, pid, n);
    assert_eq!((d("a", "b", 1, "minflt"), d("a", "b", 1, "majflt")), (16, 0));
    assert_eq!((d("a", "b", 0, "pgpgin"), d("a", "b", 0, "Cached")), (0, 0));
    assert_eq!((d("a", "b", 1, "RssShmem"), d("a", "b", 1, "RssFile")), (64, 0));
    // Unmapping the PMD leaves the page to the 16 ptes; unmapping them frees it.
    assert_eq!(
        (d("b", "c", 1, "RssShmem"), d("b", "c", 0, "ShmemPmdMapped"), d("b", "c", 1, "minflt")),
        (-2048, -2048, 0)
    );
    assert_eq!((d("c", "d", 1, "RssShmem"), d("a", "d", 0, "MemFree")), (-64, 2048));
}

/// The `exec` op maps text as the ELF loader does (here ET_EXEC at 0x400000, as the seed's
/// binary): the whole 2 MiB ranges get PMD pages, the tail past the last one PAGESIZE pages
/// (16 per fault, then the 9 left).
#[test]
fn exec_maps_text_whose_whole_ranges_get_pmd_pages() {
    let size = (4 << 20) + 100 * 1024;
    let p = json!([
        {"op": "create", "file": "t", "size": size},
        {"op": "exec", "file": "t", "name": "text", "text_size": size, "align": "2M", "addr": 0x400000},
        snap("a"),
        {"op": "fetch", "region": "text"},
        snap("b"),
    ]);
    let r = run(p, json!({"transparent_hugepage/file_text": SEED}));
    let d = |n| delta(&r, "a", "b", if n == "ShmemPmdMapped" { 0 } else { 1 }, n);
    assert_eq!((d("minflt") + d("majflt"), d("ShmemPmdMapped"), d("RssShmem"), d("RssFile")), (4, 4096, 4096, 100));
}

/// Bad `exec` fields are errors naming the field.
#[test]
fn exec_rejects_bad_fields() {
    let bad = |op: Value| {
        let w = json!({"name": "x", "program": [{"op": "create", "file": "t", "size": 4096}, op]});
        crate::workload::spec::parse_workload(&w.to_string()).unwrap_err().to_string()
    };
    let e = bad(json!({"op": "exec", "file": "t", "name": "m", "text_size": 0}));
    assert!(e.contains("program[1].text_size"), "{e}");
    let e = bad(json!({"op": "exec", "file": "u", "name": "m", "text_size": 4096}));
    assert!(e.contains("program[1].file"), "{e}");
    let e = bad(json!({"op": "exec", "file": "t", "name": "m", "text_size": 4096, "align": 3000}));
    assert!(e.contains("program[1].align"), "{e}");
    let e = bad(json!({"op": "exec", "file": "t", "name": "m", "text_size": 4096, "prot": "rw"}));
    assert!(e.contains("prot"), "{e}");
}
