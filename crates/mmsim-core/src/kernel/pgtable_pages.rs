//! Page-table pages: allocating and freeing them (`pte_alloc_one`, `pte_free`) and reading and
//! writing their entries, which live in the table pool or, for a PTE table mapping one shmem
//! object's pages with common flags, in a compact form (`ObjTable`) expanded on the first entry
//! that does not fit.

use super::mm_types::{pg, FrameData, ObjTable};
use super::page_alloc::gfp;
use super::pgtable::{self, Entry};
use super::vmstat::VmItem;
use super::{Kernel, MmId};
use crate::units::Pfn;

impl Kernel {
    /// Read entry `idx` of the table in frame `table`.
    #[inline]
    pub fn entry(&self, table: Pfn, idx: usize) -> Entry {
        match &self.mem.data[table.idx()] {
            FrameData::Table(s) => Entry(self.mem.table_entry(*s, idx)),
            FrameData::EmptyTable => Entry::NONE,
            FrameData::ObjTable(s) => self.obj_table_entry(*s, idx),
            _ => panic!("frame {:#x} is not a page table", table.0),
        }
    }

    /// Entry `idx` of `table` is present, and writable if `write`: `entry(..).present()` (and
    /// `.write()`) without looking up the page of a compact table's entry.
    #[inline]
    pub fn entry_present(&self, table: Pfn, idx: usize, write: bool) -> bool {
        match &self.mem.data[table.idx()] {
            FrameData::ObjTable(s) => {
                let t = &self.mem.obj_tables[*s as usize];
                let (w, b) = (idx / 64, 1u64 << (idx % 64));
                t.present[w] & b != 0 && (!write || t.write[w] & b != 0)
            }
            _ => {
                let e = self.entry(table, idx);
                e.present() && (!write || e.write())
            }
        }
    }

    /// The present entries of `table`, (index, entry) in index order: what a loop over
    /// `entry(table, i)` skipping the others finds, without decoding the empty ones (the
    /// invariant checks walk every table).
    pub fn present_entries(&self, table: Pfn) -> PresentEntries<'_> {
        let src = match &self.mem.data[table.idx()] {
            FrameData::Table(s) => EntrySource::Slots(self.mem.table_slot_entries(*s)),
            FrameData::EmptyTable => EntrySource::Slots(&[]),
            FrameData::ObjTable(s) => EntrySource::Obj(*s, self.mem.obj_tables[*s as usize].present),
            _ => panic!("frame {:#x} is not a page table", table.0),
        };
        PresentEntries { k: self, src, i: 0 }
    }

    /// The swap ptes of a PTE table (a compact table holds none).
    pub fn swap_entries(&self, table: Pfn) -> impl Iterator<Item = (usize, Entry)> + '_ {
        let slots: &[u64] = match &self.mem.data[table.idx()] {
            FrameData::Table(s) => self.mem.table_slot_entries(*s),
            _ => &[],
        };
        slots.iter().enumerate().map(|(i, &e)| (i, Entry(e))).filter(|(_, e)| e.is_swap())
    }

    /// Entry `idx` of a compact table: the object's page, its flags and its own bits.
    #[inline]
    fn obj_table_entry(&self, slot: u32, idx: usize) -> Entry {
        let t = &self.mem.obj_tables[slot as usize];
        let (w, b) = (idx / 64, 1u64 << (idx % 64));
        if t.present[w] & b == 0 {
            return Entry::NONE;
        }
        let page = self.shmem[t.obj as usize]
            .as_ref()
            .expect("the object of a compact table")
            .pages
            .load(t.base.wrapping_add(idx as u64));
        let mut e = Entry::new(Pfn(page), t.flags);
        for (bits, bit) in [(&t.accessed, pgtable::ACCESSED), (&t.dirty, pgtable::DIRTY), (&t.write, pgtable::RW)] {
            if bits[w] & b != 0 {
                e = e.with(bit);
            }
        }
        e
    }

    /// The compact form's (object, base, flags) for entry `e` at `idx`, if `e` maps a page of
    /// a shmem object (the only pages a compact table holds).
    fn obj_table_fit(&self, idx: usize, e: Entry) -> Option<(u32, u64, u64)> {
        if self.geo.ptrs_per_table() != ObjTable::ENTRIES || !e.present() || e.special() || e.huge() {
            return None;
        }
        let p = &self.mem.pages[e.pfn().idx()];
        if !p.test(pg::SHMEM) {
            return None;
        }
        Some((p.mapping, p.index.wrapping_sub(idx as u64), e.0 & !ObjTable::VARYING))
    }

    /// Write entry `idx` of the table in frame `table` (set_pte_at / set_pmd_at).
    #[inline]
    pub fn set_entry(&mut self, table: Pfn, idx: usize, e: Entry) {
        match self.mem.data[table.idx()] {
            FrameData::Table(s) => *self.mem.table_entry_mut(s, idx) = e.0,
            FrameData::EmptyTable => {
                if e.0 != 0 {
                    if let Some((obj, base, flags)) = self.obj_table_fit(idx, e) {
                        let s = self.mem.take_obj_table(table.idx(), obj, base, flags);
                        self.set_obj_entry(s, idx, e);
                        return;
                    }
                    let s = self.mem.take_table(table.idx());
                    *self.mem.table_entry_mut(s, idx) = e.0;
                }
            }
            FrameData::ObjTable(s) => {
                let t = &self.mem.obj_tables[s as usize];
                let fits = e.none()
                    || self.obj_table_fit(idx, e).is_some_and(|(o, b, f)| o == t.obj && b == t.base && f == t.flags);
                if fits {
                    self.set_obj_entry(s, idx, e);
                } else {
                    // Not one of the object's pages with the table's flags: a full table.
                    let entries: Vec<u64> = (0..ObjTable::ENTRIES).map(|i| self.obj_table_entry(s, i).0).collect();
                    let s = self.mem.expand_obj_table(table.idx(), &entries);
                    *self.mem.table_entry_mut(s, idx) = e.0;
                }
            }
            _ => panic!("frame {:#x} is not a page table", table.0),
        }
    }

    /// Set entry `idx` of a compact table to `e` (none, or one that fits it).
    #[inline]
    fn set_obj_entry(&mut self, slot: u32, idx: usize, e: Entry) {
        let t = &mut self.mem.obj_tables[slot as usize];
        let (w, b) = (idx / 64, 1u64 << (idx % 64));
        for (bits, on) in [
            (&mut t.present, !e.none()),
            (&mut t.accessed, e.has(pgtable::ACCESSED)),
            (&mut t.dirty, e.has(pgtable::DIRTY)),
            (&mut t.write, e.has(pgtable::RW)),
        ] {
            if on {
                bits[w] |= b;
            } else {
                bits[w] &= !b;
            }
        }
    }

    /// `pagetable_alloc` + the level's ctor: a zeroed table page, counted in NR_PAGETABLE and,
    /// below the PGD, in the mm's pgtables_bytes (mm_inc_nr_ptes/pmds/puds).
    pub fn pte_alloc_one(&mut self, mm: Option<MmId>) -> Option<Pfn> {
        let memcg = mm.map_or(super::memcontrol::ROOT_MEMCG, |m| self.mm(m).memcg);
        self.pt_alloc_charged(mm, memcg)
    }

    /// `pgd_alloc`: a new mm's top table, charged to `memcg` (the current task's).
    pub fn pgd_alloc(&mut self, memcg: u16) -> Option<Pfn> {
        self.pt_alloc_charged(None, memcg)
    }

    /// A zeroed page-table page charged to `memcg` (and counted in `mm`'s page tables).
    fn pt_alloc_charged(&mut self, mm: Option<MmId>, memcg: u16) -> Option<Pfn> {
        let a = self.alloc_pages(0, gfp::ZERO | gfp::KERNEL | gfp::TABLE)?;
        // GFP_PGTABLE_USER's __GFP_ACCOUNT: charged to the memcg as kernel memory.
        self.mem.pages[a.pfn.idx()].memcg = super::memcontrol::NO_MEMCG;
        if self.memcg_kmem_charge_page(a.pfn, memcg, gfp::KERNEL).is_err() {
            self.mem.pages[a.pfn.idx()].refcount = 0;
            self.free_pages_ok(a.pfn, 0);
            self.free_unref_page();
            return None;
        }
        let p = &mut self.mem.pages[a.pfn.idx()];
        p.set(pg::TABLE);
        self.mem.set_data(a.pfn.idx(), FrameData::EmptyTable);
        self.stat.mod_item(VmItem::NrPageTablePages, 1);
        self.mod_memcg_item(memcg, VmItem::NrPageTablePages, 1);
        if let Some(mm) = mm {
            self.mm_mut(mm).pgtables_bytes += self.geo.page_size() as i64;
        }
        Some(a.pfn)
    }

    /// `pagetable_free` + dtor; `mm` is given for tables counted in pgtables_bytes.
    pub fn pte_free(&mut self, mm: Option<MmId>, table: Pfn) {
        debug_assert!(self.mem.pages[table.idx()].test(pg::TABLE));
        if let Some(m) = mm {
            self.pt_table_freed(table, m);
        }
        self.mem.pages[table.idx()].mapcount = 0;
        self.mem.pages[table.idx()].clear(pg::TABLE);
        let memcg = self.mem.pages[table.idx()].memcg;
        self.mod_memcg_item(memcg, VmItem::NrPageTablePages, -1);
        self.memcg_kmem_uncharge_page(table);
        self.stat.mod_item(VmItem::NrPageTablePages, -1);
        if let Some(mm) = mm {
            self.mm_mut(mm).pgtables_bytes -= self.geo.page_size() as i64;
        }
        self.mem.pages[table.idx()].refcount = 0;
        self.free_pages_ok(table, 0);
        self.free_unref_page();
    }
}

/// Where [`Kernel::present_entries`] reads a table's entries from.
enum EntrySource<'a> {
    /// A table's slot in the pool.
    Slots(&'a [u64]),
    /// A compact table (its slot) and the present bits not yet visited.
    Obj(u32, [u64; 8]),
}

/// The iterator of [`Kernel::present_entries`].
pub struct PresentEntries<'a> {
    k: &'a Kernel,
    src: EntrySource<'a>,
    /// Next slot index to look at (`Slots`).
    i: usize,
}

impl Iterator for PresentEntries<'_> {
    type Item = (usize, pgtable::Entry);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.src {
            EntrySource::Slots(slots) => {
                while self.i < slots.len() {
                    let (i, e) = (self.i, pgtable::Entry(slots[self.i]));
                    self.i += 1;
                    if e.present() {
                        return Some((i, e));
                    }
                }
                None
            }
            EntrySource::Obj(slot, bits) => {
                let w = bits.iter().position(|&b| b != 0)?;
                let i = w * 64 + bits[w].trailing_zeros() as usize;
                bits[w] &= bits[w] - 1;
                Some((i, self.k.obj_table_entry(*slot, i)))
            }
        }
    }
}
