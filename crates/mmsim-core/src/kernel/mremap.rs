//! mm/mremap.c as Linux 6.16+ structures it (`struct vma_remap_struct`): `do_mremap` with
//! MREMAP_MAYMOVE, and MREMAP_FIXED when a new address is given. A shrink unmaps the tail; an
//! expansion grows the vma in place when the range after it is free, else the vma moves:
//! `copy_vma` places it at the new address and `move_page_tables` carries its entries over,
//! whole PUD entries, whole PMD entries (a PTE table, a THP and its deposited table) where
//! both ranges are aligned, single PTEs elsewhere; then the old range is unmapped. Nothing
//! is copied and nothing faults. Deliberately left out: MREMAP_DONTUNMAP, the multi-vma
//! "move only" form (6.17) and hugetlb (mmsim has none yet).

use super::memory::Slot;
use super::mm::{vm, Vma};
use super::mmap::Errno;
use super::pgtable::Entry;
use super::{Kernel, MmId};

impl Kernel {
    /// `do_mremap`: resize the mapping at `addr` from `old_len` to `new_len` bytes, moving it
    /// if it cannot grow in place (MREMAP_MAYMOVE), or to `new_addr` (MREMAP_FIXED). Returns
    /// where the mapping now starts. A locked mapping that grew has its new part populated
    /// (`vrm->mlocked`: `mm_populate` of the delta, errors ignored).
    pub fn mremap_vrm(
        &mut self,
        mm: MmId,
        addr: u64,
        old_len: u64,
        new_len: u64,
        new_addr: Option<u64>,
    ) -> Result<u64, Errno> {
        let locked = self.mm(mm).vma_lookup(addr).is_some_and(|v| v.flags & vm::LOCKED != 0);
        // Seed 003: the moved or resized range is unshared first.
        if let Some(e) = addr.checked_add(self.geo.page_align(old_len).unwrap_or(0)) {
            self.pt_unshare_range(mm, addr & self.geo.page_mask(), e);
        }
        let at = self.do_mremap_vrm(mm, addr, old_len, new_len, new_addr)?;
        let g = self.geo;
        let (old_len, new_len) = (g.page_align(old_len).unwrap_or(0), g.page_align(new_len).unwrap_or(0));
        if locked && new_len > old_len {
            let _ = self.mm_populate(mm, at + old_len, at + new_len, true);
        }
        Ok(at)
    }

    /// `do_mremap`'s work (`struct vma_remap_struct`), before the populate.
    fn do_mremap_vrm(
        &mut self,
        mm: MmId,
        addr: u64,
        old_len: u64,
        new_len: u64,
        new_addr: Option<u64>,
    ) -> Result<u64, Errno> {
        let g = self.geo;
        // check_mremap_params; a hugetlb mapping's lengths are in huge pages, its addresses
        // aligned to one, and it may not grow (its reservation cannot be split).
        let (old_len, new_len) = match self.mm(mm).vma_lookup(addr) {
            Some(v) if v.flags & vm::HUGETLB != 0 => {
                let h = g.hpage_pmd_size();
                let (o, n) = (old_len.checked_next_multiple_of(h), new_len.checked_next_multiple_of(h));
                let (o, n) = (o.ok_or(Errno::EINVAL)?, n.ok_or(Errno::EINVAL)?);
                if addr & (h - 1) != 0 || new_addr.is_some_and(|na| na & (h - 1) != 0) || n > o {
                    return Err(Errno::EINVAL);
                }
                (o, n)
            }
            _ => (old_len, new_len),
        };
        let old_len = g.page_align(old_len).ok_or(Errno::EINVAL)?;
        let new_len = g.page_align(new_len).ok_or(Errno::EINVAL)?;
        if addr & !g.page_mask() != 0 || new_len == 0 || new_len > g.task_size() {
            return Err(Errno::EINVAL);
        }
        if let Some(na) = new_addr {
            if na > g.task_size() - new_len || na & !g.page_mask() != 0 {
                return Err(Errno::EINVAL);
            }
            // vrm_overlaps: the target may not overlap the source.
            if na < addr.saturating_add(old_len) && addr < na + new_len {
                return Err(Errno::EINVAL);
            }
        }
        // check_prep_vma: the checks of a remap that maps new space (an expansion or a move);
        // a shrink in place may unmap across vmas.
        let vma = self.mm(mm).vma_lookup(addr).cloned().ok_or(Errno::EFAULT)?;
        if new_len > old_len || new_addr.is_some() {
            if old_len == 0 && !vma.is_shared() {
                return Err(Errno::EINVAL);
            }
            if old_len.min(new_len) > vma.end - addr {
                return Err(Errno::EFAULT);
            }
            if new_len != old_len && vma.flags & vm::DONTEXPAND != 0 {
                return Err(Errno::EFAULT);
            }
        }
        match new_addr {
            // mremap_to
            Some(na) => {
                self.do_munmap(mm, na, new_len)?;
                if self.mm(mm).vma_lookup(addr).is_none() {
                    return Err(Errno::EFAULT);
                }
                let mut old_len = old_len;
                if new_len < old_len {
                    self.do_munmap(mm, addr + new_len, old_len - new_len)?;
                    old_len = new_len;
                }
                self.move_vma(mm, addr, old_len, na, new_len)
            }
            // mremap_at
            None if new_len == old_len => Ok(addr),
            None if new_len < old_len => {
                self.do_munmap(mm, addr + new_len, old_len - new_len)?;
                Ok(addr)
            }
            None => {
                let delta = new_len - old_len;
                if self.vma_expandable(mm, &vma, addr, old_len, delta) {
                    // vma_merge_extend: grow the vma, then merge with the next if it fits.
                    self.mm_mut(mm).vmas.get_mut(&vma.start).expect("vma").end += delta;
                    if vma.flags & vm::LOCKED != 0 {
                        self.mm_mut(mm).locked_vm += (delta >> self.geo.page_shift) as i64;
                    }
                    self.vma_merge_around(mm, vma.start);
                    return Ok(addr);
                }
                let na = self.get_unmapped_area(mm, 0, new_len, vma.is_shared())?;
                self.move_vma(mm, addr, old_len, na, new_len)
            }
        }
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
    /// range unmapped.
    fn move_vma(&mut self, mm: MmId, addr: u64, old_len: u64, new_addr: u64, new_len: u64) -> Result<u64, Errno> {
        let vma = self.mm(mm).vma_lookup(addr).cloned().ok_or(Errno::EFAULT)?;
        let shift = self.geo.page_shift;
        let pgoff = if vma.is_anonymous() && vma.anon_vma.is_none() {
            new_addr >> shift
        } else {
            vma.pgoff + ((addr - vma.start) >> shift)
        };
        self.vma_file_get(mm, vma.backing);
        let copy = Vma { start: new_addr, end: new_addr + new_len, pgoff, ..vma.clone() };
        if vma.flags & vm::LOCKED != 0 {
            // vrm_stat_account: the new range is locked; the unmap of the old one unlocks it.
            self.mm_mut(mm).locked_vm += (new_len >> shift) as i64;
        }
        self.mm_mut(mm).vmas.insert(new_addr, copy);
        self.vma_merge_around(mm, new_addr);
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
        // A hugetlb source keeps its reservation for the moved vma
        // (clear_vma_resv_huge_pages on the old one).
        self.do_vmi_align_munmap(mm, addr, old_len, true)?;
        Ok(new_addr)
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
        let align = old & !g.pmd_mask();
        if len >= pmd_size - align
            && align != 0
            && align == new & !g.pmd_mask()
            && self.can_align_down(mm, old)
            && self.can_align_down(mm, new)
        {
            old_addr &= g.pmd_mask();
            new_addr &= g.pmd_mask();
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
                self.__split_huge_pmd(mm, &v, old_pmd, old_addr & g.pmd_mask());
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
        v.start == addr && self.range_free(mm, addr & self.geo.pmd_mask(), v.start)
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
    use crate::sim::{run_with, RunOptions};
    use crate::workload::spec::parse_workload;

    fn run(w: serde_json::Value) -> Report {
        let w = parse_workload(&w.to_string()).expect("valid workload");
        let opts = RunOptions { check: true, invariants_each_op: true, ..Default::default() };
        let r = run_with(&w, &[], &opts).expect("runs");
        assert_eq!(r.check.mismatches, 0, "reference model mismatches: {:?}", r.events);
        assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
        assert!(!r.events.iter().any(|e| e.kind == "invariant"), "invariant violated: {:?}", r.events);
        r
    }

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
