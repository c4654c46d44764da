//! The engine's entry points for front ends (the PyO3 binding): JSON in, JSON out.

use crate::error::Error;

/// Run a workload given as JSON text, with knob overrides (`--set NAME=VALUE`, applied after
/// the workload's own knobs) and the reference-model check. Returns the report as JSON.
pub fn run_json(workload_json: &str, sets: &[(String, String)], check: bool) -> Result<String, Error> {
    let spec = crate::workload::spec::parse_workload(workload_json)?;
    let report = crate::sim::run(&spec, sets, check)?;
    Ok(serde_json::to_string(&report).expect("reports serialise"))
}

/// Every knob with its default, accepted values and meaning, as a JSON list.
pub fn knobs_json() -> String {
    serde_json::to_string(&crate::kernel::knobs::Knobs::describe()).expect("serialise")
}
