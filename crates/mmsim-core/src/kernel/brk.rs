//! brk(2) (mm/mmap.c `SYSCALL_DEFINE1(brk)` and mm/vma.c `do_brk_flags`): the heap, one
//! anonymous vma from `start_brk` that grows and shrinks with the break.

use super::mm::{vm, Backing, Vma};
use super::mmap::STACK_GUARD_GAP_PAGES;
use super::{Kernel, MmId};

impl Kernel {
    /// `brk(addr)`: move the break to `addr`; returns the break after the call (the old one
    /// when it could not move, as Linux returns it: the C library's sbrk turns that into
    /// ENOMEM). Below `start_brk` nothing moves. Shrinking unmaps [PAGE_ALIGN(addr),
    /// PAGE_ALIGN(brk)); growing needs a page and, below a stack, the stack guard gap free
    /// above the new end (`check_brk_limits`, `vm_start_gap`), then `do_brk_flags`. With
    /// MCL_FUTURE (VM_LOCKED in `def_flags`) the new part is populated. RLIMIT_DATA is
    /// unlimited (mmsim has no rlimits).
    pub(super) fn sys_brk_inner(&mut self, mm: MmId, addr: u64) -> u64 {
        let g = self.geo;
        let (start_brk, origbrk) = (self.mm(mm).start_brk, self.mm(mm).brk);
        if addr < start_brk {
            return origbrk;
        }
        let (Some(newbrk), Some(oldbrk)) = (g.page_align(addr), g.page_align(origbrk)) else {
            return origbrk;
        };
        if oldbrk == newbrk {
            self.mm_mut(mm).brk = addr;
            return addr;
        }
        if addr <= origbrk {
            // Always allowed to shrink.
            self.mm_mut(mm).brk = addr;
            if self.do_munmap(mm, newbrk, oldbrk - newbrk).is_err() {
                self.mm_mut(mm).brk = origbrk;
                return origbrk;
            }
            return addr;
        }
        // check_brk_limits: the range must fit in the address space.
        if newbrk > g.task_size() || oldbrk < super::mmap::MMAP_MIN_ADDR {
            return origbrk;
        }
        // The next vma may not start within a page (a stack: its guard gap) of the new end.
        let guard = STACK_GUARD_GAP_PAGES * g.page_size();
        let blocked = self.mm(mm).vmas.range(oldbrk..).next().is_some_and(|(_, v)| {
            let gap_start = if v.flags & vm::GROWSDOWN != 0 { v.start.saturating_sub(guard) } else { v.start };
            newbrk + g.page_size() > gap_start
        }) || self.mm(mm).vma_lookup(oldbrk).is_some();
        if blocked {
            return origbrk;
        }
        self.do_brk_flags(mm, oldbrk, newbrk - oldbrk);
        self.mm_mut(mm).brk = addr;
        if self.mm(mm).def_flags & vm::LOCKED != 0 {
            // mm_populate(oldbrk, newbrk - oldbrk), errors ignored.
            let _ = self.mm_populate(mm, oldbrk, newbrk, true);
        }
        addr
    }

    /// `do_brk_flags`: map [addr, addr + len) anonymous and read-write (VM_DATA_DEFAULT_FLAGS |
    /// VM_ACCOUNT | mm->def_flags, adding to locked_vm under MCL_FUTURE), expanding the vma that ends at `addr` when it could merge with the new
    /// part (`vma_merge_new_range` with just_expand: only the vma before; at the first brk
    /// that is the bss the ELF loader mapped up to `start_brk`), else a vma of its own that
    /// merges with nothing.
    fn do_brk_flags(&mut self, mm: MmId, addr: u64, len: u64) {
        let flags =
            vm::READ | vm::WRITE | vm::MAYREAD | vm::MAYWRITE | vm::MAYEXEC | vm::ACCOUNT | self.mm(mm).def_flags;
        if flags & vm::LOCKED != 0 {
            self.mm_mut(mm).locked_vm += (len >> self.geo.page_shift) as i64;
        }
        let pgoff = addr >> self.geo.page_shift;
        let new = Vma::new_unallocated(addr, addr + len, flags, pgoff, Backing::Anon);
        let prev = self.mm(mm).vmas.range(..addr).next_back().map(|(_, v)| v.clone());
        if let Some(prev) = prev.filter(|p| p.end == addr) {
            if Self::can_merge(&prev, &new, self.geo) {
                self.mm_mut(mm).vmas.get_mut(&prev.start).expect("vma").end = addr + len;
                return;
            }
        }
        self.mm_mut(mm).vmas.insert(addr, new);
        self.vm_area_alloc_new(mm, addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::knobs::Knobs;
    use crate::units::Geometry;

    const P: u64 = 4096;

    fn setup() -> (Kernel, MmId, u64) {
        let mut k = Kernel::new(64 << 20, Knobs::default(), Geometry::X86_64);
        let mm = k.exec_mm().unwrap();
        let b = k.mm(mm).brk;
        (k, mm, b)
    }

    #[test]
    fn the_heap_grows_in_one_vma_and_shrinks() {
        let (mut k, mm, b) = setup();
        assert_eq!(k.sys_brk_inner(mm, b + 3 * P + 1), b + 3 * P + 1, "an unaligned break is kept");
        assert_eq!(k.mm(mm).draw(b, b + 8 * P, P), "AAAA    ", "mapped to the break's page end");
        assert_eq!(k.sys_brk_inner(mm, b + 6 * P), b + 6 * P);
        assert_eq!(k.mm(mm).draw(b, b + 8 * P, P), "AAAAAA  ", "the heap's vma expanded");
        assert_eq!(k.sys_brk_inner(mm, b + 2 * P), b + 2 * P);
        assert_eq!(k.mm(mm).draw(b, b + 8 * P, P), "AA      ", "shrunk: the tail unmapped");
        assert_eq!(k.sys_brk_inner(mm, b - P), b + 2 * P, "below start_brk: nothing moves");
        k.check_invariants().unwrap();
    }

    #[test]
    fn the_break_stops_a_page_short_of_the_next_mapping() {
        let (mut k, mm, b) = setup();
        let rw = vm::READ | vm::WRITE;
        let args =
            super::super::mmap::MmapArgs { addr: b + 8 * P, len: P, prot: rw, fixed: true, ..Default::default() };
        k.do_mmap(mm, args).unwrap();
        assert_eq!(k.sys_brk_inner(mm, b + 8 * P), b, "would touch the mapping: refused");
        assert_eq!(k.sys_brk_inner(mm, b + 7 * P), b + 7 * P, "a page short: allowed");
        assert_eq!(k.mm(mm).draw(b, b + 9 * P, P), "AAAAAAA B");
    }

    #[test]
    fn a_locked_neighbour_keeps_the_new_part_apart() {
        let (mut k, mm, b) = setup();
        k.sys_brk_inner(mm, b + 2 * P);
        k.mlock_apply_populate(mm, b, 2 * P, vm::LOCKED).unwrap();
        k.sys_brk_inner(mm, b + 4 * P);
        assert_eq!(k.mm(mm).draw(b, b + 4 * P, P), "AABB", "VM_LOCKED differs: not expanded");
        k.check_invariants().unwrap();
    }
}
