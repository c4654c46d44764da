//! `engine.events`: the events of a run, exact in number and order, with their tasks; a run
//! without them is unchanged.

use serde_json::json;

use crate::report::Report;
use crate::sim::{run_with, RunOptions};
use crate::workload::spec::parse_workload;

fn run(w: serde_json::Value, events: Option<&str>) -> Report {
    let w = parse_workload(&w.to_string()).unwrap();
    let sets: Vec<(String, String)> =
        events.map(|e| ("engine.events".to_string(), e.to_string())).into_iter().collect();
    run_with(&w, &sets, &RunOptions::default()).unwrap()
}

/// hzp-rss (docs/getting-started.md): 200 MiB read a page at a time under THP always, then
/// one byte written.
fn hzp_rss() -> serde_json::Value {
    json!({"name": "hzp-rss",
        "knobs": {"transparent_hugepage/enabled": "always"},
        "program": [
            {"op": "mmap", "name": "p", "size": "200M", "align": "2M"},
            {"op": "read", "region": "p", "stride": 4096},
            {"op": "write", "region": "p", "length": 1}]})
}

#[test]
fn each_fault_allocation_and_huge_zero_map_is_an_event_of_its_task() {
    let r = run(hzp_rss(), Some("exceptions:*,kmem:mm_page_alloc,mmsim:*"));
    let count = |name: &str| r.trace_events.iter().filter(|e| e.event == name).count();
    // 100 read faults (one per 2 MiB, each mapping the huge zero page) and the write's.
    assert_eq!(count("exceptions:page_fault_user") as i64, r.processes[0].minflt);
    assert_eq!(count("exceptions:page_fault_user"), 101);
    assert_eq!(count("mmsim:huge_zero_page_map"), 100);
    // A deposited PTE table per read fault, the huge zero page once, the write's THP.
    assert_eq!(count("kmem:mm_page_alloc"), 102);
    assert_eq!(count("kmem:mm_page_free"), 0, "not selected");
    let first: Vec<(&str, &str)> = r.trace_events[..4].iter().map(|e| (e.event, e.fields.as_str())).collect();
    assert_eq!(first[0].0, "exceptions:page_fault_user");
    assert!(first[0].1.ends_with("ip=0x0 error_code=0x4"), "{first:?}");
    assert_eq!(
        &first[1..],
        &[
            ("kmem:mm_page_alloc", "pfn=0x6 order=0 gfp_flags=0x435"),
            ("kmem:mm_page_alloc", "pfn=0x200 order=9 gfp_flags=0x407"),
            ("mmsim:huge_zero_page_map", "address=0x7fffeb400000"),
        ]
    );
    let last = r.trace_events.iter().rev().find(|e| e.event == "exceptions:page_fault_user").unwrap();
    assert!(last.fields.ends_with("error_code=0x6"), "the write: {last:?}");
    assert!(r.trace_events.iter().all(|e| (e.comm.as_str(), e.pid, e.cpu) == ("hzp-rss", 1, 0)));
    assert!(r.trace_events.windows(2).all(|w| w[0].time <= w[1].time), "in time order");
}

#[test]
fn a_fork_and_the_switches_between_its_tasks_are_events() {
    let w = json!({"name": "forker", "machine": {"cpus": 1},
        "program": [
            {"op": "mmap", "name": "p", "size": "64K"},
            {"op": "write", "region": "p", "stride": 4096},
            {"op": "fork", "program": [{"op": "write", "region": "p", "stride": 4096}]},
            {"op": "wait"}]});
    let r = run(w, Some("sched:*"));
    let forks: Vec<&str> =
        r.trace_events.iter().filter(|e| e.event == "sched:sched_process_fork").map(|e| e.fields.as_str()).collect();
    assert_eq!(forks, vec!["comm=forker pid=1 child_comm=forker child_pid=2"]);
    let switches: Vec<String> = r
        .trace_events
        .iter()
        .filter(|e| e.event == "sched:sched_switch")
        .map(|e| e.fields.split(" prev_prio").next().unwrap().to_string() + &e.fields[e.fields.find("==>").unwrap()..])
        .collect();
    assert_eq!(switches[0], "prev_comm=swapper/0 prev_pid=0==> next_comm=forker next_pid=1 next_prio=120");
    assert!(switches.iter().any(|s| s.contains("prev_pid=1") && s.contains("next_pid=2")), "{switches:?}");
}

#[test]
fn events_change_no_counter_and_a_bad_glob_is_an_error() {
    let (with, without) = (run(hzp_rss(), Some("*")), run(hzp_rss(), None));
    assert!(without.trace_events.is_empty());
    assert_eq!(with.perf, without.perf);
    assert_eq!(with.vmstat, without.vmstat);
    let w = parse_workload(&hzp_rss().to_string()).unwrap();
    let e = run_with(&w, &[("engine.events".into(), "kmem:nosuch".into())], &RunOptions::default()).unwrap_err();
    assert!(e.to_string().contains("--set engine.events=kmem:nosuch: \"kmem:nosuch\" selects no event"), "{e}");
}

/// The `ns=` field of an event.
fn ns(e: &crate::tracepoints::TraceEvent) -> f64 {
    e.fields.rsplit("ns=").next().unwrap().parse().unwrap()
}

#[test]
fn a_contended_spinlock_raises_each_wait_with_its_length() {
    // Two threads on two CPUs take one spinlock 200 times each, holding it 1,000 cycles: they
    // take turns, so nearly every acquisition waits for the other's hold.
    let w = json!({"name": "spin", "machine": {"cpus": 2},
        "program": [
            {"op": "mmap", "name": "p", "size": "4K"},
            {"op": "write", "region": "p"},
            {"op": "thread", "count": 2, "cpu": 0,
             "program": [{"op": "atomic", "region": "p", "count": 200, "hold": 1000}]},
            {"op": "wait"}]});
    let (with, without) = (run(w.clone(), Some("mmsim:lock_wait")), run(w, None));
    assert_eq!(with.perf, without.perf);
    let waits: Vec<_> = with.trace_events.iter().filter(|e| e.event == "mmsim:lock_wait").collect();
    assert!(waits.len() > 200, "{} waits", waits.len());
    assert!(waits.iter().all(|e| e.fields.contains("func=spin_lock") && ns(e) > 0.0));
    // Each thread's events are on its own CPU; a wait is at most the other's hold plus a
    // line transfer (1,000 cycles at the default profile's clock, and some).
    let cpus: std::collections::BTreeSet<u32> = waits.iter().map(|e| e.cpu).collect();
    assert_eq!(cpus.len(), 2);
    let hold_ns = 1000.0 / 2.45;
    assert!(waits.iter().all(|e| ns(e) <= hold_ns * 1.5), "{:?}", waits.iter().map(|e| ns(e)).fold(0.0, f64::max));
}

#[test]
fn a_cold_read_raises_its_waits_for_the_device() {
    let w = json!({"name": "cold",
        "program": [
            {"op": "create", "file": "f", "size": "4M"},
            {"op": "pread", "file": "f", "chunk": "64K"}]});
    let (with, without) = (run(w.clone(), Some("mmsim:io_wait")), run(w, None));
    assert_eq!(with.perf, without.perf);
    assert!(!with.trace_events.is_empty());
    let pages: u64 = with
        .trace_events
        .iter()
        .map(|e| e.fields.split("pages=").nth(1).unwrap().split(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    // The first miss waits for the sync window (read_ahead_kb 128: 32 pages); the async
    // windows after it complete when submitted (the model's I/O timing), so nothing else waits.
    assert_eq!(pages, 32);
    assert_eq!(with.trace_events.len(), 1);
    assert!(with.trace_events.iter().all(|e| ns(e) > 0.0));
}

#[test]
fn memcg_updates_and_flushes_are_events_as_linuxs_memcg_tracepoints() {
    // 100 pages written in `box` (memcg 1) on one CPU: each fault counts a pgfault and charges
    // a page (v1's pgpgin with cgroup/memory=v1, the rss and LRU sizes): over 128 updates a
    // CPU pending, so the read of memory.stat at the snapshot flushes them.
    let w = json!({"cgroups":{"box":{}},"cgroup":"box","machine":{"cpus":2},"cpu":0,
        "knobs":{"transparent_hugepage/enabled":"never"},"program":[
        {"op":"snapshot","label":"before"},
        {"op":"mmap","name":"p","size":"400K"},
        {"op":"write","region":"p"},
        {"op":"snapshot","label":"after"}]});
    let r = run(w, Some("memcg:*"));
    let box_ = |e: &&crate::tracepoints::TraceEvent| e.fields.starts_with("memcg_id=1 ");
    let pgfaults = r
        .trace_events
        .iter()
        .filter(box_)
        .filter(|e| e.event == "memcg:count_memcg_events" && e.fields.contains(" item=pgfault "))
        .count();
    assert_eq!(pgfaults, 100);
    // Each page mapped adds one to nr_anon_pages, and the exit takes each away.
    let anon: Vec<i64> = r
        .trace_events
        .iter()
        .filter(box_)
        .filter(|e| e.event == "memcg:mod_memcg_lruvec_state" && e.fields.contains(" item=nr_anon_pages "))
        .map(|e| e.fields.rsplit("val=").next().unwrap().parse::<i64>().unwrap())
        .collect();
    assert_eq!(anon.iter().filter(|&&v| v == 1).count(), 100);
    assert_eq!(anon.iter().sum::<i64>(), 0);
    let flushes: Vec<&str> = r
        .trace_events
        .iter()
        .filter(box_)
        .filter(|e| e.event == "memcg:memcg_flush_stats")
        .map(|e| e.fields.as_str())
        .collect();
    assert_eq!(flushes.first(), Some(&"memcg_id=1 stats_updates=0 force=0 needs_flush=0"));
    assert!(flushes.last().unwrap().ends_with("force=0 needs_flush=1"), "{flushes:?}");
    // What the second read flushed is in its memory.stat.
    let after = r.snapshots.iter().find(|s| s.label == "after").unwrap();
    assert_eq!(after.cgroups["box"].stat.get("anon"), Some(100 * 4096));
}

#[test]
fn a_tasks_vmas_are_slab_objects_charged_to_its_cgroup() {
    // A process of `box` maps 16 MiB (one vm_area_struct), then 4 MiB right after it, which
    // merges (vma_merge_new_range expands the first: nothing allocated); it mprotects 4 MiB in
    // the middle (__split_vma twice: two vm_area_dup) and unmaps the first 16 MiB (a split at
    // their end, then three vm_area_free); its exit frees the last. kmem:kmem_cache_alloc and
    // kmem_cache_free as the kernel's tracepoints count them, each charged to box (memcg 1)
    // but the stack's, made before the process joined box.
    let w = json!({"cgroups":{"box":{}},"cgroup":"box","program":[
        {"op":"mmap","name":"p","size":"16M","addr":"0x100000000","fixed":true},
        {"op":"mmap","name":"q","size":"4M","addr":"0x101000000","fixed":true},
        {"op":"mprotect","region":"p","offset":"4M","length":"4M","prot":"r"},
        {"op":"munmap","region":"p"}]});
    let r = run(w, Some("kmem:kmem_cache*"));
    assert_eq!(slab_events(&r, "kmem:kmem_cache_alloc", "vm_area_struct"), ["1"; 4]);
    assert_eq!(slab_events(&r, "kmem:kmem_cache_free", "vm_area_struct"), ["1", "1", "1", "1", "none"]);
}

#[test]
fn an_ext4_folios_buffer_heads_are_charged_to_its_memcg() {
    // 4 MiB written to an ext4 file by a process of `box`: each folio written gets a buffer
    // head per 4 KiB block (create_empty_buffers), 1024 in all, charged to box; once fsync has
    // written them, fadvise DONTNEED drops the folios, freeing every buffer head
    // (try_to_free_buffers) as the kernel's kmem tracepoints count them.
    let w = json!({"cgroups":{"box":{}},"cgroup":"box","program":[
        {"op":"create","file":"f","size":0,"fs":"ext4"},
        {"op":"pwrite","file":"f","length":"4M","chunk":"64K"},
        {"op":"fsync","file":"f"},
        {"op":"fadvise","file":"f","advice":"dontneed"}]});
    let r = run(w, Some("kmem:kmem_cache*"));
    assert_eq!(slab_events(&r, "kmem:kmem_cache_alloc", "buffer_head"), vec!["1"; 1024]);
    assert_eq!(slab_events(&r, "kmem:kmem_cache_free", "buffer_head"), vec!["1"; 1024]);
}

/// The memcg (`memcg_id`) of each `event` (kmem:kmem_cache_alloc or _free) of `cache`.
fn slab_events(r: &Report, event: &str, cache: &str) -> Vec<String> {
    let name = format!("name={cache} ");
    r.trace_events
        .iter()
        .filter(|e| e.event == event && e.fields.starts_with(&name))
        .map(|e| e.fields.rsplit("memcg_id=").next().unwrap().to_string())
        .collect()
}
