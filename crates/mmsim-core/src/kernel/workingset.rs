//! Workingset detection (mm/workingset.c, classic LRU): each lruvec's nonresident clock
//! (`nonresident_age`), the shadow entry an evicted folio leaves in the page cache or swap
//! cache (`workingset_eviction`: the reclaim target's clock, its memcg, PG_workingset), and
//! the refault test (`workingset_refault`, `workingset_test_recent`): a folio back within a
//! refault distance no larger than the workingset it competes with goes straight to the
//! active list.
//!
//! Differs from Linux: no NUMA node in the shadow and no bucket_order (the clock never passes
//! its 45 bits); shadows are not reclaimed by a shrinker (page-cache shadows go when their
//! file does, swap-cache shadows when their slot is freed).

use super::lruvec::Lru;
use super::mm_types::pg;
use super::vmstat::VmItem;
use super::Kernel;
use crate::units::Pfn;

/// Bits of the eviction timestamp in a shadow.
const EVICTION_BITS: u32 = 45;
const EVICTION_MASK: u64 = (1 << EVICTION_BITS) - 1;

/// `pack_shadow`.
pub fn pack_shadow(memcg: u16, eviction: u64, workingset: bool) -> u64 {
    ((eviction & EVICTION_MASK) << 17) | (memcg as u64) << 1 | workingset as u64
}

/// `unpack_shadow`: (memcg, eviction, workingset).
pub fn unpack_shadow(s: u64) -> (u16, u64, bool) {
    ((s >> 1) as u16, s >> 17, s & 1 != 0)
}

impl Kernel {
    /// `workingset_age_nonresident`: the clock of `memcg`'s lruvec and its ancestors' moves
    /// on by `nr` pages.
    pub fn workingset_age_nonresident(&mut self, memcg: u16, nr: u64) {
        let mut cur = Some(memcg);
        while let Some(c) = cur {
            let g = &mut self.memcg.groups[c as usize];
            g.lruvec.nonresident_age += nr;
            cur = g.parent;
        }
    }

    /// `workingset_eviction`: the shadow a folio evicted by reclaim of `target` (None:
    /// global) leaves: that lruvec's clock before it moves on by the folio's pages.
    pub fn workingset_eviction(&mut self, head: Pfn, target: Option<u16>) -> u64 {
        let memcg = target.unwrap_or(super::memcontrol::ROOT_MEMCG);
        let eviction = self.memcg.groups[memcg as usize].lruvec.nonresident_age;
        let nr = self.folio_nr_pages(head);
        self.workingset_age_nonresident(memcg, nr);
        pack_shadow(memcg, eviction, self.mem.pages[head.idx()].test(pg::WORKINGSET))
    }

    /// `workingset_test_recent`: whether a folio evicted with `shadow` refaults within the
    /// workingset it competes with (the active file list, plus the inactive file list for
    /// anonymous memory, plus anonymous memory when there is swap for it).
    fn workingset_test_recent(&mut self, shadow: u64, file: bool) -> bool {
        let (memcg, eviction, _) = unpack_shadow(shadow);
        if memcg as usize >= self.memcg.groups.len() {
            return false;
        }
        self.mem_cgroup_flush_stats_ratelimited();
        let age = self.memcg.groups[memcg as usize].lruvec.nonresident_age;
        let distance = age.wrapping_sub(eviction) & EVICTION_MASK;
        let st = |l: Lru| self.memcg.groups[memcg as usize].flushed.items[l.item()].max(0) as u64;
        let mut ws = st(Lru::ActiveFile);
        if !file {
            ws += st(Lru::InactiveFile);
        }
        if self.mem_cgroup_get_nr_swap_pages(memcg) > 0 {
            ws += st(Lru::ActiveAnon);
            if file {
                ws += st(Lru::InactiveAnon);
            }
        }
        distance <= ws
    }

    /// `workingset_refault`: a folio comes back where a shadow was: counted, and activated
    /// (before it joins the LRU) if it was evicted recently enough; restored workingset pages
    /// count as the cost of reclaiming their type.
    pub fn workingset_refault(&mut self, head: Pfn, shadow: u64) {
        let file = self.folio_is_file_lru(head);
        let nr = self.folio_nr_pages(head);
        let memcg = self.mem.pages[head.idx()].memcg;
        let item = if file { VmItem::WorkingsetRefaultFile } else { VmItem::WorkingsetRefaultAnon };
        self.mod_lruvec_item(head, item, nr as i64);
        if !self.workingset_test_recent(shadow, file) {
            return;
        }
        self.mem.pages[head.idx()].set(pg::ACTIVE);
        self.workingset_age_nonresident(memcg, nr);
        let item = if file { VmItem::WorkingsetActivateFile } else { VmItem::WorkingsetActivateAnon };
        self.mod_lruvec_item(head, item, nr as i64);
        if unpack_shadow(shadow).2 {
            self.mem.pages[head.idx()].set(pg::WORKINGSET);
            self.lru_note_cost(memcg, file, nr, 0);
            let item = if file { VmItem::WorkingsetRestoreFile } else { VmItem::WorkingsetRestoreAnon };
            self.mod_lruvec_item(head, item, nr as i64);
        }
    }

    /// `workingset_activation`: `folio_mark_accessed` promoted a folio: the clock moves on.
    pub fn workingset_activation(&mut self, head: Pfn) {
        let memcg = self.mem.pages[head.idx()].memcg;
        let nr = self.folio_nr_pages(head);
        self.workingset_age_nonresident(memcg, nr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadows_round_trip() {
        for (m, e, w) in [(0u16, 0u64, false), (7, 123_456_789, true), (u16::MAX, EVICTION_MASK, true)] {
            assert_eq!(unpack_shadow(pack_shadow(m, e, w)), (m, e, w));
        }
    }
}
