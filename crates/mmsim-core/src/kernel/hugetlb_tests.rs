//! hugetlb: the pool and its reservations, faults and SIGBUS, fork and COW (with the owner's
//! fallback that takes the page back from the children), Linux's PMD sharing and its unshare
//! paths, and the alignment errors, as workloads run with the reference model and the
//! invariants (pool counts, nr_hugetlb, refcounts, share counts) after every system call. The
//! numbers the comments call Linux's are what `mmsim run --native` printed on Linux 6.18.

use serde_json::json;

use crate::report::{Report, Snapshot};
use crate::test_support::{run, snap};

/// HugePages_Total, _Free, _Rsvd, _Surp and nr_hugetlb at a snapshot.
fn pool(s: &Snapshot) -> [i64; 5] {
    let m = |k: &str| s.meminfo.get(k).unwrap();
    [
        m("HugePages_Total"),
        m("HugePages_Free"),
        m("HugePages_Rsvd"),
        m("HugePages_Surp"),
        s.vmstat.get("nr_hugetlb").unwrap(),
    ]
}

fn proc_of(s: &Snapshot, pid: u32) -> &crate::report::ProcessStatus {
    s.processes.iter().find(|p| p.pid == pid).expect("pid")
}

/// A private mapping reserves its pages at mmap; each fault consumes one; a fork's child COW
/// takes one without a reservation; munmap gives everything back. A shared mapping keeps its
/// pages in its file until the last mapping goes. The same counts as Linux 6.18.
#[test]
fn reservations_faults_and_cow_count_as_linux_does() {
    let r = run(json!({"knobs": {"vm/nr_hugepages": 8}, "program": [
        {"op": "mmap", "name": "h", "size": "4M", "flags": ["private", "anonymous", "hugetlb"]},
        {"op": "snapshot", "label": "mapped"},
        {"op": "write", "region": "h", "length": 1},
        {"op": "snapshot", "label": "touched"},
        {"op": "fork", "program": [
            {"op": "write", "region": "h", "length": 1, "value": 2},
            {"op": "read", "region": "h", "length": 1, "expect": 2},
            {"op": "snapshot", "label": "child"}]},
        {"op": "wait"},
        {"op": "read", "region": "h", "length": 1, "expect": 1},
        {"op": "mmap", "name": "s", "size": "4M", "flags": ["shared", "anonymous", "hugetlb"]},
        {"op": "write", "region": "s"},
        {"op": "snapshot", "label": "shared"},
        {"op": "munmap", "region": "h"},
        {"op": "snapshot", "label": "unmapped"},
        {"op": "munmap", "region": "s"},
        {"op": "snapshot", "label": "gone"}]}));
    assert_eq!(pool(snap(&r, "mapped")), [8, 8, 2, 0, 0]);
    assert_eq!(pool(snap(&r, "touched")), [8, 7, 1, 0, 512]);
    assert_eq!(pool(snap(&r, "child")), [8, 6, 1, 0, 1024], "the child's COW: no reservation used");
    assert_eq!(pool(snap(&r, "shared")), [8, 5, 1, 0, 1536]);
    assert_eq!(pool(snap(&r, "unmapped")), [8, 6, 0, 0, 1024], "the owner's unused reservation goes");
    assert_eq!(pool(snap(&r, "gone")), [8, 8, 0, 0, 0], "the shared file's pages with its last mapping");
    let p = proc_of(snap(&r, "shared"), 1);
    assert_eq!((p.hugetlb_pages, p.vm_rss - proc_of(snap(&r, "mapped"), 1).vm_rss), (6144, 0), "not in rss");
    assert_eq!(r.meminfo.get("Hugetlb"), Some(16384));
    assert_eq!(
        r.meminfo.get("MemTotal").unwrap() - r.meminfo.get("MemFree").unwrap(),
        16384,
        "the pool is not free memory"
    );
}

/// An empty pool: a fault is SIGBUS; a mapping the pool cannot promise fails with ENOMEM (and
/// the process, which needs the region, ends); overcommit allocates surplus pages and frees
/// them. The events are Linux 6.18's.
#[test]
fn an_empty_pool_is_sigbus_and_overcommit_adds_surplus_pages() {
    let r = run(json!({"knobs": {"vm/nr_hugepages": 1}, "program": [
        {"op": "fork", "program": [{"op": "mmap", "name": "big", "size": "4M", "flags": ["private", "anonymous", "hugetlb"]}]},
        {"op": "wait"},
        {"op": "fork", "program": [
            {"op": "mmap", "name": "h", "size": "2M", "flags": ["private", "anonymous", "hugetlb"]},
            {"op": "write", "region": "h", "length": 1},
            {"op": "fork", "program": [{"op": "write", "region": "h", "length": 1, "value": 3}]},
            {"op": "wait"}]},
        {"op": "wait"}]}));
    let msgs: Vec<&str> = r.events.iter().map(|e| e.message.as_str()).collect();
    assert!(msgs.iter().any(|m| m.contains("mmap big") && m.contains("ENOMEM")), "{msgs:?}");
    assert!(msgs.iter().any(|m| m.starts_with("SIGBUS")), "the grandchild's COW finds no page: {msgs:?}");
    let r = run(json!({"knobs": {"vm/nr_hugepages": 1, "vm/nr_overcommit_hugepages": 2}, "program": [
        {"op": "mmap", "name": "h", "size": "6M", "flags": ["private", "anonymous", "hugetlb"]},
        {"op": "snapshot", "label": "mapped"},
        {"op": "write", "region": "h"},
        {"op": "snapshot", "label": "written"},
        {"op": "munmap", "region": "h"},
        {"op": "snapshot", "label": "gone"}]}));
    assert_eq!(pool(snap(&r, "mapped")), [3, 3, 3, 2, 0], "two surplus pages for the reservation");
    assert_eq!(pool(snap(&r, "written")), [3, 0, 0, 2, 1536]);
    assert_eq!(pool(snap(&r, "gone")), [1, 1, 0, 0, 0], "surplus pages go back to the buddy allocator");
}

/// The owner of a private mapping whose COW finds no free page takes the page back from its
/// child (`unmap_ref_private`): the owner goes on, the child's next touch is SIGBUS.
#[test]
fn the_owner_takes_the_page_back_when_its_cow_finds_none() {
    let r = run(json!({"machine": {"cpus": 2}, "knobs": {"vm/nr_hugepages": 1}, "program": [
        {"op": "mmap", "name": "h", "size": "2M", "flags": ["private", "anonymous", "hugetlb"]},
        {"op": "write", "region": "h", "length": 1, "value": 4},
        {"op": "fork", "program": [{"op": "sleep", "ms": 2}, {"op": "read", "region": "h", "length": 1}]},
        {"op": "write", "region": "h", "length": 1, "value": 5},
        {"op": "read", "region": "h", "length": 1, "expect": 5},
        {"op": "wait"}]}));
    let bus: Vec<_> = r.events.iter().filter(|e| e.message.starts_with("SIGBUS")).collect();
    assert_eq!(bus.len(), 1, "{:?}", r.events);
    assert_eq!(bus[0].pid, 2, "the child");
}

/// Linux's PMD sharing: children of a process with a 1 GiB-aligned shared hugetlb region
/// attach its PMD table at their first fault there (one fault for all 512 pages); each counts
/// it in VmPTE, the machine once. 2 MiB off the alignment no window lies inside the vma: every
/// child builds its own table and faults 512 times.
#[test]
fn linux_shares_hugetlb_pmd_tables_of_whole_aligned_gigabytes() {
    let w = |addr: &str| {
        json!({"machine": {"cpus": 2}, "knobs": {"vm/nr_hugepages": 512}, "program": [
            {"op": "mmap", "name": "s", "size": "1G", "addr": addr, "fixed": true, "flags": ["shared", "anonymous", "hugetlb"]},
            {"op": "write", "region": "s", "stride": "2M"},
            {"op": "snapshot", "label": "written"},
            {"op": "fork", "count": 2, "program": [
                {"op": "snapshot", "label": "c0"},
                {"op": "read", "region": "s", "stride": "2M", "expect": 1},
                {"op": "snapshot", "label": "c1"},
                {"op": "sleep", "ms": 5}]},
            {"op": "sleep", "ms": 2},
            {"op": "snapshot", "label": "both"},
            {"op": "wait"}]})
    };
    let child = |r: &Report, label: &str| {
        proc_of(r.snapshots.iter().find(|s| s.label == label && s.pid == 2).unwrap(), 2).clone()
    };
    let aligned = run(w("0x8000000000"));
    let (c0, c1) = (child(&aligned, "c0"), child(&aligned, "c1"));
    assert_eq!(c1.minflt - c0.minflt, 1, "one fault attaches the parent's PMD table");
    assert_eq!(c1.vm_pte - c0.vm_pte, 8, "its PUD table and the shared PMD table");
    assert_eq!(
        c1.hugetlb_pages - c0.hugetlb_pages,
        0,
        "pages reached through a shared table are not counted (Linux's skew)"
    );
    let tables = |r: &Report| {
        snap(r, "both").vmstat.get("nr_page_table_pages").unwrap()
            - snap(r, "written").vmstat.get("nr_page_table_pages").unwrap()
    };
    assert_eq!(tables(&aligned), 2 * (4 + 1), "each child: pgd, stack (3), a PUD table; the PMD table is shared");
    let off = run(w("0x8000200000"));
    let (c0, c1) = (child(&off, "c0"), child(&off, "c1"));
    assert_eq!(c1.minflt - c0.minflt, 512);
    assert_eq!(c1.hugetlb_pages - c0.hugetlb_pages, 1 << 20);
    assert_eq!(tables(&off), 2 * (4 + 1 + 2), "two PMD tables each: the region spans two windows");
}

/// A child that munmaps 2 MiB in the middle of a shared 1 GiB window leaves the shared PMD
/// table (huge_pmd_unshare) and refaults the rest of the window; the parent's pages and the
/// other child stay as they were.
#[test]
fn munmap_in_a_shared_hugetlb_window_unshares() {
    let r = run(json!({"machine": {"cpus": 2}, "knobs": {"vm/nr_hugepages": 1024}, "program": [
        {"op": "mmap", "name": "s", "size": "2G", "addr": "0x8000000000", "fixed": true, "flags": ["shared", "anonymous", "hugetlb"]},
        {"op": "write", "region": "s", "stride": "2M", "value": 9},
        {"op": "fork", "program": [
            {"op": "read", "region": "s", "stride": "2M", "expect": 9},
            {"op": "snapshot", "label": "read"},
            {"op": "munmap", "region": "s", "offset": "2M", "length": "2M"},
            {"op": "mmap", "name": "p", "size": "2M", "addr": "0x8000200000", "fixed": true},
            {"op": "write", "region": "p", "value": 3},
            {"op": "snapshot", "label": "unmapped"},
            {"op": "read", "region": "s", "offset": "4M", "length": "1020M", "stride": "2M", "expect": 9},
            {"op": "snapshot", "label": "refaulted"}]},
        {"op": "wait"},
        {"op": "read", "region": "s", "stride": "2M", "expect": 9}]}));
    let c = |l: &str| proc_of(r.snapshots.iter().find(|s| s.label == l).unwrap(), 2).clone();
    assert_eq!(c("read").minflt, 2, "one fault per shared window");
    // The 510 huge pages after the private 2 MiB refault into a PMD table of the child's own.
    assert_eq!(c("refaulted").minflt - c("unmapped").minflt, 510);
    assert!(r.vmstat.get("mmsim_pt_unshare").unwrap() >= 1);
}

/// Alignment: munmap, mprotect and MADV_DONTNEED of a hugetlb vma at an address not huge-page
/// aligned are EINVAL and change nothing; mremap may not grow it.
#[test]
fn hugetlb_ranges_must_be_huge_page_aligned() {
    let r = run(json!({"knobs": {"vm/nr_hugepages": 4}, "program": [
        {"op": "mmap", "name": "h", "size": "4M", "flags": ["private", "anonymous", "hugetlb"]},
        {"op": "write", "region": "h", "value": 6},
        {"op": "munmap", "region": "h", "offset": "1M", "length": "2M"},
        {"op": "mprotect", "region": "h", "offset": "4K", "length": "4K", "prot": "r"},
        {"op": "madvise", "region": "h", "offset": "4K", "length": "4K", "advice": "dontneed"},
        {"op": "mremap", "region": "h", "size": "6M"},
        {"op": "read", "region": "h", "expect": 6},
        // The end is rounded down: [0, 2M) is dropped, [2M, 4M) kept.
        {"op": "madvise", "region": "h", "offset": 0, "length": "3M", "advice": "dontneed"},
        {"op": "read", "region": "h", "length": 1, "expect": 0},
        {"op": "read", "region": "h", "offset": "2M", "length": 1, "expect": 6},
        {"op": "write", "region": "h", "length": "2M", "value": 6},
        {"op": "mremap", "region": "h", "size": "2M"},
        {"op": "read", "region": "h", "expect": 6}]}));
    let errs: Vec<&str> = r.events.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        errs,
        ["munmap h: EINVAL", "mprotect h: EINVAL", "madvise h dontneed: EINVAL", "mremap h: EINVAL"],
        "{:?}",
        r.events
    );
}

/// Seed 003's rules share hugetlb PMD tables too when `vm/ptshare` has `pmd` (the patch's
/// PTSHARE_HUGEPAGE): at fork, with the same address required; Linux's own sharing is off.
#[test]
fn the_seeds_rules_share_hugetlb_pmd_tables_at_fork() {
    let w = json!({"knobs": {"vm/nr_hugepages": 512, "vm/ptshare": "pmd"}, "program": [
        {"op": "mmap", "name": "s", "size": "1G", "addr": "0x8000000000", "fixed": true, "flags": ["shared", "anonymous", "hugetlb"]},
        {"op": "write", "region": "s", "stride": "2M"},
        {"op": "fork", "program": [
            {"op": "snapshot", "label": "c0"},
            {"op": "read", "region": "s", "stride": "2M", "expect": 1},
            {"op": "snapshot", "label": "c1"}]},
        {"op": "wait"}]});
    let r = run(w);
    let c = |l: &str| proc_of(snap(&r, l), 2).clone();
    assert_eq!(c("c1").minflt - c("c0").minflt, 0, "shared at fork: no fault at all");
    assert_eq!(r.vmstat.get("mmsim_pt_share"), Some(1));
}

/// `align` on a hugetlb mapping is done as user space does it: a PROT_NONE reservation of
/// size + align, the region mapped MAP_FIXED at the aligned address inside it. Only the
/// region's own huge pages are reserved: 2 GiB aligned to 1 GiB fits a pool of 1,100 pages
/// (mapping 3 GiB of huge pages and trimming would need 1,536 and fail with ENOMEM).
#[test]
fn an_aligned_hugetlb_mapping_reserves_only_its_own_pages() {
    let r = run(json!({"machine": {"memory": "4G"}, "knobs": {"vm/nr_hugepages": 1100}, "program": [
        {"op": "mmap", "name": "h", "size": "2G", "align": "1G", "flags": ["private", "anonymous", "hugetlb"]},
        {"op": "snapshot", "label": "mapped"},
        {"op": "write", "region": "h", "stride": "1G"},
        {"op": "snapshot", "label": "touched"}]}));
    assert!(r.events.is_empty(), "{:?}", r.events);
    assert_eq!(pool(snap(&r, "mapped")), [1100, 1100, 1024, 0, 0]);
    assert_eq!(pool(snap(&r, "touched")), [1100, 1098, 1022, 0, 1024], "nr_hugetlb in base pages");
    // The kernel's view: one 1 GiB-aligned hugetlb vma of 2 GiB, nothing of the reservation left.
    let knobs = crate::kernel::knobs::Knobs { nr_hugepages: 1100, ..Default::default() };
    let mut k = crate::kernel::Kernel::new(4 << 30, knobs, crate::units::Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    let before = k.mm(mm).vmas.len();
    let args = crate::kernel::mmap::MmapArgs {
        len: 2 << 30,
        align: 1 << 30,
        prot: crate::kernel::mm::vm::READ | crate::kernel::mm::vm::WRITE,
        hugetlb: true,
        ..Default::default()
    };
    let a = k.do_mmap(mm, args).unwrap();
    let v = k.mm(mm).vma_lookup(a).unwrap();
    assert_eq!((a % (1 << 30), v.end - v.start, k.mm(mm).vmas.len()), (0, 2 << 30, before + 1));
    k.check_invariants().unwrap();
}
