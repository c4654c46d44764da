//! mm/mremap.c as Linux 6.16+ structures it (`struct vma_remap_struct`): `do_mremap` of a
//! range of one vma, with MREMAP_MAYMOVE, MREMAP_FIXED and MREMAP_DONTUNMAP. A shrink unmaps
//! the tail; an expansion grows the vma in place when the range ends at the vma's end and the
//! range after it is free, else the range moves (MREMAP_MAYMOVE; without it, ENOMEM):
//! `copy_vma` places it at the new address and `move_page_tables` carries its entries over,
//! whole PUD entries, whole PMD entries (a PTE table, a THP and its deposited table) where
//! both ranges are aligned, single PTEs elsewhere; then the old range is unmapped, or with
//! MREMAP_DONTUNMAP stays mapped and empty (`dontunmap_complete`). Nothing is copied and
//! nothing faults. A "move only" remap (6.17+: MREMAP_FIXED with old_len == new_len) moves
//! every vma of the range, holes between them kept (`remap_move`); the pieces moved are in
//! the outcome (`Effects::remapped`) for the reference model.

use super::memory::Slot;
use super::mm::{vm, Vma, VMA_UNALLOCATED};
use super::mmap::Errno;
use super::pgtable::Entry;
use super::uapi::MremapFlags;
use super::{Kernel, MmId};
use crate::units::is_aligned;

/// `enum mremap_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RemapType {
    NoResize,
    Shrink,
    Expand,
}

/// `struct vma_remap_struct`: the user's arguments and what do_mremap worked out.
struct Vrm {
    addr: u64,
    old_len: u64,
    new_len: u64,
    flags: MremapFlags,
    new_addr: u64,
    delta: u64,
    remap_type: RemapType,
    /// `populate_expand`: a VM_LOCKED vma grew; its new part is populated after the call.
    populate_expand: bool,
}

impl Vrm {
    /// `vrm_implies_new_addr`: MREMAP_FIXED or MREMAP_DONTUNMAP always give a new address.
    fn implies_new_addr(&self) -> bool {
        self.flags.intersects(MremapFlags::FIXED | MremapFlags::DONTUNMAP)
    }

    /// `vrm_set_delta` + `vrm_remap_type`.
    fn set_delta(&mut self) {
        self.delta = self.old_len.abs_diff(self.new_len);
        self.remap_type = match self.old_len.cmp(&self.new_len) {
            std::cmp::Ordering::Equal => RemapType::NoResize,
            std::cmp::Ordering::Greater => RemapType::Shrink,
            std::cmp::Ordering::Less => RemapType::Expand,
        };
    }

    /// `vrm_overlaps`: the target range overlaps the source range.
    fn overlaps(&self) -> bool {
        self.addr.saturating_add(self.old_len) > self.new_addr && self.new_addr.saturating_add(self.new_len) > self.addr
    }
}

impl Kernel {
    /// `do_mremap`: resize the range [addr, addr + old_len) of one vma to `new_len` bytes,
    /// moving it if it cannot grow in place (MREMAP_MAYMOVE), to `new_addr` (MREMAP_FIXED),
    /// or leaving the old range mapped and empty (MREMAP_DONTUNMAP, `new_addr` a hint without
    /// MREMAP_FIXED). Returns where the range now starts. A locked mapping that grew has its
    /// new part populated (`populate_expand`: `mm_populate` of the delta, errors ignored).
    pub fn mremap_vrm(
        &mut self,
        mm: MmId,
        addr: u64,
        old_len: u64,
        new_len: u64,
        flags: MremapFlags,
        new_addr: u64,
    ) -> Result<u64, Errno> {
        // Seed 003: the moved or resized range is unshared first.
        if let Some(e) = addr.checked_add(self.geo.page_align(old_len).unwrap_or(0)) {
            self.pt_unshare_range(mm, self.geo.page_align_down(addr), e);
        }
        let mut vrm = Vrm {
            addr,
            old_len,
            new_len,
            flags,
            new_addr,
            delta: 0,
            remap_type: RemapType::NoResize,
            populate_expand: false,
        };
        let at = self.do_mremap_vrm(mm, &mut vrm)?;
        if vrm.populate_expand {
            let from = vrm.new_addr + vrm.old_len;
            let _ = self.mm_populate(mm, from, from + vrm.delta, true);
        }
        Ok(at)
    }

    /// `do_mremap`'s work, before the populate: `check_mremap_params`, then `check_prep_vma`
    /// and `mremap_to` or `mremap_at`.
    fn do_mremap_vrm(&mut self, mm: MmId, vrm: &mut Vrm) -> Result<u64, Errno> {
        let g = self.geo;
        // check_mremap_params (the lengths page-aligned first).
        if !MremapFlags::all().contains(vrm.flags) || !g.page_aligned(vrm.addr) {
            return Err(Errno::EINVAL);
        }
        vrm.old_len = g.page_align(vrm.old_len).ok_or(Errno::EINVAL)?;
        vrm.new_len = g.page_align(vrm.new_len).ok_or(Errno::EINVAL)?;
        if vrm.new_len == 0 || vrm.new_len > g.task_size() {
            return Err(Errno::EINVAL);
        }
        // The checks of a new address (MREMAP_FIXED, MREMAP_DONTUNMAP).
        if vrm.implies_new_addr()
            && (vrm.new_addr > g.task_size() - vrm.new_len
                || !g.page_aligned(vrm.new_addr)
                || !vrm.flags.contains(MremapFlags::MAYMOVE)
                || (vrm.flags.contains(MremapFlags::DONTUNMAP) && vrm.old_len != vrm.new_len)
                || vrm.overlaps())
        {
            return Err(Errno::EINVAL);
        }
        if vrm.flags.contains(MremapFlags::FIXED) && vrm.old_len == vrm.new_len {
            return self.remap_move(mm, vrm);
        }
        let vma = self.mm(mm).vma_lookup(vrm.addr).cloned().ok_or(Errno::EFAULT)?;
        self.check_prep_vma(vrm, &vma)?;
        if vrm.implies_new_addr() {
            return self.mremap_to(mm, vrm);
        }
        // mremap_at
        match vrm.remap_type {
            RemapType::NoResize => Ok(vrm.addr),
            RemapType::Shrink => {
                self.do_munmap(mm, vrm.addr + vrm.new_len, vrm.delta)?;
                Ok(vrm.addr)
            }
            RemapType::Expand => {
                // expand_vma
                if self.vma_expandable(mm, &vma, vrm.addr, vrm.old_len, vrm.delta) {
                    // expand_vma_in_place: vma_merge_extend grows the vma, then merges it
                    // with the next if it fits; vrm_stat_account.
                    self.mm_mut(mm).vmas.get_mut(&vma.start).expect("vma").end += vrm.delta;
                    if vma.flags & vm::LOCKED != 0 {
                        self.mm_mut(mm).locked_vm += (vrm.delta >> g.page_shift) as i64;
                    }
                    self.vma_merge_around(mm, vma.start);
                    return Ok(vrm.addr);
                }
                if !vrm.flags.contains(MremapFlags::MAYMOVE) {
                    return Err(Errno::ENOMEM);
                }
                vrm.new_addr = self.get_unmapped_area(mm, 0, vrm.new_len, vma.is_shared())?;
                self.move_vma(mm, vrm)
            }
        }
    }

    /// `remap_move` (Linux 6.17+, `vrm_move_only`): MREMAP_FIXED without a size change moves
    /// every vma in [addr, addr + old_len), each by `check_prep_vma` and `mremap_to` of its
    /// part, to the same offset from `new_addr`: the holes between them are kept, and what is
    /// mapped in the target where the source has a hole stays. A hole at the start is EFAULT
    /// (so is a range with no vma). Every vma of mmsim may move with others
    /// (`vma_multi_allowed` refuses a userfaultfd-armed vma and a file whose
    /// `get_unmapped_area` is not a known good one: shmem's, hugetlbfs's and
    /// `thp_get_unmapped_area`, ext4's, are). An error stops the move where it is: the vmas
    /// before it have moved. Returns `new_addr`; each piece moved is recorded in `current`'s
    /// `remapped`.
    fn remap_move(&mut self, mm: MmId, vrm: &mut Vrm) -> Result<u64, Errno> {
        let (start, end, new_addr) = (vrm.addr, vrm.addr + vrm.old_len, vrm.new_addr);
        let (mut seen, mut last_end, mut target) = (false, 0, new_addr);
        let mut res = Err(Errno::EFAULT);
        let mut at = start;
        // for_each_vma_range: find_vma from where the last piece ended, up to `end`.
        while let Some(vma) = self.mm(mm).find_vma(at).filter(|v| v.start < end).cloned() {
            let addr = vma.start.max(at);
            let len = end.min(vma.end) - addr;
            if !seen && start < vma.start {
                return Err(Errno::EFAULT);
            }
            let offset = if seen { vma.start - last_end } else { 0 };
            last_end = vma.end;
            (vrm.addr, vrm.new_addr, vrm.old_len, vrm.new_len) = (addr, target + offset, len, len);
            self.check_prep_vma(vrm, &vma)?;
            let moved = self.mremap_to(mm, vrm)?;
            self.current.effects.remapped.push((vrm.addr, vrm.old_len, moved));
            if !seen {
                res = Ok(moved);
            }
            seen = true;
            target = moved + vrm.new_len;
            at = vma.end;
        }
        res
    }

    /// `check_prep_vma`: hugetlb's alignment, the remap's type, and the checks of a remap
    /// that maps new space (an expansion or a move); a shrink in place may unmap across vmas.
    fn check_prep_vma(&self, vrm: &mut Vrm, vma: &Vma) -> Result<(), Errno> {
        if vma.flags & vm::HUGETLB != 0 {
            // align_hugetlb: the lengths in huge pages, the addresses aligned to one, and no
            // growth (the reservation cannot be split).
            let h = self.geo.hpage_pmd_size();
            let o = vrm.old_len.checked_next_multiple_of(h).ok_or(Errno::EINVAL)?;
            let n = vrm.new_len.checked_next_multiple_of(h).ok_or(Errno::EINVAL)?;
            (vrm.old_len, vrm.new_len) = (o, n);
            if !is_aligned(vrm.addr, h) || !is_aligned(vrm.new_addr, h) || n > o {
                return Err(Errno::EINVAL);
            }
        }
        vrm.set_delta();
        if !vrm.implies_new_addr() {
            vrm.new_addr = vrm.addr;
        }
        // vrm_will_map_new
        if vrm.remap_type != RemapType::Expand && !vrm.implies_new_addr() {
            return Ok(());
        }
        if vrm.old_len == 0 && vma.flags & (vm::SHARED | vm::MAYSHARE) == 0 {
            return Err(Errno::EINVAL);
        }
        if vrm.flags.contains(MremapFlags::DONTUNMAP) && vma.flags & vm::DONTEXPAND != 0 {
            return Err(Errno::EINVAL);
        }
        // The range moved may not cross the vma's end (a shrink's unmapped tail may).
        let old_len = if vrm.remap_type == RemapType::Shrink { vrm.new_len } else { vrm.old_len };
        if old_len > vma.end - vrm.addr {
            return Err(Errno::EFAULT);
        }
        if vrm.new_len == old_len {
            return Ok(());
        }
        if vma.flags & vm::LOCKED != 0 {
            vrm.populate_expand = true;
        }
        if vma.flags & vm::DONTEXPAND != 0 {
            return Err(Errno::EFAULT);
        }
        Ok(())
    }

    /// `mremap_to`: MREMAP_FIXED unmaps the target first; a shrink unmaps the source's tail;
    /// then the range moves (`vrm_set_new_addr`: the fixed address, or for MREMAP_DONTUNMAP
    /// alone an unmapped area, `new_addr` a hint).
    fn mremap_to(&mut self, mm: MmId, vrm: &mut Vrm) -> Result<u64, Errno> {
        if vrm.flags.contains(MremapFlags::FIXED) {
            self.do_munmap(mm, vrm.new_addr, vrm.new_len)?;
            if self.mm(mm).vma_lookup(vrm.addr).is_none() {
                return Err(Errno::EFAULT);
            }
        }
        if vrm.remap_type == RemapType::Shrink {
            self.do_munmap(mm, vrm.addr + vrm.new_len, vrm.delta)?;
            if self.mm(mm).vma_lookup(vrm.addr).is_none() {
                return Err(Errno::EFAULT);
            }
            vrm.old_len = vrm.new_len;
        }
        if !vrm.flags.contains(MremapFlags::FIXED) {
            let shared = self.mm(mm).vma_lookup(vrm.addr).is_some_and(|v| v.is_shared());
            vrm.new_addr = self.get_unmapped_area(mm, vrm.new_addr, vrm.new_len, shared)?;
        }
        self.move_vma(mm, vrm)
    }

    /// `vrm_can_expand_in_place` + `vma_expandable`: the range ends at the vma's end and the
    /// `delta` bytes after it are free and inside the address space.
    fn vma_expandable(&self, mm: MmId, vma: &Vma, addr: u64, old_len: u64, delta: u64) -> bool {
        let Some(end) = vma.end.checked_add(delta) else {
            return false;
        };
        vma.end - addr == old_len && end <= self.geo.task_size() && self.range_free(mm, vma.end, end)
    }

    /// `move_vma` -> `copy_vma_and_data` + `unmap_source_vma`: a vma at `new_addr` with the
    /// old one's flags and backing (an anonymous vma never faulted takes the new address as
    /// its pgoff, so that it may merge there), the entries of `old_len` bytes moved, the old
    /// range unmapped, or with MREMAP_DONTUNMAP left mapped (`dontunmap_complete`).
    fn move_vma(&mut self, mm: MmId, vrm: &Vrm) -> Result<u64, Errno> {
        let (addr, old_len, new_addr, new_len) = (vrm.addr, vrm.old_len, vrm.new_addr, vrm.new_len);
        let vma = self.mm(mm).vma_lookup(addr).cloned().ok_or(Errno::EFAULT)?;
        let shift = self.geo.page_shift;
        let pgoff = if vma.is_anonymous() && vma.anon_vma.is_none() {
            new_addr >> shift
        } else {
            vma.pgoff + ((addr - vma.start) >> shift)
        };
        self.vma_file_get(mm, vma.backing);
        let copy = Vma { start: new_addr, end: new_addr + new_len, pgoff, objcg: VMA_UNALLOCATED, ..vma.clone() };
        if vma.flags & vm::LOCKED != 0 {
            // vrm_stat_account: the new range is locked; the unmap of the old one unlocks it
            // (with MREMAP_DONTUNMAP, nothing does: see dontunmap_complete).
            self.mm_mut(mm).locked_vm += (new_len >> shift) as i64;
        }
        if copy.pgoff << shift != new_addr {
            // Its anonymous pages' index no longer matches their address (kernel/rmap.rs).
            self.mm_mut(mm).nonlinear_anon = true;
        }
        self.mm_mut(mm).vmas.insert(new_addr, copy);
        // copy_vma: vm_area_dup unless the new range merges.
        let at = self.vma_merge_around(mm, new_addr);
        self.vm_area_alloc_new(mm, at);
        let moved = self.move_page_tables(mm, addr, new_addr, old_len);
        if moved < old_len {
            // A destination table could not be allocated: move the entries back (the old
            // tables are still there) and unmap the new range instead (copy_vma_and_data's
            // pmc_revert, then unmap_source_vma on the new vma).
            self.move_page_tables(mm, new_addr, addr, moved);
            self.flush_tlb_range(mm, new_addr, new_addr + moved);
            self.do_munmap(mm, new_addr, new_len)?;
            return Err(Errno::ENOMEM);
        }
        self.flush_tlb_range(mm, addr, addr + old_len);
        if vrm.flags.contains(MremapFlags::DONTUNMAP) {
            self.dontunmap_complete(mm, addr, old_len, new_addr);
            return Ok(new_addr);
        }
        // A hugetlb source keeps its reservation for the moved vma
        // (clear_vma_resv_huge_pages on the old one).
        self.do_vmi_align_munmap(mm, addr, old_len, true)?;
        Ok(new_addr)
    }

    /// `dontunmap_complete`: the vma of the old range, not split, loses VM_LOCKED,
    /// VM_LOCKONFAULT and VM_ACCOUNT whole, and locked_vm keeps the pages it counted for it
    /// (Linux does not unaccount them: VmLck stays up until exit). When the whole vma moved,
    /// it loses its anon_vma (`unlink_anon_vmas`): a later fault there starts a new one.
    fn dontunmap_complete(&mut self, mm: MmId, addr: u64, old_len: u64, new_addr: u64) {
        let shift = self.geo.page_shift;
        let m = self.mm_mut(mm);
        let Some(v) = m.vmas.range_mut(..=addr).next_back().map(|(_, v)| v).filter(|v| v.end > addr) else {
            return;
        };
        let was_locked = v.flags & vm::LOCKED != 0;
        let len = (v.end - v.start) >> shift;
        v.flags &= !(vm::LOCKED_MASK | vm::ACCOUNT);
        let whole = v.start == addr && v.end == addr + old_len && !(v.start..v.end).contains(&new_addr);
        if whole {
            v.anon_vma = None;
            v.fork_child = false;
        }
        if was_locked {
            m.locked_vm_stray += len as i64;
        }
    }

    /// `move_page_tables`: move the entries of [old, old + len) to `new`. Returns the bytes
    /// whose entries moved.
    fn move_page_tables(&mut self, mm: MmId, old: u64, new: u64, len: u64) -> u64 {
        let g = self.geo;
        let (pmd_size, pud_size) = (g.hpage_pmd_size(), g.level_size(2));
        let old_end = old + len;
        let (mut old_addr, mut new_addr) = (old, new);
        // try_realign_addr(PMD_MASK): start at the PMD boundary below both addresses when
        // they share their offset in it and nothing else is mapped between the boundary and
        // the vmas' starts, so that whole PMD entries move.
        let align = g.offset_in_pmd(old);
        if len >= pmd_size - align
            && align != 0
            && align == g.offset_in_pmd(new)
            && self.can_align_down(mm, old)
            && self.can_align_down(mm, new)
        {
            old_addr = g.hpage_pmd_align_down(old_addr);
            new_addr = g.hpage_pmd_align_down(new_addr);
        }
        let orig = old_end - len;
        while old_addr < old_end {
            let extent = extent_of(old_addr, old_end, new_addr, pud_size);
            let Some(old_pud) = self.get_old_pud(mm, old_addr) else {
                old_addr += extent;
                new_addr += extent;
                continue;
            };
            let Some(new_pud) = self.alloc_new_pud(mm, new_addr) else { break };
            if extent == pud_size && self.entry(new_pud.table, new_pud.idx).none() {
                // move_normal_pud: the PMD table moves whole.
                let e = self.entry(old_pud.table, old_pud.idx);
                self.set_entry(old_pud.table, old_pud.idx, Entry::NONE);
                self.set_entry(new_pud.table, new_pud.idx, e);
                old_addr += extent;
                new_addr += extent;
                continue;
            }
            let extent = extent_of(old_addr, old_end, new_addr, pmd_size);
            let Some(old_pmd) = self.get_old_pmd(old_pud, old_addr) else {
                old_addr += extent;
                new_addr += extent;
                continue;
            };
            let Some(new_pmd) = self.alloc_new_pmd(mm, new_pud, new_addr) else { break };
            let e = self.entry(old_pmd.table, old_pmd.idx);
            let new_none = self.entry(new_pmd.table, new_pmd.idx).none();
            if e.huge() {
                if extent == pmd_size && new_none {
                    // move_huge_pmd: the entry and its deposited table.
                    self.set_entry(old_pmd.table, old_pmd.idx, Entry::NONE);
                    self.set_entry(new_pmd.table, new_pmd.idx, e);
                    if let Some(t) = self.deposited.remove(&(old_pmd.table.0, old_pmd.idx as u16)) {
                        self.deposited.insert((new_pmd.table.0, new_pmd.idx as u16), t);
                    }
                    old_addr += extent;
                    new_addr += extent;
                    continue;
                }
                let v = self.mm(mm).vma_lookup(old_addr).cloned().expect("the source vma");
                self.__split_huge_pmd(mm, &v, old_pmd, g.hpage_pmd_align_down(old_addr));
            } else if extent == pmd_size && new_none {
                // move_normal_pmd: the PTE table moves whole.
                self.set_entry(old_pmd.table, old_pmd.idx, Entry::NONE);
                self.set_entry(new_pmd.table, new_pmd.idx, e);
                old_addr += extent;
                new_addr += extent;
                continue;
            }
            if self.entry(old_pmd.table, old_pmd.idx).none() {
                old_addr += extent;
                new_addr += extent;
                continue;
            }
            let Some(new_table) = self.pte_alloc(mm, new_pmd) else { break };
            // move_ptes
            let old_table = self.entry(old_pmd.table, old_pmd.idx).pfn();
            let n = extent >> g.page_shift;
            let (oi, ni) = (g.table_index(old_addr, 0), g.table_index(new_addr, 0));
            for k in 0..n as usize {
                let pte = self.entry(old_table, oi + k);
                if pte.none() {
                    continue;
                }
                self.set_entry(old_table, oi + k, Entry::NONE);
                self.set_entry(new_table, ni + k, pte);
            }
            old_addr += extent;
            new_addr += extent;
        }
        old_addr.saturating_sub(orig).min(len)
    }

    /// `can_align_down`: `addr` starts its vma and nothing is mapped from the PMD boundary
    /// below it up to the vma.
    fn can_align_down(&self, mm: MmId, addr: u64) -> bool {
        let Some(v) = self.mm(mm).vma_lookup(addr) else { return false };
        v.start == addr && self.range_free(mm, self.geo.hpage_pmd_align_down(addr), v.start)
    }

    /// `get_old_pud`: the PUD entry of `addr` when the PGD and PUD entries are present.
    fn get_old_pud(&self, mm: MmId, addr: u64) -> Option<Slot> {
        let pgd = self.mm(mm).pgd;
        let e = self.entry(pgd, self.geo.table_index(addr, 3));
        if !e.present() {
            return None;
        }
        let slot = Slot { table: e.pfn(), idx: self.geo.table_index(addr, 2) };
        (!self.entry(slot.table, slot.idx).none()).then_some(slot)
    }

    /// `get_old_pmd`: the PMD entry of `addr` under `pud` when it is not none.
    fn get_old_pmd(&self, pud: Slot, addr: u64) -> Option<Slot> {
        let slot = Slot { table: self.entry(pud.table, pud.idx).pfn(), idx: self.geo.table_index(addr, 1) };
        (!self.entry(slot.table, slot.idx).none()).then_some(slot)
    }

    /// `alloc_new_pud`: the PUD entry of `addr`, allocating the PUD table.
    fn alloc_new_pud(&mut self, mm: MmId, addr: u64) -> Option<Slot> {
        let pgd = self.mm(mm).pgd;
        let pud = self.table_alloc(mm, pgd, self.geo.table_index(addr, 3))?;
        Some(Slot { table: pud, idx: self.geo.table_index(addr, 2) })
    }

    /// `alloc_new_pmd`: the PMD entry of `addr` under `pud`, allocating the PMD table.
    fn alloc_new_pmd(&mut self, mm: MmId, pud: Slot, addr: u64) -> Option<Slot> {
        let pmd = self.table_alloc(mm, pud.table, pud.idx)?;
        Some(Slot { table: pmd, idx: self.geo.table_index(addr, 1) })
    }
}

/// `get_extent`: bytes from `old` to the next `size` boundary, bounded by `old_end` and by the
/// next boundary after `new`.
fn extent_of(old: u64, old_end: u64, new: u64, size: u64) -> u64 {
    let mask = !(size - 1);
    let a = ((old + size) & mask).wrapping_sub(old).min(old_end - old);
    a.min(((new + size) & mask).wrapping_sub(new))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::report::Report;
    use crate::test_support::run;

    /// VmPTE (kB) and faults at each snapshot of the first process.
    fn pte_faults(r: &Report) -> Vec<(i64, i64)> {
        r.snapshots.iter().filter(|s| s.pid == 1).map(|s| (s.processes[0].vm_pte, s.processes[0].minflt)).collect()
    }

    /// Moves with no fault: to the same offset in a PMD (whole PTE tables move: VmPTE does not
    /// change), to an odd offset (PTEs move one by one into new tables: +4 kB here), then a
    /// shrinking move. The counts are Linux 6.18's on this workload (`mmsim validate
    /// experiments/validate/mremap-unaligned.json`).
    #[test]
    fn moves_carry_entries_and_tables_as_linux_does() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../experiments/validate/mremap-unaligned.json"
        ))
        .expect("the validate case");
        let r = run(serde_json::from_str(&text).expect("json"));
        let p = pte_faults(&r);
        let d: Vec<(i64, i64)> = p.windows(2).map(|w| (w[1].0 - w[0].0, w[1].1 - w[0].1)).collect();
        assert_eq!(d, [(0, 0), (4, 0), (-8, 896)], "{p:?}");
    }

    /// A fixed move that grows (the new part reads zero), then errors: a fixed target over
    /// the source and an unaligned target (EINVAL); the region stays and keeps its data.
    #[test]
    fn bad_remaps_fail_with_linux_errnos() {
        let r = run(json!({"program": [
            {"op":"mmap","name":"p","size":"64K"},
            {"op":"write","region":"p","value":6},
            {"op":"mmap","name":"q","size":"64K"},
            {"op":"mremap","region":"p","size":"128K","addr":"0x10000000","fixed":true},
            {"op":"mremap","region":"p","size":"64K","addr":"0x10008000","fixed":true},
            {"op":"read","region":"p","length":"64K","expect":6},
            {"op":"read","region":"p","offset":"64K","expect":0},
            {"op":"mremap","region":"q","size":"64K","addr":"0x10000001","fixed":true},
            {"op":"snapshot","label":"end"}]}));
        let msgs: Vec<&str> = r.events.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(msgs, ["mremap p: EINVAL", "mremap q: EINVAL"], "overlapping its source; unaligned");
    }
}
