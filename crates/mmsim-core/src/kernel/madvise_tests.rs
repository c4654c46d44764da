//! MADV_DONTFORK / MADV_DOFORK, MADV_REMOVE and MADV_FREE: on the kernel directly (vma
//! flags, page flags, reclaim) and through whole workloads with the reference model and the
//! invariants checked after every operation (rss, faults, vmstat, errors, what is read).

use serde_json::{json, Value};

use super::knobs::Knobs;
use super::madvise::Advice;
use super::mm::vm;
use super::mm_types::pg;
use super::mmap::{Errno, MmapArgs};
use super::pgtable;
use super::vmstat::VmEvent;
use super::{Kernel, MmId};
use crate::report::{ProcessStatus, Report, Snapshot};
use crate::test_support::{run, run_checked, snap};
use crate::units::x86::{HPAGE_PMD_SIZE, PAGE_SIZE};
use crate::units::Geometry;

const P: u64 = PAGE_SIZE;
const RW: u32 = vm::READ | vm::WRITE;

fn kernel(memory: u64) -> (Kernel, MmId) {
    let mut k = Kernel::new(memory, Knobs::default(), Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    (k, mm)
}

/// `pages` pages of private anonymous memory, each written (its first byte `value`).
fn written(k: &mut Kernel, mm: MmId, pages: u64, value: u8) -> u64 {
    let a = k.do_mmap(mm, MmapArgs { len: pages * P, prot: RW, ..Default::default() }).unwrap();
    for i in 0..pages {
        write(k, mm, a + i * P, value);
    }
    a
}

/// A user's write of one byte: the fault if the page is not writable, then the store through
/// the page walk (which sets the accessed and dirty bits, as the MMU does).
fn write(k: &mut Kernel, mm: MmId, addr: u64, value: u8) {
    if k.translate(mm, addr, true).is_none() {
        assert_eq!(k.handle_mm_fault(mm, addr, true) & super::vm_fault::ERROR, 0);
    }
    let pfn = k.translate(mm, addr, true).expect("mapped writable");
    k.write_page_content(pfn, (addr % P) as usize, (addr % P) as usize + 1, 1, value);
}

/// What a read of `addr` sees (None: nothing mapped there now).
fn peek(k: &mut Kernel, mm: MmId, addr: u64) -> Option<u8> {
    let pfn = k.translate(mm, addr, false)?;
    Some(k.page_content(pfn).map_or(0, |c| c.get((addr % P) as usize)))
}

fn pte(k: &Kernel, mm: MmId, addr: u64) -> pgtable::Entry {
    let s = k.pte_slot(mm, addr).expect("a PTE table");
    k.entry(s.table, s.idx)
}

fn anon_kb(k: &Kernel, mm: MmId) -> i64 {
    k.rss_kb(mm, super::mm::MmCounter::AnonPages)
}

fn vmstat(s: &Snapshot, name: &str) -> i64 {
    s.vmstat.get(name).unwrap_or_else(|| panic!("no vmstat {name}"))
}

fn meminfo(s: &Snapshot, name: &str) -> i64 {
    s.meminfo.get(name).unwrap_or_else(|| panic!("no meminfo {name}"))
}

fn pid(s: &Snapshot, pid: u32) -> &ProcessStatus {
    s.processes.iter().find(|p| p.pid == pid).unwrap_or_else(|| panic!("no pid {pid}"))
}

fn events(r: &Report, kind: &str) -> Vec<(u32, String)> {
    r.events.iter().filter(|e| e.kind == kind).map(|e| (e.pid, e.message.clone())).collect()
}

// ---- MADV_DONTFORK / MADV_DOFORK ---------------------------------------------------------

/// MADV_DONTFORK sets VM_DONTCOPY on the range, splitting the vma (and merging it back when
/// MADV_DOFORK clears it); fork leaves the vma out of the child, pages, tables and all. A
/// hugetlb vma cut off a huge page boundary is EINVAL, and nothing changes where the flags
/// are already as asked.
#[test]
fn dontfork_sets_vm_dontcopy_and_fork_leaves_the_vma_out() {
    let (mut k, mm) = kernel(64 << 20);
    let a = written(&mut k, mm, 16, 1);
    k.madvise_do_behavior(mm, a + 4 * P, 4 * P, Advice::DontFork).unwrap();
    assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AAAABBBBCCCCCCCC");
    assert_ne!(k.mm(mm).vma_lookup(a + 4 * P).unwrap().flags & vm::DONTCOPY, 0);
    assert_eq!(k.mm(mm).vma_lookup(a).unwrap().flags & vm::DONTCOPY, 0);
    let child = k.dup_mm(mm).unwrap();
    assert_eq!(k.mm(child).draw(a, a + 16 * P, P), "AAAA    BBBBBBBB", "nothing mapped there in the child");
    assert_eq!(anon_kb(&k, mm) - anon_kb(&k, child), 4 * 4, "12 of the 16 pages copied");
    assert!(k.translate(child, a + 4 * P, false).is_none());
    assert_eq!(peek(&mut k, child, a), Some(1));
    k.check_invariants().unwrap();
    k.madvise_do_behavior(mm, a, 16 * P, Advice::DoFork).unwrap();
    assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AAAAAAAAAAAAAAAA", "merged back");
    let child2 = k.dup_mm(mm).unwrap();
    assert_eq!(anon_kb(&k, child2), anon_kb(&k, mm));
    assert_eq!(peek(&mut k, child2, a + 5 * P), Some(1));
    // A hole in the range: the vmas around it are advised, ENOMEM.
    let b = k.do_mmap(mm, MmapArgs { addr: a + 32 * P, len: 4 * P, prot: RW, fixed: true, ..Default::default() });
    assert_eq!(b, Ok(a + 32 * P));
    assert_eq!(k.madvise_do_behavior(mm, a + 12 * P, 24 * P, Advice::DontFork), Err(Errno::ENOMEM));
    assert_ne!(k.mm(mm).vma_lookup(a + 33 * P).unwrap().flags & vm::DONTCOPY, 0, "past the hole too");
    k.check_invariants().unwrap();

    // Hugetlb: a cut off a 2 MiB boundary is EINVAL (hugetlb_vm_op_split); a whole huge page
    // is fine; a range whose flags are already set needs no split.
    let knobs = Knobs { nr_hugepages: 4, ..Default::default() };
    let mut k = Kernel::new(64 << 20, knobs, Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    let h = k.do_mmap(mm, MmapArgs { len: 4 << 20, prot: RW, shared: true, hugetlb: true, ..Default::default() });
    let h = h.unwrap();
    assert_eq!(k.madvise_do_behavior(mm, h + P, P, Advice::DontFork), Err(Errno::EINVAL));
    assert_eq!(k.madvise_stop(mm, h + P, P, Advice::DontFork), h + P);
    k.madvise_do_behavior(mm, h, HPAGE_PMD_SIZE, Advice::DontFork).unwrap();
    assert_eq!(k.mm(mm).draw(h, h + (4 << 20), HPAGE_PMD_SIZE), "AB");
    assert_eq!(k.madvise_do_behavior(mm, h, P, Advice::DontFork), Ok(()), "already VM_DONTCOPY: no split");
    assert_eq!(k.madvise_do_behavior(mm, h, P, Advice::DoFork), Err(Errno::EINVAL));
    k.check_invariants().unwrap();
}

/// The selftests' scenario on a workload: a child forked after MADV_DONTFORK has no mapping
/// there (its access is SIGSEGV, as the reference model says) and fewer page tables (the
/// region's PTE table: 4 kB of VmPTE) and rss; after MADV_DOFORK a child has it again.
#[test]
fn a_child_forked_after_dontfork_segfaults_there_and_has_fewer_tables() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"never"},"program":[
        {"op":"mmap","name":"p","size":"4M","align":"2M"},
        {"op":"mmap","name":"q","size":"2M","align":"2M"},
        {"op":"write","region":"p","value":1},
        {"op":"write","region":"q","value":2},
        {"op":"madvise","region":"q","advice":"dontfork"},
        {"op":"fork","program":[
            {"op":"snapshot","label":"child"},
            {"op":"write","region":"p","length":"64K","value":3},
            {"op":"read","region":"p","expect":1,"offset":"64K"},
            {"op":"snapshot","label":"child-wrote"},
            {"op":"read","region":"q","length":1}]},
        {"op":"wait"},
        {"op":"madvise","region":"q","advice":"dofork"},
        {"op":"fork","program":[{"op":"snapshot","label":"child2"},{"op":"read","region":"q","expect":2}]},
        {"op":"wait"},
        {"op":"read","region":"q","expect":2},
        {"op":"snapshot","label":"end"}]}));
    let (c, w, c2) = (snap(&r, "child"), snap(&r, "child-wrote"), snap(&r, "child2"));
    assert_eq!(pid(c, 2).rss_anon, pid(c2, 3).rss_anon - 2048, "q's 512 pages are not the child's");
    assert_eq!(pid(c, 2).vm_pte, pid(c2, 3).vm_pte - 4, "nor its PTE table");
    assert_eq!(pid(w, 2).minflt - pid(c, 2).minflt, 16, "its other memory is copied as ever");
    let segv = events(&r, "segfault");
    assert_eq!(segv.len(), 1, "{segv:?}");
    assert_eq!(segv[0].0, 2, "the first child's read of q");
    assert_eq!(pid(snap(&r, "end"), 2).state, "killed");
    assert_eq!(pid(snap(&r, "end"), 3).state, "exited");
}

// ---- MADV_REMOVE --------------------------------------------------------------------------

/// MADV_REMOVE of a shared anonymous mapping punches a hole in its shmem object: the pages
/// leave the page cache (Shmem, nr_shmem) and every mapping (each process's RssShmem), and
/// read as zero after; the rest keeps its data. A child's remove reaches the parent's
/// mapping too.
#[test]
fn remove_punches_a_hole_in_shared_anonymous_memory_for_every_mapping() {
    let r = run(json!({"program":[
        {"op":"mmap","name":"s","size":"4M","flags":["shared","anonymous"]},
        {"op":"write","region":"s","value":7},
        {"op":"snapshot","label":"a"},
        {"op":"madvise","region":"s","advice":"remove","offset":"1M","length":"1M"},
        {"op":"snapshot","label":"b"},
        {"op":"read","region":"s","length":"1M","expect":7},
        {"op":"read","region":"s","offset":"1M","length":"1M","expect":0},
        {"op":"read","region":"s","offset":"2M","expect":7},
        {"op":"snapshot","label":"c"},
        {"op":"fork","program":[
            {"op":"madvise","region":"s","advice":"remove","offset":"2M","length":"2M"},
            {"op":"read","region":"s","offset":"2M","length":"4K","expect":0}]},
        {"op":"wait"},
        {"op":"snapshot","label":"d"},
        {"op":"read","region":"s","offset":"2M","expect":0},
        {"op":"read","region":"s","length":"1M","expect":7}]}));
    let (a, b, c, d) = (snap(&r, "a"), snap(&r, "b"), snap(&r, "c"), snap(&r, "d"));
    assert_eq!(pid(a, 1).rss_shmem, 4096);
    assert_eq!(pid(b, 1).rss_shmem, 3072);
    assert_eq!(meminfo(a, "Shmem") - meminfo(b, "Shmem"), 1024);
    assert_eq!(vmstat(a, "nr_shmem") - vmstat(b, "nr_shmem"), 256);
    assert_eq!(pid(c, 1).rss_shmem, 4096, "the hole's read faults instantiate zero pages again");
    assert_eq!(pid(d, 1).rss_shmem, 2048, "the child's hole unmapped the parent's pages too");
    assert_eq!(meminfo(c, "Shmem") - meminfo(d, "Shmem"), 2048 - 4, "but the page the child read");
}

/// MADV_REMOVE's errors as madvise_remove returns them: a private anonymous mapping has no
/// file (EINVAL), a private file mapping is not shared (EACCES), a locked vma is EINVAL; a
/// read-only shared mapping may be written (VM_MAYWRITE): fine. The walk stops at the error.
#[test]
fn remove_refuses_private_and_locked_mappings() {
    let r = run(json!({"program":[
        {"op":"create","file":"f","size":"1M"},
        {"op":"mmap","name":"p","size":"64K"},
        {"op":"mmap","name":"m","size":"64K","file":"f","flags":["private"]},
        {"op":"mmap","name":"s","size":"64K","flags":["shared","anonymous"]},
        {"op":"mmap","name":"r","size":"64K","flags":["shared","anonymous"],"prot":"r"},
        {"op":"write","region":"s","value":1},
        {"op":"mlock","region":"s"},
        {"op":"madvise","region":"p","advice":"remove"},
        {"op":"madvise","region":"m","advice":"remove"},
        {"op":"madvise","region":"s","advice":"remove"},
        {"op":"read","region":"s","expect":1},
        {"op":"madvise","region":"r","advice":"remove"}]}));
    let got: Vec<String> = events(&r, "syscall").into_iter().map(|e| e.1).collect();
    assert_eq!(got, ["madvise p remove: EINVAL", "madvise m remove: EACCES", "madvise s remove: EINVAL"]);
}

/// MADV_REMOVE of a shared ext4 mapping punches a hole in the file: its blocks and cached
/// pages go (dirty ones dropped, not written), read(2) and a private mapping of the file
/// read zeroes there, the rest of the file keeps its data; RssFile drops in each mapping.
#[test]
fn remove_punches_a_hole_in_an_ext4_file() {
    let r = run(json!({"program":[
        {"op":"create","file":"f","size":"4M"},
        {"op":"pwrite","file":"f","value":5},
        {"op":"fsync","file":"f"},
        {"op":"mmap","name":"m","size":"4M","file":"f","flags":["shared"]},
        {"op":"mmap","name":"v","size":"4M","file":"f","flags":["private"],"prot":"r"},
        {"op":"write","region":"m","offset":"1M","length":"4K","value":6},
        {"op":"read","region":"v","expect":5,"offset":"2M"},
        {"op":"read","region":"m","length":"1M","expect":5},
        {"op":"snapshot","label":"a"},
        {"op":"madvise","region":"m","advice":"remove","offset":"1M","length":"2M"},
        {"op":"snapshot","label":"b"},
        {"op":"pread","file":"f","offset":"1M","length":"2M","expect":0},
        {"op":"pread","file":"f","length":"1M","expect":5},
        {"op":"pread","file":"f","offset":"3M","expect":5},
        {"op":"read","region":"v","offset":"1M","length":"2M","expect":0},
        {"op":"read","region":"m","offset":"1M","length":"2M","expect":0},
        {"op":"read","region":"m","offset":"3M","expect":5}]}));
    let (a, b) = (snap(&r, "a"), snap(&r, "b"));
    // v mapped [2M, 4M), m [0, 1M) and the page written at 1M: [2M, 3M) of v and m's page go.
    assert_eq!(pid(a, 1).rss_file - pid(b, 1).rss_file, 1024 + 4);
    assert_eq!(vmstat(a, "nr_file_pages") - vmstat(b, "nr_file_pages"), 512, "the hole's pages left the cache");
    assert_eq!((meminfo(a, "Dirty"), meminfo(b, "Dirty")), (4, 0), "the dirty page was dropped with its block");
}

/// MADV_REMOVE of a shared hugetlb mapping (hugetlbfs_punch_hole): the huge pages the range
/// covers whole are unmapped and freed (HugePages_Free up, HugetlbPages down; their
/// reservation was used, so HugePages_Rsvd stays), the part of one it covers in part is
/// zeroed in place; a later fault allocates a page without a reservation.
#[test]
fn remove_punches_a_hole_in_shared_hugetlb_memory() {
    let r = run(json!({"knobs":{"vm/nr_hugepages":"4"},"program":[
        {"op":"mmap","name":"h","size":"8M","flags":["shared","anonymous","hugetlb"]},
        {"op":"write","region":"h","value":9},
        {"op":"snapshot","label":"a"},
        {"op":"madvise","region":"h","advice":"remove","offset":"2M","length":"2M"},
        {"op":"madvise","region":"h","advice":"remove","offset":"5M","length":"4K"},
        {"op":"snapshot","label":"b"},
        {"op":"read","region":"h","offset":"2M","length":"2M","expect":0},
        {"op":"read","region":"h","offset":"5M","length":"4K","expect":0},
        {"op":"read","region":"h","offset":"4M","length":"1M","expect":9},
        {"op":"read","region":"h","offset":"5M","stride":4096,"length":"4K","expect":0},
        {"op":"read","region":"h","offset":"6M","expect":9},
        {"op":"snapshot","label":"c"}]}));
    let (a, b, c) = (snap(&r, "a"), snap(&r, "b"), snap(&r, "c"));
    assert_eq!((meminfo(a, "HugePages_Free"), meminfo(b, "HugePages_Free"), meminfo(c, "HugePages_Free")), (0, 1, 0));
    assert_eq!((meminfo(a, "HugePages_Rsvd"), meminfo(b, "HugePages_Rsvd")), (0, 0));
    assert_eq!(pid(a, 1).hugetlb_pages - pid(b, 1).hugetlb_pages, 2048);
    assert_eq!(pid(c, 1).hugetlb_pages, pid(a, 1).hugetlb_pages);
    // Private hugetlb memory has a file but is not shared: EACCES.
    let r = run(json!({"knobs":{"vm/nr_hugepages":"1"},"program":[
        {"op":"mmap","name":"h","size":"2M","flags":["private","anonymous","hugetlb"]},
        {"op":"madvise","region":"h","advice":"remove"}]}));
    assert_eq!(events(&r, "syscall"), [(1, "madvise h remove: EACCES".to_string())]);
}

/// A hugetlb hole over a page never faulted keeps its reservation: remove_inode_hugepages
/// unreserves only the pages it removes (the host: HugePages_Rsvd unchanged, validate case
/// remove-hugetlb-unfaulted).
#[test]
fn remove_of_unfaulted_hugetlb_pages_keeps_their_reservations() {
    let knobs = Knobs { nr_hugepages: 4, ..Default::default() };
    let mut k = Kernel::new(64 << 20, knobs, Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    let h = k.do_mmap(mm, MmapArgs { len: 8 << 20, prot: RW, shared: true, hugetlb: true, ..Default::default() });
    let h = h.unwrap();
    assert_eq!(k.hugetlb.resv_huge_pages, 4);
    write(&mut k, mm, h, 1);
    assert_eq!(k.hugetlb.resv_huge_pages, 3);
    k.madvise_do_behavior(mm, h, 4 << 20, Advice::Remove).unwrap();
    assert_eq!((k.hugetlb.resv_huge_pages, k.hugetlb.free_huge_pages), (3, 4), "idx 1's reservation kept");
    k.check_invariants().unwrap();
}

// ---- MADV_FREE ----------------------------------------------------------------------------

/// MADV_FREE keeps the pages mapped (rss, data) but cleans their ptes and marks them
/// lazyfree (pglazyfree, LazyFree); a write dirties a pte again. Reclaim discards the clean
/// ones (pglazyfreed, rss down, a read sees zero), keeps the written one (its data stays, it
/// is swap-backed again), and gives a page read since a second round.
#[test]
fn free_marks_pages_lazyfree_and_reclaim_discards_only_clean_ones() {
    let (mut k, mm) = kernel(64 << 20);
    let a = written(&mut k, mm, 8, 3);
    let before = anon_kb(&k, mm);
    k.madvise_do_behavior(mm, a, 8 * P, Advice::Free).unwrap();
    assert_eq!(anon_kb(&k, mm), before, "nothing unmapped");
    assert_eq!(k.stat.events[VmEvent::PgLazyFree], 0, "queued on the lru_lazyfree batch");
    k.check_invariants().unwrap();
    k.lru_add_drain();
    assert_eq!(k.stat.events[VmEvent::PgLazyFree], 8);
    assert_eq!(k.lazyfree_pages(mm), 8);
    assert!(!pte(&k, mm, a).has(pgtable::DIRTY) && !pte(&k, mm, a).has(pgtable::ACCESSED));
    assert_eq!(peek(&mut k, mm, a), Some(3), "the data is there until reclaim");
    write(&mut k, mm, a + P, 4);
    assert!(pte(&k, mm, a + P).has(pgtable::DIRTY));
    assert_eq!(k.lazyfree_pages(mm), 7, "the written page is no longer LazyFree (the read one, young, is)");
    k.check_invariants().unwrap();
    // Pages 0 and 1 were accessed since (young): a second round (folio_check_references
    // keeps a referenced folio once). The others are discarded.
    let freed = k.shrink_inactive_for_test(super::lruvec::Lru::InactiveFile);
    assert_eq!(freed, 6);
    assert_eq!(k.stat.events[VmEvent::PgLazyFreed], 6);
    assert_eq!(anon_kb(&k, mm), before - 6 * 4);
    assert_eq!(k.translate(mm, a + 2 * P, false), None, "discarded: not mapped");
    let lazy = |k: &Kernel| {
        k.lru_folios(0, super::lruvec::Lru::InactiveFile)
            .iter()
            .filter(|f| k.mem.pages[f.idx()].test(pg::LAZYFREE))
            .count()
    };
    assert_eq!(lazy(&k), 2, "pages 0 and 1 wait for their second round");
    k.check_invariants().unwrap();
    // Second round: page 0, only read, is discarded; page 1, written, is kept with its data
    // and is swap-backed again.
    assert_eq!(k.shrink_inactive_for_test(super::lruvec::Lru::InactiveFile), 1);
    assert_eq!(k.translate(mm, a, false), None);
    assert_eq!(peek(&mut k, mm, a + P), Some(4), "written after MADV_FREE: kept");
    let kept = k.translate(mm, a + P, false).unwrap();
    assert!(!k.mem.pages[kept.idx()].test(pg::LAZYFREE));
    assert_eq!(lazy(&k), 0);
    assert_eq!(k.stat.events[VmEvent::PgLazyFreed], 7);
    k.check_invariants().unwrap();
    // A read fault there maps the zero page: zeroes.
    assert_eq!(k.handle_mm_fault(mm, a + 2 * P, false), 0);
    assert_eq!(peek(&mut k, mm, a + 2 * P), Some(0));
    assert_eq!(k.lazyfree_pages(mm), 0);
    k.check_invariants().unwrap();
}

/// While MADV_FREE's lru_lazyfree batch holds a folio, a write fault on its write-protected
/// pte copies it (the batch's reference: `wp_can_reuse_anon_folio`), so the next MADV_FREE
/// lazyfrees the copy too: pglazyfree 2 where the host kernel counts 2 (the runner's tasks
/// on one CPU; validate case 1533 of `--random 2000 --seed 2026`). A write after a drain (a
/// fork's child exits: exit_mmap drains) reuses the page, and so does a write through a
/// writable pte (no fault): 1, as the kernel counts.
#[test]
fn a_write_fault_while_the_lazyfree_batch_holds_the_page_copies_it() {
    let go = |pre: Value, mid: Value| {
        let mut prog = vec![json!({"op":"mmap","name":"p","size":"4K"}), json!({"op":"write","region":"p","value":1})];
        prog.extend(pre.as_array().unwrap().iter().cloned());
        prog.push(json!({"op":"snapshot","label":"a"}));
        prog.push(json!({"op":"madvise","region":"p","advice":"free"}));
        prog.extend(mid.as_array().unwrap().iter().cloned());
        prog.push(json!({"op":"write","region":"p","value":2}));
        prog.push(json!({"op":"madvise","region":"p","advice":"free"}));
        prog.push(json!({"op":"snapshot","label":"b"}));
        prog.push(json!({"op":"read","region":"p","expect":2}));
        let r = run(json!({ "program": prog }));
        let (a, b) = (snap(&r, "a"), snap(&r, "b"));
        (vmstat(b, "pglazyfree") - vmstat(a, "pglazyfree"), vmstat(b, "mmsim_cow_copy") - vmstat(a, "mmsim_cow_copy"))
    };
    let fork = json!([{"op":"fork","program":[]},{"op":"wait"}]);
    assert_eq!(go(fork.clone(), json!([])), (2, 1), "the fault copies the queued page");
    assert_eq!(go(json!([]), json!([])), (1, 0), "a writable pte: no fault, one page");
    let child = json!([{"op":"fork","program":[]},{"op":"wait"}]);
    assert_eq!(go(fork, child), (1, 0), "the child's exit drained the batch: reused");
}

/// A THP the range covers whole is lazyfreed whole (512 pages, no split) and discarded whole
/// with its deposited table; one covered in part is split first (thp_split_pmd and
/// thp_split_page) and only its pages in the range become lazyfree.
#[test]
fn free_takes_a_whole_thp_whole_and_splits_one_it_covers_in_part() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"4M","align":"2M"},
        {"op":"write","region":"p","value":1},
        {"op":"snapshot","label":"a"},
        {"op":"madvise","region":"p","advice":"free","length":"2M"},
        {"op":"snapshot","label":"b"},
        {"op":"madvise","region":"p","advice":"free","offset":"2M","length":"8K"},
        {"op":"snapshot","label":"c"},
        {"op":"write","region":"p","offset":"2M","length":1,"value":2},
        {"op":"snapshot","label":"d"},
        {"op":"read","region":"p","expect":1,"offset":"4K","length":"1M"}]}));
    let (a, b, c, d) = (snap(&r, "a"), snap(&r, "b"), snap(&r, "c"), snap(&r, "d"));
    assert_eq!(vmstat(b, "pglazyfree") - vmstat(a, "pglazyfree"), 512);
    assert_eq!(vmstat(b, "thp_split_pmd"), vmstat(a, "thp_split_pmd"));
    let rss = pid(a, 1).rss_anon;
    assert_eq!((pid(b, 1).lazy_free, pid(b, 1).anon_huge_pages, pid(b, 1).rss_anon), (2048, 4096, rss));
    assert_eq!(vmstat(c, "pglazyfree") - vmstat(b, "pglazyfree"), 2);
    assert_eq!(vmstat(c, "thp_split_pmd") - vmstat(b, "thp_split_pmd"), 1);
    assert_eq!(vmstat(c, "thp_split_page") - vmstat(b, "thp_split_page"), 1);
    assert_eq!((pid(c, 1).lazy_free, pid(c, 1).anon_huge_pages, pid(c, 1).rss_anon), (2056, 2048, rss));
    assert_eq!(pid(d, 1).lazy_free, 2052, "the write dirtied one");
    assert_eq!(pid(d, 1).minflt, pid(c, 1).minflt, "a write through a clean writable pte takes no fault");

    let (mut k, mm) = kernel(64 << 20);
    k.knobs.thp_enabled = super::knobs::ThpEnabled::Always;
    let t = k.do_mmap(mm, MmapArgs { len: 4 << 20, prot: RW, align: HPAGE_PMD_SIZE, ..Default::default() });
    let t = t.unwrap();
    write(&mut k, mm, t, 1);
    let pte_kb = k.mm(mm).pgtables_bytes;
    let rss = anon_kb(&k, mm);
    k.madvise_do_behavior(mm, t, HPAGE_PMD_SIZE, Advice::Free).unwrap();
    k.lru_add_drain();
    assert_eq!(k.shrink_inactive_for_test(super::lruvec::Lru::InactiveFile), 512);
    assert_eq!(k.stat.events[VmEvent::PgLazyFreed], 512);
    assert_eq!(k.mm(mm).pgtables_bytes, pte_kb - 4096, "the deposited table went with it");
    assert_eq!(anon_kb(&k, mm), rss - 2048);
    k.check_invariants().unwrap();
}

/// The split MADV_FREE makes of a THP it covers in part maps the pages that hold only zeroes
/// by the shared zero page and frees them (`remap_page` with RMP_USE_SHARED_ZEROPAGE, since
/// Linux 6.12): a THP only read (allocated on a read fault without the huge zero page) leaves
/// nothing in rss and nothing lazyfree; one written in one page keeps that page. Found by
/// `validate --random` (kernel RssAnon 4 kB, mmsim 2048 kB).
#[test]
fn free_splitting_a_thp_maps_its_zero_pages_to_the_zero_page() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always","transparent_hugepage/use_zero_page":"0"},
        "program":[
        {"op":"mmap","name":"p","size":"4M","align":"2M"},
        {"op":"read","region":"p"},
        {"op":"write","region":"p","offset":"3M","length":1,"value":8},
        {"op":"snapshot","label":"a"},
        {"op":"madvise","region":"p","advice":"free","offset":"1M","length":"4K"},
        {"op":"snapshot","label":"b"},
        {"op":"madvise","region":"p","advice":"free","offset":"2M","length":"4K"},
        {"op":"snapshot","label":"c"},
        {"op":"read","region":"p","expect":0,"length":"3M"},
        {"op":"read","region":"p","offset":"3M","length":1,"expect":8},
        {"op":"snapshot","label":"d"}]}));
    let (a, b, c, d) = (snap(&r, "a"), snap(&r, "b"), snap(&r, "c"), snap(&r, "d"));
    assert_eq!(pid(a, 1).anon_huge_pages, 4096);
    assert_eq!(pid(a, 1).rss_anon - pid(b, 1).rss_anon, 2048, "the read-only THP's pages all went");
    assert_eq!((pid(b, 1).lazy_free, vmstat(b, "pglazyfree")), (0, 0), "zero pages are not lazyfree");
    assert_eq!(vmstat(b, "thp_split_pmd") - vmstat(a, "thp_split_pmd"), 1);
    assert_eq!(vmstat(b, "thp_split_page") - vmstat(a, "thp_split_page"), 1);
    assert_eq!(pid(b, 1).rss_anon - pid(c, 1).rss_anon, 2048 - 4, "but the page written at 3M");
    assert_eq!((pid(c, 1).lazy_free, vmstat(c, "pglazyfree")), (0, 0));
    assert_eq!(pid(d, 1).minflt, pid(c, 1).minflt, "the zero pages are mapped: no fault");
}

/// MADV_FREE of memory a fork child shares (madvise_free_huge_pmd and madvise_free_pte_range
/// skip what `folio_maybe_mapped_shared` says others map): a THP the parent maps too is left
/// whole (no split, not lazyfree), the small pages are lazyfree (their folio is not dirty)
/// but only the child's ptes are clean, so only the child counts them in LazyFree. Both
/// keep their data. As the host kernel does (`experiments/validate/free-then-write.json`).
#[test]
fn free_of_memory_shared_with_a_child_leaves_its_thp_and_lazyfrees_its_small_pages() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"madvise"},"program":[
        {"op":"mmap","name":"t","size":"2M","align":"2M"},
        {"op":"madvise","region":"t","advice":"hugepage"},
        {"op":"write","region":"t","value":1},
        {"op":"mmap","name":"q","size":"64K"},
        {"op":"write","region":"q","value":2},
        {"op":"snapshot","label":"a"},
        {"op":"fork","program":[
            {"op":"snapshot","label":"forked"},
            {"op":"madvise","region":"t","advice":"free"},
            {"op":"madvise","region":"q","advice":"free"},
            {"op":"snapshot","label":"freed"},
            {"op":"read","region":"t","expect":1},
            {"op":"read","region":"q","expect":2}]},
        {"op":"wait"},
        {"op":"snapshot","label":"b"},
        {"op":"read","region":"t","expect":1},
        {"op":"read","region":"q","expect":2}]}));
    let (a, forked, freed, b) = (snap(&r, "a"), snap(&r, "forked"), snap(&r, "freed"), snap(&r, "b"));
    assert_eq!(pid(a, 1).anon_huge_pages, 2048);
    assert_eq!(vmstat(freed, "pglazyfree") - vmstat(forked, "pglazyfree"), 16, "q's pages, not the THP");
    assert_eq!(vmstat(freed, "thp_split_pmd"), vmstat(forked, "thp_split_pmd"));
    assert_eq!((pid(freed, 2).lazy_free, pid(freed, 2).anon_huge_pages), (64, 2048));
    assert_eq!((pid(freed, 1).lazy_free, pid(freed, 1).rss_anon), (0, pid(a, 1).rss_anon));
    assert_eq!(pid(freed, 2).rss_anon, pid(forked, 2).rss_anon, "nothing unmapped");
    assert_eq!((pid(b, 1).lazy_free, pid(b, 1).rss_anon), (0, pid(a, 1).rss_anon));
}

/// MADV_FREE's errors (madvise_dontneed_free_valid_vma, madvise_free_single_vma): an mlocked
/// vma, a hugetlb one, shared anonymous memory and a file mapping are EINVAL.
#[test]
fn free_refuses_locked_hugetlb_shared_and_file_mappings() {
    let r = run(json!({"knobs":{"vm/nr_hugepages":"1"},"program":[
        {"op":"create","file":"f","size":"64K"},
        {"op":"mmap","name":"l","size":"64K"},
        {"op":"mlock","region":"l"},
        {"op":"mmap","name":"h","size":"2M","flags":["private","anonymous","hugetlb"]},
        {"op":"mmap","name":"s","size":"64K","flags":["shared","anonymous"]},
        {"op":"mmap","name":"m","size":"64K","file":"f","flags":["private"]},
        {"op":"madvise","region":"l","advice":"free"},
        {"op":"madvise","region":"h","advice":"free"},
        {"op":"madvise","region":"s","advice":"free"},
        {"op":"madvise","region":"m","advice":"free"}]}));
    let got: Vec<String> = events(&r, "syscall").into_iter().map(|e| e.1).collect();
    assert_eq!(
        got,
        ["madvise l free: EINVAL", "madvise h free: EINVAL", "madvise s free: EINVAL", "madvise m free: EINVAL"]
    );
}

/// Memory pressure on a small machine: a child's allocations reclaim the clean lazyfree
/// pages oldest first, from the parent and the child alike (pglazyfreed, each one's rss
/// down), and the written one stays; what each process reads afterwards is exactly what the
/// reference model, told of each discard, says.
#[test]
fn reclaim_under_pressure_discards_lazyfree_pages_and_the_reference_model_follows() {
    let prog = |fill: u64| {
        json!({"machine":{"memory":"64M"},"knobs":{"transparent_hugepage/enabled":"never"},"program":[
            {"op":"mmap","name":"p","size":"16M"},
            {"op":"write","region":"p","value":3},
            {"op":"madvise","region":"p","advice":"free"},
            {"op":"write","region":"p","length":"4K","value":4},
            {"op":"snapshot","label":"a"},
            {"op":"fork","program":[
                {"op":"snapshot","label":"child"},
                {"op":"mmap","name":"q","size":fill},
                {"op":"write","region":"q","value":5},
                {"op":"snapshot","label":"b"},
                {"op":"read","region":"p","length":"4K","expect":4},
                {"op":"read","region":"p"},
                {"op":"read","region":"q","expect":5}]},
            {"op":"wait"},
            {"op":"snapshot","label":"c"},
            {"op":"read","region":"p","length":"4K","expect":4},
            {"op":"read","region":"p"}]})
    };
    let free_kb = meminfo(snap(&run(prog(4096)), "a"), "MemFree");
    let fill_kb = free_kb + 4096;
    let r = run(prog(fill_kb as u64 * 1024));
    let (a, child, b, c) = (snap(&r, "a"), snap(&r, "child"), snap(&r, "b"), snap(&r, "c"));
    assert_eq!(vmstat(a, "pglazyfree"), 4096);
    let discarded = vmstat(b, "pglazyfreed") - vmstat(a, "pglazyfreed");
    assert!((1024..4095).contains(&discarded), "{discarded} pages discarded");
    assert_eq!(pid(b, 2).rss_anon, pid(child, 2).rss_anon + fill_kb - discarded * 4);
    assert_eq!(pid(a, 1).rss_anon - pid(c, 1).rss_anon, discarded * 4, "the parent's mappings went too");
    assert_eq!(pid(c, 1).lazy_free, 16384 - 4 - discarded * 4);
    assert_eq!(events(&r, "oom-kill"), []);
    // Every byte read of p (the pages discarded, zeroes; those kept, 3) was checked against
    // the reference model, which agrees (`run`).
    assert!(r.check.reads_checked >= 2 * 4096, "{}", r.check.reads_checked);
}

/// GUP's FOLL_TOUCH marks each page it follows accessed (follow_page_pte's
/// folio_mark_accessed): MADV_POPULATE_WRITE of pages an earlier populate left referenced
/// activates them. experiments/validate/madvise-populate.json's last step on Linux 6.18 here:
/// pgactivate 512 and nr_active_anon 512 (the 1 MiB made read-only fails the populate of its
/// range, so 2 MiB from offset 2M and the 3 MiB after it: 512 pages already referenced at
/// 2M..4M, the rest new).
#[test]
fn populate_touches_what_it_follows_and_activates_a_page_followed_twice() {
    let s = |l: &str| json!({"op": "snapshot", "label": l});
    let r = run_checked(json!({"knobs": {"fault_around_bytes": 4096}, "program": [
        {"op": "mmap", "name": "p", "size": "4M", "align": "2M"},
        {"op": "madvise", "region": "p", "advice": "nohugepage"},
        {"op": "madvise", "region": "p", "advice": "populate_read"},
        {"op": "madvise", "region": "p", "advice": "populate_write"},
        s("e"),
        {"op": "mprotect", "region": "p", "prot": "r", "length": "1M"},
        {"op": "madvise", "region": "p", "advice": "populate_write", "offset": "2M"},
        {"op": "madvise", "region": "p", "advice": "populate_write"},
        s("f")]}));
    let d = |n: &str| vmstat(snap(&r, "f"), n) - vmstat(snap(&r, "e"), n);
    assert_eq!(vmstat(snap(&r, "e"), "pgactivate"), 0);
    assert_eq!(d("pgactivate"), 512);
    assert_eq!(d("nr_active_anon"), 512);
}
