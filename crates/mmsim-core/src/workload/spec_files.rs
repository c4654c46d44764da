//! The file ops of a workload: `create`, `memfd_create`, `fallocate`, `pwrite`, `pread`,
//! `fadvise`, `fsync` (and the
//! `file` fields of `mmap`), their fields and their validation. Files are named, one
//! namespace for every process, as paths are.

use serde::Deserialize;

use crate::units::Size;

/// The `create` op: `open(F, O_CREAT | O_TRUNC)` of a file of `size` bytes on `fs`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CreateOp {
    pub file: String,
    pub size: Size,
    /// `"ext4"` (the default: the file exists on the block device, not cached) or `"tmpfs"`
    /// (empty and sparse).
    #[serde(default = "default_fs")]
    pub fs: String,
}

fn default_fs() -> String {
    "ext4".to_string()
}

/// The `memfd_create` op: `memfd_create(F, MFD_HUGETLB if hugetlb)` then `ftruncate(fd,
/// size)`, as a program makes a memfd of a size. The file is named F like a `create`d one
/// (an `mmap` with `"file": F` maps it) and stays open to the end of the run. hugetlb: on
/// the internal hugetlbfs mount, 2 MiB pages from the hugetlb pool (a size not a multiple of
/// 2 MiB fails ftruncate with EINVAL, leaving the file empty).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MemfdCreateOp {
    pub file: String,
    pub size: Size,
    #[serde(default)]
    pub hugetlb: bool,
}

/// The `fallocate` op: `fallocate(fd, mode, offset, length)` on a tmpfs or hugetlbfs file
/// (ext4: EOPNOTSUPP, not modelled). mode: none (allocate), or `punch_hole` with
/// `keep_size` (Linux refuses punch_hole alone with EOPNOTSUPP).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FallocateOp {
    pub file: String,
    #[serde(default)]
    pub offset: Size,
    pub length: Size,
    #[serde(default)]
    pub mode: Vec<crate::kernel::uapi::FallocMode>,
}

/// The `pwrite` op: `write()` calls of `chunk` bytes of `value` from `offset` on.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PwriteOp {
    pub file: String,
    #[serde(default)]
    pub offset: Size,
    /// Default: to the file's end.
    #[serde(default)]
    pub length: Option<Size>,
    /// Bytes per call (default 4096).
    #[serde(default)]
    pub chunk: Option<Size>,
    /// The byte written (default 1).
    #[serde(default)]
    pub value: Option<u8>,
}

/// The `pread` op: `read()` calls of `chunk` bytes from `offset` on (stopping at the file's
/// end); with `expect`, every byte read must equal it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PreadOp {
    pub file: String,
    #[serde(default)]
    pub offset: Size,
    #[serde(default)]
    pub length: Option<Size>,
    #[serde(default)]
    pub chunk: Option<Size>,
    #[serde(default)]
    pub expect: Option<u8>,
}

/// The `fadvise` op: `posix_fadvise(fd, offset, length, advice)` (length 0 or none: to the
/// end of the file).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FadviseOp {
    pub file: String,
    #[serde(default)]
    pub offset: Size,
    #[serde(default)]
    pub length: Option<Size>,
    /// `"dontneed"` or `"willneed"`.
    pub advice: String,
}

/// The `fsync` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FsyncOp {
    pub file: String,
}

/// Default bytes per `pread` / `pwrite` call.
pub const DEFAULT_CHUNK: u64 = 4096;

/// How validation records a file name among the region names (one list; no region name
/// starts with NUL).
pub fn file_key(name: &str) -> String {
    format!("\0file:{name}")
}

/// A name that is not a file name mmsim and the native runner can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a file name (1 to 64 of A-Z a-z 0-9 _ . -)")]
pub struct BadFileName(pub String);

/// How validation records that a file name is a hugetlb memfd's.
pub fn hugetlb_file_key(name: &str) -> String {
    format!("\0hugetlbfs:{name}")
}

/// Check a file name: `[A-Za-z0-9_.-]`, 1 to 64 characters (what the native runner can use
/// as a path component).
pub fn check_file_name(name: &str) -> Result<(), BadFileName> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(BadFileName(name.into()))
    }
}
