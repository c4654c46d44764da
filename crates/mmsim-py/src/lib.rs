//! PyO3 bindings of mmsim-core (`mmsim._mmsim`): convert, delegate, map errors. Nothing else
//! lives here; the Python package `mmsim` builds its API and CLI on these three functions.

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
    m.add("MmsimError", m.py().get_type::<MmsimError>())?;
    Ok(())
}
