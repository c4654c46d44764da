//! mm/mprotect.c: do_mprotect_pkey -> mprotect_fixup (split/merge vmas) -> change_protection
//! -> change_pmd_range (huge pmds split when only partly covered) -> change_pte_range.

use super::mm::{vm, Vma};
use super::mm_types::pg;
use super::mmap::Errno;
use super::pgtable::{self, Entry};
use super::{Kernel, MmId};

impl Kernel {
    /// `do_mprotect_pkey`: change the access bits of every vma in [start, start+len); ENOMEM
    /// if part of the range is unmapped (after changing the mapped part before the hole, as
    /// Linux does).
    pub fn do_mprotect(&mut self, mm: MmId, start: u64, len: u64, prot: u32) -> Result<(), Errno> {
        if !self.geo.page_aligned(start) {
            return Err(Errno::EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        let end = self.geo.page_align(len).and_then(|l| start.checked_add(l)).ok_or(Errno::ENOMEM)?;
        // hugetlb_vm_op_split: a hugetlb vma is cut only at a huge page boundary.
        self.hugetlb_split_ok(mm, start, end)?;
        // Seed 003: whenever in doubt, unshare (the process refaults with the new protection);
        // hugetlb_change_protection unshares a shared PMD table too.
        self.pt_unshare_range(mm, start, end);
        self.for_each_vma_range(mm, start, end, |k, _, addr, stop| k.mprotect_fixup(mm, addr, stop, prot))
    }

    /// `mprotect_fixup`: isolate [start, end) in its own vma, set the new flags, change the
    /// page tables, and merge with neighbours that now match. A private mapping made writable
    /// is charged (VM_ACCOUNT); one made read-only while no anon_vma exists is uncharged, so its
    /// flags no longer match a neighbour that keeps VM_ACCOUNT.
    fn mprotect_fixup(&mut self, mm: MmId, start: u64, end: u64, prot: u32) {
        let v = self.mm(mm).vma_lookup(start).cloned().expect("vma");
        let mut newflags = (v.flags & !vm::ACCESS) | prot;
        if newflags == v.flags {
            return;
        }
        if newflags & vm::WRITE != 0 {
            if !v.is_shared() {
                newflags |= vm::ACCOUNT;
            }
        } else if v.flags & vm::ACCOUNT != 0 && !v.is_shared() && v.anon_vma.is_none() {
            newflags &= !vm::ACCOUNT;
        }
        self.split_vma(mm, start);
        self.split_vma(mm, end);
        let vma = {
            let m = self.mm_mut(mm);
            let vv = m.vmas.get_mut(&start).expect("isolated vma");
            vv.flags = newflags;
            vv.clone()
        };
        let changed = self.change_protection(mm, &vma, start, end);
        if changed > 0 {
            self.flush_tlb_range(mm, start, end);
        }
        let merged = self.vma_merge_around(mm, start);
        // A locked private mapping made writable is populated (write faults break COW), so
        // that it stays fully mapped as mlock promised.
        if v.flags & (vm::WRITE | vm::SHARED | vm::LOCKED) == vm::LOCKED && newflags & vm::WRITE != 0 {
            let vma = self.mm(mm).vmas[&merged].clone();
            self.populate_vma_page_range(mm, &vma, start, end);
        }
    }

    /// `change_protection`: rewrite the leaf entries of [start, end); returns how many changed.
    fn change_protection(&mut self, mm: MmId, vma: &Vma, start: u64, end: u64) -> u64 {
        if self.sabotage.skip_change_protection {
            return 0;
        }
        let mut changed = 0;
        let mut addr = start;
        while let Some((next, pmd)) = self.pmd_walk_next(mm, &mut addr, end) {
            let e = self.entry(pmd.table, pmd.idx);
            if e.present() && e.huge() {
                if next - addr != self.geo.hpage_pmd_size() {
                    self.__split_huge_pmd(mm, vma, pmd, self.geo.hpage_pmd_align_down(addr));
                } else {
                    let ne = self.change_leaf(vma, e);
                    if ne != e {
                        self.set_entry(pmd.table, pmd.idx, ne);
                        changed += 1;
                    }
                    addr = next;
                    continue;
                }
            }
            let e = self.entry(pmd.table, pmd.idx);
            if e.present() {
                if e.has(pgtable::ZERO_TABLE) {
                    // Unmark a virtual huge zero page whenever in doubt.
                    self.set_entry(pmd.table, pmd.idx, e.without(pgtable::ZERO_TABLE));
                }
                let table = e.pfn();
                let mut a = addr;
                while a < next {
                    let idx = self.geo.table_index(a, 0);
                    let pe = self.entry(table, idx);
                    // Swap ptes keep their entry: the protection applies at swap-in.
                    if !pe.none() && !pe.is_swap() {
                        let ne = self.change_leaf(vma, pe);
                        if ne != pe {
                            self.set_entry(table, idx, ne);
                            changed += 1;
                        }
                    }
                    a += self.geo.page_size();
                }
            }
            addr = next;
        }
        changed
    }

    /// `pte_modify` + the MM_CP_TRY_CHANGE_WRITABLE upgrade (`can_change_pte_writable`): keep
    /// the frame and A/D/special bits, take the protection from the vma; a private entry
    /// stays writable only if it maps an exclusive anonymous page. PROT_NONE clears present
    /// and sets PROTNONE, as x86 does.
    fn change_leaf(&self, vma: &Vma, e: Entry) -> Entry {
        let keep = e.0 & (pgtable::PFN_MASK | pgtable::ACCESSED | pgtable::DIRTY | pgtable::PSE | pgtable::SPECIAL);
        let mut ne = Entry(keep | pgtable::USER);
        if vma.flags & (vm::READ | vm::WRITE | vm::EXEC) == 0 {
            return ne.with(pgtable::PROTNONE);
        }
        ne = ne.with(pgtable::P);
        if vma.flags & vm::EXEC == 0 {
            ne = ne.with(pgtable::NX);
        }
        if vma.flags & vm::WRITE != 0 {
            let writable = if vma.is_shared() {
                true
            } else {
                let page = e.pfn();
                !e.special() && {
                    let p = &self.mem.pages[page.idx()];
                    p.test(pg::ANON) && p.test(pg::ANON_EXCLUSIVE)
                }
            };
            if writable {
                ne = ne.with(pgtable::RW);
            }
        }
        ne
    }
}
