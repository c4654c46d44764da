//! One CPU's TLBs (split L1 iTLB/dTLB per page size, a unified second-level TLB) and its
//! paging-structure caches. Entries hold the translation (the leaf entry with the frame of the
//! 4 KiB piece or huge page), so a missing flush shows up as a stale read, as on hardware.

use super::assoc::SetAssoc;
use super::profile::{replacement, ArraySpec, TlbSpec};
use crate::units::Geometry;

/// Page sizes a TLB entry can map: a base page, a PMD's range, a PUD's range (x86-64: 4 KiB,
/// 2 MiB, 1 GiB; ia64 with 16 KiB pages: 16 KiB, 32 MiB, 64 GiB). The profile's arrays keep
/// x86's names (`dtlb_4k`, `dtlb_2m`, `dtlb_1g`) for the three classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageSize {
    Base = 0,
    Pmd = 1,
    Pud = 2,
}

/// Where a translation was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbHit {
    L1,
    Stlb,
}

/// Bits of a key: 12 of address-space id above the page number.
const ASID_SHIFT: u32 = 50;
const SIZE_SHIFT: u32 = 48;

/// Page-size class of a key (`PageSize as u64`).
#[inline]
fn key_size(k: u64) -> u64 {
    (k >> SIZE_SHIFT) & 3
}

/// Asid of a key.
#[inline]
fn key_asid(k: u64) -> u32 {
    (k >> ASID_SHIFT) as u32
}

fn array(name: &str, a: &ArraySpec) -> SetAssoc {
    SetAssoc::new(a.entries, a.ways, replacement(name, &a.replacement).expect("validated")).expect("validated")
}

/// The TLB hierarchy of one CPU.
#[derive(Clone, Debug)]
pub struct Tlb {
    /// L1 instruction TLB, per size (4K, 2M).
    pub itlb: [SetAssoc; 2],
    /// L1 data TLB, per size (4K, 2M, 1G).
    pub dtlb: [SetAssoc; 3],
    pub stlb: SetAssoc,
    pub stlb_2m: bool,
    /// Entries of the STLB that map a PMD's range (a lookup of a 4 KiB-only address space
    /// need not look for one).
    stlb_pmd: u64,
    /// Paging-structure caches: PML4E (by VA[47:39]), PDPTE (VA[47:30]), PDE (VA[47:21]).
    pub pwc: [SetAssoc; 3],
    /// log2 of the bytes each PageSize maps (the geometry's PAGE_SHIFT, PMD_SHIFT, PUD_SHIFT).
    size_shift: [u32; 3],
    /// log2 of the range each paging-structure cache entry covers (PGDIR, PUD, PMD shifts).
    pwc_shift: [u32; 3],
    /// A bit per bucket of address-space ids (the id modulo 4096) that may have entries
    /// here: set by every fill, cleared by a flush that leaves no entry of the bucket. An id
    /// whose bucket's bit is clear has none, so `flush_asid` skips its scan (the scan would
    /// remove nothing; the arrays are as they would be either way). Fixed size: a fill
    /// allocates nothing.
    maybe_present: [u64; PRESENT_WORDS],
    /// Bumped whenever an entry joins or leaves the L1 arrays or the STLB (what a lookup's
    /// answer depends on; a hit's recency change is not one).
    gen: u64,
    /// The last lookup that found nothing: (asid, base page, instruction side, `gen` then). The
    /// same lookup again before anything joins or leaves finds nothing again (the access retried
    /// after its fault), so it is answered at once.
    last_miss: (u32, u64, bool, u64),
    /// Each side's (data, instruction) last lookup when it hit an L1 array: (asid, base page,
    /// `gen` then, the answer). The same lookup again, with no lookup of that side between and
    /// nothing joined or left, finds the same entry, and its hit changes nothing (the entry is
    /// already the most recent of its set under LRU; FIFO and random hits change nothing), so
    /// it is answered at once: the arrays end as a full lookup would leave them.
    last_hit: [(u32, u64, u64, PageSize, u64); 2],
}

/// Words of `Tlb::maybe_present`: 4096 buckets of address-space ids.
const PRESENT_WORDS: usize = 64;

/// The word and bit of `asid`'s bucket in `Tlb::maybe_present`.
#[inline(always)]
fn present_bit(asid: u32) -> (usize, u32) {
    let bucket = asid as usize % (PRESENT_WORDS * 64);
    (bucket / 64, (bucket % 64) as u32)
}

impl Tlb {
    /// The tag of a translation: address-space id, page-size class and page number.
    #[inline(always)]
    fn key(&self, asid: u32, size: PageSize, vaddr: u64) -> u64 {
        ((asid as u64) << ASID_SHIFT) | ((size as u64) << SIZE_SHIFT) | (vaddr >> self.size_shift[size as usize])
    }

    pub fn new(s: &TlbSpec, geo: Geometry) -> Tlb {
        Tlb {
            size_shift: [geo.page_shift, geo.pmd_shift(), geo.pud_shift()],
            pwc_shift: [geo.pgdir_shift(), geo.pud_shift(), geo.pmd_shift()],
            itlb: [array("tlb.itlb_4k", &s.itlb_4k), array("tlb.itlb_2m", &s.itlb_2m)],
            dtlb: [
                array("tlb.dtlb_4k", &s.dtlb_4k),
                array("tlb.dtlb_2m", &s.dtlb_2m),
                array("tlb.dtlb_1g", &s.dtlb_1g),
            ],
            stlb: array("tlb.stlb", &s.stlb),
            stlb_2m: s.stlb_2m,
            stlb_pmd: 0,
            pwc: [
                array("tlb.pwc_pml4", &s.pwc_pml4),
                array("tlb.pwc_pdpt", &s.pwc_pdpt),
                array("tlb.pwc_pde", &s.pwc_pde),
            ],
            maybe_present: [0; PRESENT_WORDS],
            gen: 0,
            last_miss: (u32::MAX, u64::MAX, false, u64::MAX),
            last_hit: [(u32::MAX, u64::MAX, u64::MAX, PageSize::Base, 0); 2],
        }
    }

    /// Note that `asid` may have entries now.
    #[inline(always)]
    fn mark(&mut self, asid: u32) {
        let (w, b) = present_bit(asid);
        self.maybe_present[w] |= 1 << b;
    }

    /// Look up a data (or instruction) translation: the L1 arrays of every size, then the
    /// STLB. Returns the cached leaf entry and page size.
    #[inline]
    pub fn lookup(&mut self, asid: u32, vaddr: u64, instr: bool) -> Option<(TlbHit, PageSize, u64)> {
        let page = vaddr >> self.size_shift[0];
        let miss = (asid, page, instr, self.gen);
        if miss == self.last_miss {
            return None;
        }
        let side = instr as usize;
        let (la, lp, lg, lsz, lv) = self.last_hit[side];
        if la == asid && lp == page && lg == self.gen {
            return Some((TlbHit::L1, lsz, lv));
        }
        // Another lookup of this side comes between: the memo of its last hit no longer holds.
        self.last_hit[side].2 = u64::MAX;
        let sizes: &[PageSize] =
            if instr { &[PageSize::Base, PageSize::Pmd] } else { &[PageSize::Base, PageSize::Pmd, PageSize::Pud] };
        for &sz in sizes {
            let k = self.key(asid, sz, vaddr);
            let arr = if instr { &mut self.itlb[sz as usize] } else { &mut self.dtlb[sz as usize] };
            if let Some(v) = arr.get(k) {
                self.last_hit[side] = (asid, page, self.gen, sz, v);
                return Some((TlbHit::L1, sz, v));
            }
        }
        for sz in [PageSize::Base, PageSize::Pmd] {
            if sz == PageSize::Pmd && (!self.stlb_2m || self.stlb_pmd == 0) {
                continue;
            }
            let k = self.key(asid, sz, vaddr);
            if let Some(v) = self.stlb.get(k) {
                // Refill the L1 (whose lookup above missed: no second search).
                let arr = if instr { &mut self.itlb[sz as usize] } else { &mut self.dtlb[sz as usize] };
                arr.put_absent(k, v);
                self.gen += 1;
                return Some((TlbHit::Stlb, sz, v));
            }
        }
        self.last_miss = miss;
        None
    }

    /// Install a translation after a walk. `absent`: the lookup that started the walk found
    /// no entry for the address (the common case), so the arrays need not be searched again.
    pub fn fill(&mut self, asid: u32, vaddr: u64, size: PageSize, entry: u64, instr: bool, absent: bool) {
        self.mark(asid);
        self.gen += 1;
        let k = self.key(asid, size, vaddr);
        let arr = if instr { &mut self.itlb[(size as usize).min(1)] } else { &mut self.dtlb[size as usize] };
        let stlb = size == PageSize::Base || (size == PageSize::Pmd && self.stlb_2m);
        if absent {
            arr.put_absent(k, entry);
        } else {
            arr.put(k, entry);
        }
        if stlb {
            self.stlb_put(k, entry, absent);
        }
    }

    /// Put a translation in the STLB (`absent`: known not to be there), keeping count of its
    /// PMD-sized entries.
    #[inline]
    fn stlb_put(&mut self, k: u64, entry: u64, absent: bool) {
        let new_pmd = key_size(k) == PageSize::Pmd as u64 && (absent || !self.stlb.contains(k));
        let evicted = if absent { self.stlb.put_absent(k, entry) } else { self.stlb.put(k, entry) };
        self.stlb_pmd += new_pmd as u64;
        if evicted.is_some_and(|e| key_size(e) == PageSize::Pmd as u64) {
            self.stlb_pmd -= 1;
        }
    }

    /// Drop the translation of one address (invlpg): every size, every level, and the
    /// paging-structure caches covering it.
    pub fn invlpg(&mut self, asid: u32, vaddr: u64) {
        self.gen += 1;
        for sz in [PageSize::Base, PageSize::Pmd, PageSize::Pud] {
            let k = self.key(asid, sz, vaddr);
            self.dtlb[sz as usize].invalidate(k);
            if sz != PageSize::Pud {
                self.itlb[sz as usize].invalidate(k);
                if self.stlb.invalidate(k) && sz == PageSize::Pmd {
                    self.stlb_pmd -= 1;
                }
            }
        }
        for (i, shift) in self.pwc_shift.into_iter().enumerate() {
            self.pwc[i].invalidate(((asid as u64) << ASID_SHIFT) | (vaddr >> shift));
        }
    }

    /// Drop every translation of one address space (a CR3 write / INVPCID single-context).
    pub fn flush_asid(&mut self, asid: u32) {
        let (w, b) = present_bit(asid);
        if self.maybe_present[w] & (1 << b) == 0 {
            return;
        }
        self.gen += 1;
        // Whether an entry of another id of the same bucket stays (then the bit stays set).
        let others = std::cell::Cell::new(false);
        let f = |k: u64| {
            let a = key_asid(k);
            if a != asid && present_bit(a) == (w, b) {
                others.set(true);
            }
            a == asid
        };
        for a in self.itlb.iter_mut().chain(self.dtlb.iter_mut()).chain(self.pwc.iter_mut()) {
            a.invalidate_if(f);
        }
        let pmd = std::cell::Cell::new(0);
        self.stlb.invalidate_if(|k| {
            let hit = f(k);
            pmd.set(pmd.get() + (hit && key_size(k) == PageSize::Pmd as u64) as u64);
            hit
        });
        self.stlb_pmd -= pmd.get();
        if !others.get() {
            self.maybe_present[w] &= !(1 << b);
        }
    }

    /// Drop everything.
    pub fn flush_all(&mut self) {
        self.gen += 1;
        for a in self.itlb.iter_mut().chain(self.dtlb.iter_mut()).chain(self.pwc.iter_mut()) {
            a.flush();
        }
        self.stlb.flush();
        self.stlb_pmd = 0;
        self.maybe_present.fill(0);
    }

    /// Paging-structure cache lookup at `level` (0 = PML4E, 1 = PDPTE, 2 = PDE): the table
    /// frame the cached entry points to.
    #[inline]
    pub fn pwc_get(&mut self, level: usize, asid: u32, vaddr: u64) -> Option<u64> {
        let shift = self.pwc_shift[level];
        self.pwc[level].get(((asid as u64) << ASID_SHIFT) | (vaddr >> shift))
    }

    /// Cache an upper-level entry after a walk read it: the walk began below the deepest
    /// paging-structure cache that hit, so every level it caches was looked up and missed
    /// (`pwc_get`), and the entry is put without a second search.
    #[inline]
    pub fn pwc_put(&mut self, level: usize, asid: u32, vaddr: u64, table_pfn: u64) {
        self.mark(asid);
        let shift = self.pwc_shift[level];
        self.pwc[level].put_absent(((asid as u64) << ASID_SHIFT) | (vaddr >> shift), table_pfn);
    }

    /// Digest of the contents (for exact loop fast-forward).
    pub fn digest(&self, h: &mut u64) {
        for a in self.itlb.iter().chain(self.dtlb.iter()).chain(self.pwc.iter()) {
            a.digest(h);
        }
        self.stlb.digest(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// flush_asid's skip is exact: ids that share a presence bucket (4096 apart) keep each
    /// other's bit, so each flush still finds and removes its own entries; a flush of an id
    /// with none leaves everything as it was.
    #[test]
    fn flush_asid_skips_only_ids_without_entries() {
        let p = crate::hw::profile::builtin("default", &[]).unwrap();
        let mut t = Tlb::new(&p.tlb, Geometry::X86_64);
        let (a, b, c) = (7u32, 7 + 4096, 8u32);
        for (i, asid) in [a, b].into_iter().enumerate() {
            t.fill(asid, 0x1000 * (i as u64 + 1), PageSize::Base, 0x42, false, true);
        }
        let digest = |t: &Tlb| {
            let mut h = 0;
            t.digest(&mut h);
            h
        };
        let before = digest(&t);
        t.flush_asid(c);
        assert_eq!(digest(&t), before);
        t.flush_asid(a);
        assert!(t.lookup(a, 0x1000, false).is_none());
        assert!(t.lookup(b, 0x2000, false).is_some(), "b's entry survives a's flush");
        t.flush_asid(b);
        assert!(t.lookup(b, 0x2000, false).is_none(), "b's bit stayed set, so its flush scanned");
    }

    /// A lookup answered from the memo of the last miss (`last_miss`) is what a search finds:
    /// through fills, STLB hits that refill the L1, invlpg and flushes, every lookup's answer
    /// equals a search of the arrays (a lookup that hits changes the arrays the same way in
    /// both, so the two TLBs stay equal).
    #[test]
    fn a_repeated_miss_is_a_miss_until_something_changes() {
        let p = crate::hw::profile::builtin("westmere-ex", &[]).unwrap();
        let (mut t, mut r) = (Tlb::new(&p.tlb, Geometry::X86_64), Tlb::new(&p.tlb, Geometry::X86_64));
        let mut x = 99u64;
        for step in 0..50_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let asid = ((x >> 62) & 1) as u32;
            let vaddr = ((x >> 20) & 0x3ff) << 12;
            let instr = (x >> 40) & 1 == 1;
            match (x >> 41) % 8 {
                0 => {
                    t.invlpg(asid, vaddr);
                    r.invlpg(asid, vaddr);
                }
                1 if step % 97 == 0 => {
                    t.flush_asid(asid);
                    r.flush_asid(asid);
                }
                2 | 3 => {
                    for tlb in [&mut t, &mut r] {
                        tlb.fill(asid, vaddr, PageSize::Base, x, instr, false);
                    }
                }
                _ => {
                    // The same lookup twice in a row now and then: the retry after a fault.
                    for _ in 0..1 + (x >> 50) % 2 {
                        r.last_miss = (u32::MAX, u64::MAX, false, u64::MAX);
                        assert_eq!(t.lookup(asid, vaddr, instr), r.lookup(asid, vaddr, instr), "step {step}");
                    }
                }
            }
        }
    }

    /// The count of PMD-sized STLB entries stays exact through fills, evictions, invlpg and
    /// flushes (a lookup skips the 2 MiB probe on it).
    #[test]
    fn the_stlb_counts_its_pmd_entries() {
        let p = crate::hw::profile::builtin(
            "default",
            &[("tlb.stlb.entries".into(), "32".into()), ("tlb.stlb.ways".into(), "4".into())],
        )
        .unwrap();
        let mut t = Tlb::new(&p.tlb, Geometry::X86_64);
        let mut x = 12345u64;
        for step in 0..20000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let asid = ((x >> 60) & 3) as u32;
            let vaddr = ((x >> 20) & 0xff) << 21 | ((x >> 30) & 7) << 12;
            let size = if (x >> 40) & 1 == 0 { PageSize::Base } else { PageSize::Pmd };
            match (x >> 41) % 16 {
                0 => t.invlpg(asid, vaddr),
                1 if step % 50 == 0 => t.flush_asid(asid),
                2 if step % 300 == 0 => t.flush_all(),
                _ => {
                    let absent = t.lookup(asid, vaddr, false).is_none();
                    t.fill(asid, vaddr, size, x, false, absent);
                }
            }
            let sets = t.stlb.capacity() / 4;
            let pmd = (0..sets).flat_map(|s| t.stlb.set_order(s)).filter(|&k| key_size(k) == PageSize::Pmd as u64);
            assert_eq!(pmd.count() as u64, t.stlb_pmd, "step {step}");
        }
    }
}
