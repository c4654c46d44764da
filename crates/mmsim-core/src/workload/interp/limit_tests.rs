//! Limits that hold: `kernel/pid_max` (fork and clone fail with EAGAIN while the pids in use
//! fill it; `wait` and a parent's exit free them) and `engine.max_host_memory`, exact counts.

use serde_json::json;

use crate::error::Error;
use crate::kernel::mm_types::FrameData;
use crate::report::Report;
use crate::sim::{run_with, RunOptions};
use crate::workload::interp::Interp;
use crate::workload::spec::parse_workload;

fn run(w: serde_json::Value) -> Report {
    let w = parse_workload(&w.to_string()).expect("valid workload");
    run_with(&w, &[], &RunOptions::default()).expect("runs")
}

/// Failed forks: the `fork-failed` events kept and the ones counted beyond them.
fn fork_failures(r: &Report) -> (usize, u64) {
    let kept = r.events.iter().filter(|e| e.kind == "fork-failed").count();
    assert_eq!(kept, r.events.len(), "only fork failures: {:?}", &r.events[..3.min(r.events.len())]);
    (kept, r.engine.events_dropped)
}

#[test]
fn pid_max_bounds_the_pids_in_use_and_wait_frees_them() {
    // Default pid_max 32768: pids 1..32767, the parent holds one, so 32766 children.
    let fork = json!({"op": "fork", "count": 40000});
    let r = run(json!({"program": [fork, {"op": "wait"}, fork, {"op": "wait"}]}));
    assert_eq!(r.knobs.0.iter().find(|k| k.0 == "kernel/pid_max").map(|k| k.1.as_str()), Some("32768"));
    // After the wait reaped the first 32766, the second op forks as many again.
    assert_eq!(r.processes.len(), 1 + 2 * 32766);
    assert_eq!(r.processes.last().map(|p| p.pid), Some(1 + 2 * 32766));
    let (kept, dropped) = fork_failures(&r);
    assert_eq!(kept as u64 + dropped, 2 * (40000 - 32766));
    assert_eq!((kept, r.events[0].pid), (200, 1));
    assert_eq!(r.events[0].message, "fork: EAGAIN (kernel/pid_max 32768: 32767 pids in use)");
}

#[test]
fn zombies_hold_their_pids_until_reaped() {
    // pid_max 301: 300 usable pids. The children exit while the parent sleeps, but as zombies
    // they keep their pids until the parent's wait: the fork after the sleep fails, the one
    // after wait works.
    let pause = json!({"op": "sleep", "ms": 10});
    let r = run(json!({"knobs": {"kernel/pid_max": 301}, "program": [
        {"op": "fork", "count": 300},
        pause,
        {"op": "fork"},
        {"op": "wait"},
        {"op": "fork", "count": 2},
    ]}));
    assert_eq!(r.processes.len(), 1 + 299 + 2);
    let failed: Vec<&str> = r.events.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(failed, vec!["fork: EAGAIN (kernel/pid_max 301: 300 pids in use)"; 2]);
    // A parent's exit frees its zombies (init reaps them) and its children exit unreaped by it:
    // the grandchildren's pids come back without any wait.
    let r = run(json!({"knobs": {"kernel/pid_max": 301}, "program": [
        {"op": "fork", "count": 1, "program": [{"op": "fork", "count": 298}]},
        pause,
        {"op": "fork", "count": 298},
    ]}));
    // The child exited before the parent's second fork; itself a zombie, it holds one pid.
    assert_eq!(r.processes.len(), 1 + 1 + 298 + 298);
    assert!(r.events.is_empty(), "{:?}", r.events);
}

#[test]
fn threads_take_pids_and_free_them_at_exit() {
    // clone fails as fork does; a thread other than the group leader reaps itself at exit.
    let r = run(json!({"knobs": {"kernel/pid_max": 301}, "program": [
        {"op": "thread", "count": 400},
        {"op": "sleep", "ms": 10},
        {"op": "thread", "count": 299},
    ]}));
    assert_eq!(r.processes.len(), 1 + 299 + 299);
    let (kept, dropped) = fork_failures(&r);
    assert_eq!((kept, dropped), (101, 0));
    assert_eq!(r.events[0].message, "clone: EAGAIN (kernel/pid_max 301: 300 pids in use)");
}

#[test]
fn pid_max_can_be_lowered_mid_run() {
    // As `echo 301 > /proc/sys/kernel/pid_max`: the pids in use stay, new ones are refused.
    let r = run(json!({"program": [
        {"op": "fork", "count": 400, "program": [{"op": "mmap", "name": "p", "size": "64K"}, {"op": "write", "region": "p"}]},
        {"op": "set", "knob": "kernel/pid_max", "value": 301},
        {"op": "fork", "count": 3},
        {"op": "wait"},
        {"op": "fork", "count": 3},
    ]}));
    assert_eq!(r.processes.len(), 1 + 400 + 3);
    assert_eq!(r.events.len(), 3);
    assert_eq!(r.events[0].message, "fork: EAGAIN (kernel/pid_max 301: 401 pids in use)");
}

/// The frames' content bytes recounted from scratch, against the kept total.
fn recount(it: &Interp) -> (u64, u64) {
    let mem = &it.kernel.mem;
    let tables = mem.data.iter().filter(|d| matches!(d, FrameData::Table(_))).count() as u64;
    let bytes = mem.data.iter().map(FrameData::heap_bytes).sum::<u64>()
        + tables * crate::kernel::mm_types::table_host_bytes(mem.table_entries);
    (bytes, tables)
}

#[test]
fn host_usage_counts_what_the_run_holds() {
    // 16 MiB written with sparse bytes (overrides), then forks that copy its page tables.
    let w = parse_workload(
        &json!({"machine": {"memory": "256M"}, "program": [
            {"op": "mmap", "name": "p", "size": "16M"},
            {"op": "write", "region": "p", "stride": 1024, "value": 3},
            {"op": "write", "region": "p", "length": "1M", "stride": 1, "value": 5},
            {"op": "fork", "count": 10, "program": [{"op": "write", "region": "p", "length": "2M"}]},
            {"op": "wait"},
            {"op": "munmap", "region": "p", "length": "8M"},
        ]})
        .to_string(),
    )
    .unwrap();
    let profile = crate::hw::profile::builtin("default", &[]).unwrap();
    let machine = crate::hw::machine::Machine::new(profile, 1);
    let kernel = crate::kernel::Kernel::new(w.machine.memory.0, Default::default(), crate::units::Geometry::X86_64);
    let mut it = Interp::new(kernel, machine, w.program.clone(), 0, false).unwrap();
    let mut peak_tables = 0;
    while it.round() {
        assert_eq!(recount(&it), (it.kernel.mem.content_bytes, it.kernel.mem.tables));
        peak_tables = peak_tables.max(it.kernel.mem.tables);
    }
    // Each child copied the parent's 8 PTE tables and its stack's and upper levels.
    assert!(peak_tables >= 8 * 11, "{peak_tables}");
    let u = it.host_usage();
    assert_eq!(u.frames, 65536 * 64);
    assert_eq!(u.page_tables, it.kernel.mem.tables * 4096);
    assert_eq!(u.nr_tasks, 11);
    // 4096 pages with four overrides each and 256 written whole, less the 2048 unmapped.
    assert!(u.data > 0 && u.total() > u.frames);
}

#[test]
fn max_host_memory_stops_a_fork_storm_with_the_limit_named() {
    // A parent with 64 MiB written: each child copies 32 PTE tables and more (about 150 KiB of
    // host memory each); 100000 children would take 15 GB, the limit stops the fork op.
    let w = json!({"machine": {"memory": "1G"}, "program": [
        {"op": "mmap", "name": "p", "size": "64M"},
        {"op": "write", "region": "p"},
        {"op": "fork", "count": 100000, "program": [{"op": "wait"}]},
    ]});
    let w = parse_workload(&w.to_string()).unwrap();
    let opts = RunOptions { max_host_memory: Some(256 << 20), ..Default::default() };
    let Err(Error::Limit(e)) = run_with(&w, &[], &opts) else { panic!("the limit stops the run") };
    assert!(e.starts_with("the simulator's own memory would pass engine.max_host_memory (256M): about 256 MiB"), "{e}");
    assert!(e.contains("MiB of page tables") && e.contains("for 1"), "{e}");
    assert!(e.ends_with("raise it with --set engine.max_host_memory=SIZE"), "{e}");
    // The same run, step by step: it stops after the fork that passed the limit, no later.
    let profile = crate::hw::profile::builtin("default", &[]).unwrap();
    let machine = crate::hw::machine::Machine::new(profile, 1);
    let kernel = crate::kernel::Kernel::new(1 << 30, Default::default(), crate::units::Geometry::X86_64);
    let mut it = Interp::new(kernel, machine, w.program.clone(), 0, false).unwrap();
    it.max_host_memory = 256 << 20;
    while it.round() && !it.host_limit_hit {}
    assert!(it.host_limit_hit);
    // Every mm holds the same page tables: the PGD, a PUD, a PMD, 32 PTE tables for p and one
    // for the stack (the parent's and each child's copy).
    let mms = it.tasks.len() as u64;
    assert_eq!(it.kernel.mem.tables, 36 * mms);
    // The estimate passed the limit with the last child, and not before it.
    let last = it.tasks.last().unwrap();
    let per_child = 36 * crate::kernel::mm_types::table_host_bytes(512)
        + super::task_host_bytes(last)
        + super::mm_host_bytes(Some(it.kernel.mm(last.mm.unwrap())))
        + it.machine.mm_host_bytes(1);
    let total = it.host_usage().total();
    assert!(total > 256 << 20 && total - per_child <= 256 << 20, "{:?}", it.host_usage());
    assert!((1000..1700).contains(&(mms - 1)), "{mms}");
}

#[test]
fn a_machine_whose_metadata_passes_the_limit_is_refused_before_it_boots() {
    let w = parse_workload(r#"{"machine":{"memory":"16G"},"program":[]}"#).unwrap();
    let opts = RunOptions { max_host_memory: Some(64 << 20), ..Default::default() };
    let e = run_with(&w, &[], &opts).unwrap_err().to_string();
    assert_eq!(
        e,
        "limit: machine.memory: 16.0 GiB of simulated memory takes 256 MiB of frame metadata, over \
         engine.max_host_memory (64M); raise it with --set engine.max_host_memory=SIZE"
    );
}

#[test]
fn the_default_host_limit_holds_the_largest_default_machine() {
    // engine.max_memory's default (256 GiB), every page written: 4 GiB of frame metadata,
    // under engine.max_host_memory's default. A page written whole, or in at most three
    // bytes, keeps its data in its 16-byte slot; more sparse bytes take an allocation (128
    // bytes for 16 of them).
    let pages = crate::sim::DEFAULT_MAX_MEMORY / 4096;
    let frame = (std::mem::size_of::<crate::kernel::mm_types::Page>() + std::mem::size_of::<FrameData>()) as u64;
    let mut c = crate::kernel::content::PageContent::default();
    c.write(0, 4096, 2048, 1, 4096);
    let few = FrameData::Data(c.clone()).heap_bytes();
    c.write(0, 4096, 256, 2, 4096);
    let many = FrameData::Data(c).heap_bytes();
    assert_eq!((frame, few, many), (64, 0, 32 + 16 + 4 * 16 + 16));
    assert!(pages * frame < crate::sim::DEFAULT_MAX_HOST_MEMORY);
}
