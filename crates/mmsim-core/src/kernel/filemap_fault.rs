//! Page faults on file mappings (mm/memory.c `do_fault`, `do_read_fault`, `do_cow_fault`,
//! `do_shared_fault`, `do_fault_around`, `finish_fault`, `do_set_pmd`; mm/filemap.c
//! `filemap_fault`, `do_sync_mmap_readahead`, `do_async_mmap_readahead`, `filemap_map_pages`;
//! mm/shmem.c `shmem_fault`; mm/rmap.c's file rmap of a PMD) as Linux 6.18 has them
//! (docs/research/page-cache-linux-6.18-rules.md).
//!
//! Differs from Linux: I/O completes when submitted, so fault-around never finds a folio
//! still being read (on the kernel, one whose I/O is in flight is skipped and faults later),
//! and a major fault always drops its lock and is retried once (`VM_FAULT_RETRY`), as a
//! user fault that waits for I/O does.

use super::memory::{maybe_mkwrite, vm_page_prot, Slot};
use super::mm::{vm, Backing, MmCounter, Vma};
use super::mm_types::pg;
use super::page_alloc::gfp;
use super::pgtable::{self, Entry};
use super::vmstat::{VmEvent, VmItem};
use super::{vm_fault, Kernel, MmId};
use crate::units::{align_down, Pfn};

/// `MMAP_LOTSAMISS`: after this many mmap misses with no hits, fault readahead stops.
const MMAP_LOTSAMISS: u32 = 100;

impl Kernel {
    /// The open file and inode of a file vma.
    pub(super) fn vma_file(&self, vma: &Vma) -> (u32, u32) {
        let Backing::File(f) = vma.backing else { unreachable!("a file vma") };
        (f, self.filp(f).inode)
    }

    /// The protection of a file pte: `vm_page_prot`, write-protected in a shared writable
    /// ext4 mapping until the first write reports the page dirty (`vma_wants_writenotify`:
    /// ext4 has `page_mkwrite`; shmem has none and maps writable at once).
    pub(super) fn file_pte_prot(&self, vma: &Vma, obj: u32) -> u64 {
        let p = vm_page_prot(vma);
        if self.inode(obj).is_shmem() {
            p
        } else {
            p & !pgtable::RW
        }
    }

    /// `do_fault` for a file vma: a read fault maps around (`do_read_fault`), a write to a
    /// private mapping copies the page (`do_cow_fault`), a write to a shared one dirties it
    /// (`do_shared_fault`).
    pub(super) fn do_file_fault(&mut self, mm: MmId, vma: &Vma, addr: u64, write: bool, pmd: Slot) -> u32 {
        let (filp, obj) = self.vma_file(vma);
        if !write {
            self.current.fault_path = "do_read_fault";
            if self.knobs.file_text == super::knobs::FileText::Seed && !vma.is_shared() {
                // Seed 004: a page of a range this mm holds a text copy of.
                if let Some(r) = self.seed_text_map_page(mm, vma, addr, pmd) {
                    return r;
                }
            }
            if self.knobs.fault_around_bytes >> self.geo.page_shift > 1 {
                let r = self.do_fault_around_file(mm, vma, addr, pmd, filp, obj);
                if r != 0 {
                    return r;
                }
            }
            return self.fault_and_finish(mm, vma, addr, pmd, filp, obj, false);
        }
        if !vma.is_shared() {
            self.current.fault_path = "do_cow_fault";
            self.anon_vma_prepare(mm, vma.start);
            let Some(a) = self.alloc_pages(0, gfp::HIGHUSER_MOVABLE) else {
                return vm_fault::OOM;
            };
            if !self.charge_new_anon(a.pfn, mm) {
                return vm_fault::OOM;
            }
            let (page, ret) = match self.vm_ops_fault(mm, vma, addr, filp, obj) {
                Ok(x) => x,
                Err(r) => {
                    self.folio_put(a.pfn);
                    return r;
                }
            };
            if ret & vm_fault::RETRY != 0 {
                self.folio_put(a.pfn);
                return ret;
            }
            self.copy_page(a.pfn, page);
            self.stat.count(VmEvent::CowFault);
            let Some(table) = self.pte_alloc(mm, pmd) else {
                self.folio_put(a.pfn);
                return vm_fault::OOM;
            };
            self.folio_add_new_anon_rmap(a.pfn, mm, false, vma.linear_page_index(addr, self.geo));
            self.folio_add_lru_vma(a.pfn, vma);
            self.add_rss_at(table, mm, MmCounter::AnonPages, 1);
            let e = Entry::new(a.pfn, vm_page_prot(vma) | pgtable::DIRTY | pgtable::ACCESSED);
            self.set_entry(table, self.geo.table_index(addr, 0), maybe_mkwrite(e, vma));
            return ret;
        }
        self.current.fault_path = "do_shared_fault";
        self.fault_and_finish(mm, vma, addr, pmd, filp, obj, true)
    }

    /// `__do_fault` + `finish_fault` of `do_read_fault` and `do_shared_fault`: the page from
    /// `->fault`, held while it is mapped (reclaim for the page table leaves it alone); a
    /// shared write dirties it first (`->page_mkwrite`, `fault_dirty_shared_page`).
    #[allow(clippy::too_many_arguments)]
    fn fault_and_finish(&mut self, mm: MmId, vma: &Vma, addr: u64, pmd: Slot, filp: u32, obj: u32, write: bool) -> u32 {
        let (page, ret) = match self.vm_ops_fault(mm, vma, addr, filp, obj) {
            Ok(x) => x,
            Err(r) => return r,
        };
        if ret & vm_fault::RETRY != 0 {
            return ret;
        }
        let head = self.head_of(page);
        if write {
            // ext4_page_mkwrite -> block_page_mkwrite: the folio's buffers, then dirty.
            self.folio_create_buffers(head);
            self.folio_mark_dirty(head);
        }
        self.folio_get(head);
        let r = self.finish_fault(mm, vma, addr, page, pmd, write, obj);
        self.folio_put(head);
        ret | r
    }

    /// `vma->vm_ops->fault`: `shmem_fault` for tmpfs (the page, allocated on first use),
    /// `filemap_fault` for ext4. Ok with the page and VM_FAULT_MAJOR / VM_FAULT_RETRY bits.
    fn vm_ops_fault(&mut self, mm: MmId, vma: &Vma, addr: u64, filp: u32, obj: u32) -> Result<(Pfn, u32), u32> {
        let index = vma.linear_page_index(addr, self.geo);
        if self.inode(obj).is_shmem() {
            if index >= self.inode(obj).i_size.div_ceil(self.geo.page_size()) {
                return Err(vm_fault::SIGBUS);
            }
            return self.shmem_fault_folio(obj, index, mm).ok_or(vm_fault::OOM);
        }
        self.filemap_fault(vma, index, filp, obj)
    }

    /// `filemap_fault`: a cached page starts async readahead at a marked folio; a missing
    /// one is a major fault (PGMAJFAULT) that reads the window around it
    /// (`do_sync_mmap_readahead`), or the page alone, waits for it with the lock dropped and
    /// returns VM_FAULT_RETRY.
    fn filemap_fault(&mut self, vma: &Vma, index: u64, filp: u32, obj: u32) -> Result<(Pfn, u32), u32> {
        if index >= self.inode(obj).i_size.div_ceil(self.geo.page_size()) {
            return Err(vm_fault::SIGBUS);
        }
        if let Some(page) = self.shmem_find_folio(obj, index) {
            if !self.fault_tried && self.do_async_mmap_readahead(vma, filp, page, index) {
                // The lock was dropped to start readahead: retry (not a major fault).
                return Ok((page, vm_fault::RETRY));
            }
            return Ok((page, 0));
        }
        self.current.fault_path = "filemap_fault";
        self.stat.count(VmEvent::PgMajFault);
        if let Some(m) = self.cur_mm.and_then(|mm| self.mms.get(mm as usize)).and_then(|m| m.as_ref()) {
            self.count_memcg_events(m.memcg, VmEvent::PgMajFault, 1);
        }
        let read = self.do_sync_mmap_readahead(vma, filp, index);
        self.current.effects.io_wait_pages += read;
        let page = match self.shmem_find_folio(obj, index) {
            Some(p) => p,
            None => {
                // __filemap_get_folio(FGP_CREAT | FGP_FOR_MMAP) + filemap_read_folio.
                let p = self.page_cache_alloc_read(obj, index, 0, gfp::HIGHUSER_MOVABLE);
                let p = p.ok_or(vm_fault::OOM)?;
                self.count_read_io(1);
                self.current.effects.io_wait_pages += 1;
                p
            }
        };
        // The lock was dropped for the I/O (maybe_unlock_mmap_for_io): retry.
        Ok((page, vm_fault::MAJOR | vm_fault::RETRY))
    }

    /// `do_sync_mmap_readahead`: a VM_HUGEPAGE vma reads two PMD folios (one with
    /// VM_RAND_READ) from the aligned index; VM_RAND_READ reads nothing more; VM_SEQ_READ
    /// starts a sequential window; otherwise, while the file's mmap misses stay under
    /// MMAP_LOTSAMISS, read around the fault: `ra_pages` from `ra_pages / 2` before it, the
    /// last quarter marked (VM_EXEC: from the fault, no mark). Returns the pages read.
    fn do_sync_mmap_readahead(&mut self, vma: &Vma, filp: u32, index: u64) -> u64 {
        let pmd_nr = self.geo.hpage_pmd_nr();
        let ra_pages = self.filp(filp).ra.ra_pages;
        let f = self.filps[filp as usize].as_mut().expect("file");
        if self.geo.hpage_pmd_order() <= super::page_alloc::MAX_ORDER && vma.flags & vm::HUGEPAGE != 0 {
            let ra = &mut f.ra;
            ra.start = align_down(index, pmd_nr);
            ra.size = if vma.flags & vm::RAND_READ != 0 { pmd_nr } else { 2 * pmd_nr };
            ra.async_size = pmd_nr;
            ra.order = self.geo.hpage_pmd_order();
            let start = ra.start;
            return self.page_cache_ra_order(filp, start);
        }
        if vma.flags & (vm::RAND_READ | vm::EXEC) == vm::RAND_READ || ra_pages == 0 {
            return 0;
        }
        if vma.flags & vm::SEQ_READ != 0 {
            return self.page_cache_sync_ra(filp, index, ra_pages);
        }
        let ra = &mut f.ra;
        if ra.mmap_miss < MMAP_LOTSAMISS * 10 {
            ra.mmap_miss += 1;
        }
        if ra.mmap_miss > MMAP_LOTSAMISS {
            return 0;
        }
        if vma.flags & vm::EXEC != 0 {
            // exec_folio_order() is 0 on x86: no alignment.
            let vma_end = vma.pgoff + (vma.len() >> self.geo.page_shift);
            ra.start = index.max(vma.pgoff);
            ra.size = (ra.start + ra_pages).min(vma_end) - ra.start;
            ra.async_size = 0;
        } else {
            ra.start = index.saturating_sub(ra_pages / 2);
            ra.size = ra_pages;
            ra.async_size = ra_pages / 4;
        }
        ra.order = 0;
        let start = ra.start;
        self.page_cache_ra_order(filp, start)
    }

    /// `do_async_mmap_readahead`: a hit lowers the mmap miss count; a folio marked
    /// PG_readahead starts the next window (`page_cache_async_ra` with `ra_pages`), with the
    /// fault's lock dropped (`maybe_unlock_mmap_for_io`): true then, and the fault is retried.
    fn do_async_mmap_readahead(&mut self, vma: &Vma, filp: u32, page: Pfn, index: u64) -> bool {
        let ra_pages = self.filp(filp).ra.ra_pages;
        if vma.flags & vm::RAND_READ != 0 || ra_pages == 0 {
            return false;
        }
        let f = self.filps[filp as usize].as_mut().expect("file");
        f.ra.mmap_miss = f.ra.mmap_miss.saturating_sub(1);
        let head = self.head_of(page);
        if self.mem.pages[head.idx()].test(pg::READAHEAD) {
            self.page_cache_async_ra(filp, index, head, ra_pages);
            return true;
        }
        false
    }

    /// `do_fault_around`: the fault_around_bytes-aligned window of the faulting page table
    /// around `addr`, clipped to the vma, handed to `filemap_map_pages`.
    fn do_fault_around_file(&mut self, mm: MmId, vma: &Vma, addr: u64, pmd: Slot, filp: u32, obj: u32) -> u32 {
        let (from, to) = self.fault_around_window(vma, addr);
        let pte_off = self.geo.table_index(addr, 0) as u64;
        let pgoff = vma.linear_page_index(addr, self.geo);
        self.filemap_map_pages(mm, vma, addr, pmd, filp, obj, pgoff + from - pte_off, pgoff + to - pte_off)
    }

    /// `next_uptodate_folio`: the first cached folio from `index` to `end` that fault-around
    /// may map (not marked PG_readahead, not past the end of the file). Its head.
    fn next_uptodate_folio(&self, obj: u32, index: &mut u64, end: u64) -> Option<Pfn> {
        while *index <= end {
            let Some(p) = self.shmem_find_folio(obj, *index) else {
                *index += 1;
                continue;
            };
            let head = self.head_of(p);
            let (fi, nr) = (self.mem.pages[head.idx()].index, self.folio_nr_pages(head));
            // A fallocated shmem folio is not uptodate until its first use.
            if self.mem.pages[head.idx()].test(pg::READAHEAD) || self.mem.pages[head.idx()].test(pg::FALLOC) {
                // (Never backwards: a slot holding a frame of another index, a bug the
                // invariants report, must not hang the fault.)
                *index = (fi + nr).max(*index + 1);
                continue;
            }
            return Some(head);
        }
        None
    }

    /// `filemap_map_pages` over page-cache indices [start, end] of the file: the first
    /// folio found may be mapped by the PMD (`filemap_map_pmd`); then every cached folio's
    /// pages in the window that have no pte are mapped, a large folio whole when it lies
    /// inside the file, the vma and the page table (`filemap_map_folio_range`). The pages
    /// found lower the file's mmap misses. VM_FAULT_NOPAGE when `addr` got mapped.
    #[allow(clippy::too_many_arguments)]
    fn filemap_map_pages(
        &mut self,
        mm: MmId,
        vma: &Vma,
        addr: u64,
        pmd: Slot,
        filp: u32,
        obj: u32,
        start: u64,
        end: u64,
    ) -> u32 {
        let ps = self.geo.page_size();
        let shmem = self.inode(obj).is_shmem();
        let file_end = self.inode(obj).i_size.div_ceil(ps).saturating_sub(1);
        if self.inode(obj).i_size == 0 {
            return 0;
        }
        let end = end.min(file_end);
        let mut index = start;
        let Some(first) = self.next_uptodate_folio(obj, &mut index, end) else {
            return 0;
        };
        let (fi, fnr) = (self.mem.pages[first.idx()].index, self.folio_nr_pages(first));
        let pe = self.entry(pmd.table, pmd.idx);
        let table = if file_end >= fi + fnr || shmem {
            // filemap_map_pmd: a huge pmd is there already, or the first folio is PMD-sized
            // and do_set_pmd maps it; else the PTE table is installed.
            if pe.present() && pe.huge() {
                return vm_fault::NOPAGE;
            }
            if pe.none() && fnr >= self.geo.hpage_pmd_nr() && self.do_set_pmd(mm, vma, addr, first, pmd, false) == 0 {
                return vm_fault::NOPAGE;
            }
            // next_uptodate_folio holds the folio (folio_try_get): the reclaim the table's
            // allocation may run cannot evict it.
            self.folio_get(first);
            let t = self.pte_alloc(mm, pmd);
            self.folio_put(first);
            match t {
                Some(t) => t,
                None => return vm_fault::OOM,
            }
        } else {
            // The first folio holds the end of the file: no filemap_map_pmd, so with no PTE
            // table (pte_offset_map fails) nothing is mapped around.
            match self.entry(pmd.table, pmd.idx) {
                e if e.none() => return 0,
                e if e.huge() => return vm_fault::NOPAGE,
                e => e.pfn(),
            }
        };
        let vma_first = vma.pgoff;
        let vma_last = vma.pgoff + (vma.len() >> self.geo.page_shift) - 1;
        // The pgoff the page table's first entry would map (negative when the vma starts
        // inside the table at a small file offset).
        let table_base = vma.linear_page_index(addr, self.geo) as i64 - self.geo.table_index(addr, 0) as i64;
        let ptrs = self.geo.ptrs_per_table() as i64;
        let prot = self.file_pte_prot(vma, obj);
        let mut ret = 0;
        let mut hits = 0u64;
        let mut mapped = 0;
        let mut head = Some(first);
        while let Some(h) = head {
            let (fi, nr) = (self.mem.pages[h.idx()].index, self.folio_nr_pages(h));
            let (mut lo, mut hi) = (fi.max(start), (fi + nr - 1).min(end));
            let whole = nr > 1
                && (fi + nr <= file_end || shmem)
                && fi >= vma_first
                && fi + nr - 1 <= vma_last
                && fi as i64 >= table_base
                && (fi + nr) as i64 <= table_base + ptrs;
            if whole {
                (lo, hi) = (fi, fi + nr - 1);
            }
            // set_pte_range per run of none ptes: each run is one folio_add_file_rmap_ptes,
            // which mlocks the folio (VM_LOCKED) only when the run maps all of it.
            let mut run = 0;
            for i in lo..=hi {
                hits += 1;
                let idx = (i as i64 - table_base) as usize;
                if !self.entry(table, idx).none() {
                    if run == nr {
                        self.mlock_vma_folio(h, vma, true);
                    }
                    run = 0;
                    continue;
                }
                let page = Pfn(h.0 + (i - fi) as u32);
                self.folio_get(h);
                self.add_rmap_pte(page, mm);
                self.set_entry(table, idx, Entry::new(page, prot));
                mapped += 1;
                run += 1;
                if i == vma.linear_page_index(addr, self.geo) {
                    ret = vm_fault::NOPAGE;
                }
            }
            if run == nr {
                self.mlock_vma_folio(h, vma, true);
            }
            index = fi + nr;
            head = self.next_uptodate_folio(obj, &mut index, end);
        }
        let c = if shmem { MmCounter::ShmemPages } else { MmCounter::FilePages };
        self.add_rss_at(table, mm, c, mapped);
        self.stat.count_n(VmEvent::FaultAroundPages, mapped);
        let f = self.filps[filp as usize].as_mut().expect("file");
        f.ra.mmap_miss = f.ra.mmap_miss.saturating_sub(hits.min(u32::MAX as u64) as u32);
        ret
    }

    /// `finish_fault`: map the faulting page: by the PMD if the pmd is none and the folio is
    /// PMD-sized and lies inside the file (`do_set_pmd`), else the whole large folio with
    /// ptes when it lies inside the file, the vma and the page table and none of its ptes is
    /// set, else the page alone. A write maps dirty and writable.
    #[allow(clippy::too_many_arguments)]
    fn finish_fault(&mut self, mm: MmId, vma: &Vma, addr: u64, page: Pfn, pmd: Slot, write: bool, obj: u32) -> u32 {
        let ps = self.geo.page_size();
        let shmem = self.inode(obj).is_shmem();
        let head = self.head_of(page);
        let (fi, nr) = (self.mem.pages[head.idx()].index, self.folio_nr_pages(head));
        let needs_fallback = !shmem && self.inode(obj).i_size.div_ceil(ps) < fi + nr;
        let pe = self.entry(pmd.table, pmd.idx);
        if pe.none() && !needs_fallback && nr >= self.geo.hpage_pmd_nr() {
            let r = self.do_set_pmd(mm, vma, addr, head, pmd, write);
            if r != vm_fault::FALLBACK {
                return r;
            }
        }
        let Some(table) = self.pte_alloc(mm, pmd) else {
            return vm_fault::OOM;
        };
        let index = vma.linear_page_index(addr, self.geo);
        let table_base = index as i64 - self.geo.table_index(addr, 0) as i64;
        let ptrs = self.geo.ptrs_per_table() as i64;
        let vma_last = vma.pgoff + (vma.len() >> self.geo.page_shift) - 1;
        let fits = nr > 1
            && !needs_fallback
            && fi >= vma.pgoff
            && fi + nr - 1 <= vma_last
            && fi as i64 >= table_base
            && (fi + nr) as i64 <= table_base + ptrs;
        let (lo, hi) = if fits && (fi..fi + nr).all(|i| self.entry(table, (i as i64 - table_base) as usize).none()) {
            (fi, fi + nr - 1)
        } else {
            (index, index)
        };
        let mut prot = self.file_pte_prot(vma, obj);
        if write {
            prot |= pgtable::DIRTY;
        }
        for i in lo..=hi {
            let p = Pfn(head.0 + (i - fi) as u32);
            self.folio_get(head);
            self.add_rmap_pte(p, mm);
            let mut e = Entry::new(p, prot);
            if write {
                e = maybe_mkwrite(e, vma);
            }
            self.set_entry(table, (i as i64 - table_base) as usize, e);
        }
        // folio_add_file_rmap_ptes mlocks (VM_LOCKED) a folio it maps whole, not a page of a
        // large one (Linux 6.18: `folio_nr_pages(folio) == nr_pages`).
        if hi - lo + 1 == nr {
            self.mlock_vma_folio(head, vma, true);
        }
        let c = if shmem { MmCounter::ShmemPages } else { MmCounter::FilePages };
        self.add_rss_at(table, mm, c, (hi - lo + 1) as i64);
        0
    }

    /// `do_set_pmd`: map a PMD-sized page-cache folio by the pmd, when THP is not disabled for
    /// the vma (VM_NOHUGEPAGE; the sysfs `enabled` setting does not matter), the vma covers the
    /// aligned 2 MiB with the file offset congruent to the address, and the pmd is none.
    /// VM_FAULT_FALLBACK otherwise. Counts THP_FILE_MAPPED; no table is deposited (x86).
    pub(super) fn do_set_pmd(&mut self, mm: MmId, vma: &Vma, addr: u64, head: Pfn, pmd: Slot, write: bool) -> u32 {
        let hsize = self.geo.hpage_pmd_size();
        let haddr = self.geo.hpage_pmd_align_down(addr);
        let pmd_nr = self.geo.hpage_pmd_nr();
        let congruent = ((vma.start >> self.geo.page_shift).wrapping_sub(vma.pgoff)).is_multiple_of(pmd_nr);
        if !self.has_transparent_hugepage()
            || vma.flags & vm::NOHUGEPAGE != 0
            || !congruent
            || haddr < vma.start
            || haddr + hsize > vma.end
            || self.folio_nr_pages(head) != pmd_nr
            || !self.entry(pmd.table, pmd.idx).none()
        {
            return vm_fault::FALLBACK;
        }
        let obj = self.mem.pages[head.idx()].mapping;
        let mut e = Entry::new(head, self.file_pte_prot(vma, obj) | pgtable::PSE);
        if write {
            e = maybe_mkwrite(e.with(pgtable::DIRTY), vma);
        }
        self.folio_get(head);
        self.file_add_rmap_pmd(head, mm);
        self.mlock_vma_folio(head, vma, true);
        let c = self.mm_counter(head);
        self.add_rss_at(pmd.table, mm, c, pmd_nr as i64);
        self.set_entry(pmd.table, pmd.idx, e);
        self.stat.count(VmEvent::ThpFileMapped);
        0
    }

    /// `folio_add_file_rmap_pmd`: the first entire mapping counts the folio in
    /// NR_FILE_PMDMAPPED / NR_SHMEM_PMDMAPPED and its pages not mapped by ptes in
    /// NR_FILE_MAPPED.
    pub(super) fn file_add_rmap_pmd(&mut self, head: Pfn, mm: MmId) {
        let nr = self.geo.hpage_pmd_nr();
        let e = self.mem.pages[head.idx()].entire_mapcount;
        if e == 0 {
            let shmem = self.mem.pages[head.idx()].test(pg::SHMEM | pg::TEXT_COPY);
            let item = if shmem { VmItem::NrShmemPmdmapped } else { VmItem::NrFilePmdmapped };
            self.mod_lruvec_item(head, item, 1);
            let newly = (0..nr as u32).filter(|i| self.mem.pages[(head.0 + i) as usize].mapcount == 0).count();
            self.mod_lruvec_item(head, VmItem::NrMapped, newly as i64);
        }
        self.mem.pages[head.idx()].entire_mapcount = e + 1;
        self.track_mm(head, mm, 1);
    }

    /// `folio_remove_rmap_pmd` of a page-cache folio.
    pub(super) fn file_remove_rmap_pmd(&mut self, head: Pfn, mm: MmId) {
        let nr = self.geo.hpage_pmd_nr();
        let e = self.mem.pages[head.idx()].entire_mapcount - 1;
        self.mem.pages[head.idx()].entire_mapcount = e;
        if e == 0 {
            let shmem = self.mem.pages[head.idx()].test(pg::SHMEM | pg::TEXT_COPY);
            let item = if shmem { VmItem::NrShmemPmdmapped } else { VmItem::NrFilePmdmapped };
            self.mod_lruvec_item(head, item, -1);
            let gone = (0..nr as u32).filter(|i| self.mem.pages[(head.0 + i) as usize].mapcount == 0).count();
            self.mod_lruvec_item(head, VmItem::NrMapped, -(gone as i64));
        }
        self.track_mm(head, mm, -1);
    }

    /// `zap_huge_pmd` / `__split_huge_pmd_locked` of a pmd mapping a page-cache folio: the pmd
    /// is cleared (a file folio is not remapped by ptes: later faults map it again), its dirty
    /// bit passes to the folio, the rmap and rss go.
    pub(super) fn zap_file_pmd(&mut self, mm: MmId, pmd: Slot) {
        let e = self.entry(pmd.table, pmd.idx);
        self.set_entry(pmd.table, pmd.idx, Entry::NONE);
        let head = e.pfn();
        if e.has(pgtable::DIRTY) {
            self.folio_mark_dirty(head);
        }
        let c = self.mm_counter(head);
        self.add_rss_at(pmd.table, mm, c, -(self.geo.hpage_pmd_nr() as i64));
        self.file_remove_rmap_pmd(head, mm);
        self.folio_put(head);
    }
}

impl Kernel {
    /// `folio_mkclean` (mm/rmap.c, called by `folio_clear_dirty_for_io` when writeback takes a
    /// folio): write-protect and clean every writable pte or pmd that maps folio `head`
    /// (index `fi` of inode `obj`) in a shared mapping, so that the next write faults
    /// (`do_wp_page` -> `page_mkwrite`) and dirties the folio again. Walks the inode's mms
    /// and their vmas of the inode (`i_mmap` at mm granularity); private mappings map the
    /// page-cache folio read-only already.
    pub(super) fn folio_mkclean(&mut self, obj: u32, head: Pfn, fi: u64, nr: u64) {
        for (m, v, lo, hi) in self.i_mmap_range(obj, fi, nr) {
            if !v.is_shared() {
                continue;
            }
            let mut flushed = None::<(u64, u64)>;
            let mut i = lo;
            while let Some((addr, pmd, pe)) = self.pvmw_next_pmd(m, &v, &mut i, hi) {
                let mut step = 1;
                if pe.present() && pe.huge() {
                    // A PMD mapping of the folio (page_vma_mapped_walk's pmd case).
                    step = self.geo.hpage_pmd_nr() - (i - fi) % self.geo.hpage_pmd_nr();
                    if pe.pfn() == head && (pe.write() || pe.has(pgtable::DIRTY)) {
                        self.set_entry(pmd.table, pmd.idx, pe.without(pgtable::RW).without(pgtable::DIRTY));
                        let base = self.geo.hpage_pmd_align_down(addr);
                        flushed = Some(span(flushed, base, base + self.geo.hpage_pmd_size()));
                    }
                } else if pe.present() {
                    let idx = self.geo.table_index(addr, 0);
                    let e = self.entry(pe.pfn(), idx);
                    let page = Pfn(head.0 + (i - fi) as u32);
                    if e.present() && e.pfn() == page && (e.write() || e.has(pgtable::DIRTY)) {
                        self.set_entry(pe.pfn(), idx, e.without(pgtable::RW).without(pgtable::DIRTY));
                        flushed = Some(span(flushed, addr, addr + self.geo.page_size()));
                    }
                }
                i += step;
            }
            if let Some((a, b)) = flushed {
                self.flush_tlb_range(m, a, b);
            }
        }
    }
}

/// The union of a span and [a, b).
fn span(s: Option<(u64, u64)>, a: u64, b: u64) -> (u64, u64) {
    s.map_or((a, b), |(x, y)| (x.min(a), y.max(b)))
}
