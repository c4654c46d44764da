//! Invariants of the memory manager, recounted from first principles (the page tables, the
//! shmem objects and the free lists) and compared with what the kernel keeps incrementally:
//! frame conservation, refcounts and mapcounts, rss, VmPTE, and the vmstat items. mmsim's
//! analogue of CONFIG_DEBUG_VM checks, cheap enough to run after every operation on small
//! machines.

use std::collections::HashMap;

use super::mm::MmCounter;
use super::mm_types::{pg, NIL};
use super::vmstat::VmItem;
use super::{Kernel, MmId};
use crate::units::{Pfn, HPAGE_PMD_NR, PAGE_SIZE};

/// Who owns a frame, as found by the recount.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Owner {
    None,
    Free,
    Reserved,
    Table,
    Folio,
    HugeZero,
}

#[derive(Default)]
struct Counts {
    /// PTE mappings per base page.
    pte_maps: HashMap<u32, i32>,
    /// PMD mappings per folio head.
    pmd_maps: HashMap<u32, i32>,
    tables: Vec<u32>,
    /// Pmds mapping the huge zero folio.
    hzp_pmds: u64,
}

impl Kernel {
    /// Check every invariant; Err describes the first violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.mem.nr_pages() as usize;
        let mut owner = vec![Owner::None; n];
        let claim = |pfn: u32, o: Owner, owner: &mut Vec<Owner>| -> Result<(), String> {
            let cur = owner[pfn as usize];
            if cur != Owner::None {
                return Err(format!("frame {pfn:#x} owned twice: {cur:?} and {o:?}"));
            }
            owner[pfn as usize] = o;
            Ok(())
        };
        let mut free_total = 0;
        for (pfn, order, _z) in self.mem.free_blocks() {
            for i in 0..1u32 << order {
                claim(pfn + i, Owner::Free, &mut owner)?;
            }
            free_total += 1u64 << order;
        }
        if free_total != self.mem.free_pages {
            return Err(format!("free lists hold {free_total} pages, counter says {}", self.mem.free_pages));
        }
        for p in 0..self.mem.reserved as u32 {
            claim(p, Owner::Reserved, &mut owner)?;
        }
        if let Some(z) = self.huge_zero.pfn {
            for i in 0..HPAGE_PMD_NR as u32 {
                claim(z.0 + i, Owner::HugeZero, &mut owner)?;
            }
        }
        let mut counts = Counts::default();
        let mut nr_tables = 0i64;
        let mut hzp_pmds = 0u64;
        for (id, m) in self.mms.iter().enumerate() {
            let Some(m) = m else { continue };
            let id = id as MmId;
            let mut c = Counts::default();
            let mut rss = [0i64; 3];
            self.recount_table(m.pgd, 3, 0, &mut c, &mut rss)?;
            let pgtables = (c.tables.len() as i64 - 1) * PAGE_SIZE as i64;
            if pgtables != m.pgtables_bytes {
                return Err(format!("mm {id}: VmPTE recount {pgtables} bytes, kernel says {}", m.pgtables_bytes));
            }
            if rss != m.rss {
                return Err(format!("mm {id}: rss recount {rss:?} (file, anon, shmem), kernel says {:?}", m.rss));
            }
            nr_tables += c.tables.len() as i64;
            hzp_pmds += c.hzp_pmds;
            for t in c.tables.drain(..) {
                claim(t, Owner::Table, &mut owner)?;
            }
            for (k, v) in c.pte_maps {
                *counts.pte_maps.entry(k).or_default() += v;
            }
            for (k, v) in c.pmd_maps {
                *counts.pmd_maps.entry(k).or_default() += v;
            }
        }
        if let Some(want) = self.huge_zero_expected_refcount(hzp_pmds) {
            if want != self.huge_zero.refcount {
                return Err(format!(
                    "huge zero refcount {} but {want} expected ({hzp_pmds} huge zero pmds, policy {:?})",
                    self.huge_zero.refcount, self.knobs.hzp_refcount
                ));
            }
        }
        if hzp_pmds > 0 && self.huge_zero.pfn.is_none() {
            return Err(format!("{hzp_pmds} pmds map a huge zero page that is not allocated"));
        }
        if nr_tables != self.stat.items[VmItem::NrPageTablePages] {
            return Err(format!(
                "nr_page_table_pages: recount {nr_tables}, kernel says {}",
                self.stat.items[VmItem::NrPageTablePages]
            ));
        }
        // Shmem page caches.
        let mut cache_refs: HashMap<u32, i32> = HashMap::new();
        let mut nr_shmem = 0;
        for o in self.shmem.iter().flatten() {
            for &p in &o.pages {
                if p != NIL {
                    cache_refs.insert(p, 1);
                    nr_shmem += 1;
                }
            }
        }
        if nr_shmem != self.stat.items[VmItem::NrShmem] {
            return Err(format!("nr_shmem: recount {nr_shmem}, kernel says {}", self.stat.items[VmItem::NrShmem]));
        }
        // Every other allocated frame belongs to a folio; check its counts.
        let mut anon_mapped = 0i64;
        let mut anon_thps = 0i64;
        let mut pfn = 0usize;
        while pfn < n {
            if owner[pfn] != Owner::None {
                pfn += 1;
                continue;
            }
            let p = &self.mem.pages[pfn];
            if p.test(pg::TAIL) || p.head != pfn as u32 {
                return Err(format!("frame {pfn:#x} is allocated but belongs to nothing (head {:#x})", p.head));
            }
            let nr = if p.test(pg::HEAD) { 1usize << p.order } else { 1 };
            let pmd = counts.pmd_maps.get(&(pfn as u32)).copied().unwrap_or(0);
            if p.entire_mapcount != pmd {
                return Err(format!("folio {pfn:#x}: entire_mapcount {} but {pmd} pmds map it", p.entire_mapcount));
            }
            let mut refs = pmd + cache_refs.get(&(pfn as u32)).copied().unwrap_or(0);
            let mut mapped_any = false;
            for i in 0..nr {
                let sp = &self.mem.pages[pfn + i];
                let m = counts.pte_maps.get(&((pfn + i) as u32)).copied().unwrap_or(0);
                if sp.mapcount != m {
                    return Err(format!("page {:#x}: mapcount {} but {m} ptes map it", pfn + i, sp.mapcount));
                }
                refs += m;
                if sp.test(pg::ANON) && (m > 0 || pmd > 0) {
                    anon_mapped += 1;
                }
                mapped_any |= m > 0;
                owner[pfn + i] = Owner::Folio;
            }
            if pmd > 0 && p.test(pg::ANON) {
                anon_thps += 1;
            }
            if refs == 0 {
                return Err(format!("folio {pfn:#x} ({nr} pages) is allocated but unreferenced (leak)"));
            }
            if p.refcount != refs {
                return Err(format!("folio {pfn:#x}: refcount {} but {refs} references found", p.refcount));
            }
            let _ = mapped_any;
            pfn += nr;
        }
        if anon_mapped != self.stat.items[VmItem::NrAnonPages] {
            return Err(format!(
                "nr_anon_pages: recount {anon_mapped}, kernel says {}",
                self.stat.items[VmItem::NrAnonPages]
            ));
        }
        if anon_thps != self.stat.items[VmItem::NrAnonThps] {
            return Err(format!(
                "nr_anon_transparent_hugepages: recount {anon_thps}, kernel says {}",
                self.stat.items[VmItem::NrAnonThps]
            ));
        }
        Ok(())
    }

    /// Walk one table recursively, recording mappings, tables and rss.
    fn recount_table(
        &self,
        table: Pfn,
        level: u32,
        _base: u64,
        c: &mut Counts,
        rss: &mut [i64; 3],
    ) -> Result<(), String> {
        c.tables.push(table.0);
        if !self.mem.pages[table.idx()].test(pg::TABLE) {
            return Err(format!("frame {:#x} used as a {} table lacks PG_table", table.0, level));
        }
        for i in 0..512 {
            let e = self.entry(table, i);
            if !e.present() {
                continue;
            }
            if level == 0 {
                if e.special() {
                    if !self.is_zero_pfn(e.pfn()) {
                        return Err(format!("special pte to {:#x}, not the zero page", e.pfn().0));
                    }
                    continue;
                }
                *c.pte_maps.entry(e.pfn().0).or_default() += 1;
                let ctr = self.mm_counter(e.pfn());
                rss[ctr as usize] += 1;
            } else if level == 1 && e.huge() {
                let dep = self
                    .deposited
                    .get(&(table.0, i as u16))
                    .ok_or_else(|| format!("huge pmd {:#x}[{i}] has no deposited table", table.0))?;
                c.tables.push(*dep);
                if self.is_huge_zero_pmd(e) {
                    c.hzp_pmds += 1;
                    continue;
                }
                *c.pmd_maps.entry(e.pfn().0).or_default() += 1;
                rss[MmCounter::AnonPages as usize] += HPAGE_PMD_NR as i64;
            } else if level > 0 {
                self.recount_table(e.pfn(), level - 1, 0, c, rss)?;
            }
        }
        Ok(())
    }
}
