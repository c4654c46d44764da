//! The serial schedule (`engine.schedule=serial`): exact order and counts.

use serde_json::json;

use crate::report::Report;
use crate::sim::{run_with, RunOptions};
use crate::workload::spec::parse_workload;

fn run(w: serde_json::Value, serial: bool) -> Report {
    let w = parse_workload(&w.to_string()).expect("valid workload");
    let opts = RunOptions { check: true, invariants_each_op: true, serial: Some(serial), ..Default::default() };
    let r = run_with(&w, &[], &opts).expect("runs");
    assert_eq!(r.check.mismatches, 0, "reference model mismatches: {:?}", r.events);
    r
}

/// (label, pid) of every snapshot, in the order they were taken.
fn order(r: &Report) -> Vec<(String, u32)> {
    r.snapshots.iter().map(|s| (s.label.clone(), s.pid)).collect()
}

#[test]
fn tasks_run_depth_first_each_to_its_end() {
    let snap = |l: &str| json!({"op":"snapshot","label":l});
    let w = json!({"machine":{"cpus":4},"program":[
        {"op":"mmap","name":"p","size":"1M"},
        {"op":"fork","count":2,"program":[
            snap("child"),
            {"op":"thread","count":2,"program":[snap("thread"), {"op":"write","region":"p"}]},
            snap("child-end")]},
        snap("parent"),
        {"op":"wait"}]});
    let r = run(w.clone(), true);
    let s = |l: &str, p: u32| (l.to_string(), p);
    // A fork op's two children take pids 2 and 3; child 2's threads 4 and 5 come after them.
    assert_eq!(
        order(&r),
        vec![
            s("child", 2),
            s("thread", 4),
            s("thread", 5),
            s("child-end", 2),
            s("child", 3),
            s("thread", 6),
            s("thread", 7),
            s("child-end", 3),
            s("parent", 1),
        ]
    );
    // The parallel schedule interleaves them: the parent does not wait for its children.
    assert_ne!(order(&run(w, false)), order(&r));
}

#[test]
fn a_parent_after_its_serial_children_reuses_its_thp() {
    // The child splits its own pmds and exits before the parent writes: the parent's THP is
    // mapped by its pmd alone (refcount 1), and do_huge_pmd_wp_page reuses it, as Linux does.
    let w = json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"8M","align":"2M"},
        {"op":"write","region":"p"},
        {"op":"fork","program":[{"op":"write","region":"p","stride":"1M","value":2}]},
        {"op":"write","region":"p","offset":"2M","length":1,"value":3},
        {"op":"snapshot","label":"done"},
        {"op":"wait"}]});
    let r = run(w, true);
    let done = &r.snapshots[0];
    assert_eq!(done.vmstat.get("thp_split_pmd"), Some(4), "the child's four, none of the parent's");
    assert_eq!(done.processes[0].anon_huge_pages, 8192);
}

#[test]
fn engine_fork_cgroup_root_charges_the_forks_page_tables_outside_the_workloads_cgroup() {
    // A process in `box` with 64 MiB of anonymous memory (32 PTE tables) forks. Linux charges
    // the tables dup_mmap copies to the forking task's cgroup: `box`, or the root where the
    // fork is made from it (validate's runner). The child's own later tables are box's either
    // way, and so are its faults.
    let w = json!({"cgroups":{"box":{}},"cgroup":"box",
        "knobs":{"transparent_hugepage/enabled":"never"},"program":[
        {"op":"mmap","name":"p","size":"64M","align":"2M"},
        {"op":"write","region":"p"},
        {"op":"snapshot","label":"parent"},
        {"op":"fork","program":[{"op":"snapshot","label":"child"}]},
        {"op":"wait"}]});
    let tables = |root: bool| {
        let w = parse_workload(&w.to_string()).expect("valid workload");
        let opts = RunOptions { check: true, serial: Some(true), fork_from_root: Some(root), ..Default::default() };
        let r = run_with(&w, &[], &opts).expect("runs");
        let snap = |l: &str| r.snapshots.iter().find(|s| s.label == l).expect("snapshot");
        let pages = |l: &str| snap(l).cgroups["box"].stat_live.get("pagetables").unwrap_or(0) / 4096;
        // The child's tables below its PGD (VmPTE, mm_pgtables_bytes), and the PGD.
        let child = snap("child").processes.iter().find(|p| p.pid == 2).expect("the child").vm_pte / 4 + 1;
        (pages("parent"), pages("child"), child)
    };
    let (parent, own, child) = tables(false);
    let (parent_root, from_root, child_root) = tables(true);
    assert_eq!((parent, child), (parent_root, child_root));
    // The child's 32 PTE tables of `p` and the levels above them, copied by dup_mmap, are
    // box's only when the fork is made from box.
    assert!(child > 32, "{child}");
    assert_eq!(own, parent + child, "{own} {parent} {child}");
    assert_eq!(from_root, parent);
}

#[test]
fn each_task_made_in_a_cgroup_charges_it_its_kernel_stack() {
    // Two threads and a child made by a process in `box`: each new task's 16 KiB kernel stack
    // is charged to box (the creating task's cgroup) as kernel memory and counted in
    // kernel_stack while the task lives (Linux: memcg_charge_kernel_stack, account_kernel_stack),
    // and given back when it exits. The first process's stack is not box's: it was made
    // before it joined.
    let snap = |l: &str| json!({"op":"snapshot","label":l});
    let w = json!({"cgroups":{"box":{}},"cgroup":"box","program":[
        snap("start"),
        {"op":"thread","count":2,"program":[snap("thread")]},
        {"op":"fork","program":[{"op":"thread","program":[snap("grandchild")]}]},
        {"op":"wait"},
        snap("end")]});
    let w = parse_workload(&w.to_string()).expect("valid workload");
    let opts = RunOptions { check: true, invariants_each_op: true, serial: Some(true), ..Default::default() };
    let r = run_with(&w, &[], &opts).expect("runs");
    let at = |l: &str, key: &str| {
        let s = r.snapshots.iter().rfind(|s| s.label == l).expect("snapshot");
        s.cgroups["box"].stat_live.get(key).unwrap_or(0)
    };
    assert_eq!(at("start", "kernel_stack"), 0);
    // Each thread's snapshot: one thread's stack, as the runner's (serial: each task of an op
    // is made once the one before has ended, its stack charged as it starts).
    let threads: Vec<i64> = r
        .snapshots
        .iter()
        .filter(|s| s.label == "thread")
        .map(|s| s.cgroups["box"].stat_live.get("kernel_stack").unwrap_or(0))
        .collect();
    assert_eq!(threads, [16384, 16384]);
    // The child and its thread.
    assert_eq!(at("grandchild", "kernel_stack"), 2 * 16384);
    assert_eq!(at("end", "kernel_stack"), 0);
    // Kernel memory left: the page tables, and at most the page the CPU's object stock keeps
    // of the bytes the child's vm_area_structs (dup_mmap's, charged to box) gave back.
    let rest = at("end", "kernel") - at("end", "pagetables");
    assert!(rest == 0 || rest == 4096, "{rest}");
    let vm = |l: &str| {
        let s = r.snapshots.iter().rfind(|s| s.label == l).expect("snapshot");
        s.vmstat.get("nr_kernel_stack").unwrap()
    };
    assert_eq!(vm("grandchild") - vm("start"), 2 * 16);
    assert_eq!(vm("end"), vm("start"));
}
