//! Coherence between the CPUs' private caches: exact transfers, invalidations and their cost
//! by distance (`hw::coherence`).

use super::machine::Machine;
use super::perf::PerfCounters;
use super::profile;
use crate::units::Pfn;

/// Haswell-EP, 2 sockets x 18 cores x 2 threads: CPU 0's sibling is 36, CPU 1 is on its
/// socket, CPU 18 on the other.
fn haswell() -> Machine {
    let p = profile::builtin("haswell-ep", &[]).unwrap();
    Machine::with_memory(p, 72, 1 << 30)
}

/// One store of `cpu` to byte 0 of frame 1000: its cycles.
fn store(m: &mut Machine, cpu: usize, write: bool) -> (f64, PerfCounters) {
    let mut pc = PerfCounters::default();
    m.page_accesses(cpu, Pfn(1000), 0, 1, 1, write, 1.0, &mut pc);
    (pc.cycles, pc)
}

/// A ping-pong of one line: two CPUs take turns writing it, 100 round trips. The first write
/// takes the line from memory; each of the 199 after it moves the modified line from the
/// other CPU's cache, at the profile's latency for their distance, and costs the writer that
/// latency (over the memory-level parallelism, as every miss of a store stream) beyond the
/// store's issue.
#[test]
fn ping_pong_costs_the_profiles_core_to_core_latency() {
    for (b, want, dist) in [(36, 12.0, "smt"), (1, 103.0, "socket"), (18, 294.0, "remote")] {
        let mut m = haswell();
        assert_eq!(m.c2c(0, b), want, "{dist}");
        let p = m.p.clone();
        let issue = 1.0 / p.cpu.stores_per_cycle;
        store(&mut m, 0, true);
        let mut hitm = 0;
        for i in 0..199 {
            let cpu = if i % 2 == 0 { b } else { 0 };
            let (cycles, pc) = store(&mut m, cpu, true);
            assert!((cycles - (issue + want / p.memory.mlp)).abs() < 1e-9, "{dist}: {cycles}");
            hitm += pc.hitm_local + pc.hitm_remote;
            assert_eq!(pc.hitm_remote, u64::from(dist == "remote"));
        }
        assert_eq!(hitm, 199);
        let (st, lines) = m.coherence_stats();
        let n = [st.transfers_smt, st.transfers_socket, st.transfers_remote];
        let at = ["smt", "socket", "remote"].iter().position(|&d| d == dist).unwrap();
        assert_eq!(n.iter().sum::<u64>(), 199);
        assert_eq!(n[at], 199, "{dist}: {n:?}");
        assert_eq!(st.invalidations, 199, "each write drops the other's copy");
        assert!((st.transfer_cycles - 199.0 * want).abs() < 1e-6);
        assert_eq!(lines, 1);
    }
}

/// MESI's other cases: readers share a line without transfers; a read of a line another CPU
/// holds modified moves it once and leaves both copies shared (a second read moves nothing);
/// a write to a shared line invalidates every other copy and waits for the farthest.
#[test]
fn reads_share_and_a_write_invalidates_the_copies() {
    let mut m = haswell();
    store(&mut m, 0, true);
    let (_, pc) = store(&mut m, 1, false);
    assert_eq!(pc.hitm_local, 1, "a read of CPU 0's modified line");
    let (_, pc) = store(&mut m, 1, false);
    assert_eq!(pc.hitm_local, 0, "now shared");
    let (_, pc) = store(&mut m, 0, false);
    assert_eq!(pc.hitm_local, 0, "CPU 0 kept its copy, shared");
    store(&mut m, 18, false);
    let before = m.coherence_stats().0.clone();
    assert_eq!(before.transfers_socket, 1);
    assert_eq!(before.transfers_remote, 0, "18 read a clean line from the LLC");
    // CPU 1 writes: CPU 0's and CPU 18's copies go; CPU 1 waits for CPU 18's acknowledgement.
    let p = m.p.clone();
    let (cycles, pc) = store(&mut m, 1, true);
    assert_eq!(pc.hitm_local + pc.hitm_remote, 0);
    let after = m.coherence_stats().0.clone();
    assert_eq!(after.invalidations - before.invalidations, 2);
    let issue = 1.0 / p.cpu.stores_per_cycle;
    assert!((cycles - (issue + m.c2c(18, 1) / p.memory.mlp)).abs() < 1e-9, "{cycles}");
    // Both lost it: their next read takes it from CPU 1.
    let (_, pc) = store(&mut m, 0, false);
    assert_eq!(pc.hitm_local, 1);
    let (_, pc) = store(&mut m, 18, false);
    assert_eq!((pc.hitm_local, pc.hitm_remote), (0, 0), "CPU 1's copy is shared now: from the LLC");
}

/// A CPU working on memory no other CPU touched makes no directory entry; a page another CPU
/// held modified is fetched line by line when this one writes it (a clear through the caches
/// of a page another CPU wrote); non-temporal stores drop every copy and the directory's.
#[test]
fn private_memory_costs_nothing_and_a_clear_takes_the_lines() {
    use crate::kernel::page_alloc::ClearPath;
    use crate::kernel::{Kernel, Work};
    let mut m = haswell();
    let mut pc = PerfCounters::default();
    for f in 0..64u32 {
        m.page_accesses(0, Pfn(2000 + f), 0, 4096, 64, true, 1.0, &mut pc);
    }
    assert_eq!(m.coherence_stats().1, 0, "one CPU's pages: no directory");
    let mut k = Kernel::new(64 << 20, crate::kernel::knobs::Knobs::default(), crate::units::Geometry::X86_64);
    let clear = |nt: bool| Work::Clear {
        pfn: Pfn(2063),
        pages: 1,
        chunk: 1,
        path: if nt { ClearPath::Kscrubd } else { ClearPath::Alloc },
        target: crate::kernel::NO_TARGET,
    };
    m.do_work(18, &mut k, clear(false), &mut pc, 0.0);
    let st = m.coherence_stats().0.clone();
    assert_eq!(st.transfers_remote, 64, "the page's 64 modified lines from the other socket");
    // kscrubd with the offload engine: non-temporal, every copy dropped.
    k.knobs.scrub_engine = crate::kernel::knobs::ScrubEngine::Offload;
    m.do_work(1, &mut k, clear(true), &mut pc, 0.0);
    assert_eq!(m.coherence_stats().1, 0, "the directory forgets the page");
    m.page_accesses(18, Pfn(2063), 0, 4096, 64, false, 1.0, &mut pc);
    assert_eq!(m.coherence_stats().0.transfers_remote, 64, "nothing left to move");
}

/// Contended atomics are the same mechanism: a line two CPUs take turns to own costs each use
/// the distance's latency, counted as transfers of an atomic's line.
#[test]
fn atomics_move_their_line_at_the_cpus_distance() {
    let mut m = haswell();
    let p = m.p.clone();
    let mut t = 0.0;
    for i in 0..10 {
        let cpu = if i % 2 == 0 { 0 } else { 18 };
        let mut pc = PerfCounters::default();
        let spent = m.atomic_rmw(cpu, 1 << 50, t, 0.0, 1.0, "test", &mut pc);
        let want = if i == 0 { p.smp.atomic } else { p.smp.atomic + m.c2c(0, 18) };
        assert!((spent - want).abs() < 1e-9, "use {i}: {spent} vs {want}");
        t += spent;
    }
    let st = m.coherence_stats().0;
    assert_eq!((st.transfers_remote, st.atomic_transfers), (9, 9));
}
