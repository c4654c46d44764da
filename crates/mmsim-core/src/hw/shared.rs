//! What the CPUs of a machine share and take turns at: contended cache lines (an atomic
//! counter, a spinlock, a fault's locks) and each node's memory bandwidth, each a calendar of
//! uses in simulated time, so that CPUs simulated a slice at a time still meet in time order.

use std::ops::{Index, IndexMut};

use super::machine::Machine;
use super::perf::PerfCounters;

/// A calendar's intervals, in order, as one contiguous vector read from `head` on: what
/// `VecDeque` gave it (uses leave at the front as the horizon passes them, new ones join at or
/// near the back), with the live part a plain slice, so that a search and an index are a
/// slice's. The front is dropped for good only when it is at least half the vector (amortised
/// O(1) per use; a calendar of at most `n` live entries never holds more than `2 n + 256`).
#[derive(Debug, Default)]
pub(super) struct Calendar<T> {
    v: Vec<T>,
    head: usize,
}

impl<T: Copy> Calendar<T> {
    pub(super) fn with_capacity(n: usize) -> Calendar<T> {
        Calendar { v: Vec::with_capacity(n), head: 0 }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.v.len() - self.head
    }

    #[inline]
    fn live(&self) -> &[T] {
        &self.v[self.head..]
    }

    #[inline]
    pub(super) fn front(&self) -> Option<&T> {
        self.v.get(self.head)
    }

    #[cfg(test)]
    pub(super) fn back(&self) -> Option<&T> {
        self.live().last()
    }

    #[inline]
    pub(super) fn back_mut(&mut self) -> Option<&mut T> {
        let h = self.head;
        self.v[h..].last_mut()
    }

    #[inline]
    pub(super) fn pop_front(&mut self) {
        self.head += 1;
        if self.head == self.v.len() {
            self.v.clear();
            self.head = 0;
        } else if self.head >= 128 && 2 * self.head >= self.v.len() {
            self.v.drain(..self.head);
            self.head = 0;
        }
    }

    #[inline]
    pub(super) fn push_back(&mut self, x: T) {
        self.v.push(x);
    }

    #[inline]
    pub(super) fn insert(&mut self, i: usize, x: T) {
        self.v.insert(self.head + i, x);
    }

    #[inline]
    pub(super) fn remove(&mut self, i: usize) {
        self.v.remove(self.head + i);
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<&T> {
        self.live().get(i)
    }

    /// The first index whose entry does not satisfy `pred` (the entries that do come first).
    #[inline]
    pub(super) fn partition_point(&self, pred: impl FnMut(&T) -> bool) -> usize {
        self.live().partition_point(pred)
    }
}

impl<T> Index<usize> for Calendar<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.v[self.head + i]
    }
}

impl<T> IndexMut<usize> for Calendar<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.v[self.head + i]
    }
}

/// A node's memory channel (its DRAM controllers, or the PIII's front-side bus) as a calendar
/// of the time its users occupy it at `memory.bandwidth` (clears, copies, a zeroing engine,
/// and a page visit's lines fetched from memory and written back): each use books its bytes'
/// time first come first served in simulated time, in the gaps earlier uses left, so
/// concurrent streams slow each other down once their demand passes the bandwidth.
/// Arbitration is per transaction for line requests: a bulk transfer (a clear, a copy, the
/// engine's zeroing) does not hold the channel whole against them; a line request that arrives
/// while one is under way alternates with it line by line, so it finishes in twice its own
/// time there, a line miss at most one line's transfer late (`finish`). Line requests queue
/// behind other line requests, and a bulk transfer behind everything booked (first come first
/// served: with many CPUs streaming at once a half share would overstate what each gets).
/// Deliberately simple: the bulk use's own end, reported when it was booked, is not moved by a
/// later-simulated line request that cut in (its bytes are booked after, for later uses).
#[derive(Debug, Default)]
pub(super) struct Channel {
    /// (start, end, bulk) of each booked interval not yet behind the horizon: sorted and
    /// disjoint (`bulk`: booked by a bulk transfer).
    pub(super) busy: Calendar<(f64, f64, bool)>,
    /// Bytes booked so far (the node's DRAM traffic that mmsim times).
    pub(super) bytes: u64,
}

/// Intervals a channel's calendar keeps when the horizon does not move (a bound on memory).
pub(super) const CHANNEL_CALENDAR: usize = 4096;

impl Channel {
    /// Book `need` cycles of the channel (`bulk`: for a bulk transfer) from `now` on, in the
    /// gaps left free; returns when the use is done (`finish`). Intervals ending at or before
    /// `horizon` are forgotten.
    pub(super) fn book(&mut self, now: f64, need: f64, horizon: f64, bulk: bool) -> f64 {
        while let Some(&(_, end, _)) = self.busy.front() {
            if end > horizon && self.busy.len() < CHANNEL_CALENDAR {
                break;
            }
            self.busy.pop_front();
        }
        // Booked after everything booked so far (a stream's misses come in time order): the
        // general case below would append it, or extend the last interval if it ends at `now`.
        match self.busy.back_mut() {
            None if need > 0.0 => {
                self.busy.push_back((now, now + need, bulk));
                return now + need;
            }
            Some(last) if last.1 <= now && need > 0.0 => {
                if last.1 == now && last.2 == bulk {
                    last.1 = now + need;
                } else {
                    self.busy.push_back((now, now + need, bulk));
                }
                return now + need;
            }
            _ => {}
        }
        // A line request cuts into a bulk transfer (`finish`); a bulk transfer takes its turn.
        let cut_in = if bulk { None } else { Some(self.finish(now, need)) };
        let mut i = self.busy.partition_point(|&(_, e, _)| e <= now);
        let (mut t, mut left, mut done) = (now, need, now);
        while left > 0.0 {
            if i < self.busy.len() && self.busy[i].0 <= t {
                t = t.max(self.busy[i].1);
                i += 1;
                continue;
            }
            let gap_end = self.busy.get(i).map_or(f64::INFINITY, |b| b.0);
            let take = left.min(gap_end - t);
            if i > 0 && self.busy[i - 1].1 >= t && self.busy[i - 1].2 == bulk {
                self.busy[i - 1].1 = t + take;
            } else {
                self.busy.insert(i, (t, t + take, bulk));
                i += 1;
            }
            t += take;
            left -= take;
            done = t;
            // Touching the next interval of the same kind: join them.
            if i < self.busy.len() && self.busy[i].0 <= t && self.busy[i].2 == bulk {
                self.busy[i - 1].1 = self.busy[i].1;
                self.busy.remove(i);
                t = self.busy[i - 1].1;
            }
        }
        cut_in.unwrap_or(done)
    }

    /// When a line request of `need` cycles arriving at `now` is done: it takes the free time
    /// at the full rate, a bulk transfer's time at half (the two alternate transaction by
    /// transaction), and waits out other line requests.
    fn finish(&self, now: f64, need: f64) -> f64 {
        let mut i = self.busy.partition_point(|&(_, e, _)| e <= now);
        let (mut t, mut left) = (now, need);
        loop {
            match self.busy.get(i) {
                Some(&(start, end, bulk)) if start <= t => {
                    if bulk {
                        let share = (end - t) / 2.0;
                        if share >= left {
                            return t + 2.0 * left;
                        }
                        left -= share;
                    }
                    t = end;
                    i += 1;
                }
                next => {
                    let gap_end = next.map_or(f64::INFINITY, |b| b.0);
                    if gap_end - t >= left {
                        return t + left;
                    }
                    left -= gap_end - t;
                    t = gap_end;
                }
            }
        }
    }
}

/// A cache line that CPUs take turns to own (an atomic counter, a spinlock), as a calendar:
/// its uses in time order, so that a CPU simulated later but arriving earlier in simulated
/// time takes an idle gap before a use already booked (CPUs are simulated a slice at a time,
/// and a fault's atomic can lie thousands of cycles ahead of the other CPUs' clocks).
#[derive(Debug, Default)]
pub(super) struct SharedLine {
    /// (start, end, owner) of each use not yet behind the horizon: sorted and disjoint.
    busy: Calendar<(f64, f64, usize)>,
    /// Owner after the last use that left the calendar (None: never used).
    owner_before: Option<usize>,
    /// End of the last use that left the calendar: no new use starts before it.
    pruned_end: f64,
}

/// Uses a shared line's calendar keeps when the horizon does not move (a bound on memory).
const SHARED_LINE_CALENDAR: usize = 4096;

impl Machine {
    /// Bytes each node's channel has carried so far (clears, copies, engine zeroing and
    /// program lines fetched from memory; not prefetches or write-backs), by node.
    pub fn dram_bytes(&self) -> Vec<u64> {
        self.channels.iter().map(|c| c.bytes).collect()
    }

    /// The last interval booked on `node`'s channel (start, end), in cycles.
    #[cfg(test)]
    pub(crate) fn last_booking(&self, node: usize) -> Option<(f64, f64)> {
        self.channels[node].busy.back().map(|&(s, e, _)| (s, e))
    }

    /// Book `bytes` of `cpu`'s node's memory bandwidth from `now` on for line requests
    /// (`Channel::book`): returns the cycles from `now` until they have passed.
    pub fn book_bandwidth(&mut self, cpu: usize, now: f64, bytes: u64) -> f64 {
        self.book_channel(cpu, now, bytes, false)
    }

    /// `book_bandwidth` for a bulk transfer (a clear, a copy, an engine's zeroing): line
    /// requests interleave with it transaction by transaction, bulk transfers queue behind it.
    pub fn book_bulk(&mut self, cpu: usize, now: f64, bytes: u64) -> f64 {
        self.book_channel(cpu, now, bytes, true)
    }

    fn book_channel(&mut self, cpu: usize, now: f64, bytes: u64, bulk: bool) -> f64 {
        if bytes == 0 {
            return 0.0;
        }
        // One channel per node, allocated at boot.
        let node = self.numa_node(cpu);
        let need = bytes as f64 / self.bytes_per_cycle(self.p.memory.bandwidth);
        let horizon = self.horizon;
        self.channels[node].bytes += bytes;
        self.channels[node].book(now, need, horizon, bulk) - now
    }

    /// An atomic read-modify-write (or a spinlock acquire held for `hold` cycles) by `cpu` at
    /// time `now` on physical line `line`: it waits for the first time from `now` on when the
    /// line is free long enough (uses are booked in time order, whatever order the CPUs are
    /// simulated in), pays `transfers` line transfers if another CPU owned it before (2 for a
    /// read + cmpxchg loop), and keeps the line busy while it works. Returns the cycles the CPU
    /// spent (waiting included), charged to `func`.
    #[allow(clippy::too_many_arguments)]
    pub fn atomic_rmw(
        &mut self,
        cpu: usize,
        line: u64,
        now: f64,
        hold: f64,
        transfers: f64,
        func: &'static str,
        perf: &mut PerfCounters,
    ) -> f64 {
        self.use_shared_line(cpu, line, now, hold, transfers, false, func, perf)
    }

    /// A lock a page fault takes on a line other CPUs' faults may take too (`Work::FaultLock`):
    /// booked like `atomic_rmw`, but the uncontended acquisition and the `hold` are already in
    /// `cost.fault_handler`, so the CPU pays only for waiting and the line's transfer.
    pub fn fault_lock(
        &mut self,
        cpu: usize,
        line: u64,
        now: f64,
        hold: f64,
        func: &'static str,
        perf: &mut PerfCounters,
    ) -> f64 {
        self.use_shared_line(cpu, line, now, hold, 1.0, true, func, perf)
    }

    #[allow(clippy::too_many_arguments)]
    fn use_shared_line(
        &mut self,
        cpu: usize,
        line: u64,
        now: f64,
        hold: f64,
        transfers: f64,
        included: bool,
        func: &'static str,
        perf: &mut PerfCounters,
    ) -> f64 {
        let atomic = self.p.smp.atomic;
        let ncpus = self.cpus.len();
        // A line another CPU owned comes from its cache at their distance (`Machine::c2c`).
        let lt = |o: usize| super::coherence::c2c_between(&self.p, ncpus, o, cpu);
        let sl = self.shared_lines.entry(line).or_default();
        while let Some(&(_, end, owner)) = sl.busy.front() {
            if end > self.horizon && sl.busy.len() < SHARED_LINE_CALENDAR {
                break;
            }
            sl.owner_before = Some(owner);
            sl.pruned_end = sl.pruned_end.max(end);
            sl.busy.pop_front();
        }
        // The earliest gap at or after `now` long enough for this use; its cost depends on
        // who owned the line before it.
        let mut i = sl.busy.partition_point(|&(_, end, _)| end <= now);
        let (mut prev_end, mut prev_owner) = match i {
            0 => (sl.pruned_end, sl.owner_before),
            _ => (sl.busy[i - 1].1, Some(sl.busy[i - 1].2)),
        };
        let (start, cost, from) = loop {
            let start = now.max(prev_end);
            let from = prev_owner.filter(|&o| o != cpu);
            let cost = match from {
                None => atomic,
                Some(o) => transfers * lt(o) + atomic,
            };
            // A fault's lock is busy for its transfer and hold only (its uncontended
            // acquisition is part of the handler's time, which this CPU spends anyway).
            let len = if included { cost - atomic + hold } else { cost + hold };
            if i == sl.busy.len() || sl.busy[i].0 >= start + len {
                break (start, cost, from);
            }
            (prev_end, prev_owner) = (sl.busy[i].1, Some(sl.busy[i].2));
            i += 1;
        };
        let len = if included { cost - atomic + hold } else { cost + hold };
        sl.busy.insert(i, (start, start + len, cpu));
        self.last_wait = start - now;
        if let Some(o) = from {
            // Counted once per transfer the use makes (a cmpxchg loop's read and its write).
            for _ in 0..transfers as u32 {
                self.count_transfer(o, cpu, true, perf);
            }
        }
        if included {
            // Only what contention adds: the wait and the transfer.
            let spent = start - now + (cost - atomic);
            if spent > 0.0 {
                perf.charge(func, spent);
                perf.stalled_backend += spent;
            }
            return spent;
        }
        let spent = start - now + cost + hold;
        perf.charge(func, spent);
        perf.stalled_backend += start - now + cost;
        perf.instructions += self.p.cost.atomic_instructions;
        spent
    }
}
