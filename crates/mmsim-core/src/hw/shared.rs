//! What the CPUs of a machine share and take turns at: contended cache lines (an atomic
//! counter, a spinlock, a fault's locks), each a calendar of uses in simulated time, so that
//! CPUs simulated a slice at a time still meet in time order; and each node's memory
//! bandwidth, shared among the agents using it at the same time.

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
    pub(super) fn insert(&mut self, i: usize, x: T) {
        self.v.insert(self.head + i, x);
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

/// A node's memory channel (its DRAM controllers, or the PIII's front-side bus) at
/// `memory.bandwidth`, shared by its agents: each CPU (its line fetches and write-backs, its
/// clears and copies) and the zeroing engine. Arbitration is per transaction, round robin
/// among the agents with a request outstanding (the P6 bus's symmetric agents; a DRAM
/// controller's queues), modelled as processor sharing: the agents with uses under way share
/// the bandwidth equally, so a line miss arriving during kscrubd's 4 MiB block takes twice its
/// own time and pushes the block's end back by its own, a fault's 4 KiB clear shares the
/// channel with the block line by line, and n CPUs streaming at once get 1/n each. An agent's
/// own uses are served in order. A use books at its arrival: the others' uses under way are
/// known by the ends they were given, their work left is recovered from those ends, and the
/// ends are moved to where the new sharing puts them (a use already returned keeps its cycles;
/// its agent's next use starts after the moved end). Deliberately simple: a use booked at a
/// later time by a CPU simulated ahead is not seen by one arriving before it.
#[derive(Debug, Default)]
pub(super) struct Channel {
    /// Each agent's (start, end) of its latest run of uses: CPU i at i, the engine last.
    agents: Vec<(f64, f64)>,
    /// Scratch (kept allocated: booking allocates nothing): the agents sharing a use's time,
    /// as (end or work left, agent).
    sharing: Vec<(f64, usize)>,
    /// The latest use booked (start, end).
    last: Option<(f64, f64)>,
    /// Bytes booked so far (the node's DRAM traffic that mmsim times).
    pub(super) bytes: u64,
}

impl Channel {
    /// A channel for `cpus` CPUs and the zeroing engine.
    pub(super) fn new(cpus: usize) -> Channel {
        Channel { agents: vec![(0.0, 0.0); cpus + 1], sharing: Vec::with_capacity(cpus + 2), last: None, bytes: 0 }
    }

    /// Each agent's recorded end (tests).
    #[cfg(test)]
    pub(super) fn agent_ends(&self) -> impl Iterator<Item = f64> + '_ {
        self.agents.iter().map(|a| a.1)
    }

    /// The engine's agent number.
    pub(super) fn engine(&self) -> usize {
        self.agents.len() - 1
    }

    /// Book `need` cycles of the channel (its time at the full rate) for `agent`'s use from
    /// `now` on, after the agent's own earlier uses; returns when the use is done, sharing the
    /// channel equally with the other agents' uses under way then, whose ends move later.
    pub(super) fn book(&mut self, agent: usize, now: f64, need: f64) -> f64 {
        let (s0, e0) = self.agents[agent];
        let start = now.max(e0);
        // The uses under way at `start`, by end.
        self.sharing.clear();
        for (j, &(s, e)) in self.agents.iter().enumerate() {
            if j != agent && s <= start && e > start {
                self.sharing.push((e, j));
            }
        }
        let done = if self.sharing.is_empty() {
            start + need
        } else {
            // Their work left at `start`: between consecutive ends, the ones still under way
            // shared the channel equally.
            self.sharing.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
            let k = self.sharing.len();
            let (mut prev, mut work) = (start, 0.0);
            for i in 0..k {
                let e = self.sharing[i].0;
                work += (e - prev) / (k - i) as f64;
                prev = e;
                self.sharing[i].0 = work;
            }
            // The work left grows along the ends: the new use goes in its place.
            let at = self.sharing.partition_point(|&(w, _)| w < need);
            self.sharing.insert(at, (need, agent));
            // Processor sharing from `start`: the least work left ends first.
            let m = self.sharing.len();
            let (mut t, mut served, mut done) = (start, 0.0, start);
            for i in 0..m {
                let (w, j) = self.sharing[i];
                t += (w - served) * (m - i) as f64;
                served = w;
                if j == agent {
                    done = t;
                } else {
                    self.agents[j].1 = t;
                }
            }
            done
        };
        self.agents[agent] = (if e0 == start { s0 } else { start }, done);
        self.last = Some((start, done));
        done
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

    /// The last use booked on `node`'s channel (start, end), in cycles.
    #[cfg(test)]
    pub(crate) fn last_booking(&self, node: usize) -> Option<(f64, f64)> {
        self.channels[node].last
    }

    /// Book `bytes` of `cpu`'s node's memory bandwidth from `now` on (`Channel::book`): its
    /// line fetches and write-backs, its clears, copies and drained non-temporal stores alike.
    /// Returns the cycles from `now` until they have passed.
    pub fn book_bandwidth(&mut self, cpu: usize, now: f64, bytes: u64) -> f64 {
        self.book_channel(cpu, Some(cpu), now, bytes)
    }

    /// `book_bandwidth` for the zeroing engine of `cpu`'s node (an agent of its own: the CPU
    /// that started it goes on meanwhile).
    pub fn book_engine(&mut self, cpu: usize, now: f64, bytes: u64) -> f64 {
        self.book_channel(cpu, None, now, bytes)
    }

    fn book_channel(&mut self, cpu: usize, agent: Option<usize>, now: f64, bytes: u64) -> f64 {
        if bytes == 0 {
            return 0.0;
        }
        // One channel per node, allocated at boot.
        let node = self.numa_node(cpu);
        let need = bytes as f64 / self.bytes_per_cycle(self.p.memory.bandwidth);
        let ch = &mut self.channels[node];
        ch.bytes += bytes;
        let agent = agent.unwrap_or_else(|| ch.engine());
        ch.book(agent, now, need) - now
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
        // A line another CPU owned comes from its cache at their distance (`Machine::c2c`).
        let lt = |o: usize| super::coherence::c2c_in(&self.p, &self.topo, o, cpu);
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
