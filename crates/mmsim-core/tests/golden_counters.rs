//! Golden counters: a fixed set of workloads (`tests/golden/cases.json`: experiments/validate,
//! experiments/bench, experiments/workloads and the small workloads of
//! `tests/golden/workloads/`, several with knob and hardware variants) whose whole report, the
//! JSON object `mmsim run --json` prints, is pinned in `tests/golden/expected/NAME.json`. Any
//! change of any number fails the test: an optimisation must leave every count bit-identical,
//! and a model change re-blesses the files in a commit of its own that says why they moved.
//!
//! Re-bless (write every expected file from the current engine) after checking the diff:
//!
//! ```sh
//! MMSIM_BLESS=1 cargo test --release -p mmsim-core --test golden_counters
//! git diff --stat crates/mmsim-core/tests/golden/expected
//! ```
//!
//! On a mismatch the test names the cases and the first differing JSON paths, and writes what
//! the engine reported now to `target/golden-actual/NAME.json` (compare with `diff`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::Value;

/// One pinned run: a workload file (relative to the repository's root), `--set` overrides and
/// `--check`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    workload: String,
    #[serde(default)]
    set: serde_json::Map<String, Value>,
    #[serde(default)]
    check: bool,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The report of one case, as pretty JSON text (what is pinned).
fn run_case(c: &Case) -> String {
    let path = root().join(&c.workload);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let w = mmsim_core::workload::spec::parse_workload(&text).unwrap_or_else(|e| panic!("{}: {e}", c.workload));
    let sets: Vec<(String, String)> =
        c.set.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string))).collect();
    let opts = mmsim_core::sim::RunOptions { check: c.check, ..Default::default() };
    let report = mmsim_core::sim::run_with(&w, &sets, &opts).unwrap_or_else(|e| panic!("{}: {e}", c.name));
    serde_json::to_string_pretty(&report).expect("reports serialise") + "\n"
}

/// The JSON paths where `a` and `b` differ (at most `max`).
fn diff_paths(a: &Value, b: &Value, path: &str, out: &mut Vec<String>, max: usize) {
    if out.len() >= max || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                match y.get(k) {
                    Some(vb) => diff_paths(va, vb, &format!("{path}.{k}"), out, max),
                    None => out.push(format!("{path}.{k}: only in the expected file")),
                }
            }
            for k in y.keys().filter(|k| !x.contains_key(*k)) {
                if out.len() < max {
                    out.push(format!("{path}.{k}: new"));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                diff_paths(va, vb, &format!("{path}[{i}]"), out, max);
            }
        }
        _ => out.push(format!("{path}: expected {a}, now {b}")),
    }
}

#[test]
fn golden_counters_are_unchanged() {
    let dir = golden_dir();
    let cases: Vec<Case> = serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).expect("cases.json"))
        .expect("cases.json parses");
    let bless = std::env::var_os("MMSIM_BLESS").is_some_and(|v| v != "0");
    let expected_dir = dir.join("expected");
    let actual_dir = root().join("target/golden-actual");
    if bless {
        std::fs::create_dir_all(&expected_dir).expect("create expected/");
    }
    // The cases run on two threads (the machine this is built on has two cores).
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(c) = cases.get(i) else { return };
                let now = run_case(c);
                let file = expected_dir.join(format!("{}.json", c.name));
                if bless {
                    std::fs::write(&file, &now).expect("write expected file");
                    continue;
                }
                let Ok(want) = std::fs::read_to_string(&file) else {
                    failures.lock().unwrap().push(format!("{}: no expected file (bless it)", c.name));
                    continue;
                };
                if want != now {
                    let mut paths = Vec::new();
                    let (a, b): (Value, Value) =
                        (serde_json::from_str(&want).expect("expected JSON"), serde_json::from_str(&now).unwrap());
                    diff_paths(&a, &b, "", &mut paths, 12);
                    std::fs::create_dir_all(&actual_dir).expect("create target/golden-actual");
                    std::fs::write(actual_dir.join(format!("{}.json", c.name)), &now).expect("write actual");
                    failures.lock().unwrap().push(format!("{}:\n    {}", c.name, paths.join("\n    ")));
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    if !bless {
        // Expected files no case produces any more.
        let names: std::collections::HashSet<String> = cases.iter().map(|c| format!("{}.json", c.name)).collect();
        for e in std::fs::read_dir(&expected_dir).expect("expected/") {
            let n = e.expect("entry").file_name().to_string_lossy().into_owned();
            if !names.contains(&n) {
                failures.push(format!("{n}: an expected file without a case (remove it)"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden outputs differ (now in target/golden-actual/; MMSIM_BLESS=1 re-blesses):\n  {}",
        failures.len(),
        cases.len(),
        failures.join("\n  ")
    );
}
