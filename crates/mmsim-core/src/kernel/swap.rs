//! mm/swap.c: the per-CPU folio batches that feed the LRU lists (`cpu_fbatches`), the moves
//! between the lists they queue (`folio_add_lru`, `folio_activate`, `folio_deactivate`,
//! `deactivate_file_folio`, `folio_mark_lazyfree`, `folio_rotate_reclaimable`), the software
//! access bit (`folio_mark_accessed`), their draining (`lru_add_drain`, `lru_add_drain_all`),
//! and the reclaim costs (`lru_note_cost`).
//!
//! Each batch holds a reference on each folio it queued, as Linux's do; a batch drains when it
//! holds PAGEVEC_SIZE folios, when a large folio joins it, and at the `lru_add_drain` points
//! Linux has (reclaim, zap, mlock, madvise, khugepaged, fadvise, drop_caches, a write fault on
//! a folio not yet on the LRU). The mlock batch (`mlock_fbatch`) is kernel/mlock.rs's; it
//! drains with `lru_add_drain` and `lru_add_drain_all`, after this file's batches, as Linux's
//! `mlock_drain_local` does.

use super::lruvec::Lru;
use super::mm::{vm, Vma};
use super::mm_types::pg;
use super::vmstat::VmEvent;
use super::Kernel;
use crate::units::Pfn;

/// `PAGEVEC_SIZE` (include/linux/pagevec.h): a folio batch drains when it holds this many.
pub const PAGEVEC_SIZE: usize = 31;

/// Which of a CPU's batches (`struct cpu_fbatches`), in `lru_add_drain_cpu`'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fbatch {
    LruAdd = 0,
    LruMoveTail = 1,
    LruDeactivateFile = 2,
    LruDeactivate = 3,
    LruLazyfree = 4,
    LruActivate = 5,
}

impl Fbatch {
    const ALL: [Fbatch; 6] = [
        Fbatch::LruAdd,
        Fbatch::LruMoveTail,
        Fbatch::LruDeactivateFile,
        Fbatch::LruDeactivate,
        Fbatch::LruLazyfree,
        Fbatch::LruActivate,
    ];
}

/// What `mlock_folio_batch` does with an entry of the mlock batch (mm/mlock.c's tag bits in
/// the folio pointer: LRU_FOLIO, NEW_FOLIO, none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlockTag {
    /// `mlock_lru`: an mlocked folio that may be on an LRU list (`__mlock_folio`).
    Lru,
    /// `mlock_new`: a new folio of a VM_LOCKED vma, on no list yet (`__mlock_new_folio`).
    New,
    /// A munlocked folio (`__munlock_folio`).
    Munlock,
}

/// `struct cpu_fbatches`: one CPU's folio batches (head pages, each holding a reference), and
/// its `mlock_fbatch`.
#[derive(Clone, Debug, Default)]
pub struct CpuFbatches {
    pub batches: [Vec<Pfn>; 6],
    pub mlock: Vec<(Pfn, MlockTag)>,
}

impl Kernel {
    /// Queue `head` on this CPU's batch `which` with a reference (`folio_batch_add_and_move`):
    /// a full batch, or a large folio, moves the whole batch at once.
    fn folio_batch_add_and_move(&mut self, head: Pfn, which: Fbatch) {
        self.folio_get(head);
        let cpu = self.cur_cpu;
        if self.fbatches.len() <= cpu {
            self.fbatches.resize_with(cpu + 1, Default::default);
        }
        let b = &mut self.fbatches[cpu].batches[which as usize];
        b.push(head);
        if b.len() >= PAGEVEC_SIZE || self.folio_nr_pages(head) > 1 {
            self.folio_batch_move_lru(cpu, which);
        }
    }

    /// `folio_batch_move_lru`: apply the batch's move to each folio in the order queued
    /// (every move but lru_add only to a folio still on an LRU list), then drop the batch's
    /// references.
    fn folio_batch_move_lru(&mut self, cpu: usize, which: Fbatch) {
        let mut batch = std::mem::take(&mut self.fbatches[cpu].batches[which as usize]);
        for &head in &batch {
            if which != Fbatch::LruAdd {
                if !self.mem.pages[head.idx()].test(pg::LRU) {
                    continue;
                }
                self.mem.pages[head.idx()].clear(pg::LRU);
            }
            match which {
                Fbatch::LruAdd => self.lru_add(head),
                Fbatch::LruMoveTail => self.lru_move_tail(head),
                Fbatch::LruDeactivateFile => self.lru_deactivate_file(head),
                Fbatch::LruDeactivate => self.lru_deactivate(head),
                Fbatch::LruLazyfree => self.lru_lazyfree(head),
                Fbatch::LruActivate => self.lru_activate(head),
            }
            self.mem.pages[head.idx()].set(pg::LRU);
        }
        for &head in &batch {
            self.folio_put(head);
        }
        batch.clear();
        // Keep the allocation (a put above may have queued nothing here: batches only grow
        // from callers).
        if self.fbatches[cpu].batches[which as usize].is_empty() {
            self.fbatches[cpu].batches[which as usize] = batch;
        }
    }

    /// `lru_add`: a new folio onto its list (the unevictable one if it is mlocked).
    fn lru_add(&mut self, head: Pfn) {
        let p = &mut self.mem.pages[head.idx()];
        let was_unevictable = p.test(pg::UNEVICTABLE);
        p.clear(pg::UNEVICTABLE);
        let nr = self.folio_nr_pages(head) as i64;
        if self.folio_evictable(head) {
            if was_unevictable {
                self.count_vm_events_folio(head, VmEvent::UnevictablePgsRescued, nr);
            }
        } else {
            let p = &mut self.mem.pages[head.idx()];
            p.clear(pg::ACTIVE);
            p.set(pg::UNEVICTABLE);
            if !was_unevictable {
                self.count_vm_events_folio(head, VmEvent::UnevictablePgsCulled, nr);
            }
        }
        self.lruvec_add_folio(head);
    }

    /// `lru_move_tail` (`folio_rotate_reclaimable`): to the inactive tail, next to go.
    fn lru_move_tail(&mut self, head: Pfn) {
        if self.mem.pages[head.idx()].test(pg::UNEVICTABLE) {
            return;
        }
        self.lruvec_del_folio(head);
        self.mem.pages[head.idx()].clear(pg::ACTIVE);
        self.lruvec_add_folio_tail(head);
        let nr = self.folio_nr_pages(head) as i64;
        self.count_vm_events_folio(head, VmEvent::PgRotated, nr);
    }

    /// `lru_deactivate_file`: an unmapped file folio invalidation could not drop goes to the
    /// inactive list, its tail if clean (reclaim takes it next), else its head marked for
    /// reclaim once written back.
    fn lru_deactivate_file(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if p.test(pg::UNEVICTABLE) || self.folio_mapcount(head) > 0 {
            return;
        }
        let active = p.test(pg::ACTIVE);
        let nr = self.folio_nr_pages(head) as i64;
        self.lruvec_del_folio(head);
        self.mem.pages[head.idx()].clear(pg::ACTIVE | pg::REFERENCED);
        if p.test(pg::WRITEBACK) || p.test(pg::DIRTY) {
            self.lruvec_add_folio(head);
            self.mem.pages[head.idx()].set(pg::RECLAIM);
        } else {
            self.lruvec_add_folio_tail(head);
            self.count_vm_events_folio(head, VmEvent::PgRotated, nr);
        }
        if active {
            self.count_vm_events_folio(head, VmEvent::PgDeactivate, nr);
        }
    }

    /// `lru_deactivate` (MADV_COLD): an active folio to the inactive list's head.
    fn lru_deactivate(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if p.test(pg::UNEVICTABLE) || !p.test(pg::ACTIVE) {
            return;
        }
        self.lruvec_del_folio(head);
        self.mem.pages[head.idx()].clear(pg::ACTIVE | pg::REFERENCED);
        self.lruvec_add_folio(head);
        let nr = self.folio_nr_pages(head) as i64;
        self.count_vm_events_folio(head, VmEvent::PgDeactivate, nr);
    }

    /// `lru_activate`: an inactive folio to the active list (pgactivate).
    fn lru_activate(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if p.test(pg::ACTIVE) || p.test(pg::UNEVICTABLE) {
            return;
        }
        self.lruvec_del_folio(head);
        self.mem.pages[head.idx()].set(pg::ACTIVE);
        self.lruvec_add_folio(head);
        let nr = self.folio_nr_pages(head) as i64;
        self.count_vm_events_folio(head, VmEvent::PgActivate, nr);
    }

    /// `folio_evictable`: not mlocked (mmsim has no unevictable mappings: ramfs and
    /// SHM_LOCK are not modelled).
    pub fn folio_evictable(&self, head: Pfn) -> bool {
        !self.mem.pages[head.idx()].test(pg::MLOCKED)
    }

    /// `folio_add_lru`: a folio not on the LRU joins it through this CPU's lru_add batch.
    pub fn folio_add_lru(&mut self, head: Pfn) {
        debug_assert!(!self.mem.pages[head.idx()].test(pg::LRU), "folio {:#x} already on the LRU", head.0);
        self.folio_batch_add_and_move(head, Fbatch::LruAdd);
    }

    /// `folio_add_lru_vma`: a new folio of a VM_LOCKED vma is mlocked (`mlock_new_folio`:
    /// through the mlock batch onto the unevictable list); any other joins the LRU.
    pub(super) fn folio_add_lru_vma(&mut self, head: Pfn, vma: &Vma) {
        if vma.flags & vm::LOCKED != 0 {
            self.mlock_new_folio(head);
        } else {
            self.folio_add_lru(head);
        }
    }

    /// `folio_putback_lru`: a folio isolated from the LRU goes back (through the batch) and
    /// the isolation's reference is dropped.
    pub fn folio_putback_lru(&mut self, head: Pfn) {
        self.folio_add_lru(head);
        self.folio_put(head);
    }

    /// `folio_activate`: queue an inactive folio on the LRU for the active list.
    pub fn folio_activate(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if p.test(pg::ACTIVE) || p.test(pg::UNEVICTABLE) || !p.test(pg::LRU) {
            return;
        }
        self.folio_batch_add_and_move(head, Fbatch::LruActivate);
    }

    /// `folio_deactivate` (MADV_COLD): queue an active folio for the inactive list.
    pub fn folio_deactivate(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if !p.test(pg::LRU) || p.test(pg::UNEVICTABLE) || !p.test(pg::ACTIVE) {
            return;
        }
        self.folio_batch_add_and_move(head, Fbatch::LruDeactivate);
    }

    /// `deactivate_file_folio`: an unmapped file folio invalidation could not drop.
    pub fn deactivate_file_folio(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if !p.test(pg::LRU) || p.test(pg::UNEVICTABLE) {
            return;
        }
        self.folio_batch_add_and_move(head, Fbatch::LruDeactivateFile);
    }

    /// `folio_rotate_reclaimable`: writeback ended on a folio reclaim wanted (PG_reclaim,
    /// cleared by the caller): to the inactive tail, unless it was dirtied meanwhile.
    pub fn folio_rotate_reclaimable(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if p.test(pg::DIRTY) || p.test(pg::UNEVICTABLE) || p.test(pg::LOCKED) || !p.test(pg::LRU) {
            return;
        }
        self.folio_batch_add_and_move(head, Fbatch::LruMoveTail);
    }

    /// Queue `head` on the lru_lazyfree batch (`folio_mark_lazyfree`; kernel/lazyfree.rs).
    pub(super) fn queue_lazyfree(&mut self, head: Pfn) {
        self.folio_batch_add_and_move(head, Fbatch::LruLazyfree);
    }

    /// `folio_mark_accessed`: inactive,unreferenced -> inactive,referenced -> active (queued
    /// for activation, or marked active in this CPU's lru_add batch), with
    /// `workingset_activation`.
    pub fn folio_mark_accessed(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if !p.test(pg::REFERENCED) {
            self.mem.pages[head.idx()].set(pg::REFERENCED);
        } else if p.test(pg::UNEVICTABLE) {
        } else if !p.test(pg::ACTIVE) {
            if p.test(pg::LRU) {
                self.folio_activate(head);
            } else {
                self.lru_cache_activate_folio(head);
            }
            self.mem.pages[head.idx()].clear(pg::REFERENCED);
            self.workingset_activation(head);
        }
    }

    /// `__lru_cache_activate_folio`: a folio still in this CPU's lru_add batch is marked
    /// active, so that the drain puts it on the active list.
    fn lru_cache_activate_folio(&mut self, head: Pfn) {
        let cpu = self.cur_cpu;
        let found =
            self.fbatches.get(cpu).is_some_and(|b| b.batches[Fbatch::LruAdd as usize].iter().rev().any(|&h| h == head));
        if found {
            self.mem.pages[head.idx()].set(pg::ACTIVE);
        }
    }

    /// `lru_add_drain`: this CPU's batches, then its mlock batch (`mlock_drain_local`).
    pub fn lru_add_drain(&mut self) {
        self.lru_add_drain_cpu(self.cur_cpu);
        self.mlock_drain_cpu(self.cur_cpu);
    }

    /// `lru_add_drain_cpu`.
    pub fn lru_add_drain_cpu(&mut self, cpu: usize) {
        if cpu >= self.fbatches.len() {
            return;
        }
        for which in Fbatch::ALL {
            if !self.fbatches[cpu].batches[which as usize].is_empty() {
                self.folio_batch_move_lru(cpu, which);
            }
        }
    }

    /// `lru_add_drain_all`: every CPU's batches (`lru_add_and_bh_lrus_drain` on each: its
    /// mlock batch too).
    pub fn lru_add_drain_all(&mut self) {
        for cpu in 0..self.fbatches.len() {
            self.lru_add_drain_cpu(cpu);
            self.mlock_drain_cpu(cpu);
        }
    }

    /// The folios the batches hold a reference on (a folio once per queueing).
    pub(super) fn fbatch_folios(&self) -> impl Iterator<Item = Pfn> + '_ {
        self.fbatches.iter().flat_map(|c| c.batches.iter().flatten().copied().chain(c.mlock.iter().map(|e| e.0)))
    }

    /// Whether a folio waits in a batch of `which` (tests).
    pub fn in_fbatch(&self, head: Pfn, which: Fbatch) -> bool {
        self.fbatches.iter().any(|c| c.batches[which as usize].contains(&head))
    }

    /// `lru_note_cost`: `nr_io` pages of I/O and `nr_rotated` pages put back cost this
    /// lruvec's type (and its ancestors'), each cost halved whenever the costs pass a quarter
    /// of the lruvec's evictable pages.
    pub fn lru_note_cost(&mut self, memcg: u16, file: bool, nr_io: u64, nr_rotated: u64) {
        let cost = nr_io * super::vmscan::SWAP_CLUSTER_MAX + nr_rotated;
        if cost == 0 {
            return;
        }
        let mut cur = Some(memcg);
        while let Some(c) = cur {
            let g = &mut self.memcg.groups[c as usize];
            let lv = &mut g.lruvec;
            if file {
                lv.file_cost += cost;
            } else {
                lv.anon_cost += cost;
            }
            if lv.file_cost + lv.anon_cost > lv.evictable_pages() / 4 {
                lv.file_cost /= 2;
                lv.anon_cost /= 2;
            }
            cur = g.parent;
        }
    }

    /// `count_vm_events` plus the folio's memcg's (`count_memcg_folio_events`).
    pub fn count_vm_events_folio(&mut self, head: Pfn, e: VmEvent, n: i64) {
        self.stat.count_n(e, n);
        let memcg = self.mem.pages[head.idx()].memcg;
        self.count_memcg_events(memcg, e, n);
    }

    /// Whether a folio is on an inactive list of `lru`'s type (tests).
    pub fn folio_on(&self, head: Pfn, lru: Lru) -> bool {
        self.mem.pages[head.idx()].test(pg::LRU) && self.folio_lru_list(head) == lru
    }
}
