//! Tests of what the CPUs share and of clearing: memory bandwidth (clears and misses), a
//! clear's chunk and subpage order, and the locks threads of one process fault under.

use serde_json::json;

use super::machine::Machine;
use super::perf::PerfCounters;
use super::profile;
use super::tests::{perf, run_with_sets};
use crate::kernel::knobs::Knobs;
use crate::kernel::Kernel;
use crate::report::Report;

/// Memory bandwidth is shared by a node's CPUs: on the PIII's 800 MB/s front-side bus a 4 KiB
/// clear (no read for ownership: 4 KiB of write-back) needs 2,304 cycles of the bus, more
/// than its 2,048 cycles of stores; alone, a CPU clears at the bus's rate; two CPUs clearing
/// at once get half of it each.
#[test]
fn clears_share_the_nodes_bandwidth() {
    use crate::kernel::page_alloc::ClearPath;
    use crate::kernel::Work;
    use crate::units::Pfn;
    let p = profile::builtin("piii-450", &[]).unwrap();
    let bus = 4096.0 / (p.memory.bandwidth / p.cpu.freq_ghz);
    assert!((bus - 2304.0).abs() < 1e-6 && 4096.0 / p.cost.clear_bytes_per_cycle < bus);
    let run = |cpus: usize| {
        let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
        let mut m = Machine::new(p.clone(), 2);
        let mut t = [0.0f64; 2];
        for i in 0..10u32 {
            for (c, tc) in t.iter_mut().enumerate().take(cpus) {
                let mut pc = PerfCounters::default();
                let w = Work::Clear {
                    pfn: Pfn(1000 + 100 * c as u32 + i),
                    pages: 1,
                    chunk: 1,
                    path: ClearPath::Alloc,
                    target: crate::kernel::NO_TARGET,
                };
                m.do_work(c, &mut k, w, &mut pc, *tc);
                *tc += pc.cycles;
            }
        }
        t
    };
    let alone = run(1)[0];
    assert!((alone - 10.0 * bus).abs() < 1e-6, "alone: the bus's rate: {alone}");
    let both = run(2);
    for (c, &t) in both.iter().enumerate() {
        assert!((t - 20.0 * bus).abs() <= bus + 1e-6, "cpu {c}: half the bus each: {t} vs {}", 20.0 * bus);
    }
}

/// Threads of one process faulting at once contend on the locks of their kernel's era: with
/// 2.6.10's mm-wide page_table_lock and mmap_sem every fault's lines bounce between the two
/// CPUs; with Linux 6.18's per-vma locks and split PTE locks, two threads in vmas of their own
/// share only the PTE table across their boundary. One thread alone books no lock at all.
#[test]
fn threads_faulting_at_once_contend_on_their_eras_locks() {
    let prog = |threads: u64| {
        json!({"machine": {"cpus": 2, "memory": "256M"}, "program": [
            {"op": "thread", "count": threads, "program": [
                {"op": "mmap", "name": "m", "size": "16M", "flags": ["private", "anonymous", "dontexpand"]},
                {"op": "write", "region": "m"},
            ]},
            {"op": "wait"},
        ]})
    };
    let lock_cycles = |r: &Report| -> f64 {
        ["down_read", "up_read", "_raw_spin_lock", "lock_vma_under_rcu", "vma_end_read"]
            .iter()
            .map(|f| r.profile.get(f).unwrap_or(0.0))
            .sum()
    };
    let old = run_with_sets(prog(2), &[("kernel/fault_locking", "page_table_lock")]);
    let new = run_with_sets(prog(2), &[("kernel/fault_locking", "per_vma")]);
    let faults = 2.0 * 4096.0;
    assert_eq!(perf(&old, "page-faults"), perf(&new, "page-faults"));
    assert!(lock_cycles(&old) / faults > 30.0, "2.6.10: the mm's lines bounce: {}", lock_cycles(&old) / faults);
    // (Only the PTE table that spans the boundary of the two adjacent mappings is shared.)
    assert!(lock_cycles(&new) / faults < 10.0, "6.18: the threads' vmas share no lock: {}", lock_cycles(&new) / faults);
    assert!(perf(&old, "cycles") > perf(&new, "cycles"));
    let alone = run_with_sets(prog(1), &[("kernel/fault_locking", "page_table_lock")]);
    assert_eq!(lock_cycles(&alone), 0.0, "one thread: its locks are never contended");
}

/// A clear's cost depends on its chunk: on the build machine's Zen 3 (`default`), one
/// `rep stosb` of 32 MiB or more streams past the caches (measured: 59-70 GB/s against 26-29
/// GB/s in smaller calls), so a 32 MiB block cleared in one call costs less than the same
/// block cleared 4 KiB at a time and leaves no line in the caches.
#[test]
fn a_clears_cost_depends_on_its_chunk() {
    use crate::kernel::page_alloc::ClearPath;
    use crate::kernel::Work;
    use crate::units::Pfn;
    let p = profile::builtin("default", &[]).unwrap();
    assert_eq!(p.cost.clear_streaming_min, 32 << 20);
    let pages = (32u64 << 20) / 4096;
    let run = |chunk: u64| {
        let mut k = Kernel::new(256 << 20, Knobs::default(), crate::units::Geometry::X86_64);
        let mut m = Machine::new(p.clone(), 1);
        let mut pc = PerfCounters::default();
        let w = Work::Clear { pfn: Pfn(16384), pages, chunk, path: ClearPath::Alloc, target: crate::kernel::NO_TARGET };
        m.do_work(0, &mut k, w, &mut pc, 0.0);
        let last_line = ((16384 + pages - 1) * 4096) >> m.line_size().trailing_zeros();
        (pc.cycles, m.cpus[0].l2.contains(last_line))
    };
    let (page_by_page, cached) = run(1);
    let (one_call, streamed_cached) = run(pages);
    assert!(cached && !streamed_cached);
    assert!(one_call < 0.7 * page_by_page, "{one_call} vs {page_by_page}");
}

/// The program's own misses from memory share the node's bandwidth too: on the PIII a cold
/// 4 KiB page read line by line needs 2,304 cycles of the front-side bus; two CPUs reading
/// cold pages at once each take about twice as long as one alone.
#[test]
fn misses_share_the_nodes_bandwidth() {
    use crate::units::Pfn;
    let p = profile::builtin("piii-450", &[]).unwrap();
    let bus = 4096.0 / (p.memory.bandwidth / p.cpu.freq_ghz);
    let run = |cpus: usize| {
        let mut m = Machine::new(p.clone(), 2);
        let mut t = [0.0f64; 2];
        for i in 0..20u32 {
            for (c, tc) in t.iter_mut().enumerate().take(cpus) {
                let mut pc = PerfCounters::default();
                m.cpus[c].time_base = *tc;
                m.page_accesses(c, Pfn(1000 + 100 * c as u32 + i), 0, 4096, 32, false, 1.0, &mut pc);
                *tc += pc.cycles;
            }
        }
        t
    };
    let alone = run(1)[0];
    assert!(alone >= 20.0 * bus && alone < 20.0 * bus * 1.2, "alone: about the bus's rate: {alone}");
    for (c, &t) in run(2).iter().enumerate() {
        assert!(t >= 1.8 * alone, "cpu {c}: about half the bus each: {t} vs alone {alone}");
    }
}

/// Arbitration is per transaction (seed 002's P6 bus): a line miss arriving while kscrubd
/// zeroes a 4 MiB block waits at most one line's transfer, not for the block, which ends that
/// much later; a fault's 4 KiB clear arriving then shares the bus with the block line by line
/// (twice its own time); a miss arriving behind another CPU's burst shares the bus with it;
/// stores book their lines' write-back.
#[test]
fn a_line_miss_waits_at_most_one_line_behind_a_bulk_clear() {
    use crate::units::Pfn;
    let p = profile::builtin("piii-450", &[]).unwrap();
    let per_byte = 1.0 / (p.memory.bandwidth / p.cpu.freq_ghz);
    let (line, block) = (64.0 * per_byte, (4u64 << 20) as f64 * per_byte);
    let mut m = Machine::new(p.clone(), 2);
    assert_eq!(m.book_bandwidth(0, 0.0, 4 << 20), block);
    // A miss 1,000 cycles into the block: its line and, at most, the line under way.
    let miss = m.book_bandwidth(1, 1000.0, 64);
    assert!(miss > line - 1e-9 && miss <= 2.0 * line + 1e-9, "miss: {miss} vs line {line}");
    // Through the access path: a cold line's load on CPU 1 at 2,000 cycles.
    let mut pc = PerfCounters::default();
    m.cpus[1].time_base = 2000.0;
    m.page_accesses(1, Pfn(5000), 0, 1, 1, false, 1.0, &mut pc);
    let mem = p.memory.latency - p.cache.l1d.latency;
    assert!(pc.cycles <= 1.0 + mem.max(2.0 * line), "load: {} cycles", pc.cycles);
    // A 4 KiB clear inside the block: half the bus while the block goes on.
    let clear = m.book_bandwidth(1, 10_000.0, 4096);
    assert!((clear - 2.0 * 4096.0 * per_byte).abs() < 1e-6, "clear: {clear}");
    // The block gave up what the others took (the miss's 64 bytes, the load's 32-byte line,
    // the clear's 4 KiB): it ends their bus time later.
    let taken = (64.0 + p.cache.line as f64 + 4096.0) * per_byte;
    let next = m.book_bandwidth(0, block, 64);
    assert!((next - (taken + line)).abs() < 1e-6, "block's end moved by {}: {next}", next - line);
    // A miss behind another CPU's burst of 64 lines shares the bus with it.
    let t0 = 3.0e6;
    let burst = m.book_bandwidth(0, t0, 64 * 64);
    assert!((burst - 64.0 * line).abs() < 1e-6);
    let behind = m.book_bandwidth(1, t0 + 10.0, 64);
    assert!((behind - 2.0 * line).abs() < 1e-6, "behind: {behind}");
    // A store's cold lines book their fill and their write-back (the PIII's 32-byte lines).
    let l = p.cache.line;
    let mut m = Machine::new(p, 1);
    let mut pc = PerfCounters::default();
    m.page_accesses(0, Pfn(7000), 0, 4096, l, true, 1.0, &mut pc);
    assert_eq!(m.dram_bytes(), vec![2 * 4096]);
    m.page_accesses(0, Pfn(7001), 0, 4096, l, false, 1.0, &mut pc);
    assert_eq!(m.dram_bytes(), vec![3 * 4096]);
    // With a streamer (Haswell's L2 streamer), the lines it fetches from memory are booked too.
    let mut m = Machine::new(profile::builtin("haswell-ep", &[]).unwrap(), 1);
    m.page_accesses(0, Pfn(7000), 0, 4096, 64, false, 1.0, &mut pc);
    assert_eq!(m.dram_bytes(), vec![4096, 0]);
}

/// folio_zero_user clears a THP in process_huge_page's order (research notes' examples), so
/// the subpage that faulted is cleared last and is the one left in the L1.
#[test]
fn a_thp_is_cleared_with_the_faulting_subpage_last() {
    use crate::kernel::page_alloc::ClearPath;
    use crate::kernel::{process_huge_page_nth, Work};
    use crate::units::Pfn;
    let order = |nr, n| (0..nr).map(|k| process_huge_page_nth(nr, n, k)).collect::<Vec<_>>();
    assert_eq!(order(8, 2), vec![7, 6, 5, 4, 0, 3, 1, 2]);
    assert_eq!(order(8, 6), vec![0, 1, 2, 3, 4, 7, 5, 6]);
    assert_eq!(order(8, 0), vec![7, 6, 5, 4, 3, 2, 1, 0]);
    for n in [0, 1, 255, 256, 300, 511] {
        let mut o = order(512, n);
        assert_eq!(*o.last().unwrap(), n);
        o.sort();
        assert_eq!(o, (0..512).collect::<Vec<_>>(), "every subpage once (n = {n})");
    }
    let p = profile::builtin("default", &[]).unwrap();
    for target in [0u32, 300] {
        let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
        let mut m = Machine::new(p.clone(), 1);
        let mut pc = PerfCounters::default();
        let w = Work::Clear { pfn: Pfn(4096), pages: 512, chunk: 1, path: ClearPath::User, target };
        m.do_work(0, &mut k, w, &mut pc, 0.0);
        let line = |sub: u64| ((4096 + sub) * 4096) >> m.line_size().trailing_zeros();
        assert!(m.cpus[0].l1d.contains(line(target as u64)), "the faulting subpage is hot");
        assert!(!m.cpus[0].l1d.contains(line(if target == 0 { 511 } else { 0 })));
    }
}

mod channel_props {
    use super::super::shared::Channel;
    use proptest::prelude::*;

    proptest! {
        /// The channel never delivers more than its bandwidth: whatever agents book, in time
        /// order, the uses' total time at the full rate fits between the first start and the
        /// last end (every end, returned or moved, counted); and no use ends before its own
        /// time at the full rate has passed.
        #[test]
        fn the_channel_never_serves_more_than_its_bandwidth(
            uses in proptest::collection::vec((0usize..4, 0.0f64..200.0, 1.0f64..500.0), 1..60),
        ) {
            let mut ch = Channel::new(3);
            let (mut now, mut total, mut last) = (0.0f64, 0.0f64, 0.0f64);
            let first = uses[0].1;
            for (agent, gap, need) in uses {
                now += gap;
                let done = ch.book(agent, now, need);
                prop_assert!(done >= now + need - 1e-6, "done {done} before now {now} + need {need}");
                total += need;
                last = last.max(done);
            }
            let end = ch.agent_ends().fold(last, f64::max);
            prop_assert!(end - first + 1e-6 >= total, "{total} cycles of work served from {first} to {end}");
        }

        /// One agent alone is served at the full rate, its uses one after another.
        #[test]
        fn one_agent_alone_gets_the_full_rate(uses in proptest::collection::vec((0.0f64..200.0, 1.0f64..500.0), 1..40)) {
            let mut ch = Channel::new(1);
            let (mut now, mut end) = (0.0f64, 0.0f64);
            for (gap, need) in uses {
                now += gap;
                let done = ch.book(0, now, need);
                end = now.max(end) + need;
                prop_assert!((done - end).abs() < 1e-6, "{done} vs {end}");
            }
        }
    }
}
