//! The memory-pressure parts of a workload: memory cgroups (`cgroups`, `cgroup`, a fork's
//! `cgroup`), swap devices (`machine.swap`), and the ops that act on them (`memory_reclaim`,
//! `cgroup_write`). Names are cgroup v2's interface files (Documentation/admin-guide/
//! cgroup-v2.rst), so a workload reads as the commands that would set it up.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer};
use serde::Deserialize;

use crate::units::{parse_size, Size};

/// A cgroup v2 limit file's value: `"max"` or a size (`page_counter_memparse`: bytes, rounded
/// down to pages when the cgroup is made).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Limit {
    #[default]
    Max,
    Bytes(u64),
}

impl Limit {
    /// Pages of `page_size` the limit allows (`PAGE_COUNTER_MAX` for max).
    pub fn pages(self, page_size: u64) -> u64 {
        match self {
            Limit::Max => u64::MAX,
            Limit::Bytes(b) => b / page_size,
        }
    }

    /// Parse a value as the cgroup file takes it (`max`, bytes, or a size with a suffix).
    pub fn parse(s: &str) -> Result<Limit, String> {
        let t = s.trim();
        if t == "max" {
            return Ok(Limit::Max);
        }
        parse_size(t).map(Limit::Bytes).map_err(|e| format!("expected \"max\" or a size ({e})"))
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Max => f.write_str("max"),
            Limit::Bytes(b) => write!(f, "{b}"),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Limit, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d)
            .map_err(|_| de::Error::custom("expected \"max\" or a size (bytes, or a string like \"128M\")"))?
        {
            Raw::Int(n) => Ok(Limit::Bytes(n)),
            Raw::Str(s) => Limit::parse(&s).map_err(de::Error::custom),
        }
    }
}

/// One memory cgroup: its interface files as `echo VALUE > FILE` would set them when it is
/// made (every file defaults to what a new cgroup has).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CgroupSpec {
    /// Hard limit: a charge over it reclaims from the cgroup, then OOM-kills in it.
    #[serde(rename = "memory.max", default)]
    pub max: Limit,
    /// Throttle limit: over it, the task reclaims and sleeps on its way back to user space.
    #[serde(rename = "memory.high", default)]
    pub high: Limit,
    /// Best-effort protection from reclaim (default 0).
    #[serde(rename = "memory.low", default = "zero")]
    pub low: Limit,
    /// Hard protection from reclaim (default 0).
    #[serde(rename = "memory.min", default = "zero")]
    pub min: Limit,
    /// Hard limit of the cgroup's swap usage.
    #[serde(rename = "memory.swap.max", default)]
    pub swap_max: Limit,
    /// Swap usage over which the cgroup's tasks are throttled.
    #[serde(rename = "memory.swap.high", default)]
    pub swap_high: Limit,
    /// `memory.oom.group`: an OOM kill in the cgroup kills all of its tasks.
    #[serde(rename = "memory.oom.group", default)]
    pub oom_group: bool,
}

fn zero() -> Limit {
    Limit::Bytes(0)
}

/// What backs a swap device (`/proc/swaps`' Type).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwapKind {
    /// A swap file on the machine's ext4 filesystem (its block device).
    #[default]
    File,
    /// A partition of the machine's block device.
    Partition,
}

impl SwapKind {
    /// The word /proc/swaps prints.
    pub fn word(self) -> &'static str {
        match self {
            SwapKind::File => "file",
            SwapKind::Partition => "partition",
        }
    }
}

/// A swap device of the machine, enabled (`swapon`) at boot in the order given.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SwapSpec {
    /// The device's (or file's) size; its first page holds the swap header.
    pub size: Size,
    #[serde(default)]
    pub kind: SwapKind,
    /// `swapon -p`: 0..32767; without it swapon gives each device the next lower negative
    /// priority (-2, -3, ... on Linux 6.18).
    #[serde(default)]
    pub priority: Option<i32>,
}

/// The `memory_reclaim` op: a write of `bytes` (and `swappiness=N`) to the cgroup's
/// `memory.reclaim` (proactive reclaim, cgroup v2).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MemoryReclaimOp {
    /// The cgroup (default: the one the process is in).
    #[serde(default)]
    pub cgroup: Option<String>,
    pub bytes: Size,
    #[serde(default)]
    pub swappiness: Option<u32>,
}

/// The `cgroup_write` op: write `value` to one of a cgroup's memory interface files while the
/// workload runs (`memory.max`, `memory.high`, `memory.low`, `memory.min`,
/// `memory.swap.max`, `memory.swap.high`, `memory.oom.group`, `memory.reclaim`, and
/// `memory.peak`, whose write resets it).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CgroupWriteOp {
    pub cgroup: String,
    pub file: String,
    pub value: crate::workload::spec::KnobValue,
}

/// The files `cgroup_write` may write.
pub const CGROUP_FILES: &[&str] = &[
    "memory.max",
    "memory.high",
    "memory.low",
    "memory.min",
    "memory.swap.max",
    "memory.swap.high",
    "memory.oom.group",
    "memory.reclaim",
    "memory.peak",
    "cgroup.procs",
];

/// The largest swap device mmsim takes (a swap entry's offset is 27 bits wide here).
pub const MAX_SWAP_BYTES: u64 = 512 << 30;
/// `MAX_SWAPFILES` (include/linux/swap.h) on x86-64 with a distribution's config: 32 swap
/// types less the 3 device-private, 3 migration, 1 hwpoison and 1 pte-marker types.
pub const MAX_SWAPFILES: usize = 24;
/// The smallest swap area mkswap makes: ten pages of 4 KiB.
pub const MIN_SWAP_BYTES: u64 = 40 << 10;

/// Whether `name` is a cgroup path mmsim takes: `a` or `a/b/c`, each part of [A-Za-z0-9_.-]
/// and not `.` or `..`.
pub fn check_cgroup_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a cgroup's name must not be empty".into());
    }
    for part in name.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(format!("{name:?}: each part of a cgroup path is a name (a/b/c)"));
        }
        if !part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
            return Err(format!("{name:?}: a cgroup's name is made of letters, digits, '_', '.' and '-'"));
        }
    }
    if name.len() > 200 {
        return Err(format!("{name:?}: longer than 200 characters"));
    }
    Ok(())
}

/// The checks of `cgroups` and `machine.swap` that their types do not make: names, parents
/// declared, limits and sizes within range. The field at fault (its path) and why.
pub fn check_memcg(cgroups: &BTreeMap<String, CgroupSpec>, swap: &[SwapSpec]) -> Result<(), (String, String)> {
    for name in cgroups.keys() {
        let path = format!("cgroups.{name}");
        check_cgroup_name(name).map_err(|m| (path.clone(), m))?;
        if let Some((parent, _)) = name.rsplit_once('/') {
            if !cgroups.contains_key(parent) {
                return Err((path, format!("its parent {parent:?} is not declared in cgroups")));
            }
        }
    }
    if swap.len() > MAX_SWAPFILES {
        return Err(("machine.swap".into(), format!("at most {MAX_SWAPFILES} swap devices (MAX_SWAPFILES)")));
    }
    for (i, s) in swap.iter().enumerate() {
        let path = format!("machine.swap[{i}]");
        if s.size.0 < MIN_SWAP_BYTES {
            return Err((format!("{path}.size"), "must be at least 40K (mkswap's ten pages)".into()));
        }
        if s.size.0 > MAX_SWAP_BYTES {
            return Err((format!("{path}.size"), "must be at most 512G".into()));
        }
        if s.priority.is_some_and(|p| !(-32768..=32767).contains(&p)) {
            return Err((format!("{path}.priority"), "must be between -32768 and 32767".into()));
        }
    }
    Ok(())
}

/// The check of a `cgroup_write`'s file and value: the field at fault and why.
pub fn check_cgroup_write(op: &CgroupWriteOp) -> Result<(), (&'static str, String)> {
    let v = op.value.0.trim();
    match op.file.as_str() {
        "memory.max" | "memory.high" | "memory.low" | "memory.min" | "memory.swap.max" | "memory.swap.high" => {
            Limit::parse(v).map(|_| ()).map_err(|e| ("value", e))
        }
        "memory.oom.group" => match v {
            "0" | "1" => Ok(()),
            _ => Err(("value", "expected 0 or 1".into())),
        },
        "memory.reclaim" => parse_reclaim_request(v).map(|_| ()).map_err(|e| ("value", e)),
        "memory.peak" => Ok(()),
        // echo 0 > cgroup.procs: the writing process moves (cgroup_procs_write's pid 0).
        "cgroup.procs" => match v {
            "0" => Ok(()),
            _ => Err(("value", "expected 0 (the writing process: mmsim moves no other)".into())),
        },
        f => Err(("file", format!("{f:?} is not one of {}", CGROUP_FILES.join(", ")))),
    }
}

/// A `memory.reclaim` write: bytes, then optional `swappiness=N` (0..200) or
/// `swappiness=max` (anonymous memory only), as `memory_reclaim()` parses it.
pub fn parse_reclaim_request(s: &str) -> Result<(u64, Option<u32>), String> {
    let mut words = s.split_whitespace();
    let bytes = words.next().ok_or("expected a size to reclaim")?;
    let bytes = parse_size(bytes).map_err(|e| format!("expected a size to reclaim ({e})"))?;
    let mut swappiness = None;
    for w in words {
        match w.strip_prefix("swappiness=") {
            Some("max") => swappiness = Some(SWAPPINESS_ANON_ONLY),
            Some(n) => match n.parse::<u32>() {
                Ok(v) if v <= 200 => swappiness = Some(v),
                _ => return Err(format!("swappiness {n:?}: expected 0..200 or max")),
            },
            None => return Err(format!("unknown argument {w:?} (expected swappiness=N)")),
        }
    }
    Ok((bytes, swappiness))
}

/// `SWAPPINESS_ANON_ONLY` (mm/internal.h): `swappiness=max`, reclaim anonymous memory only.
pub const SWAPPINESS_ANON_ONLY: u32 = 201;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_as_the_files_take_them() {
        assert_eq!(Limit::parse("max"), Ok(Limit::Max));
        assert_eq!(Limit::parse(" 128M"), Ok(Limit::Bytes(128 << 20)));
        assert_eq!(Limit::Bytes(5000).pages(4096), 1);
        assert!(Limit::parse("lots").is_err());
        assert_eq!(parse_reclaim_request("64M swappiness=0"), Ok((64 << 20, Some(0))));
        assert_eq!(parse_reclaim_request("1G swappiness=max"), Ok((1 << 30, Some(SWAPPINESS_ANON_ONLY))));
        assert!(parse_reclaim_request("1G swappiness=300").is_err());
        assert!(parse_reclaim_request("").is_err());
    }

    #[test]
    fn names_and_parents() {
        assert!(check_cgroup_name("box").is_ok());
        assert!(check_cgroup_name("a/b-1.x").is_ok());
        assert!(check_cgroup_name("a//b").is_err());
        assert!(check_cgroup_name("..").is_err());
        assert!(check_cgroup_name("a b").is_err());
        let mut m = BTreeMap::new();
        m.insert("a/b".to_string(), CgroupSpec::default());
        assert_eq!(check_memcg(&m, &[]).unwrap_err().0, "cgroups.a/b");
        m.insert("a".to_string(), CgroupSpec::default());
        assert!(check_memcg(&m, &[]).is_ok());
    }
}
