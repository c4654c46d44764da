//! Seed 002 through whole workloads, exact counts: kscrubd starts and stops at the orders
//! given, `scrub_load` holds it off, its engines, the zeroed pages the faults then take, and
//! Linux's `init_on_alloc` / `init_on_free`. The reference model checks every byte read and
//! the invariants (zeroed free blocks hold zeroes) are checked after every system call.

use serde_json::{json, Value};

use crate::kernel::vmstat::VmEvent;
use crate::sim::{run_with, RunOptions};
use crate::units::Pfn;
use crate::workload::interp::Interp;
use crate::workload::spec::parse_workload;

const MIB: u64 = 1 << 20;

/// An interpreter for `program` on a `cpus`-CPU default machine of `mem` bytes with `knobs`
/// set before the run, checking reads and invariants.
fn interp(program: Value, knobs: &[(&str, &str)], cpus: usize, mem: u64, profile: &str) -> Interp {
    let w = parse_workload(&json!({ "program": program }).to_string()).expect("valid workload");
    let p = crate::hw::profile::builtin(profile, &[]).expect("profile");
    let geo = p.geometry();
    let machine = crate::hw::machine::Machine::new(p, cpus);
    let mut k = crate::kernel::knobs::Knobs::default();
    for (n, v) in knobs {
        k.set(n, v).expect("knob");
    }
    let kernel = crate::kernel::Kernel::new(mem, k, geo);
    let mut it = Interp::new(kernel, machine, w.program.clone(), 0, true).expect("boots");
    it.check_invariants_each_op = true;
    it
}

fn finish(it: &mut Interp) {
    while it.round() {}
    assert_eq!(it.invariant_violation, None);
    assert_eq!(it.check.mismatches, 0, "reference model: {:?}", it.events);
}

fn ev(it: &Interp, e: VmEvent) -> i64 {
    it.kernel.stat.events[e]
}

/// Run to the next `snapshot` op (true), or to the end (false).
fn to_snapshot(it: &mut Interp) -> bool {
    while it.snapshot_requests.is_empty() {
        if !it.round() {
            return false;
        }
    }
    it.snapshot_requests.clear();
    true
}

/// The vmstat events at each snapshot of the run, then at its end.
fn event_snapshots(it: &mut Interp) -> Vec<crate::kernel::vmstat::VmEvents> {
    let mut v = Vec::new();
    while to_snapshot(it) {
        v.push(it.kernel.stat.events.clone());
    }
    finish(it);
    v.push(it.kernel.stat.events.clone());
    v
}

/// Write `size` of a fresh region (4 KiB pages), then unmap it.
fn write_and_unmap(name: &str, size: &str) -> [Value; 3] {
    [
        json!({"op": "mmap", "name": name, "size": size}),
        json!({"op": "write", "region": name, "value": 7}),
        json!({"op": "munmap", "region": name}),
    ]
}

#[test]
fn kscrubd_is_off_by_default() {
    let mut prog = vec![json!({"op": "snapshot", "label": "start"})];
    prog.extend(write_and_unmap("a", "8M"));
    let mut it = interp(json!(prog), &[], 2, 64 * MIB, "default");
    let s = event_snapshots(&mut it);
    let d = |e: VmEvent| s[1][e] - s[0][e];
    assert_eq!(ev(&it, VmEvent::KscrubdWake), 0);
    assert_eq!(ev(&it, VmEvent::PgZeroKscrubd), 0);
    assert_eq!(it.kernel.mem.zeroed_free_pages, 0);
    // Linux 6.18's fault clears its page itself; the page tables are __GFP_ZERO misses.
    assert_eq!(d(VmEvent::PgZeroUser), 2048);
    assert_eq!(d(VmEvent::PgZeroAlloc), 4, "four PTE tables");
    assert_eq!(d(VmEvent::PgZeroMiss), 4);
    assert_eq!(d(VmEvent::PgClear), 2048 + 4);
}

#[test]
fn kscrubd_zeroes_every_free_block_down_to_scrub_stop_then_sleeps() {
    for stop in [0u32, 2, 5] {
        let prog = json!([{"op": "sleep", "ms": 100}, {"op": "snapshot", "label": "idle"}]);
        let s = stop.to_string();
        let mut it = interp(prog, &[("vm/scrub_start", "7"), ("vm/scrub_stop", &s)], 2, 64 * MIB, "default");
        assert!(to_snapshot(&mut it));
        let m = &it.kernel.mem;
        assert_eq!(ev(&it, VmEvent::KscrubdWake), 1, "woken once, when scrub_start was written at boot");
        assert!(!it.kscrubd.running, "asleep again");
        assert_eq!(m.unzeroed_pages_from(stop), 0, "stop {stop}: no dirty block of order >= {stop} left");
        if stop > 0 {
            assert!(m.unzeroed_pages_from(0) > 0, "stop {stop}: the smaller blocks stay dirty");
        }
        assert_eq!(ev(&it, VmEvent::PgZeroKscrubd) as u64, m.zeroed_free_pages, "it zeroed what is zeroed");
        assert_eq!(it.kscrubd.pages, m.zeroed_free_pages);
        assert!(it.kscrubd.perf.cycles > 0.0 && it.kscrubd.perf.profile.iter().any(|(f, _)| *f == "kscrubd"));
        // It ran on the idle CPU (the first process sleeps on CPU 0 after both are idle: the
        // lower clock wins the tie), and its time shows there.
        assert!(it.machine.cpus[it.kscrubd.cpu].busy >= it.kscrubd.perf.cycles);
    }
}

/// Once kscrubd has zeroed memory, a free wakes it only if it coalesces a block of at least
/// `scrub_start`. With the seed's separate lists a freed THP cannot merge with its zeroed
/// buddy and stays an order-9 block; a freed 4 KiB page stays order 0.
#[test]
fn a_free_wakes_kscrubd_only_at_scrub_start_or_above() {
    for (start, wakes) in [("9", 2), ("10", 1)] {
        let prog = json!([
            {"op": "sleep", "ms": 100},
            {"op": "snapshot", "label": "zeroed"},
            {"op": "mmap", "name": "s", "size": "4096"},
            {"op": "write", "region": "s"},
            {"op": "munmap", "region": "s"},
            {"op": "sleep", "ms": 100},
            {"op": "mmap", "name": "t", "size": "2M", "align": "2M"},
            {"op": "madvise", "region": "t", "advice": "hugepage"},
            {"op": "write", "region": "t", "length": 1},
            {"op": "munmap", "region": "t"},
            {"op": "sleep", "ms": 100},
        ]);
        let knobs = [("vm/scrub_start", start), ("vm/scrub_stop", "0"), ("vm/scrub_merge", "separate")];
        let mut it = interp(prog, &knobs, 2, 64 * MIB, "default");
        let s = event_snapshots(&mut it);
        let d = |e: VmEvent| s[1][e] - s[0][e];
        assert_eq!(ev(&it, VmEvent::KscrubdWake), wakes, "scrub_start {start}");
        assert_eq!(ev(&it, VmEvent::ThpFaultAlloc), 1);
        // The faults took zeroed memory and cleared nothing themselves: the 4 KiB page, its
        // PTE table, the THP and the table deposited for it.
        assert_eq!(d(VmEvent::PgZeroMiss), 0);
        assert_eq!(d(VmEvent::PgZeroAlloc) + d(VmEvent::PgZeroUser), 0);
        assert_eq!(d(VmEvent::PgZeroed), 1 + 1 + 512 + 1);
    }
}

/// Writing `vm/scrub_start` during the run wakes kscrubd (the seed's scrub_start_handler).
#[test]
fn writing_scrub_start_wakes_kscrubd() {
    let prog = json!([
        {"op": "set", "knob": "vm/scrub_start", "value": "8"},
        {"op": "sleep", "ms": 100},
    ]);
    let mut it = interp(prog, &[], 1, 64 * MIB, "default");
    assert!(!to_snapshot(&mut it));
    assert_eq!(ev(&it, VmEvent::KscrubdWake), 1);
    assert!(ev(&it, VmEvent::PgZeroKscrubd) > 15000, "64 MiB less the first process, less blocks below order 2");
}

/// Two tasks kept busy for 80 s raise the 1-minute load average to about 1.5: a kscrubd
/// wake-up is refused with `scrub_load` 1 and allowed with 2 (and the default 999).
#[test]
fn scrub_load_holds_kscrubd_off() {
    let busy = json!([
        {"op": "mmap", "name": "l", "size": "4096"},
        {"op": "atomic", "region": "l", "count": 200, "hold": 1_000_000_000u64},
    ]);
    for (load, refused) in [("1", true), ("2", false), ("999", false)] {
        let prog = json!([
            {"op": "sleep", "ms": 100},
            {"op": "thread", "count": 2, "program": busy},
            {"op": "wait"},
            {"op": "mmap", "name": "t", "size": "2M", "align": "2M"},
            {"op": "madvise", "region": "t", "advice": "hugepage"},
            {"op": "write", "region": "t", "length": 1},
            {"op": "munmap", "region": "t"},
            {"op": "sleep", "ms": 100},
        ]);
        let knobs = [("vm/scrub_start", "9"), ("vm/scrub_merge", "separate"), ("vm/scrub_load", load)];
        let mut it = interp(prog, &knobs, 2, 64 * MIB, "default");
        finish(&mut it);
        let l = it.loadavg.avenrun[0] as f64 / 2048.0;
        assert!((1.2..1.8).contains(&l), "load average after 80 s of two busy tasks: {}", it.loadavg.text());
        assert_eq!(ev(&it, VmEvent::KscrubdLoadSkip) > 0, refused, "scrub_load {load}");
        assert_eq!(ev(&it, VmEvent::KscrubdWake), if refused { 1 } else { 2 }, "scrub_load {load}");
    }
}

/// The engines: `cpu` leaves the block's lines in its CPU's caches; `cpu_nt` leaves none; an
/// offload engine takes no CPU time and the block is zeroed after bytes / bandwidth; without
/// an engine (or for a block below its minimum) the CPU does it.
#[test]
fn scrub_engines() {
    let run = |engine: &str, profile: &str| {
        let prog = json!([{"op": "sleep", "ms": 2000}]);
        // 4 MiB blocks: order 10 of 4 KiB pages, order 8 of ia64's 16 KiB pages.
        let order = if profile == "ia64-altix" { "8" } else { "10" };
        let knobs = [("vm/scrub_start", order), ("vm/scrub_stop", order), ("vm/scrub_engine", engine)];
        let mut it = interp(prog, &knobs, 2, 16 * MIB, profile);
        finish(&mut it);
        assert_eq!(it.kernel.mem.unzeroed_pages_from(order.parse().unwrap()), 0, "{engine}");
        // 16 MiB less frame 0 and the first process: 3 free blocks of 4 MiB (4 KiB pages), or
        // one of 8 MiB and one of 4 MiB (16 KiB pages: 1024 frames, the top half is order 9).
        let blocks = if profile == "ia64-altix" { 2 } else { 3 };
        assert_eq!(it.kscrubd.blocks, blocks, "{engine} {profile}");
        let cpu = it.kscrubd.cpu;
        let c = &it.machine.cpus[cpu];
        let cached = (0..it.kernel.mem.nr_pages())
            .filter(|&p| it.kernel.mem.pages[p as usize].test(crate::kernel::mm_types::pg::ZEROED))
            .map(|p| Pfn(p as u32).phys(it.kernel.geo) >> it.machine.line_size().trailing_zeros())
            .filter(|&l| c.l2.contains(l) || it.machine.llc.contains(l))
            .count();
        (it.kscrubd.perf.cycles, cached)
    };
    let (cpu_cycles, cpu_cached) = run("cpu", "default");
    assert!(cpu_cycles > 0.0 && cpu_cached > 0, "temporal stores fill the caches: {cpu_cycles} {cpu_cached}");
    let (nt_cycles, nt_cached) = run("cpu_nt", "default");
    assert!(nt_cycles > 0.0 && nt_cached == 0, "non-temporal stores fill nothing: {nt_cycles} {nt_cached}");
    let (off_cycles, off_cached) = run("offload", "ia64-altix");
    assert_eq!((off_cycles, off_cached), (0.0, 0), "the BTE takes no CPU time and fills no cache");
    let (fallback, _) = run("offload", "default");
    assert!(fallback > 0.0, "no engine on this machine: the CPU zeroes");
}

/// kscrubd's non-temporal stores drain through the channel at its CPU's time: woken 100 ms
/// into the run (scrub_start written after a free), it books the bandwidth from then on, not from its own cycles' count
/// (its clock_base was once 0, which booked them at the start of the run, where no task's
/// misses could meet them).
#[test]
fn kscrubd_books_the_bandwidth_at_its_cpus_time() {
    let mut prog = vec![json!({"op": "sleep", "ms": 100})];
    prog.extend(write_and_unmap("a", "8M"));
    prog.push(json!({"op": "set", "knob": "vm/scrub_start", "value": "9"}));
    prog.push(json!({"op": "sleep", "ms": 100}));
    let knobs = [("vm/scrub_stop", "9"), ("vm/scrub_engine", "cpu_nt")];
    let mut it = interp(json!(prog), &knobs, 2, 64 * MIB, "default");
    // The round in which kscrubd clears its first block.
    let mut before = it.machine.last_booking(0);
    while it.kscrubd.blocks == 0 {
        before = it.machine.last_booking(0);
        assert!(it.round(), "kscrubd never ran");
    }
    let (_, task_end) = before.expect("the task's writes booked the channel");
    let (start, end) = it.machine.last_booking(0).expect("booked");
    let ms100 = 100.0 * it.machine.p.cpu.freq_ghz * 1e6;
    assert!(
        start >= ms100 && start >= task_end && end > task_end,
        "kscrubd's clear booked ({start}, {end}): after the task's last use ({task_end}) at its wake-up past {ms100}"
    );
    finish(&mut it);
}

/// The offload engine's bandwidth is simulated time: 12 MiB at the BTE's 500 MB/s take 25 ms.
#[test]
fn the_offload_engine_takes_its_time() {
    let prog = json!([{"op": "sleep", "ms": 20}, {"op": "snapshot", "label": "early"}, {"op": "sleep", "ms": 100}]);
    // Blocks of at least 4 MiB (order 8 of ia64's 16 KiB pages): the 1024 frames' top half
    // (8 MiB, order 9) and the quarter below it.
    let knobs = [("vm/scrub_start", "8"), ("vm/scrub_stop", "8"), ("vm/scrub_engine", "offload")];
    let mut it = interp(prog, &knobs, 2, 16 * MIB, "ia64-altix");
    while it.snapshot_requests.is_empty() {
        assert!(it.round());
    }
    // 20 ms in: the 8 MiB block (16.8 ms) is done, the 4 MiB one is in flight.
    assert_eq!(it.kernel.mem.zeroed_free_pages, 512);
    assert!(it.kernel.mem.scrubbing.is_some());
    it.snapshot_requests.clear();
    finish(&mut it);
    assert_eq!(it.kernel.mem.zeroed_free_pages, 512 + 256);
}

/// Pages cleared by each path while 1000 pages are written and unmapped.
fn counts(knobs: &[(&str, &str)]) -> [i64; 5] {
    let mut prog = vec![json!({"op": "snapshot", "label": "start"})];
    prog.extend(write_and_unmap("a", "4000K"));
    prog.push(json!({"op": "snapshot", "label": "end"}));
    let mut it = interp(json!(prog), knobs, 1, 64 * MIB, "default");
    let s = event_snapshots(&mut it);
    let d = |e: VmEvent| s[1][e] - s[0][e];
    [
        d(VmEvent::PgZeroUser),
        d(VmEvent::PgZeroAlloc),
        d(VmEvent::PgZeroInitOnAlloc),
        d(VmEvent::PgZeroInitOnFree),
        d(VmEvent::PgClear),
    ]
}

/// `init_on_alloc` / `init_on_free` as 6.18's post_alloc_hook, free_pages_prepare and
/// user_alloc_needs_zeroing decide: 1000 written pages and the tables that map them.
#[test]
fn init_on_alloc_and_init_on_free() {
    // [user, alloc (page tables), init_on_alloc, init_on_free, total]
    // 1000 pages under 2 PTE tables (4000K from a 2 MiB-unaligned start spans two).
    let [u, a, ia, ifr, t] = counts(&[]);
    assert_eq!([u, a, ia, ifr, t], [1000, 2, 0, 0, 1002]);
    // init_on_alloc: every allocation cleared once, the fault does not clear again.
    assert_eq!(counts(&[("init_on_alloc", "1")]), [0, 0, 1002, 0, 1002]);
    // init_on_free: frees clear (the pages and the tables munmap frees); __GFP_ZERO skips its
    // clear; the fault still clears (so a user page is cleared twice).
    assert_eq!(counts(&[("init_on_free", "1")]), [1000, 0, 0, 1002, 2002]);
    // Both: cleared at free only.
    assert_eq!(counts(&[("init_on_alloc", "1"), ("init_on_free", "1")]), [0, 0, 0, 1002, 1002]);
}

/// The same knobs through the front end's path, with a fork and a THP: the reference model
/// and the invariants hold under every prezeroing policy.
#[test]
fn prezeroing_policies_keep_memory_correct() {
    let prog = json!([
        {"op": "mmap", "name": "p", "size": "6M", "align": "2M"},
        {"op": "madvise", "region": "p", "advice": "hugepage", "length": "2M"},
        {"op": "write", "region": "p", "stride": 8192, "value": 3},
        {"op": "fork", "program": [
            {"op": "read", "region": "p", "expect": null},
            {"op": "write", "region": "p", "stride": 16384, "value": 4},
            {"op": "munmap", "region": "p", "offset": "1M", "length": "2M"},
        ]},
        {"op": "wait"},
        {"op": "munmap", "region": "p"},
        {"op": "mmap", "name": "q", "size": "6M"},
        {"op": "read", "region": "q", "expect": 0},
        {"op": "write", "region": "q", "stride": 4096, "value": 5},
        {"op": "read", "region": "q", "expect": 5},
    ]);
    let policies: &[&[(&str, &str)]] = &[
        &[],
        &[("vm/scrub_start", "0"), ("vm/scrub_stop", "0")],
        &[("vm/scrub_start", "3"), ("vm/scrub_merge", "separate"), ("transparent_hugepage/enabled", "always")],
        &[("vm/scrub_start", "5"), ("vm/scrub_engine", "cpu_nt")],
        &[("init_on_free", "1")],
        &[("init_on_alloc", "1"), ("vm/scrub_start", "9")],
    ];
    for knobs in policies {
        let w = parse_workload(&json!({"machine": {"cpus": 2, "memory": "64M"}, "program": prog}).to_string())
            .expect("valid");
        let sets: Vec<(String, String)> = knobs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        let opts = RunOptions { check: true, invariants_each_op: true, ..Default::default() };
        let r = run_with(&w, &sets, &opts).expect("runs");
        assert!(!r.failed, "{knobs:?}: {:?}", r.events);
        assert_eq!(r.check.mismatches, 0, "{knobs:?}");
    }
}

/// A task asleep when its thread group is killed (another thread's segfault) stays dead: the
/// run ends (found by the random workloads: the sleeper used to be woken as a running task
/// without an mm, and the run never ended).
#[test]
fn a_sleeping_thread_killed_with_its_group_stays_dead() {
    let prog = json!([
        {"op": "mmap", "name": "ro", "size": "4096", "prot": "r"},
        {"op": "thread", "program": [{"op": "sleep", "ms": 50}, {"op": "write", "region": "ro"}]},
        {"op": "sleep", "ms": 1000},
        {"op": "write", "region": "ro"},
    ]);
    let mut it = interp(prog, &[], 2, 64 * MIB, "default");
    let mut rounds = 0;
    while it.round() {
        rounds += 1;
        assert!(rounds < 10_000, "the run does not end");
    }
    assert!(it.tasks.iter().all(|t| t.state == crate::workload::interp::TaskState::Killed));
    assert_eq!(it.events.iter().filter(|e| e.kind == "segfault").count(), 1);
}
