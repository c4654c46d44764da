//! The hardware model: set-associative structures, TLBs, page-walk caches, caches, CPUs and
//! the cycle cost model, configured by a profile.

pub mod assoc;
pub mod coherence;
pub mod cpuset;
pub mod machine;
pub mod perf;
pub mod prefetch;
pub mod profile;
mod shared;
pub mod tlb;

#[cfg(test)]
mod assoc_tests;
#[cfg(test)]
mod coherence_tests;
#[cfg(test)]
mod frontend_tests;
#[cfg(test)]
mod run_tests;
#[cfg(test)]
mod shared_tests;
#[cfg(test)]
mod tests;
