//! mremap(2) of part of a mapping, without MREMAP_MAYMOVE, and with MREMAP_DONTUNMAP at the
//! system-call layer: the vmas, RssAnon, VmLck and the errors, as Linux 6.18's mm/mremap.c
//! and tools/testing/selftests/mm/mremap_test.c and mremap_dontunmap.c have them.

use super::fault::{Access, FaultOutcome};
use super::mm::{vm, MmCounter};
use super::mmap::Errno;
use super::syscall::MmapReq;
use super::uapi::{MapFlags, MlockFlags, MremapFlags, Prot};
use super::{Kernel, MmId};
use crate::kernel::knobs::Knobs;
use crate::units::x86::PAGE_SIZE;
use crate::units::VirtAddr;

const P: u64 = PAGE_SIZE;
const MAYMOVE: MremapFlags = MremapFlags::MAYMOVE;
const DONTUNMAP: MremapFlags = MremapFlags::MAYMOVE.union(MremapFlags::DONTUNMAP);

fn kernel() -> (Kernel, MmId) {
    let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    (k, mm)
}

/// A private anonymous read-write mapping of `pages` pages, never THP, every page written.
fn map_written(k: &mut Kernel, mm: MmId, pages: u64) -> u64 {
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let r =
        k.vm_mmap_pgoff(mm, MmapReq { len: pages * P, prot: Prot::READ | Prot::WRITE, flags, ..Default::default() });
    let a = r.ret.unwrap();
    k.do_madvise(mm, VirtAddr(a), pages * P, super::uapi::Advice::NoHugePage).ret.unwrap();
    touch(k, mm, a, pages, Access::Write);
    a
}

/// Faults each of `pages` pages from `a`: how many faulted.
fn touch(k: &mut Kernel, mm: MmId, a: u64, pages: u64, access: Access) -> u64 {
    (0..pages).filter(|i| k.handle_user_fault(mm, a + i * P, access).outcome == FaultOutcome::Handled).count() as u64
}

/// The pages of [a, a + pages * P) that have a present PTE.
fn present(k: &Kernel, mm: MmId, a: u64, pages: u64) -> u64 {
    (0..pages).filter(|i| k.pte_slot(mm, a + i * P).is_some_and(|s| k.entry(s.table, s.idx).present())).count() as u64
}

/// RssAnon in pages (the exec'd mm has its stack's page).
fn anon(k: &Kernel, mm: MmId) -> i64 {
    k.mm(mm).rss[MmCounter::AnonPages as usize]
}

fn vmas(k: &Kernel, mm: MmId) -> Vec<(u64, u64)> {
    k.mm(mm).vmas.values().map(|v| (v.start, v.end)).collect()
}

fn remap(k: &mut Kernel, mm: MmId, a: u64, old: u64, new: u64, flags: MremapFlags) -> Result<u64, Errno> {
    k.do_mremap(mm, VirtAddr(a), old * P, new * P, flags, VirtAddr(0)).ret
}

/// mremap_test.c's partial moves: the middle of a mapping moved out (grown, so it must move)
/// leaves the mapping in two around a hole; its entries move, nothing faults, RssAnon stays.
#[test]
fn partial_move_of_the_middle_splits_the_mapping() {
    let (mut k, mm) = kernel();
    let base = anon(&k, mm);
    let a = map_written(&mut k, mm, 16);
    let before = vmas(&k, mm).len();
    let b = remap(&mut k, mm, a + 4 * P, 4, 8, MAYMOVE).unwrap();
    assert_ne!(b, a + 4 * P);
    let v = vmas(&k, mm);
    assert_eq!(v.len(), before + 2, "{v:x?}");
    assert!(v.contains(&(a, a + 4 * P)) && v.contains(&(a + 8 * P, a + 16 * P)) && v.contains(&(b, b + 8 * P)));
    assert_eq!((present(&k, mm, b, 8), present(&k, mm, a, 16)), (4, 12));
    assert_eq!(anon(&k, mm) - base, 16);
    assert_eq!(touch(&mut k, mm, a + 4 * P, 1, Access::Read), 0, "the hole: SIGSEGV");
    k.check_invariants().unwrap();
}

/// Without MREMAP_MAYMOVE: a range that ends where its vma does grows in place when the space
/// after it is free; blocked by a neighbour, or not at the vma's end, ENOMEM and nothing
/// changes; a shrink of the middle unmaps the range's tail in place.
#[test]
fn without_maymove_growth_is_in_place_or_enomem() {
    let (mut k, mm) = kernel();
    let base = anon(&k, mm);
    let a = map_written(&mut k, mm, 16);
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let below = k.vm_mmap_pgoff(mm, MmapReq { len: 4 * P, prot: Prot::READ, flags, ..Default::default() });
    let below = below.ret.unwrap();
    assert_eq!(below + 4 * P, a, "top-down: right below a");
    assert_eq!(remap(&mut k, mm, below, 4, 8, MremapFlags::empty()), Err(Errno::ENOMEM), "a is in the way");
    assert_eq!(remap(&mut k, mm, a + 4 * P, 4, 8, MremapFlags::empty()), Err(Errno::ENOMEM), "not at the end");
    assert_eq!(anon(&k, mm) - base, 16, "nothing changed");
    // Shrinking [4, 8) of a to 2 pages unmaps [6, 8).
    assert_eq!(remap(&mut k, mm, a + 4 * P, 4, 2, MremapFlags::empty()), Ok(a + 4 * P));
    assert_eq!(present(&k, mm, a, 16), 14);
    assert_eq!(anon(&k, mm) - base, 14);
    // With [8, 16) unmapped, [4, 6) grows in place to [4, 12).
    k.do_munmap(mm, a + 8 * P, 8 * P).unwrap();
    assert_eq!(remap(&mut k, mm, a + 4 * P, 2, 8, MremapFlags::empty()), Ok(a + 4 * P));
    assert_eq!(k.mm(mm).vma_lookup(a).map(|v| (v.start, v.end)), Some((a, a + 12 * P)));
    k.check_invariants().unwrap();
}

/// mremap_dontunmap.c: MREMAP_DONTUNMAP moves the pages and leaves the source mapped and
/// empty: reading it faults fresh zero pages (no RssAnon), RssAnon unchanged by the move;
/// the new range holds the pages. Of part of a vma: the vma is not split.
#[test]
fn dontunmap_leaves_the_source_mapped_and_empty() {
    let (mut k, mm) = kernel();
    let base = anon(&k, mm);
    let a = map_written(&mut k, mm, 16);
    let n = vmas(&k, mm).len();
    let b = remap(&mut k, mm, a, 16, 16, DONTUNMAP).unwrap();
    assert_eq!(vmas(&k, mm).len(), n + 1);
    assert_eq!((present(&k, mm, a, 16), present(&k, mm, b, 16)), (0, 16));
    assert_eq!(anon(&k, mm) - base, 16);
    assert!(k.mm(mm).vma_lookup(a).unwrap().anon_vma.is_none(), "the whole vma moved: unlink_anon_vmas");
    assert_eq!(touch(&mut k, mm, a, 16, Access::Read), 16, "fresh faults");
    assert_eq!(anon(&k, mm) - base, 16, "zero pages");
    // Part of a vma: [4, 8) of b moves, b stays one vma.
    let c = remap(&mut k, mm, b + 4 * P, 4, 4, DONTUNMAP).unwrap();
    assert_eq!(k.mm(mm).vma_lookup(b).map(|v| (v.start, v.end)), Some((b, b + 16 * P)));
    assert_eq!((present(&k, mm, b, 16), present(&k, mm, c, 4)), (12, 4));
    assert!(k.mm(mm).vma_lookup(b).unwrap().anon_vma.is_some());
    assert_eq!(anon(&k, mm) - base, 16);
    k.check_invariants().unwrap();
}

/// MREMAP_DONTUNMAP of a locked mapping: the old vma loses VM_LOCKED (and VM_ACCOUNT), the
/// new one is locked, and locked_vm counts both (Linux leaves the old pages counted):
/// VmLck 16 then 32 pages, and after the old vma's munmap still 32; the new one's munmap
/// takes 16 off.
#[test]
fn dontunmap_of_a_locked_mapping_leaves_vmlck_counted() {
    let (mut k, mm) = kernel();
    let base = anon(&k, mm);
    let a = map_written(&mut k, mm, 16);
    k.do_mlock(mm, VirtAddr(a), 16 * P, MlockFlags::empty()).ret.unwrap();
    assert_eq!(k.mm(mm).locked_vm, 16);
    let b = remap(&mut k, mm, a, 16, 16, DONTUNMAP).unwrap();
    let old = k.mm(mm).vma_lookup(a).unwrap().flags;
    assert_eq!(old & (vm::LOCKED_MASK | vm::ACCOUNT), 0);
    assert_eq!(k.mm(mm).vma_lookup(b).unwrap().flags & vm::LOCKED, vm::LOCKED);
    assert_eq!((k.mm(mm).locked_vm, anon(&k, mm) - base), (32, 16));
    k.check_invariants().unwrap();
    k.do_munmap(mm, a, 16 * P).unwrap();
    assert_eq!(k.mm(mm).locked_vm, 32);
    k.do_munmap(mm, b, 16 * P).unwrap();
    assert_eq!(k.mm(mm).locked_vm, 16);
    k.check_invariants().unwrap();
}

/// check_mremap_params and check_prep_vma's errors, as the host kernel gives them.
#[test]
fn bad_flags_and_ranges_fail_as_linux_does() {
    let (mut k, mm) = kernel();
    let a = map_written(&mut k, mm, 16);
    let cases: [(u64, u64, u64, MremapFlags, Errno); 7] = [
        (a + 12 * P, 4, 4, MremapFlags::DONTUNMAP, Errno::EINVAL),
        (a + 12 * P, 4, 8, DONTUNMAP, Errno::EINVAL),
        (a + 12 * P, 0, 4, DONTUNMAP, Errno::EINVAL),
        (a + 12 * P, 0, 4, MAYMOVE, Errno::EINVAL),
        (a + 12 * P, 8, 8, DONTUNMAP, Errno::EFAULT),
        (a + 12 * P, 8, 9, MAYMOVE, Errno::EFAULT),
        (a + 1, 4, 4, MAYMOVE, Errno::EINVAL),
    ];
    for (at, old, new, flags, e) in cases {
        assert_eq!(remap(&mut k, mm, at, old, new, flags), Err(e), "{:#x} {old} {new} {flags:?}", at - a);
    }
    let fixed = MremapFlags::FIXED;
    assert_eq!(k.do_mremap(mm, VirtAddr(a), 4 * P, 4 * P, fixed, VirtAddr(1 << 40)).ret, Err(Errno::EINVAL));
    // A shrink may unmap past the vma's end: [12, 20) to 2 pages unmaps [14, 16).
    assert_eq!(remap(&mut k, mm, a + 12 * P, 8, 2, MremapFlags::empty()), Ok(a + 12 * P));
    assert_eq!(present(&k, mm, a, 16), 14);
    k.check_invariants().unwrap();
}

/// Linux 6.17+'s "move only" remap (mremap_test.c's mremap_move_multiple_vmas): MREMAP_FIXED
/// at the same size moves every vma of the range, holes kept and what the target maps in a
/// hole left alone; the pieces are in the outcome; a hole at the start is EFAULT.
#[test]
fn a_fixed_move_of_the_same_size_moves_every_vma_and_keeps_the_holes() {
    let (mut k, mm) = kernel();
    let a = map_written(&mut k, mm, 8);
    let t = map_written(&mut k, mm, 8);
    for hole in [1, 5] {
        k.do_vmi_munmap(mm, VirtAddr(a + hole * P), P).ret.unwrap();
    }
    let before = anon(&k, mm);
    let both = MremapFlags::MAYMOVE | MremapFlags::FIXED;
    let r = k.do_mremap(mm, VirtAddr(a), 8 * P, 8 * P, both, VirtAddr(t));
    assert_eq!(r.ret, Ok(t));
    assert_eq!(r.effects.remapped, vec![(a, P, t), (a + 2 * P, 3 * P, t + 2 * P), (a + 6 * P, 2 * P, t + 6 * P)]);
    assert_eq!(present(&k, mm, a, 8), 0, "the source is gone");
    assert_eq!(present(&k, mm, t, 8), 8, "6 pages moved, and the target's own 2 under the holes stay");
    assert_eq!(anon(&k, mm), before - 6, "the target's 6 pages under the moved ones were unmapped");
    // A hole at the start of the range: EFAULT, nothing moves.
    let b = map_written(&mut k, mm, 4);
    k.do_vmi_munmap(mm, VirtAddr(b), P).ret.unwrap();
    let r = k.do_mremap(mm, VirtAddr(b), 4 * P, 4 * P, both, VirtAddr(1 << 40));
    assert_eq!((r.ret, r.effects.remapped.len()), (Err(Errno::EFAULT), 0));
    assert_eq!(present(&k, mm, b + P, 3), 3);
    k.check_invariants().unwrap();
}
