//! MADV_COLLAPSE and khugepaged's scan of anonymous memory, as Linux 6.18's mm/khugepaged.c
//! and tools/testing/selftests/mm/khugepaged.c have them: exact counts of THPs, collapse
//! allocations, RssAnon and VmPTE, the errno of each refusal, and the invariants after each.

use super::fault::Access;
use super::khugepaged_scan::ScanResult;
use super::mm::MmCounter;
use super::mmap::Errno;
use super::syscall::MmapReq;
use super::uapi::{Advice, MapFlags, MlockFlags, Prot};
use super::vmstat::{VmEvent, VmItem};
use super::{Kernel, MmId};
use crate::kernel::knobs::Knobs;
use crate::units::x86::PAGE_SIZE;
use crate::units::VirtAddr;

const P: u64 = PAGE_SIZE;
const H: u64 = 2 << 20;

fn kernel(thp: &str) -> (Kernel, MmId) {
    let mut knobs = Knobs::default();
    knobs.set("transparent_hugepage/enabled", thp).unwrap();
    let mut k = Kernel::new(256 << 20, knobs, crate::units::Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    (k, mm)
}

/// A private anonymous read-write mapping of `n` PMDs, 2 MiB aligned.
fn area(k: &mut Kernel, mm: MmId, n: u64) -> u64 {
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let req = MmapReq { len: n * H, prot: Prot::READ | Prot::WRITE, flags, align: H, ..Default::default() };
    k.vm_mmap_pgoff(mm, req).ret.unwrap()
}

fn touch(k: &mut Kernel, mm: MmId, a: u64, pages: u64, access: Access) {
    for i in 0..pages {
        k.handle_user_fault(mm, a + i * P, access);
    }
}

fn collapse(k: &mut Kernel, mm: MmId, a: u64, len: u64) -> Result<(), Errno> {
    k.do_madvise(mm, VirtAddr(a), len, Advice::Collapse).ret
}

/// The process's stack page, written by exec.
const STACK_KB: i64 = 4;

/// RssAnon in kB but for the stack page.
fn rss(k: &Kernel, mm: MmId) -> i64 {
    k.rss_kb(mm, MmCounter::AnonPages) - STACK_KB
}

/// (AnonHugePages THPs, thp_collapse_alloc, RssAnon kB, VmPTE kB).
fn counts(k: &Kernel, mm: MmId) -> [i64; 4] {
    [
        k.stat.items[VmItem::NrAnonThps],
        k.stat.events[VmEvent::ThpCollapseAlloc],
        rss(k, mm),
        k.mm(mm).pgtables_bytes / 1024,
    ]
}

fn check(k: &Kernel) {
    k.check_invariants().unwrap();
}

/// khugepaged.c's collapse_full: 512 written pages become one THP; the pages are copied and
/// freed, the PTE table stays deposited under the pmd (VmPTE unchanged).
#[test]
fn collapse_full() {
    let (mut k, mm) = kernel("never");
    let a = area(&mut k, mm, 1);
    touch(&mut k, mm, a, 512, Access::Write);
    let [thps, alloc, rss, pte] = counts(&k, mm);
    assert_eq!([thps, alloc, rss], [0, 0, 2048]);
    let free = k.stat.items[VmItem::NrFreePages];
    assert_eq!(collapse(&mut k, mm, a, H), Ok(()), "even with THP never");
    assert_eq!(counts(&k, mm), [1, 1, 2048, pte]);
    assert_eq!(k.stat.items[VmItem::NrFreePages], free, "512 pages in, 512 out");
    check(&k);
}

/// khugepaged.c's collapse_empty: no page table under the range: nothing to collapse,
/// EINVAL. A pmd none stops the loop (SCAN_PMD_NONE): the full PMD after it stays small.
#[test]
fn collapse_empty() {
    let (mut k, mm) = kernel("never");
    let a = area(&mut k, mm, 2);
    assert_eq!(collapse(&mut k, mm, a, H), Err(Errno::EINVAL));
    touch(&mut k, mm, a + H, 512, Access::Write);
    assert_eq!(collapse(&mut k, mm, a, 2 * H), Err(Errno::EINVAL));
    assert_eq!(counts(&k, mm)[..3], [0, 0, 2048]);
    // A PTE table whose ptes are all none after MADV_DONTNEED is collapsed: zeroes.
    touch(&mut k, mm, a, 1, Access::Write);
    k.do_madvise(mm, VirtAddr(a), P, Advice::DontNeed).ret.unwrap();
    assert_eq!(collapse(&mut k, mm, a, 2 * H), Ok(()));
    assert_eq!(counts(&k, mm)[..3], [2, 2, 4096]);
    check(&k);
}

/// khugepaged.c's collapse_single_pte_entry and collapse_max_ptes_none: MADV_COLLAPSE
/// ignores max_ptes_none; one page becomes a THP (511 zero pages join RssAnon).
#[test]
fn collapse_single_pte_entry_ignores_max_ptes_none() {
    let (mut k, mm) = kernel("madvise");
    k.knobs.set("transparent_hugepage/khugepaged/max_ptes_none", "0").unwrap();
    let a = area(&mut k, mm, 1);
    touch(&mut k, mm, a, 1, Access::Write);
    assert_eq!(counts(&k, mm)[..3], [0, 0, 4]);
    assert_eq!(collapse(&mut k, mm, a, H), Ok(()));
    assert_eq!(counts(&k, mm)[..3], [1, 1, 2048]);
    assert_eq!(k.stat.events[VmEvent::ThpScanExceedNonePte], 0);
    check(&k);
}

/// Read faults map the zero page, and make no anon_vma: a range of zero-page ptes is not
/// collapsed (SCAN_PAGE_ANON, EINVAL, as on the host). With one page written (an anon_vma),
/// the other 511 read-only zero-page ptes collapse with it into a writable THP.
#[test]
fn collapse_zero_pages() {
    let (mut k, mm) = kernel("madvise");
    let a = area(&mut k, mm, 1);
    touch(&mut k, mm, a, 512, Access::Read);
    assert_eq!(counts(&k, mm)[..3], [0, 0, 0]);
    assert_eq!(collapse(&mut k, mm, a, H), Err(Errno::EINVAL));
    assert_eq!(counts(&k, mm)[..3], [0, 1, 0], "allocated, then the vma had no anon_vma");
    touch(&mut k, mm, a, 1, Access::Write);
    assert_eq!(collapse(&mut k, mm, a, H), Ok(()));
    assert_eq!(counts(&k, mm)[..3], [1, 2, 2048]);
    let pmd = k.pmd_slot(mm, a).unwrap();
    let e = k.entry(pmd.table, pmd.idx);
    assert!(e.huge() && e.write() && e.has(super::pgtable::DIRTY), "{e:?}");
    check(&k);
}

/// khugepaged.c's collapse_fork: a page shared with the parent over fork and one the child
/// wrote: the child's range collapses (MADV_COLLAPSE ignores max_ptes_shared); the parent's
/// page stays small and mapped. The parent's write-protected range collapses as well.
#[test]
fn collapse_fork() {
    let (mut k, mm) = kernel("madvise");
    let a = area(&mut k, mm, 1);
    touch(&mut k, mm, a, 1, Access::Write);
    let child = k.dup_mm(mm).unwrap();
    touch(&mut k, child, a + P, 1, Access::Write);
    k.knobs.set("transparent_hugepage/khugepaged/max_ptes_shared", "0").unwrap();
    assert_eq!(collapse(&mut k, child, a, H), Ok(()));
    assert_eq!((rss(&k, child), rss(&k, mm)), (2048, 4));
    assert_eq!(k.stat.items[VmItem::NrAnonThps], 1);
    check(&k);
    assert_eq!(collapse(&mut k, mm, a, H), Ok(()), "read-only after fork");
    assert_eq!(k.stat.items[VmItem::NrAnonThps], 2);
    check(&k);
}

/// khugepaged.c's collapse_fork_compound: a THP shared over fork, split in the child (its
/// PTE-mapped pages still shared with the parent's pmd), collapses into a new THP; the
/// parent keeps the old one.
#[test]
fn collapse_fork_compound() {
    let (mut k, mm) = kernel("always");
    let a = area(&mut k, mm, 1);
    touch(&mut k, mm, a, 1, Access::Write);
    assert_eq!(k.stat.items[VmItem::NrAnonThps], 1);
    let child = k.dup_mm(mm).unwrap();
    // Split the child's pmd: MADV_NOHUGEPAGE of one page splits the vma and the pmd.
    k.do_madvise(child, VirtAddr(a), P, Advice::NoHugePage).ret.unwrap();
    k.do_madvise(child, VirtAddr(a), H, Advice::HugePage).ret.unwrap();
    assert_eq!(k.stat.events[VmEvent::ThpSplitPmd], 1);
    assert_eq!(collapse(&mut k, child, a, H), Ok(()));
    assert_eq!(k.stat.events[VmEvent::ThpCollapseAlloc], 1);
    assert_eq!(k.stat.items[VmItem::NrAnonThps], 2, "the parent's and the child's");
    assert_eq!((rss(&k, mm), rss(&k, child)), (2048, 2048));
    check(&k);
}

/// khugepaged.c's madvise_collapse_existing_thps: a PMD-mapped range counts as collapsed,
/// with no allocation.
#[test]
fn madvise_collapse_existing_thps() {
    let (mut k, mm) = kernel("always");
    let a = area(&mut k, mm, 2);
    touch(&mut k, mm, a, 1, Access::Write);
    touch(&mut k, mm, a + H, 1, Access::Write);
    assert_eq!(collapse(&mut k, mm, a, 2 * H), Ok(()));
    assert_eq!(counts(&k, mm)[..2], [2, 0]);
    check(&k);
}

/// MADV_NOHUGEPAGE: EINVAL; an unmapped part: ENOMEM after the mapped part collapsed; a
/// range inside one PMD: EINVAL.
#[test]
fn collapse_refusals() {
    let (mut k, mm) = kernel("always");
    let a = area(&mut k, mm, 2);
    touch(&mut k, mm, a, 1, Access::Write);
    k.do_madvise(mm, VirtAddr(a), H, Advice::NoHugePage).ret.unwrap();
    k.handle_user_fault(mm, a + P, Access::Write);
    assert_eq!(collapse(&mut k, mm, a, H), Err(Errno::EINVAL));
    assert_eq!(collapse(&mut k, mm, a + P, 3 * P), Err(Errno::EINVAL));
    let b = area(&mut k, mm, 1);
    touch(&mut k, mm, b, 1, Access::Write);
    k.do_munmap(mm, b + H - P, P).unwrap();
    // b's vma is 2 MiB less a page: no whole aligned PMD in it.
    assert_eq!(collapse(&mut k, mm, b, H - P), Err(Errno::EINVAL));
    k.do_madvise(mm, VirtAddr(a + H), H, Advice::HugePage).ret.unwrap();
    touch(&mut k, mm, a + H, 1, Access::Write);
    assert_eq!(collapse(&mut k, mm, a + H, 2 * H), Err(Errno::ENOMEM), "hole after the vma");
    check(&k);
}

/// A collapse in a VM_LOCKED vma: the old pages are munlocked as their ptes go, the new THP
/// is mlocked whole (the host counts the old pages' munlocks partly as
/// unevictable_pgs_stranded, by how its per-CPU batches fall).
#[test]
fn collapse_mlocked() {
    let (mut k, mm) = kernel("never");
    let a = area(&mut k, mm, 1);
    k.do_mlock(mm, VirtAddr(a), H, MlockFlags::empty()).ret.unwrap();
    let [ml, mu] = [VmEvent::UnevictablePgMlocked, VmEvent::UnevictablePgMunlocked].map(|e| k.stat.events[e]);
    assert_eq!([ml, mu], [512, 0]);
    assert_eq!(collapse(&mut k, mm, a, H), Ok(()));
    assert_eq!(k.stat.events[VmEvent::UnevictablePgMlocked], 1024);
    assert_eq!(k.stat.events[VmEvent::UnevictablePgMunlocked], 512);
    assert_eq!(k.stat.items[VmItem::NrMlock], 512);
    check(&k);
}

/// khugepaged's rules (`cc->is_khugepaged`): max_ptes_none (511 by default: one page is
/// enough; 0: every pte must map a page), max_ptes_shared (256: a range more than half
/// shared with a fork's parent is left).
#[test]
fn khugepaged_scan_pmd_limits() {
    let (mut k, mm) = kernel("always");
    let a = area(&mut k, mm, 3);
    k.do_madvise(mm, VirtAddr(a), 3 * H, Advice::NoHugePage).ret.unwrap();
    touch(&mut k, mm, a, 1, Access::Write);
    k.do_madvise(mm, VirtAddr(a), 3 * H, Advice::HugePage).ret.unwrap();
    k.knobs.set("transparent_hugepage/khugepaged/max_ptes_none", "0").unwrap();
    // A page still in the CPU's folio_add_lru batch holds its reference: is_refcount_suitable
    // fails on it.
    assert_eq!(k.hpage_collapse_scan_pmd(mm, a, true), ScanResult::PageCount);
    // khugepaged_do_scan's lru_add_drain_all.
    k.lru_add_drain_all();
    assert_eq!(k.hpage_collapse_scan_pmd(mm, a, true), ScanResult::ExceedNonePte);
    assert_eq!(k.stat.events[VmEvent::ThpScanExceedNonePte], 1);
    k.knobs.set("transparent_hugepage/khugepaged/max_ptes_none", "511").unwrap();
    assert_eq!(k.hpage_collapse_scan_pmd(mm, a, true), ScanResult::Succeed);
    // 300 pages shared with a child: more than max_ptes_shared (256).
    k.do_madvise(mm, VirtAddr(a + H), H, Advice::NoHugePage).ret.unwrap();
    touch(&mut k, mm, a + H, 512, Access::Write);
    k.do_madvise(mm, VirtAddr(a + H), H, Advice::HugePage).ret.unwrap();
    let child = k.dup_mm(mm).unwrap();
    touch(&mut k, mm, a + H, 212, Access::Write);
    k.lru_add_drain_all();
    assert_eq!(k.hpage_collapse_scan_pmd(mm, a + H, true), ScanResult::ExceedSharedPte);
    k.knobs.set("transparent_hugepage/khugepaged/max_ptes_shared", "300").unwrap();
    assert_eq!(k.hpage_collapse_scan_pmd(mm, a + H, true), ScanResult::Succeed);
    // The child: the first range's THP (collapsed before the fork) and the 512 pages.
    assert_eq!(rss(&k, child), 4096);
    check(&k);
}

/// The validate cases under the reference model (every read checked, the data copied into
/// the THPs intact) and the invariants after each op, with their counts: collapse-anon's
/// AnonHugePages per snapshot and its three EINVALs; collapse-anon-fork's child.
#[test]
fn validate_cases_hold_under_check() {
    use crate::test_support::run_validate_case as run;
    let thp_kb = |r: &crate::report::Report, pid: u32| -> Vec<i64> {
        r.snapshots
            .iter()
            .filter_map(|s| s.processes.iter().find(|p| p.pid == pid))
            .map(|p| serde_json::to_value(p).unwrap()["AnonHugePages"].as_i64().unwrap())
            .collect()
    };
    let r = run("collapse-anon");
    assert_eq!(thp_kb(&r, 1), [0, 4096, 4096, 6144, 6144]);
    let einval = r.events.iter().filter(|e| e.kind == "syscall" && e.message.contains("collapse: EINVAL")).count();
    assert_eq!(einval, 3, "{:?}", r.events);
    let r = run("collapse-anon-fork");
    // The child's: the inherited THP and its collapsed first 2 MiB; the split one gone; the
    // compound one collapsed anew (and at its exit). The parent (in every snapshot, its
    // own and the child's): its THP, untouched by the child's collapses, then both.
    assert_eq!(thp_kb(&r, 2), [4096, 2048, 4096, 4096]);
    assert_eq!(thp_kb(&r, 1)[..5], [2048, 2048, 2048, 2048, 4096]);
}

/// khugepaged's background scan of anonymous memory (with the thread running, that is with
/// `file_text=khugepaged`): MADV_HUGEPAGE registers the mm and wakes it; its first wake-up
/// collapses each 2 MiB with a page written (max_ptes_none 511), or none of them with
/// max_ptes_none 0 (thp_scan_exceed_none_pte each); max_ptes_none 0 with every page
/// written collapses again.
#[test]
fn khugepaged_collapses_anonymous_ranges() {
    use super::filemap_tests::{delta, run};
    use serde_json::json;
    let prog = |pages: &str| {
        json!([
            {"op": "mmap", "name": "p", "size": "8M", "align": "2M"},
            {"op": "write", "region": "p", "stride": "2M", "length": "8M"},
            {"op": "write", "region": "p", "offset": "6M", "length": pages},
            {"op": "snapshot", "label": "a"},
            {"op": "madvise", "region": "p", "advice": "hugepage"},
            {"op": "sleep", "ms": 100.0},
            {"op": "snapshot", "label": "b"},
        ])
    };
    let knobs = |none: &str| {
        json!({"transparent_hugepage/file_text": "khugepaged", "transparent_hugepage/enabled": "madvise",
               "transparent_hugepage/khugepaged/max_ptes_none": none})
    };
    let got = |r: &crate::report::Report| {
        let s = r.snapshots.iter().find(|s| s.label == "b").unwrap();
        let k = s.kthreads.iter().find(|k| k.name == "khugepaged").expect("khugepaged listed");
        let h = k.khugepaged.as_ref().unwrap();
        let results: Vec<(String, u64)> = h.scan_results.clone().into_iter().collect();
        let d = |n| delta(r, "a", "b", 0, n);
        (
            h.wakeups,
            h.pages_collapsed,
            results,
            d("thp_collapse_alloc"),
            d("thp_scan_exceed_none_pte"),
            d("AnonHugePages"),
        )
    };
    let r = run(prog("4K"), knobs("511"));
    assert_eq!(got(&r), (1, 4, vec![("SCAN_SUCCEED".into(), 4)], 4, 0, 4 * 2048));
    assert_eq!(delta(&r, "a", "b", 1, "RssAnon"), 4 * 2048 - 4 * 4);
    let r = run(prog("4K"), knobs("0"));
    assert_eq!(got(&r), (1, 0, vec![("SCAN_EXCEED_NONE_PTE".into(), 4)], 0, 4, 0));
    let r = run(prog("2M"), knobs("0"));
    let exceed = ("SCAN_EXCEED_NONE_PTE".to_string(), 3);
    assert_eq!(got(&r), (1, 1, vec![exceed, ("SCAN_SUCCEED".into(), 1)], 1, 3, 2048));
}
