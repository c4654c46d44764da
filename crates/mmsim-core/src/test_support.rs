//! What the scenario tests share: a workload run with the reference model and the
//! invariants checked after every system call, which must run clean, and its snapshots.

use serde_json::Value;

use crate::report::{Report, Snapshot};
use crate::sim::{run_with, RunOptions};
use crate::workload::spec::{parse_workload, Workload};

/// Run `w` with the reference model and the invariants after every op; panics on a
/// reference-model mismatch or a violated invariant (failed `expect`s are left to the caller).
fn run_workload_checked(w: &Workload) -> Report {
    let opts = RunOptions { check: true, invariants_each_op: true, ..Default::default() };
    let r = run_with(w, &[], &opts).expect("runs");
    assert_eq!(r.check.mismatches, 0, "reference model mismatches: {:?}", r.events);
    assert!(!r.events.iter().any(|e| e.kind == "invariant"), "invariant violated: {:?}", r.events);
    r
}

/// `run_workload_checked` that also panics on a failed `expect`.
fn run_workload_clean(w: &Workload) -> Report {
    let r = run_workload_checked(w);
    assert_eq!(r.check.expect_failures, 0, "expectations failed: {:?}", r.events);
    r
}

/// A workload written as JSON, run with the reference model and the invariants; failed
/// `expect`s are the caller's to count.
pub(crate) fn run_checked(w: Value) -> Report {
    run_workload_checked(&parse_workload(&w.to_string()).expect("valid workload"))
}

/// A workload written as JSON, which must run clean: no mismatch, failed `expect` or
/// violated invariant.
pub(crate) fn run(w: Value) -> Report {
    run_workload_clean(&parse_workload(&w.to_string()).expect("valid workload"))
}

/// A case of the validate suite (`experiments/validate/NAME.json`), which must run clean.
pub(crate) fn run_validate_case(name: &str) -> Report {
    let path = format!("{}/../../experiments/validate/{name}.json", env!("CARGO_MANIFEST_DIR"));
    run_workload_clean(&parse_workload(&std::fs::read_to_string(path).expect("the validate case")).expect("valid"))
}

/// The snapshot labelled `label`.
pub(crate) fn snap<'a>(r: &'a Report, label: &str) -> &'a Snapshot {
    r.snapshots.iter().find(|s| s.label == label).unwrap_or_else(|| panic!("no snapshot {label}"))
}
