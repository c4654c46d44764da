//! The engine's error type: one line that names the field and what is wrong with it.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// The workload text is not valid JSON or does not match the format.
    #[error("workload: {0}")]
    Workload(String),
    /// A knob name or value is not accepted.
    #[error("{0}")]
    Knob(String),
    /// A hardware profile is unknown or malformed, or an `hw.` override does not apply.
    #[error("{0}")]
    Profile(String),
    /// A resource limit refused the run.
    #[error("limit: {0}")]
    Limit(String),
    /// A trace cannot be read: the file, the byte offset and what was expected there.
    #[error("{0}")]
    Trace(String),
}
