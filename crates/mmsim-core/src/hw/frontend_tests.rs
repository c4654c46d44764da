//! perf's `stalled-cycles-frontend` as each CPU's kernel maps it (`cpu.frontend_event`).

use serde_json::json;

use super::profile::{self, FrontendEvent};
use super::tests::run_with_sets;

/// On Westmere Linux counts the cycles in which no uop issued: a loop of `n` instructions in
/// `c` cycles issues them 4 at a time, so the count is c - n / 4, whatever the loop waited
/// for; where the event counts fetch stalls (Haswell: mmsim's own), a loop that fetches
/// nothing new counts none.
#[test]
fn stalled_frontend_is_what_the_cpus_event_counts() {
    let w = |profile: &str| {
        json!({"machine":{"profile":profile,"cpus":1},"knobs":{"transparent_hugepage/enabled":"never"},
            "program":[{"op":"mmap","name":"p","size":"64K"},
                {"op":"loop","count":1000,"body":[{"op":"read","region":"p","stride":64}]}]})
    };
    let p = profile::builtin("westmere-ex", &[]).unwrap();
    assert_eq!((p.cpu.frontend_event, p.cpu.issue_width), (FrontendEvent::NoIssue, 4.0));
    let r = run_with_sets(w("westmere-ex"), &[]);
    let get = |r: &crate::report::Report, n: &str| r.perf.get(n).unwrap();
    let (cycles, insns) = (get(&r, "cycles"), get(&r, "instructions"));
    let fe = get(&r, "stalled-cycles-frontend");
    assert!((fe - (cycles - insns / 4.0)).abs() <= 1.0, "{fe} vs {cycles} - {insns} / 4");
    assert!(fe > 0.3 * cycles, "a load-port-bound loop leaves most cycles without issue: {fe} of {cycles}");
    // The same run as Haswell counts it: no fetch stall once the loop's code is cached.
    let r = run_with_sets(w("westmere-ex"), &[("hw.cpu.frontend_event", "fetch")]);
    assert!(get(&r, "stalled-cycles-frontend") < 0.01 * get(&r, "cycles"));
}

/// A profile asking for the no-issue count without a width is refused, naming the field.
#[test]
fn no_issue_needs_a_width() {
    let e = profile::builtin("westmere-ex", &[("cpu.issue_width".into(), "0".into())]).unwrap_err();
    assert!(e.to_string().contains("cpu.frontend_event"), "{e}");
}
