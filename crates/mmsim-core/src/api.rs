//! The engine's entry points for front ends (the PyO3 binding): JSON in, JSON out.

use crate::error::Error;

/// Run a workload given as JSON text, with knob overrides (`--set NAME=VALUE`, applied after
/// the workload's own knobs) and the reference-model check. Returns the report as JSON.
pub fn run_json(workload_json: &str, sets: &[(String, String)], check: bool) -> Result<String, Error> {
    run_json_with_progress(workload_json, sets, check, None)
}

/// `run_json`, calling `progress` now and then while the run goes on (see
/// `sim::RunOptions::progress`).
pub fn run_json_with_progress(
    workload_json: &str,
    sets: &[(String, String)],
    check: bool,
    progress: Option<crate::sim::ProgressFn>,
) -> Result<String, Error> {
    let spec = crate::workload::spec::parse_workload(workload_json)?;
    let opts = crate::sim::RunOptions { check, progress, ..Default::default() };
    let report = crate::sim::run_with(&spec, sets, &opts)?;
    Ok(serde_json::to_string(&report).expect("reports serialise"))
}

/// Every knob with its default, accepted values and meaning, as a JSON list.
pub fn knobs_json() -> String {
    serde_json::to_string(&crate::kernel::knobs::Knobs::describe()).expect("serialise")
}

/// The workload format's closed vocabularies, as the engine declares them: the ops, and for
/// each vocabulary its words with their values in Linux's uapi headers (`kernel/uapi.rs`),
/// for the Python front and the native runner, which keep no copies; and under `workload`, every
/// op's fields with their types, defaults and meanings (`workload::schema`).
pub fn schema_json() -> String {
    use crate::kernel::uapi::{Advice, FallocMode, MapFlag, MremapFlags, Pattern, Prot};
    fn words<T: Copy>(
        all: &[T],
        word: fn(T) -> &'static str,
        value: fn(T) -> i64,
        linux: fn(T) -> &'static str,
    ) -> serde_json::Value {
        all.iter().map(|&a| serde_json::json!({"word": word(a), "value": value(a), "linux": linux(a)})).collect()
    }
    serde_json::json!({
        "ops": crate::workload::spec::OPS,
        "workload": crate::workload::schema::declaration(),
        "advice": words(Advice::ALL, Advice::word, Advice::value, Advice::linux_name),
        "map_flags": words(MapFlag::ALL, MapFlag::word, MapFlag::value, MapFlag::linux_name),
        "pattern": words(Pattern::ALL, Pattern::word, Pattern::value, Pattern::linux_name),
        "mremap_flags": [
            {"word": "maymove", "value": MremapFlags::MAYMOVE.bits(), "linux": "MREMAP_MAYMOVE"},
            {"word": "fixed", "value": MremapFlags::FIXED.bits(), "linux": "MREMAP_FIXED"},
            {"word": "dontunmap", "value": MremapFlags::DONTUNMAP.bits(), "linux": "MREMAP_DONTUNMAP"},
        ],
        "falloc_mode": words(FallocMode::ALL, FallocMode::word, FallocMode::value, FallocMode::linux_name),
        "prot": [
            {"word": "r", "value": Prot::READ.bits(), "linux": "PROT_READ"},
            {"word": "w", "value": Prot::WRITE.bits(), "linux": "PROT_WRITE"},
            {"word": "x", "value": Prot::EXEC.bits(), "linux": "PROT_EXEC"},
        ],
    })
    .to_string()
}

/// The built-in hardware profiles as a JSON list of {name, description}.
pub fn profiles_json() -> String {
    let list: Vec<serde_json::Value> = crate::hw::profile::BUILTIN
        .iter()
        .map(|(name, text)| {
            let desc = crate::hw::profile::parse(text, &[]).map(|p| p.description).unwrap_or_else(|e| e.to_string());
            serde_json::json!({"name": name, "description": desc})
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// One profile as a JSON list of [PATH, VALUE] pairs (PATH as `--set hw.PATH=VALUE` takes it).
pub fn profile_show_json(name: &str) -> Result<String, Error> {
    let text = crate::hw::profile::BUILTIN.iter().find(|b| b.0 == name).map(|b| b.1).ok_or_else(|| {
        Error::Profile(format!("unknown profile {name:?} (known: {})", crate::hw::profile::names().join(", ")))
    })?;
    let flat = crate::hw::profile::flatten(text)?;
    Ok(serde_json::to_string(&flat).expect("serialise"))
}

/// The TOML text of a built-in profile (to copy and edit).
pub fn profile_text(name: &str) -> Result<String, Error> {
    crate::hw::profile::BUILTIN
        .iter()
        .find(|b| b.0 == name)
        .map(|b| b.1.to_string())
        .ok_or_else(|| Error::Profile(format!("unknown profile {name:?}")))
}
