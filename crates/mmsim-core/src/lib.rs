//! mmsim-core: a Linux-faithful memory-management simulator engine. No I/O: front ends pass a
//! workload in and get counters out (see `api`).

pub mod api;
pub mod error;
pub mod fasthash;
pub mod hw;
pub mod kernel;
pub mod oracle;
pub mod report;
pub mod sim;
#[cfg(test)]
mod test_support;
pub mod tracepoints;
pub mod units;
pub mod workload;

pub use error::Error;
