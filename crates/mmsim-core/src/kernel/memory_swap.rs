//! The swap parts of mm/memory.c: `do_swap_page` (a fault on a swap pte), the copy of swap
//! ptes at fork (`copy_nonpresent_pte`), and their zap (`zap_nonpresent_ptes`).

use super::memory::{vm_page_prot, Slot};
use super::mm::{vm, MmCounter, Vma};
use super::mm_types::pg;
use super::pgtable::{self, Entry, SwpEntry};
use super::vmstat::VmEvent;
use super::{vm_fault, Kernel, MmId};
use crate::units::Pfn;

impl Kernel {
    /// `do_swap_page`: a fault on a swap pte. The swap cache's folio for the entry (a hit:
    /// readahead accounting), or one read in with readahead (a major fault); the task waits
    /// for its read. The entry's reference goes, the slot too when it should
    /// (`should_try_to_free_swap`); the page is mapped writable when it was exclusive to this
    /// mapping (or only we hold it), else read-only, a write then taking `do_wp_page`'s COW
    /// or reuse.
    pub(super) fn do_swap_page(&mut self, mm: MmId, vma: &Vma, addr: u64, write: bool, slot: Slot) -> u32 {
        let pte = self.entry(slot.table, slot.idx);
        let e = pte.swp_entry();
        if e.ty() >= self.swap.si.len() || self.swap_count(e) == 0 {
            self.report_bug(format!("mm {mm}: swap pte {pte:?} at {addr:#x} refers to no slot in use"));
            return vm_fault::SIGBUS;
        }
        let mut ret = 0;
        let folio = match self.swap_cache_get_folio(e) {
            Some(f) => {
                self.swap_update_readahead(f, Some((mm, vma, addr)));
                f
            }
            None => {
                let Some(f) = self.swapin_readahead(e, mm, vma, addr) else {
                    return vm_fault::OOM;
                };
                ret |= vm_fault::MAJOR;
                self.stat.count(VmEvent::PgMajFault);
                self.count_memcg_events(self.mm(mm).memcg, VmEvent::PgMajFault, 1);
                f
            }
        };
        self.folio_get(folio);
        // folio_lock_or_retry: wait for the read (ours, or a readahead's in flight).
        self.folio_wait_locked(folio);
        let pte = self.entry(slot.table, slot.idx);
        if !pte.is_swap() || pte.swp_entry() != e || !self.folio_matches_swap_entry(folio, e) {
            // The pte or the swap cache changed while we waited: the fault repeats.
            self.folio_put(folio);
            return ret;
        }
        if write && !self.mem.pages[folio.idx()].test(pg::LRU) {
            self.lru_add_drain();
        }
        let head = folio;
        let base = SwpEntry(self.mem.pages[head.idx()].private);
        let page = Pfn(head.0 + (e.offset() - base.offset()));
        // A large swap-cache folio whose ptes here are all its consecutive entries is mapped
        // whole (`do_swap_page`'s nr_pages).
        let nr_folio = self.folio_nr_pages(head);
        let mut nr = 1u64;
        let mut first_addr = self.geo.page_align_down(addr);
        let mut first_slot = slot;
        let mut first_page = page;
        if nr_folio > 1 {
            let idx0 = page.0 - head.0;
            let start = first_addr.wrapping_sub(idx0 as u64 * self.geo.page_size());
            let tidx = slot.idx as i64 - idx0 as i64;
            let fits = tidx >= 0
                && tidx as u64 + nr_folio <= self.geo.ptrs_per_table() as u64
                && start >= vma.start
                && start + nr_folio * self.geo.page_size() <= vma.end
                && (0..nr_folio).all(|i| {
                    let x = self.entry(slot.table, tidx as usize + i as usize);
                    x.is_swap() && x.swp_entry() == base.add(i as u32) && x.swp_exclusive() == pte.swp_exclusive()
                });
            if fits {
                nr = nr_folio;
                first_addr = start;
                first_slot = Slot { table: slot.table, idx: tidx as usize };
                first_page = head;
            }
        }
        // (SWP_STABLE_WRITES devices would drop exclusivity under writeback: none here.)
        let exclusive = pte.swp_exclusive();
        let first_entry = SwpEntry(e.0 - (page.0 - first_page.0));
        self.swap_free_nr(first_entry, nr as u32);
        if self.should_try_to_free_swap(head, vma, write) {
            self.folio_free_swap(head);
        }
        self.add_rss_at(slot.table, mm, MmCounter::AnonPages, nr as i64);
        self.add_swapents_at(slot.table, mm, -(nr as i64));
        let mut prot = vm_page_prot(vma);
        let mut wp = write;
        let excl_map = exclusive || self.mem.pages[head.idx()].refcount == 1;
        if excl_map && vma.flags & vm::WRITE != 0 {
            prot |= pgtable::RW;
            if write {
                prot |= pgtable::DIRTY;
                wp = false;
            }
        }
        self.folio_add_anon_rmap_ptes(head, first_page, nr, mm, vma, first_addr, excl_map);
        for i in 0..nr {
            let p = Pfn(first_page.0 + i as u32);
            let ne = if write && p == page {
                Entry::new(p, prot | pgtable::ACCESSED)
            } else {
                Entry::new(p, prot & !pgtable::DIRTY)
            };
            self.set_entry(first_slot.table, first_slot.idx + i as usize, ne);
        }
        self.mlock_vma_folio(head, vma, true);
        self.folio_put(folio);
        if wp {
            let s = Slot { table: slot.table, idx: slot.idx };
            ret |= self.do_wp_page(mm, vma, addr, s);
        }
        ret
    }

    /// Whether the swap-cache folio still caches entry `e`.
    fn folio_matches_swap_entry(&self, head: Pfn, e: SwpEntry) -> bool {
        let p = &self.mem.pages[head.idx()];
        if !p.test(pg::SWAPCACHE) {
            return false;
        }
        let base = SwpEntry(p.private);
        base.ty() == e.ty()
            && e.offset() >= base.offset()
            && ((e.offset() - base.offset()) as u64) < self.folio_nr_pages(head)
    }

    /// `should_try_to_free_swap`: after a swap-in, drop the slot when swap is getting full,
    /// the folio is mlocked, or a write fault holds the only other reference.
    fn should_try_to_free_swap(&self, head: Pfn, vma: &Vma, write: bool) -> bool {
        let p = &self.mem.pages[head.idx()];
        if !p.test(pg::SWAPCACHE) {
            return false;
        }
        if self.mem_cgroup_swap_full(head) || vma.flags & vm::LOCKED != 0 || p.test(pg::MLOCKED) {
            return true;
        }
        let nr = self.folio_nr_pages(head) as i32;
        write && p.refcount == 1 + nr
    }

    /// `folio_add_anon_rmap_ptes` (or `folio_add_new_anon_rmap` for a folio not mapped yet,
    /// whose linear index is set then): `nr` ptes from `page` on in `mm`.
    #[allow(clippy::too_many_arguments)]
    fn folio_add_anon_rmap_ptes(
        &mut self,
        head: Pfn,
        page: Pfn,
        nr: u64,
        mm: MmId,
        vma: &Vma,
        addr: u64,
        exclusive: bool,
    ) {
        if self.folio_mapcount(head) == 0 {
            let idx = vma.linear_page_index(addr, self.geo) - (page.0 - head.0) as u64;
            self.mem.pages[head.idx()].index = idx;
            self.anon_vma_prepare(mm, vma.start);
        }
        for i in 0..nr {
            let p = Pfn(page.0 + i as u32);
            self.folio_get(head);
            self.add_rmap_pte(p, mm);
            if exclusive {
                self.mem.pages[p.idx()].set(pg::ANON_EXCLUSIVE);
            } else {
                self.mem.pages[p.idx()].clear(pg::ANON_EXCLUSIVE);
            }
        }
    }

    /// `copy_nonpresent_pte` of a swap pte at fork: the entry gets one more reference and the
    /// child the same pte, both no longer exclusive; the child counts a swap entry.
    pub(super) fn copy_swap_pte(&mut self, dst: MmId, dtable: Pfn, stable: Pfn, idx: usize, e: Entry) {
        let se = e.swp_entry();
        self.swap_duplicate(se);
        let shared = Entry::swp(se, false);
        if e.swp_exclusive() {
            self.set_entry(stable, idx, shared);
        }
        self.add_swapents_at(dtable, dst, 1);
        self.set_entry(dtable, idx, shared);
    }

    /// `zap_nonpresent_ptes` of a swap pte: its reference goes (`free_swap_and_cache`).
    pub(super) fn zap_swap_pte(&mut self, mm: MmId, table: Pfn, idx: usize, e: Entry) {
        self.set_entry(table, idx, Entry::NONE);
        self.add_swapents_at(table, mm, -1);
        self.free_swap_and_cache_nr(e.swp_entry(), 1);
    }
}
