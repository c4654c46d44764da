//! mm/mlock.c: mlock(2), mlock2(2), munlock(2), mlockall(2) and munlockall(2).
//! `apply_vma_lock_flags` (and `apply_mlockall_flags` over every vma) sets or clears VM_LOCKED
//! and VM_LOCKONFAULT on the vmas of the range (`mlock_fixup`, splitting and merging them)
//! and keeps mm->locked_vm (VmLck); `mlock_vma_pages_range` mlocks or munlocks the folios
//! already mapped; a lock then populates the range (`__mm_populate`: write faults where the
//! mapping is private and writable, read faults elsewhere; none in a VM_LOCKONFAULT vma,
//! whose pages are mlocked as they are faulted in). mlockall's MCL_FUTURE puts VM_LOCKED in
//! mm->def_flags, which every later mmap takes (and populates, `vm_mmap_pgoff`). A folio is PG_mlocked while it has mlocks outstanding:
//! NR_MLOCK (Mlocked) and unevictable_pgs_mlocked / unevictable_pgs_munlocked count the
//! changes. Each mlock and munlock then goes through the CPU's mlock batch (`mlock_fbatch`,
//! drained when full, for a large folio, and by `lru_add_drain`), whose drain moves the folio
//! to the unevictable list (unevictable_pgs_culled) or back (unevictable_pgs_rescued).
//! Differs from Linux: `mlock_count` is the exact count of a folio's mlocks, kept beside the
//! folio and changed at the call, where Linux's lives in the folio's LRU link, is changed when
//! the batch drains and can undercount (a folio off the LRU then misses an mlock); so PG_mlocked
//! clears at the last munlock itself, and unevictable_pgs_stranded is never counted.

use super::mm::{vm, Vma};
use super::mm_types::pg;
use super::mmap::Errno;
use super::swap::{MlockTag, PAGEVEC_SIZE};
use super::vmstat::{VmEvent, VmItem};
use super::{Kernel, MmId};
use crate::units::Pfn;

impl Kernel {
    /// `do_mlock` (mlock(2) and mlock2(2): `vm_flags` VM_LOCKED, with MLOCK_ONFAULT also
    /// VM_LOCKONFAULT) or `sys_munlock` (`vm_flags` 0): the page-rounded range's vmas get
    /// `vm_flags` in place of their VM_LOCKED_MASK bits; ENOMEM at a hole (after changing the
    /// vmas before it, as Linux does). A lock then populates the range (`__mm_populate`, its
    /// faults added to `gup_faults`; VM_LOCKONFAULT vmas are skipped): one that stops at a
    /// PROT_NONE vma fails with ENOMEM (`__mlock_posix_error_return` of GUP's -EFAULT).
    pub fn mlock_apply_populate(&mut self, mm: MmId, start: u64, len: u64, vm_flags: u32) -> Result<(), Errno> {
        debug_assert_eq!(vm_flags & !vm::LOCKED_MASK, 0);
        let (start, end) = self.apply_vma_lock_flags(mm, start, len, vm_flags)?;
        if vm_flags & vm::LOCKED != 0 {
            self.mm_populate(mm, start, end, false)
        } else {
            Ok(())
        }
    }

    /// `apply_vma_lock_flags` over the page-rounded range; returns it.
    fn apply_vma_lock_flags(&mut self, mm: MmId, start: u64, len: u64, vm_flags: u32) -> Result<(u64, u64), Errno> {
        let g = self.geo;
        let len = g.page_align(len.checked_add(g.offset_in_page(start)).ok_or(Errno::EINVAL)?).ok_or(Errno::EINVAL)?;
        let start = g.page_align_down(start);
        let end = start.checked_add(len).ok_or(Errno::EINVAL)?;
        // Seed 003: unshare (try_to_unmap could meet the page through an unlocked sharer).
        if self.knobs.ptshare != 0 {
            self.pt_unshare_range(mm, start, end);
        }
        self.for_each_vma_range(mm, start, end, |k, v, addr, stop| {
            k.mlock_fixup(mm, v, addr, stop, (v.flags & !vm::LOCKED_MASK) | vm_flags)
        })?;
        Ok((start, end))
    }

    /// mlockall(2) (`apply_mlockall_flags`; munlockall(2) with no flags): MCL_FUTURE puts
    /// VM_LOCKED (and with MCL_ONFAULT VM_LOCKONFAULT) in mm->def_flags, anything else takes
    /// them out of it; unless only MCL_FUTURE is asked for, every vma gets VM_LOCKED (and
    /// VM_LOCKONFAULT) with MCL_CURRENT, loses them without, and MCL_CURRENT then populates
    /// the whole address space (`mm_populate(0, TASK_SIZE)`, errors ignored).
    pub fn apply_mlockall_flags(&mut self, mm: MmId, flags: super::uapi::MclFlags) {
        use super::uapi::MclFlags;
        let onfault = if flags.contains(MclFlags::ONFAULT) { vm::LOCKONFAULT } else { 0 };
        let m = self.mm_mut(mm);
        m.def_flags &= !vm::LOCKED_MASK;
        if flags.contains(MclFlags::FUTURE) {
            m.def_flags |= vm::LOCKED | onfault;
            if !flags.contains(MclFlags::CURRENT) {
                return;
            }
        }
        let to_add = if flags.contains(MclFlags::CURRENT) { vm::LOCKED | onfault } else { 0 };
        if self.knobs.ptshare != 0 {
            self.pt_unshare_range(mm, 0, self.geo.task_size());
        }
        let mut addr = 0;
        while let Some(v) = self.mm(mm).find_vma(addr).cloned() {
            let newflags = (v.flags & !vm::LOCKED_MASK) | to_add;
            self.mlock_fixup(mm, &v, v.start, v.end, newflags);
            addr = v.end;
        }
        if flags.contains(MclFlags::CURRENT) {
            let _ = self.mm_populate(mm, 0, self.geo.task_size(), true);
        }
    }

    /// `mlock_fixup`: [start, end) of `v` gets `newflags` (its VM_LOCKED_MASK bits changed),
    /// locked_vm changes by its pages where VM_LOCKED comes or goes, and the mapped folios are
    /// mlocked or munlocked (`mlock_vma_pages_range`), not when the range was locked and stays
    /// locked (only VM_LOCKONFAULT changes: "mlocking twice would be wrong"). Special vmas
    /// (VM_DONTEXPAND is part of VM_SPECIAL; hugetlb vmas are VM_DONTEXPAND here) are left
    /// alone.
    fn mlock_fixup(&mut self, mm: MmId, v: &Vma, start: u64, end: u64, newflags: u32) {
        let oldflags = v.flags;
        if newflags == oldflags || oldflags & vm::DONTEXPAND != 0 {
            return;
        }
        self.split_vma(mm, start);
        self.split_vma(mm, end);
        self.mm_mut(mm).vmas.get_mut(&start).expect("isolated vma").flags = newflags;
        let pages = ((end - start) >> self.geo.page_shift) as i64;
        let (lock, was) = (newflags & vm::LOCKED != 0, oldflags & vm::LOCKED != 0);
        self.mm_mut(mm).locked_vm += match (lock, was) {
            (false, _) => -pages,
            (true, true) => 0,
            (true, false) => pages,
        };
        if !(lock && was) {
            // mlock_vma_pages_range: lru_add_drain before and after the walk.
            self.lru_add_drain();
            self.mlock_range(mm, start, end, lock, true);
            self.lru_add_drain();
        }
        self.vma_merge_around(mm, start);
    }

    /// `mlock_vma_pages_range` (`mlock_pte_range`), and the munlock of `zap_pte_range`'s rmap
    /// removals: each folio mapped in [start, end) once (a huge pmd's THP; a PTE-mapped folio
    /// only when the range maps all of it, if `whole`), the huge zero page and zero pages never.
    pub(super) fn mlock_range(&mut self, mm: MmId, start: u64, end: u64, lock: bool, whole: bool) {
        let g = self.geo;
        let mut addr = start;
        while let Some((next, pmd)) = self.pmd_walk_next(mm, &mut addr, end) {
            let e = self.entry(pmd.table, pmd.idx);
            if e.present() && e.huge() {
                if !self.is_huge_zero_pmd(e) {
                    self.mlock_or_munlock(e.pfn(), lock);
                }
                addr = next;
                continue;
            }
            let Some(pte) = self.pte_slot(mm, addr) else {
                addr = next;
                continue;
            };
            while addr < next {
                let idx = g.table_index(addr, 0);
                let e = self.entry(pte.table, idx);
                if !e.present() || e.special() {
                    addr += g.page_size();
                    continue;
                }
                let head = self.head_of(e.pfn());
                let nr = self.folio_nr_pages(head);
                // folio_mlock_step: the run of ptes mapping this folio's next pages.
                let mut step = 1;
                while addr + step * g.page_size() < next
                    && idx + (step as usize) < g.ptrs_per_table()
                    && self.entry(pte.table, idx + step as usize).pfn().0 == e.pfn().0 + step as u32
                    && self.head_of(Pfn(e.pfn().0 + step as u32)) == head
                {
                    step += 1;
                }
                if !whole || step == nr {
                    self.mlock_or_munlock(head, lock);
                }
                addr += step * g.page_size();
            }
        }
    }

    fn mlock_or_munlock(&mut self, head: Pfn, lock: bool) {
        if lock {
            self.mlock_folio(head);
        } else {
            self.munlock_folio(head);
        }
    }

    /// `mlock_folio`: one more mlock; the first sets PG_mlocked and counts the folio's pages.
    /// The folio goes through the mlock batch to the unevictable list (`mlock_lru`).
    pub(super) fn mlock_folio(&mut self, head: Pfn) {
        self.mlock_count_inc(head);
        self.mlock_batch_add(head, MlockTag::Lru);
    }

    /// `mlock_new_folio`: a new folio of a VM_LOCKED vma, mlocked and, through the mlock batch,
    /// added to the unevictable list (in place of `folio_add_lru`).
    pub(super) fn mlock_new_folio(&mut self, head: Pfn) {
        self.mlock_count_inc(head);
        self.mlock_batch_add(head, MlockTag::New);
    }

    fn mlock_count_inc(&mut self, head: Pfn) {
        let c = self.mlock_count.entry(head.0).or_insert(0);
        *c += 1;
        if *c == 1 {
            self.mem.pages[head.idx()].set(pg::MLOCKED);
            let nr = self.folio_nr_pages(head) as i64;
            self.stat.mod_item(VmItem::NrMlock, nr);
            self.stat.count_n(VmEvent::UnevictablePgMlocked, nr);
        }
    }

    /// `munlock_folio`: one mlock less; the last clears PG_mlocked. The folio goes through the
    /// mlock batch, whose drain puts an evictable one back on its list.
    pub(super) fn munlock_folio(&mut self, head: Pfn) {
        let Some(c) = self.mlock_count.get_mut(&head.0) else { return };
        *c -= 1;
        if *c == 0 {
            self.mlock_count.remove(&head.0);
            self.mem.pages[head.idx()].clear(pg::MLOCKED);
            let nr = self.folio_nr_pages(head) as i64;
            self.stat.mod_item(VmItem::NrMlock, -nr);
            self.stat.count_n(VmEvent::UnevictablePgMunlocked, nr);
        }
        self.mlock_batch_add(head, MlockTag::Munlock);
    }

    /// Queue `head` on this CPU's mlock batch with a reference; a full batch, a large folio
    /// (or the batch's own `lru_cache_disabled`, never here) drains it at once.
    fn mlock_batch_add(&mut self, head: Pfn, tag: MlockTag) {
        self.folio_get(head);
        let cpu = self.cur_cpu;
        if self.fbatches.len() <= cpu {
            self.fbatches.resize_with(cpu + 1, Default::default);
        }
        self.fbatches[cpu].mlock.push((head, tag));
        if self.fbatches[cpu].mlock.len() >= PAGEVEC_SIZE || self.folio_nr_pages(head) > 1 {
            self.mlock_drain_cpu(cpu);
        }
    }

    /// `mlock_folio_batch` (`mlock_drain_local` / `mlock_drain_remote`): each entry's move in
    /// the order queued, then the batch's references dropped.
    pub(super) fn mlock_drain_cpu(&mut self, cpu: usize) {
        if self.fbatches.get(cpu).is_none_or(|b| b.mlock.is_empty()) {
            return;
        }
        let batch = std::mem::take(&mut self.fbatches[cpu].mlock);
        for &(head, tag) in &batch {
            match tag {
                MlockTag::Lru => self.__mlock_folio(head),
                MlockTag::New => self.__mlock_new_folio(head),
                MlockTag::Munlock => self.__munlock_folio(head),
            }
        }
        for &(head, _) in &batch {
            self.folio_put(head);
        }
    }

    /// `__mlock_folio`: an mlocked folio on an LRU list moves to the unevictable one (culled);
    /// one off the LRU (in a batch, isolated) is left to whoever puts it back.
    #[allow(non_snake_case)]
    fn __mlock_folio(&mut self, head: Pfn) {
        if !self.mem.pages[head.idx()].test(pg::LRU) {
            return;
        }
        let nr = self.folio_nr_pages(head) as i64;
        let unevictable = self.mem.pages[head.idx()].test(pg::UNEVICTABLE);
        if self.folio_evictable(head) {
            // Munlocked since it was queued: back where it belongs if it moved.
            if unevictable {
                self.lruvec_del_folio(head);
                self.mem.pages[head.idx()].clear(pg::UNEVICTABLE);
                self.lruvec_add_folio(head);
                self.stat.count_n(VmEvent::UnevictablePgsRescued, nr);
            }
            return;
        }
        if unevictable {
            return;
        }
        self.lruvec_del_folio(head);
        let p = &mut self.mem.pages[head.idx()];
        p.clear(pg::ACTIVE);
        p.set(pg::UNEVICTABLE);
        self.lruvec_add_folio(head);
        self.stat.count_n(VmEvent::UnevictablePgsCulled, nr);
    }

    /// `__mlock_new_folio`: a new folio onto the unevictable list (culled), or, munlocked
    /// since, onto its own.
    #[allow(non_snake_case)]
    fn __mlock_new_folio(&mut self, head: Pfn) {
        debug_assert!(!self.mem.pages[head.idx()].test(pg::LRU), "new folio {:#x} on the LRU", head.0);
        if !self.folio_evictable(head) {
            self.mem.pages[head.idx()].set(pg::UNEVICTABLE);
            let nr = self.folio_nr_pages(head) as i64;
            self.stat.count_n(VmEvent::UnevictablePgsCulled, nr);
        }
        self.lruvec_add_folio(head);
        self.mem.pages[head.idx()].set(pg::LRU);
    }

    /// `__munlock_folio`: a folio on the unevictable list that is evictable again goes back to
    /// its list (rescued).
    #[allow(non_snake_case)]
    fn __munlock_folio(&mut self, head: Pfn) {
        let p = &self.mem.pages[head.idx()];
        if !p.test(pg::LRU) || !p.test(pg::UNEVICTABLE) || !self.folio_evictable(head) {
            return;
        }
        self.lruvec_del_folio(head);
        self.mem.pages[head.idx()].clear(pg::UNEVICTABLE);
        self.lruvec_add_folio(head);
        let nr = self.folio_nr_pages(head) as i64;
        self.stat.count_n(VmEvent::UnevictablePgsRescued, nr);
    }

    /// `mlock_vma_folio` (an existing folio mapped whole) / `munlock_vma_folio` (an rmap
    /// removed) in a VM_LOCKED vma.
    pub(super) fn mlock_vma_folio(&mut self, head: Pfn, vma: &Vma, lock: bool) {
        if vma.flags & vm::LOCKED != 0 {
            self.mlock_or_munlock(head, lock);
        }
    }

    /// `__mm_populate` -> `populate_vma_page_range` for each vma in [start, end). Special vmas
    /// (VM_IO/VM_PFNMAP; mmsim's `dontexpand` stand-ins) are skipped; a PROT_NONE vma gets no
    /// FOLL_FORCE, so `check_vma_flags` fails with -EFAULT: without `ignore_errors` (mlock)
    /// the populate stops there with ENOMEM (the rest stays unpopulated, though VM_LOCKED);
    /// with it (mremap's `mm_populate`) it goes on at the next vma.
    pub(super) fn mm_populate(&mut self, mm: MmId, start: u64, end: u64, ignore_errors: bool) -> Result<(), Errno> {
        let mut addr = start;
        while addr < end {
            let Some(v) = self.mm(mm).find_vma(addr).cloned() else { break };
            if v.start >= end {
                break;
            }
            let (s, e) = (addr.max(v.start), v.end.min(end));
            addr = e;
            if v.flags & vm::DONTEXPAND != 0 && v.flags & vm::HUGETLB == 0 {
                continue;
            }
            // populate_vma_page_range: a VM_LOCKONFAULT vma has nothing to do (before GUP's
            // check of the vma's flags: no error at a PROT_NONE one).
            if v.flags & vm::LOCKONFAULT != 0 {
                continue;
            }
            if v.flags & (vm::READ | vm::WRITE | vm::EXEC) == 0 {
                if ignore_errors {
                    continue;
                }
                return Err(Errno::ENOMEM);
            }
            if !self.populate_vma_page_range(mm, &v, s, e) && !ignore_errors {
                return Ok(());
            }
        }
        Ok(())
    }

    /// `populate_vma_page_range`: `__get_user_pages` over [start, end) (inside `v`) with a
    /// write where the vma is private and writable (breaking COW), a read elsewhere; nothing
    /// in a VM_LOCKONFAULT vma. False if a fault failed (OOM, SIGBUS).
    pub(super) fn populate_vma_page_range(&mut self, mm: MmId, v: &Vma, start: u64, end: u64) -> bool {
        // "Rightly or wrongly, the VM_LOCKONFAULT case has never used faultin_page() to
        // break COW, so it has no work to do here."
        if v.flags & vm::LOCKONFAULT != 0 {
            return true;
        }
        let write = v.flags & (vm::WRITE | vm::SHARED) == vm::WRITE;
        self.get_user_pages(mm, v, start, end, write).is_ok()
    }

    /// `__get_user_pages`: fault in every page of [start, end) (inside `v`) that is not mapped
    /// as the access needs. Each fault counts in vmstat's pgfault and in `gup_faults` (the
    /// caller adds them to the task's min_flt: GUP faults raise no perf event). A write to a
    /// private file mapping breaks COW: the part done goes to `gup_cow_ranges`. Err with the
    /// VM_FAULT_* bits of the first fault that failed.
    pub(super) fn get_user_pages(&mut self, mm: MmId, v: &Vma, start: u64, end: u64, write: bool) -> Result<(), u32> {
        let cow_file = write && !v.is_shared() && matches!(v.backing, super::mm::Backing::File(_));
        let mut a = start;
        let mut result = Ok(());
        // The PTE table of the PMD range walked last (its base address): the pages of a range
        // are looked up in it without walking from the PGD again. Only a fault changes the
        // tables, so a fault forgets it.
        let mut table: Option<(u64, Pfn)> = None;
        while a < end {
            let base = self.geo.hpage_pmd_align_down(a);
            if table.is_none_or(|(b, _)| b != base) {
                table = self.pte_slot(mm, a).map(|s| (base, s.table));
                if table.is_none() && self.follow_page_ok(mm, a, write) {
                    // A huge pmd maps the whole range (follow_page_mask's page_mask): every
                    // page of it is there alike.
                    if write {
                        self.gup_touch_pmd(mm, a);
                    }
                    a = (base + self.geo.hpage_pmd_size()).min(end);
                    continue;
                }
            }
            // follow_page_mask's answer for a page of a PTE table (none without one).
            let ok = table.is_some_and(|(_, t)| self.entry_present(t, self.geo.table_index(a, 0), write));
            if ok {
                let (_, t) = table.expect("ok");
                self.gup_touch_pte(t, self.geo.table_index(a, 0), write);
            }
            if !ok {
                let ret = self.faultin_page(mm, a, write);
                table = None;
                if ret & super::vm_fault::ERROR != 0 {
                    result = Err(ret);
                    break;
                }
                continue;
            }
            a += self.geo.page_size();
        }
        if cow_file && a > start {
            self.current.effects.cow_ranges.push((start, a));
        }
        result
    }

    /// `faultin_page` and `mm_account_fault` for GUP (no regs: no perf event): a fault that
    /// returns VM_FAULT_RETRY (it dropped the lock to wait for I/O) is not counted, and the
    /// caller faults the page in again as a fresh fault, as `__mm_populate` and
    /// `faultin_page_range` do after -EBUSY (not FAULT_FLAG_TRIED: minor once the I/O is
    /// done). A completed fault counts in pgfault (the memcg's too) and in `gup_faults` or,
    /// when major, `gup_major_faults`. After three retries of one page the fault is taken as done.
    pub(super) fn faultin_page(&mut self, mm: MmId, addr: u64, write: bool) -> u32 {
        let mut ret = self.handle_mm_fault(mm, addr, write);
        let mut tries = 0;
        while ret & super::vm_fault::RETRY != 0 && tries < 3 {
            ret = self.handle_mm_fault(mm, addr, write);
            tries += 1;
        }
        self.stat.count(VmEvent::PgFault);
        // count_memcg_event_mm, as for a user fault.
        if let Some(m) = self.mms.get(mm as usize).and_then(|m| m.as_ref()) {
            self.count_memcg_events(m.memcg, VmEvent::PgFault, 1);
        }
        if ret & super::vm_fault::MAJOR != 0 {
            self.current.effects.maj_flt += 1;
        } else {
            self.current.effects.min_flt += 1;
        }
        ret
    }

    /// FOLL_TOUCH (`follow_page_pte`): the folio a pte maps is marked accessed, each time a
    /// page of it is followed (a large folio mapped by ptes is activated by its second page);
    /// on a write, an anonymous folio mapped by a clean pte is marked dirty too (only a
    /// lazyfree folio's writable pte is ever clean: it then is no longer discardable).
    fn gup_touch_pte(&mut self, table: Pfn, idx: usize, write: bool) {
        let e = self.entry(table, idx);
        if e.special() {
            return;
        }
        let h = self.head_of(e.pfn());
        if write && !e.has(super::pgtable::DIRTY) && self.mem.pages[h.idx()].test(super::mm_types::pg::ANON) {
            self.mem.pages[h.idx()].set(super::mm_types::pg::DIRTY);
        }
        self.folio_mark_accessed(h);
    }

    /// FOLL_TOUCH of a write through an anonymous THP's pmd (`touch_pmd`): young and dirty.
    fn gup_touch_pmd(&mut self, mm: MmId, addr: u64) {
        let Some(pmd) = self.pmd_slot(mm, addr) else { return };
        let e = self.entry(pmd.table, pmd.idx);
        let anon =
            e.present() && e.huge() && !self.is_huge_zero_pmd(e) && !self.is_hugetlb_pmd(e) && !self.is_file_pmd(e);
        let touched = e.with(super::pgtable::ACCESSED | super::pgtable::DIRTY);
        if anon && touched != e {
            self.set_entry(pmd.table, pmd.idx, touched);
        }
    }

    /// `follow_page_mask`: `addr` is mapped, writable if `write` (a huge pmd covers it whole).
    pub(super) fn follow_page_ok(&self, mm: MmId, addr: u64, write: bool) -> bool {
        let Some(pmd) = self.pmd_slot(mm, addr) else { return false };
        let e = self.entry(pmd.table, pmd.idx);
        let leaf = if e.present() && e.huge() {
            e
        } else if e.present() {
            self.entry(e.pfn(), self.geo.table_index(addr, 0))
        } else {
            return false;
        };
        leaf.present() && (!write || leaf.write())
    }
}

#[cfg(test)]
mod tests {
    use crate::report::Report;
    use crate::sim::{run_with, RunOptions};
    use crate::test_support::run_validate_case as run_case;
    use crate::workload::spec::parse_workload;

    /// Per snapshot of pid 1: (minflt, VmLck kB, Mlocked kB, unevictable_pgs_mlocked,
    /// unevictable_pgs_munlocked).
    fn rows(r: &Report) -> Vec<[i64; 5]> {
        r.snapshots
            .iter()
            .filter(|s| s.pid == 1)
            .map(|s| {
                let p = &s.processes[0];
                let v = |n: &str| s.vmstat.get(n).unwrap_or(0);
                [
                    p.minflt,
                    p.vm_lck,
                    s.meminfo.get("Mlocked").unwrap_or(0),
                    v("unevictable_pgs_mlocked"),
                    v("unevictable_pgs_munlocked"),
                ]
            })
            .collect()
    }

    fn deltas(r: &Report) -> Vec<[i64; 5]> {
        rows(r).windows(2).map(|w| std::array::from_fn(|i| w[1][i] - w[0][i])).collect()
    }

    /// mlock of 3 MiB of which 512 KiB was written: 640 populate faults, the 768 pages
    /// mlocked; a read-only and a shared region (read faults: the zero page is not mlocked, a
    /// shmem page is); a child's COW leaves the parent's locks; the parent's COW mlocks its
    /// copies; munlock of 1 MiB. The faults and VmLck are Linux 6.18's (`mmsim validate
    /// experiments/validate/mlock.json`), and so are the mlock events.
    #[test]
    fn mlock_populates_and_counts_as_linux_does() {
        let d = deltas(&run_case("mlock"));
        // written -> locked, locked -> more, more -> cow, cow -> unlocked.
        assert_eq!(d[0], [640, 3072, 3072, 768, 0]);
        assert_eq!(d[1], [512, 2048, 1024, 256, 0]);
        assert_eq!(d[3][1..], [-1024, -1024, 0, 256]);
    }

    /// A PMD-mapped THP is mlocked as one folio (512 pages); munmap of part of the range
    /// splits it and munlocks it whole, as `munlock_vma_folio` does. VmLck and the events are
    /// Linux 6.18's (`mmsim validate experiments/validate/mlock-thp.json`).
    #[test]
    fn thps_are_mlocked_whole() {
        let r = run_case("mlock-thp");
        assert_eq!(rows(&r)[0][1..], [8192, 8192, 2048, 0], "4 THPs locked whole");
        let d = deltas(&r);
        // locked -> split: MADV_DONTNEED refuses the locked vma (EINVAL); the munmap splits
        // two THPs and munlocks them whole. split -> unlocked: munlock stops at the hole
        // (ENOMEM) after unlocking the first 3 MiB, whose remaining THP it munlocks.
        assert_eq!(d[0][1..], [-2048, -4096, 0, 1024]);
        assert_eq!(d[1][1..], [-3072, -2048, 0, 512]);
    }

    /// mlock's populate stops at a PROT_NONE vma (no FOLL_FORCE there, so GUP's
    /// `check_vma_flags` fails): the pages after it stay unpopulated though their vma is
    /// locked, and mlock fails with ENOMEM. Found by `validate --random` (a child's mlock of a
    /// 46-page shared region with 8 pages PROT_NONE at page 23: 23 faults on Linux 6.18, 38 in
    /// mmsim, which skipped the vma); `mmsim validate experiments/validate/mlock-prot-none.json`.
    #[test]
    fn mlock_populate_stops_at_a_prot_none_vma() {
        let path = format!("{}/../../experiments/validate/mlock-prot-none.json", env!("CARGO_MANIFEST_DIR"));
        let w = parse_workload(&std::fs::read_to_string(path).expect("the validate case")).expect("valid");
        let opts = RunOptions { check: true, invariants_each_op: true, ..Default::default() };
        let r = run_with(&w, &[], &opts).expect("runs");
        assert!(!r.events.iter().any(|e| e.kind == "invariant"), "{:?}", r.events);
        let d = deltas(&r);
        // 23 shmem pages faulted and mlocked; the whole 184 kB locked.
        assert_eq!(d[0], [23, 184, 92, 23, 0]);
        // 128 pages written before the PROT_NONE page; the 1 MiB locked.
        assert_eq!(d[1], [128, 1024, 512, 128, 0]);
        let enomem: Vec<_> = r.events.iter().filter(|e| e.message.ends_with("ENOMEM")).map(|e| &e.message).collect();
        assert_eq!(enomem, ["mlock s: ENOMEM", "mlock p: ENOMEM"]);
    }

    /// A locked private mapping made writable is populated with write faults (mprotect_fixup),
    /// and a locked mapping mremap grows has its new part populated: 16 and 512 faults, as on
    /// Linux 6.18 (`mmsim validate experiments/validate/mlock-populate.json`; found by
    /// `validate --random`: a fork child's mlock then mprotect took 4 faults more on Linux).
    #[test]
    fn mprotect_and_mremap_populate_a_locked_mapping() {
        let d = deltas(&run_case("mlock-populate"));
        // locked -> writable (minflt, VmLck): 16 COW faults of the zero page.
        assert_eq!(d[0][..2], [16, 0]);
        // q-locked -> grown: the 2 MiB added are populated and locked.
        assert_eq!(d[2][..2], [512, 2048]);
    }
    /// mlock2(MLOCK_ONFAULT) (mlock2-tests.c's test_mlock_onfault and
    /// test_lock_onfault_of_present): the 64 pages written before are mlocked at once, nothing
    /// is populated; 128 pages written later are mlocked as they fault, 128 read map the zero
    /// page (not mlocked); a plain mlock of the last MiB populates it; MLOCK_ONFAULT over a
    /// PROT_NONE mapping is no error (plain mlock's populate fails there: ENOMEM). Every count
    /// is Linux 6.18's (`mmsim validate experiments/validate/mlock2-onfault.json`).
    #[test]
    fn mlock2_onfault_locks_what_faults_as_linux_does() {
        let r = run_case("mlock2-onfault");
        let d = deltas(&r);
        assert_eq!(d[0], [0, 4096, 256, 64, 0], "written -> locked-onfault");
        assert_eq!(d[1], [128, 0, 512, 128, 0], "-> touched");
        assert_eq!(d[2], [128, 0, 0, 0, 0], "-> read: zero pages");
        assert_eq!(d[3], [256, 0, 1024, 256, 0], "-> locked: mlock populates");
        assert_eq!(d[4], [0, 64, 0, 0, 0], "-> prot-none");
        assert_eq!(d[5], [0, -4096, -1792, 0, 448], "-> unlocked");
        let enomem: Vec<_> = r.events.iter().filter(|e| e.message.ends_with("ENOMEM")).map(|e| &e.message).collect();
        assert_eq!(enomem, ["mlock n: ENOMEM"]);
    }

    /// mlockall(MCL_CURRENT | MCL_FUTURE), then mmaps: each is locked and populated (a 1 MiB
    /// private one with 256 write faults, a read-only one with 128 read faults of the zero
    /// page, a shared one's 64 shmem pages mlocked, a PROT_NONE one locked only); a locked
    /// mapping's mremap growth is populated; munlockall unlocks everything, and a later mmap
    /// is not locked. Linux 6.18's counts (`mmsim validate
    /// experiments/validate/mlockall-future.json`, which also gives mmsim the native runner's
    /// own mappings for MCL_CURRENT to lock).
    #[test]
    fn mlockall_future_locks_and_populates_new_mappings_as_linux_does() {
        let r = run_case("mlockall-future");
        let d = deltas(&r);
        assert_eq!(d[1], [448, 1856, 1280, 320, 0], "locked -> mapped");
        assert_eq!(d[2], [128, 512, 512, 128, 0], "mapped -> grown");
        assert_eq!(d[4][..2], [64, 0], "unlocked -> after: not locked");
        assert_eq!(rows(&r)[4][1], 0, "munlockall: VmLck 0");
    }

    /// mlockall(MCL_CURRENT | MCL_ONFAULT): nothing populated, the present pages mlocked; the
    /// 128 pages written then are mlocked as they fault; mlockall(MCL_ONFAULT) alone is EINVAL;
    /// mlockall(MCL_CURRENT) then drops VM_LOCKONFAULT and populates the other 256. Linux
    /// 6.18's counts (`mmsim validate experiments/validate/mlockall-onfault.json`).
    #[test]
    fn mlockall_onfault_mlocks_on_fault_as_linux_does() {
        let r = run_case("mlockall-onfault");
        let d = deltas(&r);
        assert_eq!(d[0][0], 0, "written -> locked-onfault: no populate");
        assert_eq!(d[1], [128, 0, 512, 128, 0], "-> touched");
        // The 256 pages not written yet; here also the 32 of mmsim's stack vma that exec did
        // not write (validate's stand-in of the runner's stack has them all, as the kernel).
        assert_eq!(d[2][..2], [256 + 32, 0], "-> populated");
        assert_eq!(rows(&r)[4][1..3], [0, 0], "munlockall");
        let einval: Vec<_> = r.events.iter().filter(|e| e.message.ends_with("EINVAL")).map(|e| &e.message).collect();
        assert_eq!(einval, ["mlockall: EINVAL"]);
    }

    /// mlockall(MCL_FUTURE) is not inherited: the fork child's mmaps are not locked, its COW
    /// copies of the parent's locked pages not mlocked; the child's own MCL_FUTURE |
    /// MCL_ONFAULT locks its next mmap on fault. Linux 6.18's counts (`mmsim validate
    /// experiments/validate/mlockall-fork.json`).
    #[test]
    fn mlockall_future_is_not_inherited_as_linux_has_it() {
        let r = run_case("mlockall-fork");
        assert_eq!(rows(&r)[0][..4], [256, 1024, 1024, 256], "the parent's mmap, populated and locked");
        let d = deltas(&r);
        // The child's 32 pages mlocked on fault and munlocked by its munlockall; the parent's
        // 256 writes reuse its pages after the child's exit.
        assert_eq!(d[0], [256, 0, 0, 32, 32]);
        assert_eq!(d[1], [0, -1024, -1024, 0, 256]);
    }
}
