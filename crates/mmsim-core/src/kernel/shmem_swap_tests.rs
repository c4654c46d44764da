//! shmem and tmpfs through swap (kernel/shmem_swap.rs), through whole workloads with the
//! reference model and the invariants checked after every operation: MADV_PAGEOUT of shared
//! anonymous memory, the swap cache hit and the swap-in from the device, read(2) and write(2)
//! of a tmpfs file in swap, a clean page dropped, truncation and exit freeing the slots.

use serde_json::{json, Value};

use crate::report::{Report, Snapshot};
use crate::test_support::{run, snap};

fn vmstat(s: &Snapshot, name: &str) -> i64 {
    s.vmstat.get(name).unwrap_or_else(|| panic!("vmstat {name}"))
}

fn delta(r: &Report, a: &str, b: &str, name: &str) -> i64 {
    vmstat(snap(r, b), name) - vmstat(snap(r, a), name)
}

fn meminfo(s: &Snapshot, name: &str) -> i64 {
    s.meminfo.get(name).unwrap_or_else(|| panic!("meminfo {name}"))
}

fn swap_used_kb(s: &Snapshot) -> i64 {
    meminfo(s, "SwapTotal") - meminfo(s, "SwapFree")
}

fn proc1(s: &Snapshot) -> &crate::report::ProcessStatus {
    s.processes.iter().find(|p| p.pid == 1).expect("pid 1")
}

/// A machine of 1 GiB with a 1 GiB swap file, a cgroup `box` (v2) for the first process.
fn machine(program: Value) -> Value {
    json!({"machine": {"memory": "1G", "cpus": 2, "swap": [{"size": "1G", "kind": "file"}]},
           "knobs": {"transparent_hugepage/enabled": "never"},
           "cgroups": {"box": {}}, "cgroup": "box",
           "program": program})
}

/// MADV_PAGEOUT of 4 MiB of shared anonymous memory written: `shmem_writeout` writes every
/// page (pswpout 1024); they leave the shmem page cache (Shmem -4096 kB) for the swap cache
/// (SwapCached +4096 kB) and the process's RssShmem. Reading them back finds them in the
/// swap cache: minor faults, no I/O; each goes back to the page cache and gives up its slot
/// (swap used 0 again) with the data it held.
#[test]
fn pageout_of_shared_anonymous_memory_and_the_swap_cache_hit() {
    let r = run(machine(json!([
        {"op": "mmap", "name": "s", "size": "4M", "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "value": 7},
        {"op": "snapshot", "label": "a"},
        {"op": "madvise", "region": "s", "advice": "pageout"},
        {"op": "snapshot", "label": "b"},
        {"op": "read", "region": "s", "expect": 7},
        {"op": "snapshot", "label": "c"}])));
    let (a, b, c) = (snap(&r, "a"), snap(&r, "b"), snap(&r, "c"));
    assert_eq!(delta(&r, "a", "b", "pswpout"), 1024);
    assert_eq!(meminfo(b, "Shmem"), meminfo(a, "Shmem") - 4096);
    assert_eq!(meminfo(b, "SwapCached"), meminfo(a, "SwapCached") + 4096);
    assert_eq!(proc1(b).rss_shmem, proc1(a).rss_shmem - 4096);
    assert_eq!(proc1(b).vm_swap, 0, "shmem's swap is not the process's MM_SWAPENTS");
    assert_eq!(swap_used_kb(b), 4096);
    let box_stat = |s: &Snapshot, k: &str| s.cgroups["box"].stat.get(k).unwrap_or_else(|| panic!("memory.stat {k}"));
    assert_eq!(box_stat(b, "shmem"), box_stat(a, "shmem") - (4 << 20));
    assert_eq!(box_stat(b, "pswpout") - box_stat(a, "pswpout"), 1024);
    assert_eq!((proc1(c).minflt - proc1(b).minflt, proc1(c).majflt - proc1(b).majflt), (1024, 0));
    assert_eq!(delta(&r, "b", "c", "pswpin"), 0);
    assert_eq!(meminfo(c, "Shmem"), meminfo(a, "Shmem"));
    assert_eq!(meminfo(c, "SwapCached"), meminfo(a, "SwapCached"));
    assert_eq!(swap_used_kb(c), 0, "shmem_swapin_folio frees the slot");
}

/// After the pageout (and its writes' completion), memory.reclaim frees the swap cache (a shadow in each slot); the read
/// back then swaps every page in from the device (pswpin 1024) by cluster readahead
/// (page-cluster 3: about a major fault per 8 pages, the others read ahead and hit), each a
/// refault of anonymous (swap-backed) memory.
#[test]
fn shared_anonymous_memory_swapped_in_from_the_device() {
    let r = run(machine(json!([
        {"op": "mmap", "name": "s", "size": "4M", "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "value": 9},
        {"op": "madvise", "region": "s", "advice": "pageout"},
        {"op": "sleep", "ms": 1000},
        {"op": "memory_reclaim", "cgroup": "box", "bytes": "8M"},
        {"op": "snapshot", "label": "b"},
        {"op": "read", "region": "s", "expect": 9},
        {"op": "snapshot", "label": "c"}])));
    let (b, c) = (snap(&r, "b"), snap(&r, "c"));
    assert_eq!(meminfo(b, "SwapCached"), 0);
    assert_eq!(swap_used_kb(b), 4096);
    assert_eq!(delta(&r, "b", "c", "pswpin"), 1024);
    // Each page is read by a major fault or ahead of one, and every page read ahead is used.
    let majflt = proc1(c).majflt - proc1(b).majflt;
    assert!((128..=136).contains(&majflt), "about one major fault per 8 pages: {majflt}");
    assert_eq!(delta(&r, "b", "c", "pgmajfault"), majflt);
    assert_eq!(delta(&r, "b", "c", "swap_ra"), 1024 - majflt);
    assert_eq!(delta(&r, "b", "c", "swap_ra_hit"), 1024 - majflt);
    assert_eq!(delta(&r, "b", "c", "workingset_refault_anon"), 1024);
    assert_eq!(swap_used_kb(c), 0);
    let cg = |s: &Snapshot, k: &str| s.cgroups["box"].stat.get(k).unwrap_or_else(|| panic!("memory.stat {k}"));
    assert_eq!(cg(c, "pgmajfault") - cg(b, "pgmajfault"), majflt);
    assert_eq!(cg(c, "pswpin") - cg(b, "pswpin"), 1024);
}

/// A tmpfs file written by write(2) in a cgroup of memory.max 16M: reclaim writes the
/// file's pages to swap while it is written (pswpout); read(2) reads them back (the data
/// checked, no major fault: read(2) is no fault); a hole punched over the whole file frees
/// every slot.
#[test]
fn a_tmpfs_file_larger_than_its_cgroup_goes_to_swap_and_back() {
    let r = run(json!({
        "machine": {"memory": "1G", "cpus": 1, "swap": [{"size": "1G", "kind": "file"}]},
        "knobs": {"transparent_hugepage/enabled": "never"},
        "cgroups": {"box": {"memory.max": "16M"}}, "cgroup": "box",
        "program": [
            {"op": "create", "file": "t", "size": 0, "fs": "tmpfs"},
            {"op": "pwrite", "file": "t", "length": "32M", "chunk": "64K", "value": 5},
            {"op": "snapshot", "label": "a"},
            {"op": "pread", "file": "t", "chunk": "64K", "expect": 5},
            {"op": "snapshot", "label": "b"},
            {"op": "fallocate", "file": "t", "length": "32M", "mode": ["punch_hole", "keep_size"]},
            {"op": "snapshot", "label": "c"}]}));
    let (a, b, c) = (snap(&r, "a"), snap(&r, "b"), snap(&r, "c"));
    let out = vmstat(a, "pswpout");
    assert!(out >= 4096, "at least 16 MiB of the file written to swap: pswpout {out}");
    assert!(a.cgroups["box"].peak <= 16 << 20);
    assert!(delta(&r, "a", "b", "pswpin") > 0);
    assert_eq!(proc1(b).majflt, proc1(a).majflt, "read(2) is no fault");
    assert!(swap_used_kb(b) > 0);
    assert_eq!(swap_used_kb(c), 0, "the hole frees the slots");
    assert_eq!(meminfo(c, "Shmem"), 0);
}

/// A shmem page only read (never written) is clean: reclaim drops it (Linux's SGP_CACHE
/// folios "might still be clean"), writing nothing; reading it again finds a hole (zeroes).
#[test]
fn a_clean_shmem_page_is_dropped_not_swapped() {
    let r = run(machine(json!([
        {"op": "mmap", "name": "s", "size": "1M", "flags": ["shared", "anonymous"]},
        {"op": "read", "region": "s", "expect": 0},
        {"op": "snapshot", "label": "a"},
        {"op": "madvise", "region": "s", "advice": "pageout"},
        {"op": "snapshot", "label": "b"},
        {"op": "read", "region": "s", "expect": 0}])));
    assert_eq!(delta(&r, "a", "b", "pswpout"), 0);
    assert_eq!(meminfo(snap(&r, "b"), "Shmem"), meminfo(snap(&r, "a"), "Shmem") - 1024);
    assert_eq!(swap_used_kb(snap(&r, "b")), 0);
}

/// A child forked after the pageout reads the shared memory back from swap; the parent sees
/// what the child then writes; when both have unmapped it, the object and its slots go.
#[test]
fn fork_after_a_shmem_pageout_shares_the_pages_read_back() {
    let r = run(machine(json!([
        {"op": "mmap", "name": "s", "size": "2M", "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "value": 3},
        {"op": "madvise", "region": "s", "advice": "pageout"},
        {"op": "sleep", "ms": 1000},
        {"op": "memory_reclaim", "cgroup": "box", "bytes": "4M"},
        {"op": "fork", "program": [
            {"op": "read", "region": "s", "length": "1M", "expect": 3},
            {"op": "write", "region": "s", "offset": "1M", "length": "1M", "value": 4}]},
        {"op": "wait"},
        {"op": "snapshot", "label": "a"},
        {"op": "read", "region": "s", "length": "1M", "expect": 3},
        {"op": "read", "region": "s", "offset": "1M", "expect": 4},
        {"op": "munmap", "region": "s"},
        {"op": "snapshot", "label": "b"}])));
    assert_eq!(vmstat(snap(&r, "a"), "pswpin"), 512);
    assert_eq!(swap_used_kb(snap(&r, "a")), 0);
    assert_eq!(meminfo(snap(&r, "b"), "Shmem"), 0);
    assert_eq!(swap_used_kb(snap(&r, "b")), 0);
}

/// MADV_REMOVE (a hole punched) of a swapped range frees its slots; the hole reads zeroes.
#[test]
fn a_hole_punched_in_swapped_shmem_frees_the_slots() {
    let r = run(machine(json!([
        {"op": "mmap", "name": "s", "size": "2M", "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "value": 6},
        {"op": "madvise", "region": "s", "advice": "pageout"},
        {"op": "sleep", "ms": 1000},
        {"op": "memory_reclaim", "cgroup": "box", "bytes": "4M"},
        {"op": "snapshot", "label": "a"},
        {"op": "madvise", "region": "s", "advice": "remove", "length": "1M"},
        {"op": "snapshot", "label": "b"},
        {"op": "read", "region": "s", "length": "1M", "expect": 0},
        {"op": "read", "region": "s", "offset": "1M", "expect": 6}])));
    assert_eq!(swap_used_kb(snap(&r, "a")), 2048);
    assert_eq!(swap_used_kb(snap(&r, "b")), 1024);
}

/// MADV_COLLAPSE of a tmpfs range partly in swap, in a cgroup too small to hold it all:
/// collapse_file reads each page back and holds it (Linux locks and isolates it), so the
/// reclaim a later page's swap-in charges cannot write an earlier one out again; the huge
/// folio gets every page's data and no index keeps a swap entry beside it.
#[test]
fn collapse_of_a_range_in_swap_keeps_every_page() {
    let r = run(json!({
        "machine": {"memory": "20M", "cpus": 2, "swap": [{"size": "64M", "kind": "file"}]},
        "knobs": {"transparent_hugepage/enabled": "always", "block/read_ahead_kb": 0},
        "cgroups": {"box": {"memory.max": "8M"}},
        "cgroup": "box",
        "program": [
            {"op": "create", "file": "ft", "fs": "tmpfs", "size": 10846208},
            {"op": "pwrite", "file": "ft", "length": 10846208, "value": 7, "chunk": 65536},
            {"op": "snapshot", "label": "written"},
            {"op": "mmap", "name": "m", "file": "ft", "file_offset": "2M", "flags": ["shared"], "size": "6M", "align": "2M"},
            {"op": "madvise", "region": "m", "advice": "collapse"},
            {"op": "read", "region": "m", "stride": 4096, "expect": 7}]}));
    assert!(vmstat(snap(&r, "written"), "pswpout") > 0, "the file went partly to swap");
    assert!(r.vmstat.get("thp_collapse_alloc").unwrap() > 0, "a range was collapsed");
}
