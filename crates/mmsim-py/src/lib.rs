//! PyO3 bindings of mmsim-core (`mmsim._mmsim`): convert, delegate, map errors. Nothing else
//! lives here; the Python package `mmsim` builds its API and CLI on these functions.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(mmsim, MmsimError, PyValueError, "A bad workload, knob or profile (one line).");

/// The one place engine errors become Python exceptions.
fn to_py(e: mmsim_core::Error) -> PyErr {
    MmsimError::new_err(e.to_string())
}

/// Run a workload (JSON text) with knob overrides and the optional reference-model check;
/// returns the report as JSON text. The GIL is released while the engine runs.
#[pyfunction]
#[pyo3(signature = (workload_json, sets = Vec::new(), check = false))]
fn run(py: Python<'_>, workload_json: &str, sets: Vec<(String, String)>, check: bool) -> PyResult<String> {
    py.allow_threads(|| mmsim_core::api::run_json(workload_json, &sets, check)).map_err(to_py)
}

/// Every knob as a JSON list of {name, default, values, help}.
#[pyfunction]
fn knobs() -> String {
    mmsim_core::api::knobs_json()
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

/// The engine's version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _mmsim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(knobs, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(profile_show, m)?)?;
    m.add_function(wrap_pyfunction!(profile_text, m)?)?;
    m.add("MmsimError", m.py().get_type::<MmsimError>())?;
    Ok(())
}
