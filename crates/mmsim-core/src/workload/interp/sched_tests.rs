//! The scheduler at fork, by era: where a new task goes (`sched/balance_fork`) and whether
//! it runs before its parent with half the parent's timeslice (`sched/child_runs_first`);
//! and an idle CPU pulling a waiting task (`sched/idle_balance`).

use serde_json::json;

use crate::report::Report;
use crate::sim::{run_with, RunOptions};
use crate::workload::spec::parse_workload;

fn run(w: serde_json::Value) -> Report {
    let w = parse_workload(&w.to_string()).expect("valid workload");
    let opts = RunOptions { check: true, ..Default::default() };
    let r = run_with(&w, &[], &opts).expect("runs");
    assert_eq!(r.check.mismatches, 0, "reference model mismatches: {:?}", r.events);
    r
}

fn snap(l: &str) -> serde_json::Value {
    json!({"op":"snapshot","label":l})
}

/// (label, pid, milliseconds) of every snapshot of the workload's tasks, in time order.
fn timeline(r: &Report) -> Vec<(String, u32, f64)> {
    let mut v: Vec<_> =
        r.snapshots.iter().filter(|s| s.pid != 0).map(|s| (s.label.clone(), s.pid, s.time * 1e3)).collect();
    v.sort_by(|a, b| a.2.total_cmp(&b.2));
    v
}

/// One CPU, 2.6's O(1) scheduler (a 100 ms timeslice, HZ 250: 25 ticks of 4 ms): a parent
/// forks a child that computes for longer than a slice. With child-runs-first the child runs
/// at once, for half the parent's 25 ticks rounded up (13: until 52 ms), then the parent takes
/// its other 12; without it the parent goes on and the child waits for the parent's slice to
/// end (or for its `wait`).
#[test]
fn child_runs_first_with_half_the_parents_timeslice() {
    let w = |first: u8| {
        json!({"machine":{"profile":"opteron-2.2","cpus":1},
            "knobs":{"sched/base_slice_ns":100_000_000,"kernel/hz":250,"sched/child_runs_first":first},
            "program":[
                {"op":"mmap","name":"p","size":"4M"},
                {"op":"write","region":"p"},
                {"op":"fork","program":[
                    snap("child"),
                    {"op":"loop","count":400,"body":[{"op":"read","region":"p","stride":64}]},
                    snap("child-end")]},
                snap("parent"),
                {"op":"wait"}]})
    };
    let on = timeline(&run(w(1)));
    let labels: Vec<_> = on.iter().map(|(l, p, _)| (l.as_str(), *p)).collect();
    assert_eq!(labels, [("child", 2), ("parent", 1), ("child-end", 2)], "{on:?}");
    let (child, parent) = (on[0].2, on[1].2);
    // The parent's 4 MiB of faults take 2.3 ms; the child runs right after its fork.
    assert!(child < 3.0, "the child runs at once: {child} ms");
    assert!((52.0..52.5).contains(&parent), "the parent waits out the child's 13 ticks: {parent} ms");
    assert!(on[2].2 > 100.0, "the child needs more than its half slice: {on:?}");

    let off = timeline(&run(w(0)));
    let labels: Vec<_> = off.iter().map(|(l, p, _)| (l.as_str(), *p)).collect();
    assert_eq!(labels, [("parent", 1), ("child", 2), ("child-end", 2)], "{off:?}");
    assert!(off[0].2 < 3.0 && off[1].2 < 3.0, "the parent's wait hands the CPU over: {off:?}");
}

/// Balance on fork: each child goes to the idlest CPU (fewest runnable tasks), the parent's on
/// a tie, else the lowest-numbered. On 4 CPUs, with a busy task pinned to CPU 2 first, the next
/// children go to the idle CPUs 1 and 3, then (every CPU at one task) to the parent's CPU 0,
/// then to 1; by pid they would go to CPUs 2, 3, 0, 1. Where each child's page faults were
/// taken tells where it ran.
#[test]
fn balance_on_fork_places_children_on_the_idlest_cpu() {
    let busy = json!([{"op":"mmap","name":"q","size":"64K"},
        {"op":"loop","count":2000,"body":[{"op":"write","region":"q","stride":64}]}]);
    let w = |balance: u8| {
        json!({"machine":{"cpus":4},
            "knobs":{"sched/balance_fork":balance,"sched/base_slice_ns":100_000_000,"sched/idle_balance":0},
            "program":[
                {"op":"fork","cpu":2,"program":busy},
                {"op":"fork","count":4,"program":busy},
                {"op":"wait"}]})
    };
    let placed = |balance: u8| {
        let w = parse_workload(&w(balance).to_string()).expect("valid workload");
        let sets = [("engine.events".to_string(), "exceptions:page_fault_user".to_string())];
        let r = run_with(&w, &sets, &RunOptions::default()).expect("runs");
        (2..=6u32)
            .map(|pid| r.trace_events.iter().find(|e| e.pid == pid).map(|e| e.cpu).expect("the child faulted"))
            .collect::<Vec<u32>>()
    };
    assert_eq!(placed(1), [2, 1, 3, 0, 1], "idlest first, the parent's CPU on a tie");
    assert_eq!(placed(0), [2, 2, 3, 0, 1], "by pid: (pid - 1) mod 4");
}

/// Affinity: a first process the workload pins (top-level `cpu`) keeps its children and
/// threads on its CPU (sched_fork copies the affinity mask), balanced or not; a fork's own
/// `cpu` still moves its child. Unpinned, the same children spread by pid.
#[test]
fn children_of_a_pinned_task_inherit_its_cpu() {
    let w = |cpu: Option<u32>| {
        let mut w = json!({"machine":{"cpus":4},
            "knobs":{"sched/balance_fork":1},
            "program":[
                {"op":"mmap","name":"q","size":"64K"},
                {"op":"fork","count":3,"program":[{"op":"write","region":"q"},
                    {"op":"thread","program":[{"op":"read","region":"q"}]},{"op":"wait"}]},
                {"op":"fork","cpu":3,"program":[{"op":"write","region":"q"}]},
                {"op":"wait"},
                {"op":"write","region":"q"}]});
        if let Some(c) = cpu {
            w["cpu"] = json!(c);
        }
        let w = parse_workload(&w.to_string()).expect("valid workload");
        let sets = [("engine.events".to_string(), "exceptions:page_fault_user".to_string())];
        let r = run_with(&w, &sets, &RunOptions::default()).expect("runs");
        let mut cpus: Vec<(u32, u32)> = r.trace_events.iter().map(|e| (e.pid, e.cpu)).collect();
        cpus.sort();
        cpus.dedup();
        cpus
    };
    let pinned = w(Some(1));
    assert!(pinned.iter().filter(|&&(pid, _)| pid != 5).all(|&(_, c)| c == 1), "{pinned:?}");
    assert!(pinned.contains(&(5, 3)), "a fork's cpu moves its child: {pinned:?}");
    let free = w(None);
    let cpus: std::collections::BTreeSet<u32> = free.iter().map(|&(_, c)| c).collect();
    assert!(cpus.len() > 1, "unpinned, the children spread: {free:?}");
}

/// Wakeup preemption: on one CPU, a child that runs first and sleeps 10 ms while its parent
/// computes runs again at its wake-up when the woken preempt (2.6's O(1) scheduler);
/// otherwise it waits for the parent's slice to end (the 12 ticks of 4 ms it kept at the fork).
#[test]
fn a_woken_task_preempts_the_running_one_when_the_era_does() {
    let w = |preempt: u8| {
        json!({"machine":{"profile":"opteron-2.2","cpus":1},
            "knobs":{"sched/base_slice_ns":100_000_000,"kernel/hz":250,"sched/child_runs_first":1,
                "sched/wakeup_preemption":preempt},
            "program":[
                {"op":"mmap","name":"p","size":"4M"},
                {"op":"write","region":"p"},
                {"op":"fork","program":[{"op":"sleep","ms":10}, snap("woke")]},
                {"op":"loop","count":400,"body":[{"op":"read","region":"p","stride":64}]},
                {"op":"wait"}]})
    };
    let woke = |preempt: u8| {
        let r = run(w(preempt));
        r.snapshots.iter().find(|s| s.label == "woke").unwrap().time * 1e3
    };
    let (on, off) = (woke(1), woke(0));
    // The child falls asleep right after its fork, at about 2.3 ms (the parent's faults).
    assert!((12.0..13.0).contains(&on), "preempts at its wake-up: {on} ms");
    assert!((48.0..49.0).contains(&off), "waits for the parent's slice: {off} ms");
}

/// A task of the workload that computes: maps 4 MiB, writes it, then reads it `n` times.
fn compute(n: u64) -> serde_json::Value {
    json!([snap("go"), {"op":"mmap","name":"w","size":"4M"}, {"op":"write","region":"w"},
        {"op":"loop","count":n,"body":[{"op":"read","region":"w","stride":64}]}, snap("end")])
}

/// The time (ms) of task `pid`'s snapshot `label`.
fn at(r: &Report, pid: u32, label: &str) -> f64 {
    r.snapshots.iter().find(|s| s.pid == pid && s.label == label).expect("snapshot").time * 1e3
}

/// Newly idle balance: on 2 CPUs, placed by pid, CPU 1 gets two long tasks (pids 2 and 4)
/// and CPU 0 a short one (pid 3). When pid 3 ends, CPU 0 has nothing to run and pulls pid 4,
/// which waits on CPU 1 behind pid 2's 100 ms slice: pid 4 starts the moment pid 3 exits.
/// Without idle balancing it waits for that slice.
#[test]
fn a_cpu_going_idle_pulls_a_waiting_task_at_once() {
    let w = |balance: u8| {
        json!({"machine":{"profile":"opteron-2.2","cpus":2},
            "knobs":{"sched/balance_fork":0,"sched/idle_balance":balance,"sched/base_slice_ns":100_000_000,
                "kernel/hz":250},
            "program":[
                {"op":"fork","program":compute(400)},
                {"op":"fork","program":compute(4)},
                {"op":"fork","program":compute(400)},
                {"op":"wait"}]})
    };
    let w1 = parse_workload(&w(1).to_string()).expect("valid workload");
    let sets = [("engine.events".to_string(), "sched:sched_migrate_task".to_string())];
    let on = run_with(&w1, &sets, &RunOptions { check: true, ..Default::default() }).expect("runs");
    assert_eq!(on.check.mismatches, 0);
    let moved: Vec<_> = on.trace_events.iter().map(|e| (e.pid, e.cpu, e.fields.clone())).collect();
    assert_eq!(moved, [(4, 0, "comm=workload pid=4 prio=120 orig_cpu=1 dest_cpu=0".to_string())]);
    let migrations = |r: &Report, pid: u32| {
        let p = r.processes.iter().find(|p| p.pid == pid).expect("process");
        (p.processor, p.perf.get("cpu-migrations").expect("counted"))
    };
    assert_eq!([migrations(&on, 2), migrations(&on, 3), migrations(&on, 4)], [(1, 0.0), (0, 0.0), (0, 1.0)]);
    let (short_end, pulled) = (at(&on, 3, "end"), at(&on, 4, "go"));
    // Between the two: pid 3's exit (the teardown of its 4 MiB, 34 us) and the switch.
    assert!(pulled >= short_end && pulled - short_end < 0.1, "pid 4 starts as pid 3 ends: {short_end} {pulled} ms");
    assert_eq!(on.perf.get("cpu-migrations"), Some(1.0));

    let off = run(w(0));
    assert!(at(&off, 4, "go") > 100.0, "pid 4 waits for pid 2's slice: {} ms", at(&off, 4, "go"));
    assert_eq!(migrations(&off, 4), (1, 0.0));
    assert!(at(&on, 4, "end") < at(&off, 4, "end") - 50.0);
}

/// An idle CPU's periodic balance: on 2 CPUs, pid 3 sleeps until 10 ms on CPU 0, where pid 5
/// computes through a 100 ms slice, while CPU 1 (short pid 2 and empty pid 4 done) is idle.
/// The woken task is pulled at CPU 1's first tick after its wake-up (12 ms at HZ 250);
/// without idle balancing it waits for pid 5's slice.
#[test]
fn an_idle_cpu_pulls_a_woken_task_at_its_next_tick() {
    let w = |balance: u8| {
        json!({"machine":{"profile":"opteron-2.2","cpus":2},
            "knobs":{"sched/balance_fork":0,"sched/idle_balance":balance,"sched/base_slice_ns":100_000_000,
                "kernel/hz":250,"sched/wakeup_preemption":0},
            "program":[
                {"op":"fork","program":compute(4)},
                {"op":"fork","program":[{"op":"sleep","until_ms":10}, snap("woke")]},
                {"op":"fork","program":[]},
                {"op":"fork","program":compute(400)},
                {"op":"wait"}]})
    };
    let (on, off) = (run(w(1)), run(w(0)));
    assert!(at(&on, 2, "end") < 10.0, "CPU 1 is idle before the wake-up");
    let woke = at(&on, 3, "woke");
    assert!((12.0..12.01).contains(&woke), "pulled at the 12 ms tick: {woke} ms");
    let p3 = on.processes.iter().find(|p| p.pid == 3).expect("pid 3");
    assert_eq!((p3.processor, p3.perf.get("cpu-migrations")), (1, Some(1.0)));
    assert!(at(&off, 3, "woke") > 100.0, "waits for the slice: {} ms", at(&off, 3, "woke"));
}
