//! The flusher threads as reclaim wakes them: fs/fs-writeback.c's
//! `wakeup_flusher_threads(WB_REASON_VMSCAN)` (`wb_start_writeback`: every dirty page of the
//! disk's files, WB_SYNC_NONE), their folios' `folio_end_writeback`, and mm/vmscan.c's
//! `reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK)`, which cgroup v1's memcg reclaim sleeps in
//! after waking them (v1 has no dirty throttling of its own).
//!
//! Differs from Linux: the flusher's worker runs the moment it is woken, and its folios'
//! writeback ends in page state at once (they are clean, and one reclaim marked PG_reclaim
//! is rotated to its inactive list's tail); its requests do occupy the block device's queue,
//! so that swap I/O behind them waits, and the throttled reclaimer sleeps until they would
//! have completed. There is no periodic (`dirty_expire_centisecs`) or background
//! (`dirty_background_ratio`) writeback and no `balance_dirty_pages`: a page stays dirty until
//! fsync, fadvise or reclaim's wake-up writes it.

use super::vmscan::SWAP_CLUSTER_MAX;
use super::Kernel;
use crate::units::Pfn;

/// `reclaim_throttle`'s timeout for VMSCAN_THROTTLE_WRITEBACK: HZ/10.
const THROTTLE_WRITEBACK_NS: u64 = 100_000_000;

impl Kernel {
    /// `wakeup_flusher_threads(WB_REASON_VMSCAN)`: write back every dirty page-cache folio of
    /// the regular files (shmem and tmpfs are not the flusher's), a request of at most
    /// `max_sectors_kb` per contiguous run of a file; `folio_end_writeback` of each. Returns
    /// the pages written and when the request that holds the written page SWAP_CLUSTER_MAX + 1
    /// completes (what wakes a throttled reclaimer: `__acct_reclaim_writeback`), or the last.
    pub(super) fn wakeup_flusher_threads(&mut self) -> (u64, Option<u64>) {
        let max_pages = (self.knobs.max_sectors_kb * 1024 / self.geo.page_size()).max(1);
        let (mut pages, mut wake_at, mut last) = (0u64, None, None);
        let mut written: Vec<Pfn> = Vec::new();
        for obj in 0..self.shmem.len() as u32 {
            if self.shmem[obj as usize].as_ref().is_none_or(|o| o.is_shmem()) {
                continue;
            }
            written.clear();
            if self.filemap_write_range(obj, 0, u64::MAX, &mut written) == 0 {
                continue;
            }
            // Contiguous indices merge into one request (the plug of `wb_writeback`).
            let mut run: Option<(u64, u64)> = None;
            for i in 0..=written.len() {
                let next = written.get(i).map(|&h| (self.mem.pages[h.idx()].index, self.folio_nr_pages(h)));
                if let (Some((s, n)), Some((fi, nr))) = (run, next) {
                    if s + n == fi && n + nr <= max_pages {
                        run = Some((s, n + nr));
                        continue;
                    }
                }
                if let Some((_, n)) = run {
                    let done = self.blk.submit(true, n * self.geo.page_size(), self.now_ns as f64).ceil() as u64;
                    pages += n;
                    last = Some(done);
                    if wake_at.is_none() && pages > SWAP_CLUSTER_MAX {
                        wake_at = Some(done);
                    }
                }
                run = next;
            }
            for &h in &written {
                self.folio_end_writeback_file(h);
            }
        }
        self.trace(crate::tracepoints::ev::WRITEBACK_WRITTEN, || {
            format!(
                "bdi 254:0: sb_dev 254:1 nr_pages={pages} sync_mode=0 kupdate=0 range_cyclic=1 background=0 \
                 reason=vmscan"
            )
        });
        (pages, wake_at.or(last))
    }

    /// `folio_end_writeback` of a page-cache folio the flusher wrote: a folio reclaim marked
    /// PG_reclaim goes to its inactive list's tail (`folio_rotate_reclaimable`).
    fn folio_end_writeback_file(&mut self, head: Pfn) {
        let p = &mut self.mem.pages[head.idx()];
        if p.test(super::mm_types::pg::RECLAIM) {
            p.clear(super::mm_types::pg::RECLAIM);
            self.folio_rotate_reclaimable(head);
        }
    }

    /// `reclaim_throttle(pgdat, VMSCAN_THROTTLE_WRITEBACK)`: the reclaimer sleeps until the
    /// flusher's writes it waits for complete (`wake_at`), at most HZ/10.
    pub(super) fn reclaim_throttle_writeback(&mut self, wake_at: Option<u64>) {
        let until = wake_at.unwrap_or(u64::MAX).min(self.now_ns + THROTTLE_WRITEBACK_NS);
        let delayed = until.saturating_sub(self.now_ns);
        self.trace(crate::tracepoints::ev::VMSCAN_THROTTLED, || {
            format!(
                "nid=0 usec_timeout={} usect_delayed={} reason=VMSCAN_THROTTLE_WRITEBACK",
                THROTTLE_WRITEBACK_NS / 1000,
                delayed / 1000
            )
        });
        if delayed > 0 {
            self.current.effects.throttle_ns += delayed;
            self.advance_time(until);
        }
    }
}
