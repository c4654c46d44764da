//! The MMU's page walk, in software: translate a user address through the four levels,
//! checking present and write bits and setting accessed/dirty as the hardware does. A miss is
//! a page fault for `do_user_addr_fault`. (The timed walker with TLBs and page-walk caches
//! sits on top of this in the hardware model.)

use super::pgtable::{self, Entry};
use super::{Kernel, MmId};
use crate::units::Pfn;

impl Kernel {
    /// Translate `addr` for a read or write; None means the access faults.
    #[inline]
    pub fn translate(&mut self, mm: MmId, addr: u64, write: bool) -> Option<Pfn> {
        let pgd = self.mm(mm).pgd;
        let pude = self.entry(pgd, self.geo.table_index(addr, 3));
        if !pude.hw_present() {
            return None;
        }
        let pmde_t = self.entry(pude.pfn(), self.geo.table_index(addr, 2));
        if !pmde_t.hw_present() {
            return None;
        }
        let pmd_table = pmde_t.pfn();
        let pidx = self.geo.table_index(addr, 1);
        let pmd = self.entry(pmd_table, pidx);
        if !pmd.hw_present() {
            return None;
        }
        if pmd.huge() {
            if write && !pmd.write() {
                return None;
            }
            self.set_entry(pmd_table, pidx, young_dirty(pmd, write));
            let sub = self.geo.table_index(addr, 0) as u32;
            return Some(Pfn(pmd.pfn().0 + sub));
        }
        let table = pmd.pfn();
        let idx = self.geo.table_index(addr, 0);
        let pte = self.entry(table, idx);
        if !pte.hw_present() || (write && !pte.write()) {
            return None;
        }
        let ne = young_dirty(pte, write);
        if ne != pte {
            self.set_entry(table, idx, ne);
        }
        Some(pte.pfn())
    }
}

#[inline]
fn young_dirty(e: Entry, write: bool) -> Entry {
    let e = e.with(pgtable::ACCESSED);
    if write {
        e.with(pgtable::DIRTY)
    } else {
        e
    }
}
