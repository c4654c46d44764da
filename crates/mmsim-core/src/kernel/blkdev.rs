//! The block device's request queue as swap uses it (block/blk-mq.c's submission, a plug's
//! merging of contiguous bios, completion callbacks), in simulated time: each request takes
//! the profile's latency and its transfer at the device's bandwidth. A rotational device
//! serves one request at a time; a non-rotational one overlaps the latencies of requests in
//! flight, their transfers taking turns. Completions (`IoEvent`) are run when the kernel's
//! clock (`Kernel::now_ns`) passes them: writeback ends, reads unlock their folios.
//!
//! Differs from Linux: no I/O scheduler and no writeback throttling; file reads (the page
//! cache) keep their own cost model (the reader is charged the device's time, kernel/
//! filemap.rs) and do not occupy this queue.

use std::collections::BTreeMap;

use super::Kernel;
use crate::units::Pfn;

/// The device's timing (the profile's `[block]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockTiming {
    pub read_latency_ns: f64,
    pub read_bandwidth: f64,
    pub write_latency_ns: f64,
    pub write_bandwidth: f64,
    pub rotational: bool,
}

impl Default for BlockTiming {
    /// The default profile's device (this machine's virtio disk), for kernels built in tests.
    fn default() -> Self {
        BlockTiming {
            read_latency_ns: 58000.0,
            read_bandwidth: 1.16,
            write_latency_ns: 40000.0,
            write_bandwidth: 3.9,
            rotational: true,
        }
    }
}

/// What completes when a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoEvent {
    /// A swap write of the folio headed at this frame: its writeback ends.
    SwapWriteDone(Pfn),
    /// A swap read into the folio headed at this frame: it is uptodate and unlocked.
    SwapReadDone(Pfn),
}

/// The request queue and the completions pending.
#[derive(Clone, Debug, Default)]
pub struct BlockQueue {
    pub timing: BlockTiming,
    /// When the device finishes the transfers (non-rotational) or requests (rotational)
    /// submitted so far, in ns.
    pub busy_until_ns: f64,
    /// Completions by (time in ns, submission order).
    pub pending: BTreeMap<(u64, u64), IoEvent>,
    seq: u64,
    /// Requests and bytes submitted (after merging).
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// Bios collected under a `blk_plug`: contiguous swap slots of one device and direction are
/// merged into one request of at most `max_bytes` (`max_sectors_kb`).
#[derive(Clone, Debug, Default)]
pub struct Plug {
    /// The request being built: (swap type, first slot, pages, write).
    cur: Option<(usize, u32, u32, bool)>,
    /// The completions the request being built will run.
    events: Vec<IoEvent>,
}

impl Plug {
    /// Whether a request is being built (bios not yet submitted).
    pub fn holds_io(&self) -> bool {
        self.cur.is_some()
    }
}

impl BlockQueue {
    /// Submit one request of `bytes` at `now`; when it completes, in ns.
    pub fn submit(&mut self, write: bool, bytes: u64, now: f64) -> f64 {
        let t = &self.timing;
        let (lat, bw) =
            if write { (t.write_latency_ns, t.write_bandwidth) } else { (t.read_latency_ns, t.read_bandwidth) };
        let xfer = bytes as f64 / bw;
        let start = self.busy_until_ns.max(now);
        let done;
        if t.rotational {
            done = start + lat + xfer;
            self.busy_until_ns = done;
        } else {
            self.busy_until_ns = start + xfer;
            done = start + xfer + lat;
        }
        if write {
            self.writes += 1;
            self.write_bytes += bytes;
        } else {
            self.reads += 1;
            self.read_bytes += bytes;
        }
        done
    }

    /// Queue a completion at `done` ns.
    pub fn complete_at(&mut self, done: f64, ev: IoEvent) {
        self.seq += 1;
        self.pending.insert((done.ceil() as u64, self.seq), ev);
    }

    /// The time of the earliest pending completion.
    pub fn next_completion(&self) -> Option<u64> {
        self.pending.keys().next().map(|k| k.0)
    }
}

impl Kernel {
    /// `blk_start_plug`.
    pub fn blk_start_plug(&mut self) {
        if self.plug_depth == 0 {
            self.plug = Plug::default();
        }
        self.plug_depth += 1;
    }

    /// `blk_finish_plug`: the request being built goes to the device.
    pub fn blk_finish_plug(&mut self) {
        self.plug_depth -= 1;
        if self.plug_depth == 0 {
            self.blk_flush_plug();
        }
    }

    /// Submit the plug's request now (also when the task sleeps with a plug held:
    /// `sched_submit_work` flushes it, so that a wait for the plug's own I/O ends).
    pub(super) fn blk_flush_plug(&mut self) {
        let Some((_, _, pages, write)) = self.plug.cur.take() else { return };
        let bytes = pages as u64 * self.geo.page_size();
        let done = self.blk.submit(write, bytes, self.now_ns as f64);
        for ev in std::mem::take(&mut self.plug.events) {
            self.blk.complete_at(done, ev);
        }
    }

    /// Submit `pages` pages of swap area `ty` from slot `slot`, running `ev` at completion:
    /// merged into the plug's request when contiguous with it (and the plug is on), else a
    /// request of its own.
    pub fn submit_swap_bio(&mut self, ty: usize, slot: u32, pages: u32, write: bool, ev: IoEvent) {
        if self.plug_depth == 0 {
            let done = self.blk.submit(write, pages as u64 * self.geo.page_size(), self.now_ns as f64);
            self.blk.complete_at(done, ev);
            return;
        }
        let max_pages = (self.knobs.max_sectors_kb * 1024 / self.geo.page_size()).max(1) as u32;
        if let Some((t, s, n, w)) = self.plug.cur {
            if t == ty && w == write && s + n == slot && n + pages <= max_pages {
                self.plug.cur = Some((t, s, n + pages, w));
                self.plug.events.push(ev);
                return;
            }
            self.blk_flush_plug();
        }
        self.plug.cur = Some((ty, slot, pages, write));
        self.plug.events.push(ev);
    }

    /// The kernel's clock moves to `now_ns` (a task enters the kernel, or waits in it): the
    /// completions due by then run, in order.
    #[inline]
    pub fn advance_time(&mut self, now_ns: u64) {
        if now_ns > self.now_ns {
            self.now_ns = now_ns;
        }
        // Nothing in flight and no flush due: the common case, inline.
        if self.blk.pending.is_empty() && self.now_ns < self.memcg.flush_next_ns {
            return;
        }
        self.advance_time_slow();
    }

    #[inline(never)]
    fn advance_time_slow(&mut self) {
        while let Some(&(t, seq)) = self.blk.pending.keys().next() {
            if t > self.now_ns {
                break;
            }
            let ev = self.blk.pending.remove(&(t, seq)).expect("pending");
            match ev {
                IoEvent::SwapWriteDone(head) => self.swap_write_done(head),
                IoEvent::SwapReadDone(head) => self.swap_read_done(head),
            }
        }
        self.memcg_periodic_flush();
    }

    /// Wait (uninterruptibly) until `t` ns: the time is the current task's I/O wait.
    pub fn io_wait_until(&mut self, t: u64) {
        if t > self.now_ns {
            self.current.effects.io_wait_ns += t - self.now_ns;
            self.advance_time(t);
        }
    }
}
