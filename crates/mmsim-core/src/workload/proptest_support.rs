//! What the property-test modules share: their settings from the environment, a seeded
//! proptest configuration, one generated workload run under the reference model and the
//! invariants, and `make fuzz`'s campaign runner.

use std::str::FromStr;

use proptest::prelude::*;
use proptest::test_runner::{RngSeed, TestRunner};
use serde_json::Value;

use crate::kernel::Sabotage;
use crate::report::Report;
use crate::sim::{run_with, RunOptions};
use crate::workload::spec::parse_workload;

/// The environment variable `name` parsed, or `default` when it is unset or does not parse.
pub fn env_or<T: FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The campaign's seed: MMSIM_FUZZ_SEED for `make fuzz`, else the module's fixed `default`.
pub fn fuzz_seed(default: u64) -> u64 {
    env_or("MMSIM_FUZZ_SEED", default)
}

/// A deterministic configuration: `cases` workloads from `seed`, at most `max_shrink_iters`
/// shrinking steps, no persistence file.
pub fn config(cases: u32, seed: u64, max_shrink_iters: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        max_shrink_iters,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Run the workload `text` with the reference model and the invariants after every system
/// call, for at most `max_steps` steps; Err (with the workload) if it does not parse or run.
pub fn run_checked(text: &str, max_steps: u64, sabotage: Sabotage) -> Result<Report, String> {
    let spec = parse_workload(text).map_err(|e| format!("{e}\n{text}"))?;
    let opts = RunOptions {
        check: true,
        invariants_each_op: true,
        max_steps: Some(max_steps),
        sabotage,
        ..Default::default()
    };
    run_with(&spec, &[], &opts).map_err(|e| format!("{e}\n{text}"))
}

/// Err listing the run's reference-model mismatches and invariant violations, with the
/// workload `text`; Ok if there were none.
pub fn no_failures(r: &Report, text: &str) -> Result<(), String> {
    let bad: Vec<_> = r.events.iter().filter(|e| e.kind == "mismatch" || e.kind == "invariant").collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!("{bad:?}\nworkload: {text}"))
    }
}

/// `make fuzz`'s campaign: `check` the workloads `strategy` makes under `config`, print the
/// line `summary` writes from the number of failures (0 or 1), and panic with the shrunk
/// failing workload if there was one.
pub fn campaign<S: Strategy<Value = Value>>(
    config: ProptestConfig,
    strategy: &S,
    check: impl Fn(&Value) -> Result<(), String>,
    summary: impl FnOnce(u32) -> String,
) {
    let mut runner = TestRunner::new(config);
    let result = runner.run(strategy, |w| check(&w).map_err(TestCaseError::fail));
    println!("{}", summary(u32::from(result.is_err())));
    if let Err(e) = result {
        panic!("minimal failing workload (rerun it with `mmsim run --check`):\n{e}");
    }
}
