//! Punching holes in files (MADV_REMOVE's `vfs_fallocate(FALLOC_FL_PUNCH_HOLE |
//! FALLOC_FL_KEEP_SIZE)`): mm/shmem.c `shmem_fallocate`, fs/ext4 `ext4_punch_hole`, mm/truncate.c
//! `truncate_pagecache_range` (`unmap_mapping_range` + `truncate_inode_pages_range`), and
//! fs/hugetlbfs `hugetlbfs_punch_hole`.
//!
//! A page-cache hole: every mapping of the hole's pages is unmapped (a private mapping's own
//! copies stay: `even_cows` is false), the folios inside the hole leave the page cache and are
//! freed, a large folio the hole covers in part is split into base pages first and, as a
//! split file folio is, unmapped from every mapping (Linux's `try_folio_split` may leave
//! larger pieces outside the hole: the same pages stay cached) unless it is an ext4 folio
//! with dirty buffers, which does not split (the hole's part is zeroed in place), and ext4
//! deallocates the hole's blocks: the range reads as zeroes from then
//! on, in every mapping and through read(2). Dirty folios in the hole are dropped, not
//! written (data=ordered). A hugetlbfs hole frees the huge pages it covers whole (unmapped
//! from every mapping; their unused reservations given back) and zeroes the part of a huge
//! page it covers in part.

use super::mm::Backing;
use super::mm_types::{pg, NIL};
use super::vmstat::{VmEvent, VmItem};
use super::Kernel;
use crate::units::Pfn;

impl Kernel {
    /// Punch [offset, offset + len) (page-aligned) out of inode `obj` (shmem, tmpfs or ext4).
    pub(super) fn pagecache_punch_hole(&mut self, obj: u32, offset: u64, len: u64) {
        let shift = self.geo.page_shift;
        let ext4 = !self.inode(obj).is_shmem();
        if ext4 && offset >= self.inode(obj).i_size {
            // ext4_punch_hole: nothing past the end of the file.
            return;
        }
        let start = offset >> shift;
        let end = ((offset + len) >> shift).min(self.shmem_size(obj));
        if start >= end {
            return;
        }
        self.unmap_mapping_pages(obj, start, end);
        let mut i = start;
        while i < end {
            let Some(p) = self.shmem_find_folio(obj, i) else {
                i += 1;
                continue;
            };
            let head = self.head_of(p);
            let (fi, nr) = (self.mem.pages[head.idx()].index as u64, self.folio_nr_pages(head));
            let h = self.mem.pages[head.idx()];
            // truncate_inode_partial_folio: split_folio fails on an ext4 folio with dirty
            // buffers (filemap_release_folio); mmsim splits no mlocked folio nor text copy.
            let splittable = !(h.test(pg::MLOCKED) || h.test(pg::TEXT_COPY) || ext4 && h.test(pg::DIRTY));
            if fi >= start && fi + nr <= end {
                self.filemap_remove_folio(obj, head);
            } else if splittable {
                // The split unmaps a file folio from every mapping (unmap_folio) and does not
                // map it back (remap_page is for anonymous folios): its pages outside the hole
                // stay cached, mapped nowhere.
                self.unmap_mapping_pages(obj, fi, fi + nr);
                let split = self.split_pagecache_folio(obj, head);
                debug_assert!(split, "an unmapped folio splits");
                for k in fi.max(start)..(fi + nr).min(end) {
                    self.filemap_remove_folio(obj, Pfn(head.0 + (k - fi) as u32));
                }
            } else {
                // A folio that is not split: its part in the hole is zeroed (folio_zero_range)
                // and it stays, in the cache and in the mappings outside the hole.
                let (a, b) = (fi.max(start), (fi + nr).min(end));
                self.mem.zero_frames(head.0 + (a - fi) as u32, b - a);
            }
            i = fi + nr;
        }
        if ext4 {
            // The blocks are deallocated: the device reads zeroes there.
            let o = self.shmem[obj as usize].as_mut().expect("inode");
            o.disk.retain(|&k, _| k < start || k >= end);
        }
    }

    /// `unmap_mapping_range(mapping, start, len, even_cows = 0)` over pages [start, end) of
    /// inode `obj`: in every vma mapping them, each pte mapping one of them goes (a page of
    /// the cache, not a private copy) and each pmd mapping a folio of the cache over the
    /// range (a partial one too: a file pmd splits by being zapped).
    fn unmap_mapping_pages(&mut self, obj: u32, start: u64, end: u64) {
        let (shift, ps) = (self.geo.page_shift, self.geo.page_size());
        for (m, v, lo, hi) in self.i_mmap_range(obj, start, end - start) {
            let (a0, a1) = (v.start + ((lo - v.pgoff) << shift), v.start + ((hi - v.pgoff) << shift));
            let mut a = a0;
            while a < a1 {
                let next = ((a & self.geo.pmd_mask()) + self.geo.hpage_pmd_size()).min(a1);
                let Some(pmd) = self.pmd_slot(m, a) else {
                    a = next;
                    continue;
                };
                let pe = self.entry(pmd.table, pmd.idx);
                if pe.present() && pe.huge() {
                    if self.is_file_pmd(pe) {
                        self.zap_file_pmd(m, pmd);
                        let haddr = a & self.geo.pmd_mask();
                        self.flush_tlb_range(m, haddr, haddr + self.geo.hpage_pmd_size());
                    }
                    a = next;
                    continue;
                }
                if pe.present() {
                    // Runs of ptes mapping the cache's pages, zapped a run at a time.
                    let mut run: Option<u64> = None;
                    let mut x = a;
                    while x <= next {
                        let cache = x < next && {
                            let e = self.entry(pe.pfn(), self.geo.table_index(x, 0));
                            e.present() && !e.special() && {
                                let h = self.mem.pages[self.head_of(e.pfn()).idx()];
                                !h.test(pg::ANON) && h.mapping == obj
                            }
                        };
                        match (cache, run) {
                            (true, None) => run = Some(x),
                            (false, Some(r)) => {
                                self.zap_page_range(m, &v, r, x);
                                run = None;
                            }
                            _ => {}
                        }
                        x += ps;
                    }
                }
                a = next;
            }
        }
    }

    /// `split_folio` of a page-cache folio no pmd maps, into base pages (uniformly): each
    /// keeps the cache's reference and one per pte mapping it, PG_dirty and swap-backedness
    /// (NR_DIRTY counts pages already). False for a folio mmsim does not split (mlocked, a
    /// text copy, or still mapped by a pmd).
    fn split_pagecache_folio(&mut self, obj: u32, head: Pfn) -> bool {
        let h = self.mem.pages[head.idx()];
        if !h.test(pg::HEAD) {
            return true;
        }
        if h.entire_mapcount > 0 || h.test(pg::MLOCKED) || h.test(pg::TEXT_COPY) {
            return false;
        }
        let nr = self.folio_nr_pages(head);
        if nr >= self.geo.hpage_pmd_nr() {
            let shmem = self.inode(obj).is_shmem();
            self.stat.mod_item(if shmem { VmItem::NrShmemThps } else { VmItem::NrFileThps }, -1);
            self.stat.count(VmEvent::ThpSplitPage);
        }
        self.folio_mms.remove(&head.0);
        let fi = h.index;
        let tail_flags = h.flags & (pg::SHMEM | pg::DIRTY);
        for i in 0..nr as u32 {
            let p = &mut self.mem.pages[(head.0 + i) as usize];
            p.flags = if i == 0 { h.flags & !pg::HEAD } else { tail_flags };
            p.order = 0;
            p.head = head.0 + i;
            p.mapping = obj;
            p.index = fi + i;
            p.entire_mapcount = 0;
            p.refcount = p.mapcount + 1;
        }
        true
    }

    /// `hugetlbfs_punch_hole` of [offset, offset + len) of hugetlbfs file `f` (shared): the
    /// parts of huge pages at either end are zeroed (`hugetlbfs_zero_partial_page`), the huge
    /// pages in between unmapped from every vma (`hugetlb_vmdelete_list`) and removed from
    /// the page cache (`remove_inode_hugepages`), their reservations never used given back
    /// (`hugetlb_unreserve_pages`).
    pub(super) fn hugetlbfs_punch_hole(&mut self, f: u32, offset: u64, len: u64) {
        let hsize = self.geo.hpage_pmd_size();
        let end = offset + len;
        let hole_start = offset.next_multiple_of(hsize);
        let hole_end = end & !(hsize - 1);
        if offset < hole_start {
            self.hugetlbfs_zero_partial_page(f, offset, end.min(hole_start));
        }
        if hole_end > hole_start {
            let (s, e) = (hole_start / hsize, hole_end / hsize);
            self.hugetlb_vmdelete_list(f, s, e);
            self.remove_inode_hugepages(f, s, e);
        }
        if end > hole_end && end > hole_start {
            self.hugetlbfs_zero_partial_page(f, hole_end, end);
        }
    }

    /// `hugetlbfs_zero_partial_page`: zero [start, end) (inside one huge page) of the file's
    /// cached huge page, if it has one.
    fn hugetlbfs_zero_partial_page(&mut self, f: u32, start: u64, end: u64) {
        let (hsize, shift) = (self.geo.hpage_pmd_size(), self.geo.page_shift);
        let idx = (start / hsize) as usize;
        let Some(file) = self.hugetlb.files[f as usize].as_ref() else { return };
        let Some(&page) = file.pages.get(idx) else { return };
        if page == NIL {
            return;
        }
        let (a, b) = ((start % hsize) >> shift, (end - (idx as u64) * hsize) >> shift);
        self.mem.zero_frames(page + a as u32, b - a);
    }

    /// `hugetlb_vmdelete_list`: unmap huge pages [s, e) of file `f` from every vma mapping
    /// them (a shared PMD table is left by the mm instead, as `huge_pmd_unshare` does).
    fn hugetlb_vmdelete_list(&mut self, f: u32, s: u64, e: u64) {
        let (hnr, shift) = (self.geo.hpage_pmd_nr(), self.geo.page_shift);
        let mms: Vec<_> =
            self.hugetlb.files[f as usize].as_ref().map(|o| o.mms.iter().map(|m| m.0).collect()).unwrap_or_default();
        for m in mms {
            let vmas: Vec<_> = self.mm(m).vmas.values().filter(|v| v.backing == Backing::Hugetlb(f)).cloned().collect();
            for v in vmas {
                let pages = v.len() >> shift;
                let (lo, hi) = ((s * hnr).max(v.pgoff), (e * hnr).min(v.pgoff + pages));
                if lo < hi {
                    let (a0, a1) = (v.start + ((lo - v.pgoff) << shift), v.start + ((hi - v.pgoff) << shift));
                    self.unmap_hugepage_range(m, &v, a0, a1);
                }
            }
        }
    }

    /// `remove_inode_hugepages` + `hugetlb_unreserve_pages` over huge pages [s, e) of `f`.
    fn remove_inode_hugepages(&mut self, f: u32, s: u64, e: u64) {
        let Some(file) = self.hugetlb.files[f as usize].as_mut() else { return };
        let e = (e as usize).min(file.pages.len());
        let s = (s as usize).min(e);
        let mut cached = Vec::new();
        for p in &mut file.pages[s..e] {
            if *p != NIL {
                cached.push(*p);
                *p = NIL;
            }
        }
        let chg = file.resv[s..e].iter().filter(|&&r| r).count() as i64;
        for r in &mut file.resv[s..e] {
            *r = false;
        }
        let freed = cached.len() as i64;
        for p in cached {
            // The page cache's reference: the page is no longer mapped anywhere.
            self.folio_put(Pfn(p));
        }
        if chg > freed {
            let _ = self.hugetlb_acct_memory(-(chg - freed));
        }
    }
}
