//! PyO3 bindings of mmsim-core (`mmsim._mmsim`): convert, delegate, map errors. Nothing else
//! lives here; the Python package `mmsim` builds its API and CLI on these functions.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod trace;

create_exception!(mmsim, MmsimError, PyValueError, "A bad workload, knob or profile (one line).");

/// The one place engine errors become Python exceptions.
fn to_py(e: mmsim_core::Error) -> PyErr {
    MmsimError::new_err(e.to_string())
}

/// Run a workload (JSON text) with knob overrides and the optional reference-model check;
/// returns the report as JSON text. The GIL is released while the engine runs. With
/// `progress`, a run that takes more than two seconds shows a progress line on stderr (the
/// caller passes it when stderr is a terminal), erased when the run ends.
#[pyfunction]
#[pyo3(signature = (workload_json, sets = Vec::new(), check = false, progress = false))]
fn run(
    py: Python<'_>,
    workload_json: &str,
    sets: Vec<(String, String)>,
    check: bool,
    progress: bool,
) -> PyResult<String> {
    let shown = Arc::new(AtomicBool::new(false));
    let line = progress.then(|| progress_line(shown.clone()));
    let r = py.allow_threads(|| mmsim_core::api::run_json_with_progress(workload_json, &sets, check, line));
    if shown.load(Ordering::Relaxed) {
        eprint!("\r\x1b[K");
    }
    r.map_err(to_py)
}

/// A progress callback printing `mmsim: 12 s: 3.5M/1000M ops, 32767 tasks, ...` over itself
/// on stderr, once the run has taken two seconds, at most twice a second.
fn progress_line(shown: Arc<AtomicBool>) -> mmsim_core::sim::ProgressFn {
    let start = Instant::now();
    let last = Mutex::new(start);
    mmsim_core::sim::ProgressFn(Arc::new(move |p: &mmsim_core::sim::Progress| {
        let now = Instant::now();
        let mut last = last.lock().expect("progress lock");
        if now.duration_since(start) < Duration::from_secs(2) || now.duration_since(*last) < Duration::from_millis(500)
        {
            return;
        }
        *last = now;
        shown.store(true, Ordering::Relaxed);
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let mops = |n: u64| n as f64 / 1e6;
        // Under 80 columns, so that it overwrites itself in place on a standard terminal.
        eprint!(
            "\r\x1b[Kmmsim: {:.0} s: {:.1}M/{:.0}M ops, {} tasks, {} pids, host {:.1}/{:.1} GiB",
            now.duration_since(start).as_secs_f64(),
            mops(p.steps),
            mops(p.max_steps),
            p.tasks,
            p.pids,
            gib(p.host_bytes),
            gib(p.max_host_bytes),
        );
    }))
}

/// Every knob as a JSON list of {name, default, values, help}.
#[pyfunction]
fn knobs() -> String {
    mmsim_core::api::knobs_json()
}

/// The workload format's vocabularies (ops, madvise advice, mmap flags, prot bits) with
/// Linux's values, as a JSON object.
#[pyfunction]
fn schema() -> String {
    mmsim_core::api::schema_json()
}

/// The built-in hardware profiles as a JSON list of {name, description}.
#[pyfunction]
fn profiles() -> String {
    mmsim_core::api::profiles_json()
}

/// One profile as a JSON list of [PATH, VALUE] pairs.
#[pyfunction]
fn profile_show(name: &str) -> PyResult<String> {
    mmsim_core::api::profile_show_json(name).map_err(to_py)
}

/// The TOML text of a built-in profile.
#[pyfunction]
fn profile_text(name: &str) -> PyResult<String> {
    mmsim_core::api::profile_text(name).map_err(to_py)
}

/// Check a workload (JSON text) as `run` would, without running it: an error names the field.
#[pyfunction]
fn check_workload(workload_json: &str) -> PyResult<()> {
    mmsim_core::workload::spec::parse_workload(workload_json).map(|_| ()).map_err(to_py)
}

/// The engine's version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _mmsim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(check_workload, m)?)?;
    m.add_function(wrap_pyfunction!(knobs, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(profile_show, m)?)?;
    m.add_function(wrap_pyfunction!(profile_text, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace_stats, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace_dump, m)?)?;
    m.add_class::<trace::TraceWriter>()?;
    m.add_class::<trace::TraceRecords>()?;
    m.add("MmsimError", m.py().get_type::<MmsimError>())?;
    Ok(())
}
