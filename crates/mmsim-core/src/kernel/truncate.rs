//! Punching holes in files (MADV_REMOVE's `vfs_fallocate(FALLOC_FL_PUNCH_HOLE |
//! FALLOC_FL_KEEP_SIZE)`): mm/shmem.c `shmem_fallocate`, fs/ext4 `ext4_punch_hole`, mm/truncate.c
//! `truncate_pagecache_range` (`unmap_mapping_range` + `truncate_inode_pages_range`), and
//! fs/hugetlbfs `hugetlbfs_punch_hole` (kernel/memfd.rs, shared with fallocate(2)).
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

use super::mm_types::pg;
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
        if !ext4 {
            self.shmem_free_swap_range(obj, start, end);
        }
        let mut i = start;
        while i < end {
            let Some(p) = self.shmem_find_folio(obj, i) else {
                i += 1;
                continue;
            };
            let head = self.head_of(p);
            let (fi, nr) = (self.mem.pages[head.idx()].index, self.folio_nr_pages(head));
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
            while let Some((next, pmd)) = self.pmd_walk_next(m, &mut a, a1) {
                let pe = self.entry(pmd.table, pmd.idx);
                if pe.present() && pe.huge() {
                    if self.is_file_pmd(pe) {
                        self.zap_file_pmd(m, pmd);
                        let haddr = self.geo.hpage_pmd_align_down(a);
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
        // The LRU batches hold no large folio; one on its list leaves it whole and its pages
        // come back one by one, next to each other (lru_add_split_folio).
        if h.refcount != self.folio_mapcount(head) as i32 + nr as i32 {
            return false;
        }
        if nr >= self.geo.hpage_pmd_nr() {
            let shmem = self.inode(obj).is_shmem();
            self.mod_lruvec_item(head, if shmem { VmItem::NrShmemThps } else { VmItem::NrFileThps }, -1);
            self.stat.count(VmEvent::ThpSplitPage);
        }
        let on_lru = h.test(pg::LRU);
        if on_lru {
            self.lruvec_del_folio(head);
        }
        self.folio_mms.remove(&head.0);
        let fi = h.index;
        // filemap_release_folio before the split.
        self.folio_free_buffers(head);
        self.xa_split(obj, fi, 0);
        let keep = pg::SHMEM | pg::DIRTY | pg::LRU | pg::ACTIVE | pg::REFERENCED | pg::WORKINGSET | pg::UNEVICTABLE;
        let tail_flags = h.flags & keep;
        for i in 0..nr as u32 {
            let p = &mut self.mem.pages[(head.0 + i) as usize];
            p.flags = if i == 0 { h.flags & !pg::HEAD } else { tail_flags };
            p.order = 0;
            p.head = head.0 + i;
            p.mapping = obj;
            p.index = fi + i as u64;
            p.entire_mapcount = 0;
            p.refcount = p.mapcount + 1;
            p.memcg = h.memcg;
        }
        if on_lru {
            self.lruvec_add_folio(head);
            for i in 1..nr as u32 {
                self.lruvec_add_folio_before(Pfn(head.0 + i), head);
            }
        }
        true
    }
}
