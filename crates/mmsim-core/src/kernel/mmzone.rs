//! The zone's watermarks (mm/page_alloc.c `calculate_min_free_kbytes`,
//! `__setup_per_zone_wmarks`, `__zone_watermark_ok`; mm/khugepaged.c
//! `set_recommended_min_free_kbytes`). mmsim's machine has one node with one zone
//! (ZONE_NORMAL, holding all memory): no lowmem_reserve, and no watermark boost (that needs
//! the fragmentation mmsim does not model).

use super::Kernel;

/// Which watermark (`enum zone_watermarks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wmark {
    Min = 0,
    Low = 1,
    High = 2,
}

/// The zone's watermark state.
#[derive(Clone, Debug, Default)]
pub struct Zone {
    /// `managed_pages`: what the buddy allocator was given at boot.
    pub managed: u64,
    /// `_watermark[WMARK_MIN..WMARK_HIGH]`, in pages.
    pub wmark: [u64; 3],
    /// `min_free_kbytes` in effect (the sysctl's value).
    pub min_free_kbytes: u64,
    /// `user_min_free_kbytes`: the value written to `vm/min_free_kbytes` (None: never written).
    pub user_min_free_kbytes: Option<u64>,
}

/// `int_sqrt`.
pub fn int_sqrt(x: u64) -> u64 {
    if x == 0 {
        return 0;
    }
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

impl Kernel {
    /// `nr_free_buffer_pages`: managed pages above the high watermark.
    fn nr_free_buffer_pages(&self) -> u64 {
        self.zone.managed.saturating_sub(self.zone.wmark[Wmark::High as usize])
    }

    /// `calculate_min_free_kbytes` (boot and memory hotplug): 4 * sqrt(lowmem kB), clamped to
    /// [128, 262144], unless the sysctl was written; then THP's
    /// `set_recommended_min_free_kbytes` raises it when PMD THP is enabled (always or madvise):
    /// two pageblocks per zone plus 3 x 3 per zone for the migratetypes, at most 5% of memory.
    /// Then the watermarks (`setup_per_zone_wmarks`).
    pub fn init_per_zone_wmark_min(&mut self) {
        let kb_per_page = self.geo.page_size() / 1024;
        let lowmem_kbytes = self.nr_free_buffer_pages() * kb_per_page;
        let new = int_sqrt(lowmem_kbytes * 16);
        match self.zone.user_min_free_kbytes {
            Some(u) if u >= new => self.zone.min_free_kbytes = u,
            _ => self.zone.min_free_kbytes = new.clamp(128, 262144),
        }
        self.setup_per_zone_wmarks();
        if self.knobs.thp_enabled != super::knobs::ThpEnabled::Never {
            let pageblock = self.geo.hpage_pmd_nr();
            let nr_zones = 1;
            let mut recommended = pageblock * nr_zones * 2 + pageblock * nr_zones * 3 * 3;
            recommended = recommended.min(self.nr_free_buffer_pages() / 20);
            if recommended * kb_per_page > self.zone.min_free_kbytes {
                self.zone.min_free_kbytes = recommended * kb_per_page;
                self.setup_per_zone_wmarks();
            }
        }
    }

    /// `__setup_per_zone_wmarks`: min from min_free_kbytes (the zone's share of lowmem: all of
    /// it here); low and high each a step above, the step the larger of min/4 and
    /// `watermark_scale_factor` ten-thousandths of the zone.
    pub fn setup_per_zone_wmarks(&mut self) {
        let pages_min = self.zone.min_free_kbytes / (self.geo.page_size() / 1024);
        let managed = self.zone.managed;
        let tmp = pages_min;
        let step = (tmp / 4).max(managed * self.knobs.reclaim.watermark_scale_factor as u64 / 10000);
        self.zone.wmark = [tmp, tmp + step, tmp + 2 * step];
    }

    /// A watermark in pages (`wmark_pages`: no boost).
    #[inline]
    pub fn wmark_pages(&self, w: Wmark) -> u64 {
        self.zone.wmark[w as usize]
    }

    /// `__zone_watermark_ok` with `free` pages free: above `mark` after taking `1 << order`
    /// (strictly), and for order > 0 a free block of that order at hand. `reserve` is the
    /// alloc flags' access to the reserves: 0 none, 1 ALLOC_MIN_RESERVE (half the mark), 2
    /// ALLOC_OOM (half).
    pub fn zone_watermark_ok_free(&self, order: u32, mark: u64, free: u64, reserve: u32) -> bool {
        let mut min = mark as i64;
        if reserve != 0 {
            min -= min / 2;
        }
        let free = free as i64 - ((1i64 << order) - 1);
        if free <= min {
            return false;
        }
        order == 0 || self.mem.has_free_block(order)
    }

    /// `zone_watermark_ok` against the free pages now.
    pub fn zone_watermark_ok(&self, order: u32, w: Wmark) -> bool {
        self.zone_watermark_ok_free(order, self.wmark_pages(w), self.mem.free_pages, 0)
    }
}
