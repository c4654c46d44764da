//! mlock2(MLOCK_ONFAULT), mlockall(2) and munlockall(2) at the system-call layer: the vmas'
//! VM_LOCKED / VM_LOCKONFAULT, mm->def_flags, VmLck (locked_vm), Mlocked (NR_MLOCK), the
//! unevictable_pgs_* events, the populate's faults and the errors, as Linux 6.18's mm/mlock.c
//! and tools/testing/selftests/mm/mlock2-tests.c have them.

use super::fault::Access;
use super::mm::vm;
use super::mmap::Errno;
use super::syscall::MmapReq;
use super::uapi::{MapFlags, MclFlags, MlockFlags, MremapFlags, Prot};
use super::vmstat::{VmEvent, VmItem};
use super::{Kernel, MmId};
use crate::kernel::knobs::Knobs;
use crate::units::x86::PAGE_SIZE;
use crate::units::VirtAddr;

const P: u64 = PAGE_SIZE;

fn kernel() -> (Kernel, MmId) {
    let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    (k, mm)
}

/// A private anonymous mapping of `pages` pages, `prot`, never THP (MADV_NOHUGEPAGE).
fn map(k: &mut Kernel, mm: MmId, pages: u64, prot: Prot) -> u64 {
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let r = k.vm_mmap_pgoff(mm, MmapReq { len: pages * P, prot, flags, ..Default::default() });
    let a = r.ret.unwrap();
    k.do_madvise(mm, VirtAddr(a), pages * P, super::uapi::Advice::NoHugePage).ret.unwrap();
    a
}

fn touch(k: &mut Kernel, mm: MmId, a: u64, pages: u64, access: Access) {
    for i in 0..pages {
        k.handle_user_fault(mm, a + i * P, access);
    }
}

/// (VmLck pages, Mlocked pages, unevictable_pgs_mlocked, unevictable_pgs_munlocked).
fn counts(k: &Kernel, mm: MmId) -> [i64; 4] {
    [
        k.mm(mm).locked_vm,
        k.stat.items[VmItem::NrMlock],
        k.stat.events[VmEvent::UnevictablePgMlocked],
        k.stat.events[VmEvent::UnevictablePgMunlocked],
    ]
}

fn flags_at(k: &Kernel, mm: MmId, a: u64) -> u32 {
    k.mm(mm).vma_lookup(a).unwrap().flags & vm::LOCKED_MASK
}

fn check(k: &Kernel) {
    k.check_invariants().unwrap();
}

/// mlock2-tests.c's test_mlock_onfault: MLOCK_ONFAULT locks the vma and populates nothing;
/// the pages faulted in later are mlocked, the others not.
#[test]
fn mlock2_onfault_locks_only_the_pages_faulted_in() {
    let (mut k, mm) = kernel();
    let a = map(&mut k, mm, 64, Prot::READ | Prot::WRITE);
    let r = k.do_mlock(mm, VirtAddr(a), 64 * P, MlockFlags::ONFAULT);
    assert_eq!((r.ret, r.effects.gup_faults()), (Ok(()), 0), "no populate");
    assert_eq!(flags_at(&k, mm, a), vm::LOCKED | vm::LOCKONFAULT);
    assert_eq!(counts(&k, mm), [64, 0, 0, 0]);
    touch(&mut k, mm, a, 16, Access::Write);
    assert_eq!(counts(&k, mm), [64, 16, 16, 0], "each page faulted in is mlocked");
    // A read of the rest maps the zero page: not mlocked (mlock_new_folio is of real folios).
    touch(&mut k, mm, a + 16 * P, 16, Access::Read);
    assert_eq!(counts(&k, mm), [64, 16, 16, 0]);
    check(&k);
    // munlock: VM_LOCKED and VM_LOCKONFAULT go, the 16 folios are munlocked.
    k.sys_munlock(mm, VirtAddr(a), 64 * P).ret.unwrap();
    assert_eq!(flags_at(&k, mm, a), 0);
    assert_eq!(counts(&k, mm), [0, 0, 16, 16]);
    check(&k);
}

/// mlock2-tests.c's test_lock_onfault_of_present: pages present when MLOCK_ONFAULT is applied
/// are mlocked at once (mlock_vma_pages_range walks them); then a plain mlock of the range
/// drops VM_LOCKONFAULT and populates the rest, mlocking each page once (no double count).
#[test]
fn mlock2_onfault_mlocks_present_pages_and_mlock_populates_the_rest() {
    let (mut k, mm) = kernel();
    let a = map(&mut k, mm, 32, Prot::READ | Prot::WRITE);
    touch(&mut k, mm, a, 8, Access::Write);
    k.do_mlock(mm, VirtAddr(a), 32 * P, MlockFlags::ONFAULT).ret.unwrap();
    assert_eq!(counts(&k, mm), [32, 8, 8, 0]);
    let r = k.do_mlock(mm, VirtAddr(a), 32 * P, MlockFlags::empty());
    assert_eq!(r.effects.min_flt, 24, "the 24 pages not present are faulted in, written (private, writable)");
    assert_eq!(flags_at(&k, mm, a), vm::LOCKED);
    assert_eq!(counts(&k, mm), [32, 32, 32, 0], "locked -> locked: VmLck and the 8 mlocks unchanged");
    // And back to MLOCK_ONFAULT: only the flag changes.
    let r = k.do_mlock(mm, VirtAddr(a), 32 * P, MlockFlags::ONFAULT);
    assert_eq!((r.ret, r.effects.min_flt), (Ok(()), 0));
    assert_eq!(flags_at(&k, mm, a), vm::LOCKED | vm::LOCKONFAULT);
    assert_eq!(counts(&k, mm), [32, 32, 32, 0]);
    check(&k);
}

/// MLOCK_ONFAULT over part of a vma splits it; unknown flags are EINVAL; a hole is ENOMEM; a
/// PROT_NONE vma is no error (nothing is populated, so GUP never checks its flags).
#[test]
fn mlock2_splits_and_fails_as_linux_does() {
    let (mut k, mm) = kernel();
    let a = map(&mut k, mm, 16, Prot::READ | Prot::WRITE);
    k.do_mlock(mm, VirtAddr(a + 4 * P), 4 * P, MlockFlags::ONFAULT).ret.unwrap();
    assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AAAABBBBCCCCCCCC");
    assert_eq!(flags_at(&k, mm, a + 4 * P), vm::LOCKED | vm::LOCKONFAULT);
    assert_eq!(flags_at(&k, mm, a), 0);
    let bad = MlockFlags::from_bits_retain(2);
    assert_eq!(k.do_mlock(mm, VirtAddr(a), P, bad).ret, Err(Errno::EINVAL));
    assert_eq!(k.mm(mm).locked_vm, 4, "EINVAL changed nothing");
    // A PROT_NONE mapping: plain mlock fails with ENOMEM at the populate, MLOCK_ONFAULT not.
    let n = map(&mut k, mm, 4, Prot::NONE);
    assert_eq!(k.do_mlock(mm, VirtAddr(n), 4 * P, MlockFlags::empty()).ret, Err(Errno::ENOMEM));
    k.sys_munlock(mm, VirtAddr(n), 4 * P).ret.unwrap();
    assert_eq!(k.do_mlock(mm, VirtAddr(n), 4 * P, MlockFlags::ONFAULT).ret, Ok(()));
    // A hole after the vma: ENOMEM, the part before it locked.
    k.do_vmi_munmap(mm, VirtAddr(a + 12 * P), 4 * P).ret.unwrap();
    assert_eq!(k.do_mlock(mm, VirtAddr(a + 8 * P), 8 * P, MlockFlags::ONFAULT).ret, Err(Errno::ENOMEM));
    assert_eq!(flags_at(&k, mm, a + 8 * P), vm::LOCKED | vm::LOCKONFAULT);
    // [a+4P, a+12P) merged back into one locked-on-fault vma, and n's 4 pages.
    assert_eq!(k.mm(mm).locked_vm, 8 + 4);
    check(&k);
}

/// The copy a COW fault maps into a VM_LOCKED vma is mlocked (mlock_new_folio), the folio it
/// replaces munlocked (munlock_vma_folio with the rmap): Mlocked stays the pages mapped.
#[test]
fn cow_in_a_locked_vma_mlocks_the_copy() {
    let (mut k, mm) = kernel();
    let a = map(&mut k, mm, 8, Prot::READ | Prot::WRITE);
    touch(&mut k, mm, a, 8, Access::Write);
    k.do_mlock(mm, VirtAddr(a), 8 * P, MlockFlags::ONFAULT).ret.unwrap();
    let child = k.dup_mm(mm).unwrap();
    assert_eq!(k.mm(child).locked_vm, 0, "dup_mmap: the child's vmas are not locked");
    assert_eq!(flags_at(&k, child, a), 0);
    touch(&mut k, mm, a, 8, Access::Write);
    assert_eq!(counts(&k, mm), [8, 8, 16, 8], "8 copies mlocked, the 8 shared folios munlocked");
    check(&k);
}

/// mlockall(MCL_CURRENT | MCL_FUTURE) (mlock2-tests.c's test_mlockall): every vma locked and
/// populated; a later mmap is VM_LOCKED and populated (vm_mmap_pgoff's mm_populate), a
/// PROT_NONE one locked and not; munlockall unlocks everything and clears def_flags.
#[test]
fn mlockall_current_future_locks_and_populates_new_mappings() {
    let (mut k, mm) = kernel();
    let a = map(&mut k, mm, 16, Prot::READ | Prot::WRITE);
    let r = k.sys_mlockall(mm, MclFlags::CURRENT | MclFlags::FUTURE);
    // The 16 pages and the 32 of the stack's vma not yet present (exec wrote its top page).
    assert_eq!((r.ret, r.effects.min_flt), (Ok(()), 16 + 32));
    assert_eq!(k.mm(mm).def_flags, vm::LOCKED);
    assert_eq!(flags_at(&k, mm, a), vm::LOCKED);
    assert_eq!(counts(&k, mm), [16 + 33, 16 + 33, 16 + 33, 0]);
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let r = k.vm_mmap_pgoff(mm, MmapReq { len: 8 * P, prot: Prot::READ | Prot::WRITE, flags, ..Default::default() });
    let b = r.ret.unwrap();
    assert_eq!(r.effects.min_flt, 8, "populated");
    assert_eq!(flags_at(&k, mm, b), vm::LOCKED);
    let r = k.vm_mmap_pgoff(mm, MmapReq { len: 4 * P, prot: Prot::NONE, flags, ..Default::default() });
    let n = r.ret.unwrap();
    assert_eq!(r.effects.min_flt, 0, "PROT_NONE: the populate's error is ignored");
    assert_eq!(counts(&k, mm), [49 + 8 + 4, 49 + 8, 49 + 8, 0]);
    check(&k);
    let r = k.sys_munlockall(mm);
    assert_eq!((r.ret, k.mm(mm).def_flags), (Ok(()), 0));
    assert!([a, b, n].iter().all(|&x| flags_at(&k, mm, x) == 0));
    assert_eq!(counts(&k, mm), [0, 0, 57, 57]);
    let r = k.vm_mmap_pgoff(mm, MmapReq { len: 8 * P, prot: Prot::READ | Prot::WRITE, flags, ..Default::default() });
    assert_eq!((flags_at(&k, mm, r.ret.unwrap()), r.effects.min_flt), (0, 0), "def_flags cleared");
    check(&k);
}

/// mlockall(MCL_CURRENT | MCL_ONFAULT): every vma VM_LOCKED | VM_LOCKONFAULT, the present
/// pages mlocked, nothing populated; MCL_FUTURE | MCL_ONFAULT makes later mmaps lock on fault.
#[test]
fn mlockall_onfault_populates_nothing() {
    let (mut k, mm) = kernel();
    let a = map(&mut k, mm, 16, Prot::READ | Prot::WRITE);
    touch(&mut k, mm, a, 4, Access::Write);
    let r = k.sys_mlockall(mm, MclFlags::CURRENT | MclFlags::ONFAULT);
    assert_eq!((r.ret, r.effects.min_flt), (Ok(()), 0));
    assert_eq!(k.mm(mm).def_flags, 0, "no MCL_FUTURE");
    assert_eq!(flags_at(&k, mm, a), vm::LOCKED | vm::LOCKONFAULT);
    // 16 + 33 stack pages locked; the 4 written pages and the stack's top page mlocked.
    assert_eq!(counts(&k, mm), [49, 5, 5, 0]);
    touch(&mut k, mm, a + 4 * P, 4, Access::Write);
    assert_eq!(counts(&k, mm), [49, 9, 9, 0]);
    k.sys_mlockall(mm, MclFlags::FUTURE | MclFlags::ONFAULT).ret.unwrap();
    assert_eq!(k.mm(mm).def_flags, vm::LOCKED | vm::LOCKONFAULT);
    assert_eq!(flags_at(&k, mm, a), vm::LOCKED | vm::LOCKONFAULT, "MCL_FUTURE alone leaves the vmas");
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let r = k.vm_mmap_pgoff(mm, MmapReq { len: 8 * P, prot: Prot::READ | Prot::WRITE, flags, ..Default::default() });
    let b = r.ret.unwrap();
    assert_eq!((flags_at(&k, mm, b), r.effects.min_flt), (vm::LOCKED | vm::LOCKONFAULT, 0));
    touch(&mut k, mm, b, 2, Access::Write);
    assert_eq!(counts(&k, mm), [57, 11, 11, 0]);
    // MCL_CURRENT alone: VM_LOCKONFAULT goes (no new mlocks: the vmas were locked already),
    // the rest is populated, and def_flags is cleared.
    let r = k.sys_mlockall(mm, MclFlags::CURRENT);
    assert_eq!(r.effects.min_flt, 16 - 8 + 8 - 2 + 32);
    assert_eq!((flags_at(&k, mm, a), k.mm(mm).def_flags), (vm::LOCKED, 0));
    assert_eq!(counts(&k, mm), [57, 57, 57, 0]);
    check(&k);
}

/// mlockall's EINVAL: no flags, only MCL_ONFAULT, an unknown flag; nothing changes.
#[test]
fn mlockall_refuses_what_linux_refuses() {
    let (mut k, mm) = kernel();
    map(&mut k, mm, 4, Prot::READ | Prot::WRITE);
    for bad in [MclFlags::empty(), MclFlags::ONFAULT, MclFlags::from_bits_retain(8), MclFlags::from_bits_retain(9)] {
        assert_eq!(k.sys_mlockall(mm, bad).ret, Err(Errno::EINVAL), "{bad:?}");
    }
    assert_eq!((k.mm(mm).locked_vm, k.mm(mm).def_flags), (0, 0));
}

/// A fork's child starts with no def_flags (mm_init keeps VM_INIT_DEF_MASK only) and no
/// locked vma: its mmaps are not locked, and its pages not mlocked.
#[test]
fn fork_clears_mcl_future_and_the_childs_locks() {
    let (mut k, mm) = kernel();
    let a = map(&mut k, mm, 8, Prot::READ | Prot::WRITE);
    k.sys_mlockall(mm, MclFlags::CURRENT | MclFlags::FUTURE).ret.unwrap();
    let child = k.dup_mm(mm).unwrap();
    assert_eq!((k.mm(child).def_flags, k.mm(child).locked_vm), (0, 0));
    assert_eq!(flags_at(&k, child, a), 0);
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let r = k.vm_mmap_pgoff(child, MmapReq { len: 8 * P, prot: Prot::READ | Prot::WRITE, flags, ..Default::default() });
    assert_eq!((flags_at(&k, child, r.ret.unwrap()), r.effects.min_flt), (0, 0));
    // The child's write breaks COW into an unlocked vma: the copy is not mlocked; the
    // parent's folio keeps its mlock.
    let before = counts(&k, mm);
    touch(&mut k, child, a, 8, Access::Write);
    assert_eq!(counts(&k, mm), before);
    check(&k);
    k.exit_mmap(child);
    check(&k);
}

/// mremap growth of a locked mapping populates the new part; of one locked on fault, not.
#[test]
fn mremap_growth_populates_unless_onfault() {
    let (mut k, mm) = kernel();
    let a = map(&mut k, mm, 8, Prot::READ | Prot::WRITE);
    k.do_mlock(mm, VirtAddr(a), 8 * P, MlockFlags::ONFAULT).ret.unwrap();
    let r = k.do_mremap(mm, VirtAddr(a), 8 * P, 16 * P, MremapFlags::MAYMOVE, VirtAddr(0));
    let b = r.ret.unwrap();
    assert_eq!((r.effects.min_flt, k.mm(mm).locked_vm), (0, 16));
    k.do_mlock(mm, VirtAddr(b), 16 * P, MlockFlags::empty()).ret.unwrap();
    let r = k.do_mremap(mm, VirtAddr(b), 16 * P, 24 * P, MremapFlags::MAYMOVE, VirtAddr(0));
    assert_eq!((r.effects.min_flt, k.mm(mm).locked_vm), (8, 24));
    check(&k);
}

/// brk under MCL_FUTURE: do_brk_flags takes def_flags (the heap's new part is VM_LOCKED and
/// counts in VmLck) and brk populates it (mm_populate); under MCL_ONFAULT nothing is
/// populated; a shrink gives the pages back.
#[test]
fn brk_after_mcl_future_locks_and_populates_the_heap() {
    let (mut k, mm) = kernel();
    k.sys_mlockall(mm, MclFlags::FUTURE).ret.unwrap();
    let b = k.mm(mm).brk;
    let r = k.sys_brk(mm, VirtAddr(b + 8 * P));
    assert_eq!((r.ret, r.effects.gup_faults()), (Ok(b + 8 * P), 8), "eight populate faults");
    assert_eq!(counts(&k, mm), [8, 8, 8, 0]);
    assert_eq!(flags_at(&k, mm, b), vm::LOCKED);
    k.sys_brk(mm, VirtAddr(b + 2 * P)).ret.unwrap();
    assert_eq!(counts(&k, mm), [2, 2, 8, 6], "shrunk: six pages unmapped and munlocked");
    k.sys_mlockall(mm, MclFlags::FUTURE | MclFlags::ONFAULT).ret.unwrap();
    let r = k.sys_brk(mm, VirtAddr(b + 6 * P));
    assert_eq!(r.effects.gup_faults(), 0, "VM_LOCKONFAULT: nothing populated");
    assert_eq!(counts(&k, mm), [6, 2, 8, 6]);
    check(&k);
}

/// (nr_inactive_anon, nr_active_anon, nr_unevictable, unevictable_pgs_culled,
/// unevictable_pgs_rescued).
fn lru_counts(k: &Kernel) -> [i64; 5] {
    [
        k.stat.items[VmItem::NrInactiveAnon],
        k.stat.items[VmItem::NrActiveAnon],
        k.stat.items[VmItem::NrUnevictable],
        k.stat.events[VmEvent::UnevictablePgsCulled],
        k.stat.events[VmEvent::UnevictablePgsRescued],
    ]
}

/// mm/mlock.c's mlock folio batch: mlock moves 1024 faulted pages from the inactive anon list
/// to the unevictable one (culled), munlock puts them back (rescued); pages faulted into a
/// VM_LOCKONFAULT vma wait in the CPU's batch (`mlock_new_folio`) until it fills (31 folios)
/// or `lru_add_drain` empties it, and then go straight to the unevictable list.
#[test]
fn mlock_moves_folios_to_the_unevictable_list_through_the_batch() {
    let (mut k, mm) = kernel();
    let a = map(&mut k, mm, 1024, Prot::READ | Prot::WRITE);
    touch(&mut k, mm, a, 1024, Access::Write);
    k.lru_add_drain();
    let before = lru_counts(&k);
    k.do_mlock(mm, VirtAddr(a), 1024 * P, MlockFlags::empty()).ret.unwrap();
    let locked = lru_counts(&k);
    assert_eq!(locked[0] - before[0], -1024, "off the inactive list");
    assert_eq!(locked[2] - before[2], 1024, "onto the unevictable list");
    assert_eq!(locked[3] - before[3], 1024, "culled");
    check(&k);

    k.sys_munlock(mm, VirtAddr(a), 1024 * P).ret.unwrap();
    let unlocked = lru_counts(&k);
    assert_eq!(unlocked[0] - locked[0], 1024, "back on the inactive list");
    assert_eq!(unlocked[2] - locked[2], -1024);
    assert_eq!(unlocked[4] - locked[4], 1024, "rescued");
    check(&k);

    // Faults into a VM_LOCKONFAULT vma: 10 folios wait in the batch, the 31st fills it.
    let b = map(&mut k, mm, 64, Prot::READ | Prot::WRITE);
    k.do_mlock(mm, VirtAddr(b), 64 * P, MlockFlags::ONFAULT).ret.unwrap();
    let start = lru_counts(&k);
    touch(&mut k, mm, b, 10, Access::Write);
    assert_eq!(lru_counts(&k), start, "in the mlock batch, on no list");
    touch(&mut k, mm, b + 10 * P, 21, Access::Write);
    let full = lru_counts(&k);
    assert_eq!(full[2] - start[2], 31, "the full batch drained to the unevictable list");
    assert_eq!(full[0], start[0], "never on the inactive list");
    touch(&mut k, mm, b + 31 * P, 5, Access::Write);
    k.lru_add_drain();
    assert_eq!(lru_counts(&k)[2] - start[2], 36);
    check(&k);
}

/// The unmap of a VM_LOCKED vma munlocks each folio as its rmap goes (munlock_vma_folio), after
/// the young pte marked it accessed: a locked shmem page, referenced by the populate that
/// faulted it in, is still unevictable then, so nothing is activated (a munlock of the whole
/// range first made the unmap activate 248 of 256).
#[test]
fn an_unmap_munlocks_each_folio_after_marking_it() {
    let r = crate::test_support::run(serde_json::json!({"program": [
        {"op": "mmap", "name": "s", "size": "1M", "flags": ["shared", "anonymous"]},
        {"op": "mlock", "region": "s"},
        {"op": "snapshot", "label": "a"},
        {"op": "munmap", "region": "s"},
        {"op": "snapshot", "label": "b"}]}));
    let v = |l: &str, n: &str| crate::test_support::snap(&r, l).vmstat.get(n).unwrap();
    assert_eq!(v("a", "nr_unevictable"), 256);
    assert_eq!(v("b", "pgactivate"), 0);
    assert_eq!(v("b", "nr_unevictable"), 0);
    assert_eq!(v("b", "unevictable_pgs_munlocked") - v("a", "unevictable_pgs_munlocked"), 256);
}
