//! The huge zero page (mm/huge_memory.c's huge zero folio section), with every allocation and
//! refcounting policy of seed 000's series and seed 001: allocated at boot (patch 01) or on
//! first use (patch 09), refcounted with a shrinker that frees it when unused (patch 10),
//! the refcount taken on every map and unmap (`global`) or once per mm
//! (MMF_USED_HUGE_ZERO_PAGE, seed 001: `per_mm`), and today's persistent folio.
//! The global refcount is one cache line that every CPU's faults contend for: each get/put
//! is an atomic the hardware model executes in time order.

use super::knobs::{HzpAlloc, HzpRefcount};
use super::mm::mmf;
use super::mm_types::pg;
use super::page_alloc::gfp;
use super::vmstat::VmEvent;
use super::{AtomicKind, Kernel, MmId, Work};
use crate::units::Pfn;

/// The physical "line" of huge_zero_refcount (outside RAM: a kernel variable).
pub const HUGE_ZERO_REFCOUNT_LINE: u64 = 1 << 60;

/// The huge zero folio (huge_zero_folio, huge_zero_refcount). With the shrinkable policy the
/// refcount holds the shrinker's reference plus one per pmd mapping it (`global`) or one per
/// mm that ever used it (`per_mm`).
#[derive(Clone, Debug, Default)]
pub struct HugeZero {
    pub pfn: Option<Pfn>,
    pub refcount: u64,
    /// get/put calls made on the global counter (each an atomic on its line).
    pub atomics: u64,
}

impl Kernel {
    /// Allocate the folio at boot (patch 01, or CONFIG_PERSISTENT_HUGE_ZERO_FOLIO).
    pub(super) fn huge_zero_boot(&mut self) {
        if self.has_transparent_hugepage() && matches!(self.knobs.hzp_alloc, HzpAlloc::Boot | HzpAlloc::Persistent) {
            self.alloc_huge_zero_folio();
        }
    }

    fn alloc_huge_zero_folio(&mut self) -> bool {
        let Some(a) =
            self.alloc_pages(self.geo.hpage_pmd_order(), gfp::COMP | gfp::ZERO | gfp::DIRECT_RECLAIM | gfp::IO)
        else {
            self.stat.count(VmEvent::ThpZeroPageAllocFailed);
            return false;
        };
        self.mem.pages[a.pfn.idx()].set(pg::HUGE_ZERO);
        self.huge_zero.pfn = Some(a.pfn);
        self.stat.count(VmEvent::ThpZeroPageAlloc);
        true
    }

    fn refcount_atomic(&mut self, func: &'static str, kind: AtomicKind) {
        self.huge_zero.atomics += 1;
        self.work.push(Work::Atomic { line: HUGE_ZERO_REFCOUNT_LINE, func, kind });
    }

    /// `get_huge_zero_page`: with the shrinkable policy, `atomic_inc_not_zero` on the global
    /// counter, allocating the folio (with the shrinker's reference) when it is gone.
    fn get_huge_zero_folio(&mut self, func: &'static str) -> bool {
        match self.knobs.hzp_alloc {
            HzpAlloc::Boot | HzpAlloc::Persistent => self.huge_zero.pfn.is_some(),
            HzpAlloc::Lazy => self.huge_zero.pfn.is_some() || self.alloc_huge_zero_folio(),
            HzpAlloc::Shrinkable => {
                // atomic_inc_not_zero: a cmpxchg loop.
                self.refcount_atomic(func, AtomicKind::CmpxchgLoop);
                if self.huge_zero.refcount > 0 {
                    self.huge_zero.refcount += 1;
                    return true;
                }
                if !self.alloc_huge_zero_folio() {
                    return false;
                }
                self.huge_zero.refcount = 2;
                true
            }
        }
    }

    /// `put_huge_zero_page`: only the shrinker may drop the last reference.
    fn put_huge_zero_folio(&mut self, func: &'static str) {
        if self.knobs.hzp_alloc != HzpAlloc::Shrinkable {
            return;
        }
        // atomic_dec_and_test: one locked decrement.
        self.refcount_atomic(func, AtomicKind::Rmw);
        if self.huge_zero.refcount <= 1 {
            self.report_bug("put_huge_zero_page: the refcount would reach zero".into());
            return;
        }
        self.huge_zero.refcount -= 1;
    }

    /// `mm_get_huge_zero_folio` (per_mm: the global counter once per mm) or
    /// `get_huge_zero_page` (global: on every map).
    pub fn mm_get_huge_zero_folio(&mut self, mm: MmId) -> Option<Pfn> {
        let per_mm = self.knobs.hzp_refcount == HzpRefcount::PerMm;
        if self.knobs.hzp_alloc != HzpAlloc::Shrinkable || !per_mm {
            return self.get_huge_zero_folio("get_huge_zero_page").then_some(()).and(self.huge_zero.pfn);
        }
        if self.mm(mm).flags & mmf::HUGE_ZERO_FOLIO != 0 {
            return self.huge_zero.pfn;
        }
        if !self.get_huge_zero_folio("mm_get_huge_zero_page") {
            return None;
        }
        self.mm_mut(mm).flags |= mmf::HUGE_ZERO_FOLIO;
        self.huge_zero.pfn
    }

    /// A pmd mapping the huge zero folio went away (zap, split or replacement): the global
    /// policy drops its reference (`put_huge_zero_page`); per_mm keeps it until exit.
    pub fn put_huge_zero_pmd(&mut self) {
        if self.knobs.hzp_refcount == HzpRefcount::Global {
            self.put_huge_zero_folio("put_huge_zero_page");
        }
    }

    /// `mm_put_huge_zero_folio`, from __mmput.
    pub fn mm_put_huge_zero_folio(&mut self, mm: MmId) {
        if self.knobs.hzp_refcount == HzpRefcount::PerMm && self.mm(mm).flags & mmf::HUGE_ZERO_FOLIO != 0 {
            self.put_huge_zero_folio("mm_put_huge_zero_page");
        }
    }

    /// `shrink_huge_zero_folio_scan`: free the folio when only the shrinker's reference is left.
    pub fn shrink_huge_zero_folio(&mut self) {
        if self.knobs.hzp_alloc == HzpAlloc::Shrinkable && self.huge_zero.refcount == 1 {
            self.huge_zero.refcount = 0;
            let pfn = self.huge_zero.pfn.take().expect("allocated");
            self.mem.pages[pfn.idx()].clear(pg::HUGE_ZERO);
            self.mem.pages[pfn.idx()].refcount = 1;
            self.folio_put(pfn);
        }
    }

    /// What the refcount must be, recounted: huge zero pmds (global) or flagged mms (per_mm),
    /// plus the shrinker's reference; None when no refcount is kept.
    pub fn huge_zero_expected_refcount(&self, hzp_pmds: u64) -> Option<u64> {
        if self.knobs.hzp_alloc != HzpAlloc::Shrinkable {
            return None;
        }
        if self.huge_zero.pfn.is_none() {
            return Some(0);
        }
        let users = match self.knobs.hzp_refcount {
            HzpRefcount::Global => hzp_pmds,
            HzpRefcount::PerMm => {
                self.mms.iter().flatten().filter(|m| m.flags & mmf::HUGE_ZERO_FOLIO != 0).count() as u64
            }
        };
        Some(users + 1)
    }
}
