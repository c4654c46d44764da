//! Seed 003: shared page tables (Dave McCracken's 2006 patch, `mm/ptshare.c`, with the rules
//! the thread settled on), a policy beside Linux, which never merged it. Processes that map the
//! same object at the same address share the page-table pages of that range instead of each
//! building its own: a PMD entry points at another process's PTE table (`vm/ptshare` level
//! `pte`), a PUD entry at a PMD table (`pmd`), a PGD entry at a PUD table (`pud`).
//!
//! - Shareable (`pt_shareable`): the vma is backed by an object (shmem here), is read-only or
//!   shared-writable, has no anon_vma (never once a private page), and covers the table's whole
//!   range (`vm_start <= base` and `vm_end - 1 >= base + size - 1`, Hugh's form of the end
//!   test); the sibling maps the same object at the same offset at the same address with the
//!   same flags and covers the range too.
//! - Sharing happens at fault time (`pt_share_fault`: the sibling's table is found through the
//!   object's mappings, its i_mmap) and at fork (`pt_copy_range`: copy_page_range shares
//!   instead of copying).
//! - Unsharing (`pt_unshare_range`) needs no copy: the process refaults. It happens whenever in
//!   doubt: munmap, mprotect, mremap, mlock and munlock, madvise, a vma split, exit.
//! - A table's users are counted on its struct page (`mapcount`: users beyond the first, as
//!   hugetlb's pt_share_count); the last user is decided by a dec-and-test
//!   (`pt_decrement_share`), not by reading the count, the race Hugh found in `pt_is_shared`.
//! - A change to an entry of a shared table (possible only under `vm/ptshare_compat=rfc`) flushes
//!   every CPU that may hold a translation through it, each sharer's (`Work::FlushShared`).
//!
//! Accounting (the seed's patch left VmPTE at 0 kB for shared tables and punted on rss; see
//! README): NR_PAGETABLE (PageTables) counts every table page once, system-wide, exactly;
//! each mm's pgtables_bytes (VmPTE) and rss count every table and page it reaches, shared or
//! not, as if the tables were its own (Linux counts a hugetlb PMD table shared today in each
//! sharer's VmPTE the same way), so a process that attaches a table is "graced" with the pages
//! it maps, as Hugh put it. `pt_reach` holds, for every table reached by more than one mm, the
//! mms that reach it, so that a change below is counted in each.
//!
//! Deliberately different from the patch: the run-time knob instead of CONFIG options; the
//! seed flushed every online CPU where mmsim flushes the CPUs its mm_cpumasks name.

use super::knobs::PtshareCompat;
use super::memory::Slot;
use super::mm::{Backing, MmCounter, Vma};
use super::pgtable::{Entry, TABLE_FLAGS};
use super::{AtomicKind, Kernel, MmId, Work};
use crate::units::{align_down, is_aligned, Pfn};

/// Kernel-variable lines of page-table share counts (outside RAM, as the fault locks'):
/// `PT_SHARE_LINE | table pfn`.
const PT_SHARE_LINE: u64 = 5 << 60;

/// The vma-level rules (`pt_shareable_vma`): backed by an object (shmem, or a hugetlbfs file:
/// the patch's PTSHARE_HUGEPAGE), read-only or shared-writable, never an anonymous page.
pub fn pt_shareable_vma(vma: &Vma) -> bool {
    matches!(vma.backing, Backing::Shmem(_) | Backing::Hugetlb(_))
        && vma.anon_vma.is_none()
        && (vma.flags & super::mm::vm::WRITE == 0 || vma.is_shared())
}

impl Kernel {
    /// Tables reached by more than one mm exist (the fast paths skip the bookkeeping while
    /// none does).
    #[inline]
    pub fn pt_sharing(&self) -> bool {
        !self.pt_reach.is_empty()
    }

    /// Bytes a table whose entries are at level `tl` maps (0: a PTE table's 2 MiB, 1: a PMD
    /// table's 1 GiB, 2: a PUD table's 512 GiB).
    #[inline]
    pub fn pt_span(&self, tl: u32) -> u64 {
        self.geo.level_size(tl + 1)
    }

    /// `pt_shareable_pte` / `_pmd` / `_pud`: may the table of level `tl` covering `addr` in
    /// `vma` be shared? The vma covers the table's whole range: `vm_start <= base` and
    /// `vm_end - 1 >= base + size - 1` (the patch wrote `vm_end >= end`, the off-by-one Hugh
    /// pointed out); under `rfc` the start test is strict, so the first table of an aligned
    /// region is never shared, as Ray Bryant observed of the first posting.
    pub fn pt_shareable(&self, vma: &Vma, addr: u64, tl: u32) -> bool {
        if self.knobs.ptshare & (1 << tl) == 0 || !pt_shareable_vma(vma) {
            return false;
        }
        let size = self.pt_span(tl);
        let base = align_down(addr, size);
        let Some(last) = base.checked_add(size - 1) else { return false };
        let start_ok = match self.knobs.ptshare_compat {
            PtshareCompat::Fixed => vma.start <= base,
            PtshareCompat::Rfc => vma.start < base,
        };
        // vm_end - 1 >= base + size - 1: the last byte of the table's range is inside.
        start_ok && vma.end > last
    }

    /// Whether the table has users beyond one (the read Hugh allowed as a test of whether it
    /// is worth going to the unshare path; the decision itself is `pt_decrement_share`'s).
    #[inline]
    pub fn pt_is_shared(&self, table: Pfn) -> bool {
        self.mem.pages[table.idx()].mapcount > 0
    }

    /// `pt_increment_share`: one more upper entry points at `table`.
    fn pt_increment_share(&mut self, table: Pfn) {
        self.mem.pages[table.idx()].mapcount += 1;
        self.work.push(Work::Atomic {
            line: PT_SHARE_LINE | table.0 as u64,
            func: "pt_increment_share",
            kind: AtomicKind::Rmw,
        });
    }

    /// `pt_decrement_share`: one user leaves `table`; true when it was the last (an
    /// atomic_dec_and_test on the users), and the table is the caller's to zap and free.
    pub fn pt_decrement_share(&mut self, table: Pfn) -> bool {
        let p = &mut self.mem.pages[table.idx()];
        p.mapcount -= 1;
        let last = p.mapcount < 0;
        if last {
            p.mapcount = 0;
        }
        self.work.push(Work::Atomic {
            line: PT_SHARE_LINE | table.0 as u64,
            func: "pt_decrement_share",
            kind: AtomicKind::Rmw,
        });
        last
    }

    /// The mms that reach `table` (one of them `mm`): every sharer's, or `mm` alone.
    pub fn pt_reach_of(&self, table: Pfn, mm: MmId) -> Vec<MmId> {
        match self.pt_reach.get(&table.0) {
            Some(r) => r.clone(),
            None => vec![mm],
        }
    }

    /// `add_mm_counter` for a leaf entry of `table` that `mm` changed: every mm that reaches
    /// the table counts it.
    #[inline]
    pub fn add_rss_at(&mut self, table: Pfn, mm: MmId, c: MmCounter, n: i64) {
        if self.pt_sharing() {
            if let Some(r) = self.pt_reach.remove(&table.0) {
                for &m in &r {
                    self.mm_mut(m).add_rss(c, n);
                }
                self.pt_reach.insert(table.0, r);
                return;
            }
        }
        self.mm_mut(mm).add_rss(c, n);
    }

    /// A new table `new` was put under `parent` by `mm` (which `pte_alloc_one` charged): every
    /// other mm that reaches `parent` reaches it too and counts it in pgtables_bytes.
    pub fn pt_table_added(&mut self, parent: Pfn, new: Pfn, mm: MmId) {
        if !self.pt_sharing() {
            return;
        }
        let Some(r) = self.pt_reach.get(&parent.0).cloned() else { return };
        let bytes = self.geo.page_size() as i64;
        for &m in r.iter().filter(|&&m| m != mm) {
            self.mm_mut(m).pgtables_bytes += bytes;
        }
        self.pt_reach.insert(new.0, r);
    }

    /// `table` is being freed by `mm` (which `pte_free` uncharges): the other mms that reached
    /// it uncharge it too.
    pub(super) fn pt_table_freed(&mut self, table: Pfn, mm: MmId) {
        if let Some(r) = self.pt_reach.remove(&table.0) {
            let bytes = self.geo.page_size() as i64;
            for &m in r.iter().filter(|&&m| m != mm) {
                self.mm_mut(m).pgtables_bytes -= bytes;
            }
        }
    }

    /// The table of level `tl` on `mm`'s path to `addr` and the slot of the entry pointing at
    /// it (None where a level above is missing or a huge leaf).
    pub fn pt_table_at(&self, mm: MmId, addr: u64, tl: u32) -> Option<(Slot, Option<Pfn>)> {
        let mut table = self.mm(mm).pgd;
        let mut level = 3;
        loop {
            let idx = self.geo.table_index(addr, level);
            let e = self.entry(table, idx);
            let slot = Slot { table, idx };
            if level == tl + 1 {
                return Some((slot, (e.present() && !e.huge()).then(|| e.pfn())));
            }
            if !e.present() || e.huge() {
                return None;
            }
            table = e.pfn();
            level -= 1;
        }
    }

    /// Every table of the subtree under `table` (a table of level `tl`, itself included, and
    /// the tables deposited under its huge pmds), each with its level.
    fn pt_subtree(&self, table: Pfn, tl: u32, out: &mut Vec<(Pfn, u32)>) {
        out.push((table, tl));
        for i in 0..self.geo.ptrs_per_table() {
            let e = self.entry(table, i);
            if !e.present() {
                continue;
            }
            if tl == 0 {
                continue;
            }
            if e.huge() {
                if tl == 1 {
                    if let Some(&d) = self.deposited.get(&(table.0, i as u16)) {
                        out.push((Pfn(d), 0));
                    }
                }
                continue;
            }
            self.pt_subtree(e.pfn(), tl - 1, out);
        }
    }

    /// The rss a subtree's leaves stand for (file, anon, shmem pages), as each mm reaching it
    /// counts them.
    fn pt_subtree_rss(&self, tables: &[(Pfn, u32)]) -> [i64; 3] {
        let mut rss = [0i64; 3];
        for &(t, tl) in tables {
            if !self.mem.pages[t.idx()].test(super::mm_types::pg::TABLE) {
                continue;
            }
            for i in 0..self.geo.ptrs_per_table() {
                let e = self.entry(t, i);
                if !e.present() {
                    continue;
                }
                if tl == 0 {
                    if !e.special() {
                        rss[self.mm_counter(e.pfn()) as usize] += 1;
                    }
                } else if tl == 1 && e.huge() && !self.is_huge_zero_pmd(e) && !self.is_hugetlb_pmd(e) {
                    rss[MmCounter::AnonPages as usize] += self.geo.hpage_pmd_nr() as i64;
                }
            }
        }
        rss
    }

    /// `pt_attach`: point `slot` (an upper entry of `mm`'s tables) at `table`, a table of level
    /// `tl` that `sibling` reaches: one more user, and every mm that reaches the slot's table
    /// now reaches the subtree and counts its tables and pages.
    pub(super) fn pt_attach(&mut self, mm: MmId, slot: Slot, table: Pfn, tl: u32, sibling: MmId) {
        let attachers = self.pt_reach_of(slot.table, mm);
        let before = self.pt_reach_of(table, sibling);
        self.set_entry(slot.table, slot.idx, Entry::new(table, TABLE_FLAGS));
        self.pt_increment_share(table);
        let mut sub = Vec::new();
        self.pt_subtree(table, tl, &mut sub);
        let rss = self.pt_subtree_rss(&sub);
        let bytes = sub.len() as i64 * self.geo.page_size() as i64;
        for &m in &attachers {
            let mmr = self.mm_mut(m);
            mmr.pgtables_bytes += bytes;
            for (c, &n) in [MmCounter::FilePages, MmCounter::AnonPages, MmCounter::ShmemPages].into_iter().zip(&rss) {
                if n != 0 {
                    mmr.add_rss(c, n);
                }
            }
        }
        for &(t, _) in &sub {
            let mut r = self.pt_reach.remove(&t.0).unwrap_or_else(|| before.clone());
            for &m in &attachers {
                if !r.contains(&m) {
                    r.push(m);
                }
            }
            self.pt_reach.insert(t.0, r);
        }
        self.stat.count(super::vmstat::VmEvent::PtShare);
    }

    /// `pt_detach` (the unshare of the patch's free_pte_range and pt_unshare_range): clear
    /// `mm`'s upper entry `slot` that points at the shared `table` (level `tl`, mapping from
    /// `base`); the mms that reached it through the slot no longer do; their TLBs are flushed
    /// for the range (pmd_clear_flush). The table stays with its other users.
    pub(super) fn pt_detach(&mut self, mm: MmId, slot: Slot, table: Pfn, tl: u32, base: u64) {
        let leavers = self.pt_reach_of(slot.table, mm);
        let last = self.pt_decrement_share(table);
        debug_assert!(!last, "pt_detach of a table with no other user");
        self.set_entry(slot.table, slot.idx, Entry::NONE);
        let mut sub = Vec::new();
        self.pt_subtree(table, tl, &mut sub);
        let rss = self.pt_subtree_rss(&sub);
        let bytes = sub.len() as i64 * self.geo.page_size() as i64;
        for &m in &leavers {
            let mmr = self.mm_mut(m);
            mmr.pgtables_bytes -= bytes;
            for (c, &n) in [MmCounter::FilePages, MmCounter::AnonPages, MmCounter::ShmemPages].into_iter().zip(&rss) {
                if n != 0 {
                    mmr.add_rss(c, -n);
                }
            }
        }
        for &(t, _) in &sub {
            if let Some(mut r) = self.pt_reach.remove(&t.0) {
                r.retain(|m| !leavers.contains(m));
                if r.len() > 1 {
                    self.pt_reach.insert(t.0, r);
                }
            }
        }
        let end = base.saturating_add(self.pt_span(tl));
        for &m in &leavers {
            self.flush_tlb_range(m, base, end);
        }
        self.stat.count(super::vmstat::VmEvent::PtUnshare);
    }

    /// The sibling table of level `tl` for `addr` in `vma` of `mm`: another mm maps the same
    /// object at the same offset at this address, with the same flags, covering the table's
    /// range, and has a table there (found through the object's mappings, as the patch walked
    /// the file's i_mmap prio tree).
    fn pt_find_sibling(&self, mm: MmId, vma: &Vma, addr: u64, tl: u32) -> Option<(MmId, Pfn)> {
        let mms = match vma.backing {
            Backing::Shmem(obj) => &self.shmem[obj as usize].as_ref()?.mms,
            Backing::Hugetlb(f) => &self.hugetlb.files[f as usize].as_ref()?.mms,
            Backing::Anon | Backing::File(_) => return None,
        };
        let base = align_down(addr, self.pt_span(tl));
        let index = vma.linear_page_index(base, self.geo);
        for &(m, _) in mms {
            if m == mm {
                continue;
            }
            let Some(sv) = self.mm(m).vma_lookup(addr) else { continue };
            // pt_shareable first: it makes sure `sv` starts at or below `base`.
            if sv.backing != vma.backing
                || sv.flags != vma.flags
                || !self.pt_shareable(sv, addr, tl)
                || sv.linear_page_index(base, self.geo) != index
            {
                continue;
            }
            if let Some((_, Some(t))) = self.pt_table_at(m, addr, tl) {
                return Some((m, t));
            }
        }
        None
    }

    /// At fault time, before the fault allocates tables: from the highest level `vm/ptshare`
    /// allows down, where `mm` has no table yet and a sibling has one, attach the sibling's
    /// (the levels below come with it); tables above it are allocated as the fault would.
    /// False when a table allocation failed (the fault is VM_FAULT_OOM).
    pub fn pt_share_fault(&mut self, mm: MmId, vma: &Vma, addr: u64) -> bool {
        if self.knobs.ptshare == 0 || !pt_shareable_vma(vma) {
            return true;
        }
        let pgd = self.mm(mm).pgd;
        let mut upper = pgd;
        for tl in (0..3u32).rev() {
            let idx = self.geo.table_index(addr, tl + 1);
            let e = self.entry(upper, idx);
            if e.present() {
                if e.huge() {
                    return true;
                }
                upper = e.pfn();
                continue;
            }
            if self.pt_shareable(vma, addr, tl) {
                if let Some((sib, t)) = self.pt_find_sibling(mm, vma, addr, tl) {
                    self.pt_attach(mm, Slot { table: upper, idx }, t, tl, sib);
                    return true;
                }
            }
            if tl == 0 {
                return true;
            }
            // No sibling at this level: allocate it (the fault would), and look lower.
            let Some(t) = self.table_alloc(mm, upper, idx) else { return false };
            upper = t;
        }
        true
    }

    /// `pt_unshare_range`: detach every shared table of `mm` that maps part of [start, end),
    /// the highest level first (a table under a detached one goes with it).
    pub fn pt_unshare_range(&mut self, mm: MmId, start: u64, end: u64) {
        if !self.pt_sharing() || start >= end {
            return;
        }
        let pgd = self.mm(mm).pgd;
        self.pt_unshare_level(mm, pgd, 3, start, end);
    }

    /// The unshare of a vma split at `addr` (`split_vma`, as Hugh suggested): a shared table
    /// whose range `addr` cuts would no longer lie inside one vma, so it is detached; a table
    /// that begins or ends at `addr` stays shared.
    pub fn pt_unshare_straddling(&mut self, mm: MmId, addr: u64) {
        if !self.pt_sharing() {
            return;
        }
        let mut table = self.mm(mm).pgd;
        for level in (1..=3u32).rev() {
            let idx = self.geo.table_index(addr, level);
            let e = self.entry(table, idx);
            if !e.present() || e.huge() {
                return;
            }
            let lower = e.pfn();
            let span = self.pt_span(level - 1);
            if is_aligned(addr, span) {
                // Every table below starts at `addr` too.
                return;
            }
            if self.pt_is_shared(lower) {
                let base = align_down(addr, span);
                self.pt_detach(mm, Slot { table, idx }, lower, level - 1, base);
                return;
            }
            table = lower;
        }
    }

    fn pt_unshare_level(&mut self, mm: MmId, table: Pfn, level: u32, start: u64, end: u64) {
        let size = self.geo.level_size(level);
        let mut a = start;
        while a < end {
            let base = align_down(a, size);
            let next = base.saturating_add(size).min(end);
            let idx = self.geo.table_index(a, level);
            let e = self.entry(table, idx);
            if e.present() && !e.huge() && level > 0 {
                let lower = e.pfn();
                if self.pt_is_shared(lower) {
                    self.pt_detach(mm, Slot { table, idx }, lower, level - 1, base);
                } else if level > 1 {
                    self.pt_unshare_level(mm, lower, level - 1, a, next);
                }
            }
            if next == a {
                break;
            }
            a = next;
        }
    }

    /// At exit under `rfc`, after the vmas' zap: zap and free every table left, including
    /// those `rfc`'s partial munmap left attached where no vma is (free_pgtables, which frees
    /// only what the vmas span, would lose them).
    pub fn pt_exit_sweep(&mut self, mm: MmId) {
        let pgd = self.mm(mm).pgd;
        let (pmd_size, pud_size) = (self.geo.hpage_pmd_size(), self.geo.level_size(2));
        let mut stale = false;
        for i in 0..self.geo.ptrs_per_table() {
            let e = self.entry(pgd, i);
            if !e.present() {
                continue;
            }
            stale = true;
            let pud = e.pfn();
            for j in 0..self.geo.ptrs_per_table() {
                let e = self.entry(pud, j);
                if !e.present() || e.huge() {
                    continue;
                }
                let pmd = e.pfn();
                for k in 0..self.geo.ptrs_per_table() {
                    let base = ((i as u64) << self.geo.pgdir_shift()) + j as u64 * pud_size + k as u64 * pmd_size;
                    let e = self.entry(pmd, k);
                    if e.present() && e.huge() {
                        self.zap_huge_pmd(mm, Slot { table: pmd, idx: k });
                    } else if e.present() {
                        self.zap_pte_range_stale(mm, e.pfn(), base, base + pmd_size);
                    }
                }
            }
        }
        if stale {
            self.flush_tlb_range(mm, 0, self.geo.task_size());
            self.free_pgd_range(mm, super::mmap::MMAP_MIN_ADDR, self.geo.task_size(), 0, 0);
        }
    }

    /// `copy_page_range`'s share path at fork (the patch's pt_copy_pte/pmd/pud): for a
    /// shareable vma, the child's entries point at the parent's tables wherever the vma covers
    /// a table's whole range, the highest level first. Err on a table allocation failure.
    pub fn pt_copy_range(&mut self, dst: MmId, src: MmId, vma: &Vma) -> Result<(), super::mmap::Errno> {
        if vma.flags & super::mm::vm::LOCKED != 0 {
            // The child's vma is not VM_LOCKED (dup_mmap): the flags differ, so the sibling
            // rule says no; the child refaults (nothing to copy: no anon_vma).
            return Ok(());
        }
        let mut addr = vma.start;
        while addr < vma.end {
            let mut step = self.geo.hpage_pmd_size();
            let mut done = false;
            for tl in (0..3u32).rev() {
                let size = self.pt_span(tl);
                if !self.pt_shareable(vma, addr, tl) || !is_aligned(addr, size) {
                    continue;
                }
                let Some((_, Some(t))) = self.pt_table_at(src, addr, tl) else { continue };
                // The child's upper tables, as the fault would allocate them.
                let mut upper = self.mm(dst).pgd;
                for level in ((tl + 2)..=3).rev() {
                    let idx = self.geo.table_index(addr, level);
                    upper = self.table_alloc(dst, upper, idx).ok_or(super::mmap::Errno::ENOMEM)?;
                }
                let idx = self.geo.table_index(addr, tl + 1);
                if self.entry(upper, idx).none() {
                    self.pt_attach(dst, Slot { table: upper, idx }, t, tl, src);
                }
                step = size;
                done = true;
                break;
            }
            if !done {
                step = self.geo.hpage_pmd_size() - self.geo.offset_in_pmd(addr);
            }
            addr = addr.saturating_add(step).min(vma.end);
        }
        Ok(())
    }
}
