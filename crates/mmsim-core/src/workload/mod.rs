//! Workloads: the JSON format (`spec`), its declaration (`schema`) and its interpreter (`interp`).

pub mod interp;
mod nesting;
pub mod schema;
pub mod spec;
mod spec_check;
pub mod spec_files;
pub mod spec_memcg;

#[cfg(test)]
mod madvise_proptests;
#[cfg(test)]
mod proptest_support;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod ptshare_proptests;
