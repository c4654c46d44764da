//! The LRU lists of one memory cgroup on the one node (`struct lruvec`, include/linux/mmzone.h)
//! and the list operations of include/linux/mm_inline.h: `folio_lru_list`, `lruvec_add_folio`,
//! `lruvec_add_folio_tail`, `lruvec_del_folio`, `update_lru_size`.
//!
//! A folio's head page links it into its list through `Page::next`/`prev` (Linux's `lru`
//! list_head, shared with the buddy lists). The list's head is its most recently added end;
//! reclaim takes folios from its tail. Unevictable folios are counted but not linked, as in
//! Linux. Differs from Linux: one node with one zone, so there are no per-zone sizes.

use super::mm_types::{pg, NIL};
use super::vmstat::VmItem;
use super::Kernel;
use crate::units::Pfn;

/// `enum lru_list`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lru {
    InactiveAnon = 0,
    ActiveAnon = 1,
    InactiveFile = 2,
    ActiveFile = 3,
    Unevictable = 4,
}

impl Lru {
    /// The evictable lists in `for_each_evictable_lru` order.
    pub const EVICTABLE: [Lru; 4] = [Lru::InactiveAnon, Lru::ActiveAnon, Lru::InactiveFile, Lru::ActiveFile];
    pub const ALL: [Lru; 5] =
        [Lru::InactiveAnon, Lru::ActiveAnon, Lru::InactiveFile, Lru::ActiveFile, Lru::Unevictable];

    /// `is_file_lru`.
    pub fn is_file(self) -> bool {
        matches!(self, Lru::InactiveFile | Lru::ActiveFile)
    }
    /// `is_active_lru`.
    pub fn is_active(self) -> bool {
        matches!(self, Lru::ActiveAnon | Lru::ActiveFile)
    }
    /// The list's name in tracepoints and `memory.stat` (`lru_list_name`).
    pub fn name(self) -> &'static str {
        ["inactive_anon", "active_anon", "inactive_file", "active_file", "unevictable"][self as usize]
    }
    /// The node stat counting its pages (`NR_LRU_BASE + lru`).
    pub fn item(self) -> VmItem {
        [
            VmItem::NrInactiveAnon,
            VmItem::NrActiveAnon,
            VmItem::NrInactiveFile,
            VmItem::NrActiveFile,
            VmItem::NrUnevictable,
        ][self as usize]
    }
    /// The inactive (`active` false) or active list of a type (`file`).
    pub fn of(file: bool, active: bool) -> Lru {
        match (file, active) {
            (false, false) => Lru::InactiveAnon,
            (false, true) => Lru::ActiveAnon,
            (true, false) => Lru::InactiveFile,
            (true, true) => Lru::ActiveFile,
        }
    }
}

/// One list's ends: head pages of folios, `NIL` when empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListHead {
    /// The most recently added folio (`list_first_entry`).
    pub head: u32,
    /// The least recently added folio, where reclaim isolates from (`lru_to_folio`).
    pub tail: u32,
}

impl Default for ListHead {
    fn default() -> Self {
        ListHead { head: NIL, tail: NIL }
    }
}

/// `struct lruvec` (classic LRU, no MGLRU).
#[derive(Clone, Debug, Default)]
pub struct Lruvec {
    /// The four evictable lists (the unevictable folios are only counted).
    pub lists: [ListHead; 4],
    /// Pages on each list, the unevictable one included (`lruvec_lru_size`).
    pub size: [u64; 5],
    /// `anon_cost`, `file_cost`: what reclaiming each type has cost lately (`lru_note_cost`).
    pub anon_cost: u64,
    pub file_cost: u64,
    /// `nonresident_age`: the workingset clock (mm/workingset.c).
    pub nonresident_age: u64,
    /// `refaults[]`: WORKINGSET_ACTIVATE_{ANON,FILE} when reclaim last finished here.
    pub refaults: [i64; 2],
}

impl Lruvec {
    /// Pages on the four evictable lists.
    pub fn evictable_pages(&self) -> u64 {
        self.size[..4].iter().sum()
    }
}

impl Kernel {
    /// `folio_test_swapbacked`: anonymous memory not made lazyfree, and shmem (tmpfs) folios.
    #[inline]
    pub fn folio_test_swapbacked(&self, head: Pfn) -> bool {
        let p = &self.mem.pages[head.idx()];
        (p.test(pg::ANON) && !p.test(pg::LAZYFREE)) || p.test(pg::SHMEM)
    }

    /// `folio_is_file_lru`.
    #[inline]
    pub fn folio_is_file_lru(&self, head: Pfn) -> bool {
        !self.folio_test_swapbacked(head)
    }

    /// `folio_lru_list`: the list a folio belongs on by its flags.
    pub fn folio_lru_list(&self, head: Pfn) -> Lru {
        let p = &self.mem.pages[head.idx()];
        if p.test(pg::UNEVICTABLE) {
            return Lru::Unevictable;
        }
        Lru::of(self.folio_is_file_lru(head), p.test(pg::ACTIVE))
    }

    /// `update_lru_size`: pages of `lru` in the folio's memcg (and its ancestors' totals) and
    /// the node.
    fn update_lru_size(&mut self, memcg: u16, lru: Lru, nr: i64) {
        let lv = &mut self.memcg.groups[memcg as usize].lruvec;
        lv.size[lru as usize] = (lv.size[lru as usize] as i64 + nr) as u64;
        self.mod_memcg_item(memcg, lru.item(), nr);
        self.stat.mod_item(lru.item(), nr);
    }

    /// `lruvec_add_folio`: onto the head of its list (counted only, if unevictable).
    pub fn lruvec_add_folio(&mut self, head: Pfn) {
        self.lruvec_add(head, false)
    }

    /// `lruvec_add_folio_tail`: onto the tail of its list, next to be reclaimed.
    pub fn lruvec_add_folio_tail(&mut self, head: Pfn) {
        self.lruvec_add(head, true)
    }

    fn lruvec_add(&mut self, head: Pfn, tail: bool) {
        let lru = self.folio_lru_list(head);
        let nr = self.folio_nr_pages(head) as i64;
        let memcg = self.mem.pages[head.idx()].memcg;
        self.update_lru_size(memcg, lru, nr);
        if lru == Lru::Unevictable {
            return;
        }
        let pages = &mut self.mem.pages;
        let list = &mut self.memcg.groups[memcg as usize].lruvec.lists[lru as usize];
        let h = head.0;
        if list.head == NIL {
            pages[h as usize].next = NIL;
            pages[h as usize].prev = NIL;
            list.head = h;
            list.tail = h;
        } else if tail {
            pages[h as usize].prev = list.tail;
            pages[h as usize].next = NIL;
            pages[list.tail as usize].next = h;
            list.tail = h;
        } else {
            pages[h as usize].next = list.head;
            pages[h as usize].prev = NIL;
            pages[list.head as usize].prev = h;
            list.head = h;
        }
    }

    /// Add `new` to the list `at` is on, just before it (towards the list's head), as
    /// `list_add_tail(&new->lru, &at->lru)` does.
    pub fn lruvec_add_folio_before(&mut self, new: Pfn, at: Pfn) {
        let lru = self.folio_lru_list(new);
        let nr = self.folio_nr_pages(new) as i64;
        let memcg = self.mem.pages[new.idx()].memcg;
        self.update_lru_size(memcg, lru, nr);
        if lru == Lru::Unevictable {
            return;
        }
        let prev = self.mem.pages[at.idx()].prev;
        let pages = &mut self.mem.pages;
        pages[new.idx()].next = at.0;
        pages[new.idx()].prev = prev;
        pages[at.idx()].prev = new.0;
        if prev == NIL {
            self.memcg.groups[memcg as usize].lruvec.lists[lru as usize].head = new.0;
        } else {
            self.mem.pages[prev as usize].next = new.0;
        }
    }

    /// `lruvec_del_folio`: off the list it is on by its flags.
    pub fn lruvec_del_folio(&mut self, head: Pfn) {
        let lru = self.folio_lru_list(head);
        let nr = self.folio_nr_pages(head) as i64;
        let memcg = self.mem.pages[head.idx()].memcg;
        self.update_lru_size(memcg, lru, -nr);
        if lru == Lru::Unevictable {
            return;
        }
        let pages = &mut self.mem.pages;
        let list = &mut self.memcg.groups[memcg as usize].lruvec.lists[lru as usize];
        let (n, p) = (pages[head.idx()].next, pages[head.idx()].prev);
        if p == NIL {
            list.head = n;
        } else {
            pages[p as usize].next = n;
        }
        if n == NIL {
            list.tail = p;
        } else {
            pages[n as usize].prev = p;
        }
        pages[head.idx()].next = NIL;
        pages[head.idx()].prev = NIL;
    }

    /// The folio at the tail of `lru` in memcg `memcg`'s lruvec (None: empty).
    pub fn lru_tail(&self, memcg: u16, lru: Lru) -> Option<Pfn> {
        let t = self.memcg.groups[memcg as usize].lruvec.lists[lru as usize].tail;
        (t != NIL).then_some(Pfn(t))
    }

    /// The folios of `lru` in memcg `memcg`, head to tail (tests and invariant checks).
    pub fn lru_folios(&self, memcg: u16, lru: Lru) -> Vec<Pfn> {
        let mut v = Vec::new();
        if lru == Lru::Unevictable {
            return v;
        }
        let mut p = self.memcg.groups[memcg as usize].lruvec.lists[lru as usize].head;
        while p != NIL {
            v.push(Pfn(p));
            p = self.mem.pages[p as usize].next;
        }
        v
    }
}
