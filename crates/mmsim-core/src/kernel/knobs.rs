//! Kernel tunables under their Linux names (sysfs/procfs/debugfs paths relative to their
//! usual roots), one struct with Linux's defaults and validation, as mm/huge_memory.c's
//! `transparent_hugepage_flags` and the fault-injection attributes are.

use serde::Serialize;

/// `/sys/kernel/mm/transparent_hugepage/enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ThpEnabled {
    Always,
    Madvise,
    Never,
}

/// `/sys/kernel/mm/transparent_hugepage/defrag`: whether a THP allocation may enter direct
/// reclaim (mirrors `vma_thp_gfp_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ThpDefrag {
    Always,
    Defer,
    DeferMadvise,
    Madvise,
    Never,
}

/// Every tunable the model honours. Defaults are Linux 6.18's with a distribution config
/// (Debian/Fedora build THP as `madvise`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knobs {
    pub thp_enabled: ThpEnabled,
    pub thp_defrag: ThpDefrag,
    pub thp_use_zero_page: bool,
    /// `fail_page_alloc/min_order`: allocations of at least this order fail (None = off).
    pub fail_min_order: Option<u32>,
    /// `fail_page_alloc/every`: every Kth allocation fails (0 = off).
    pub fail_every: u64,
    /// debugfs `fault_around_bytes` (mm/memory.c), a power of two between PAGE_SIZE and 64 KiB.
    pub fault_around_bytes: u64,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            thp_enabled: ThpEnabled::Madvise,
            thp_defrag: ThpDefrag::Madvise,
            thp_use_zero_page: true,
            fail_min_order: None,
            fail_every: 0,
            fault_around_bytes: 65536,
        }
    }
}

/// A knob's public description: name, default value (as sysfs would print it) and meaning.
#[derive(Clone, Debug, Serialize)]
pub struct KnobInfo {
    pub name: &'static str,
    pub default: String,
    pub values: &'static str,
    pub help: &'static str,
}

const THP_ENABLED: &str = "transparent_hugepage/enabled";
const THP_DEFRAG: &str = "transparent_hugepage/defrag";
const THP_USE_ZERO_PAGE: &str = "transparent_hugepage/use_zero_page";
const FAIL_MIN_ORDER: &str = "fail_page_alloc/min_order";
const FAIL_EVERY: &str = "fail_page_alloc/every";
const FAULT_AROUND: &str = "fault_around_bytes";

/// (name, accepted values, meaning) of every knob, in the order `mmsim knobs` lists them.
const KNOB_TABLE: &[(&str, &str, &str)] = &[
    (
        THP_ENABLED,
        "always|madvise|never",
        "THP for anonymous memory: every suitable vma, only MADV_HUGEPAGE vmas, or none",
    ),
    (
        THP_DEFRAG,
        "always|defer|defer+madvise|madvise|never",
        "whether a THP fault allocation may reclaim (run shrinkers) before falling back",
    ),
    (THP_USE_ZERO_PAGE, "0|1", "map the huge zero page on a read fault of a THP-suitable range"),
    (FAIL_MIN_ORDER, "off|0..10", "fault injection: every page allocation of at least this order fails"),
    (FAIL_EVERY, "0|K", "fault injection: every Kth page allocation fails (0 = off)"),
    (
        FAULT_AROUND,
        "4096..65536 (power of two)",
        "read faults on file/shmem mappings also map up to this many bytes of pages already cached",
    ),
];

impl Knobs {
    /// Every knob with its default and meaning.
    pub fn describe() -> Vec<KnobInfo> {
        let d = Knobs::default();
        KNOB_TABLE
            .iter()
            .map(|&(name, values, help)| KnobInfo {
                name,
                default: d.get(name).expect("table names are knobs"),
                values,
                help,
            })
            .collect()
    }

    /// Names of every knob.
    pub fn names() -> impl Iterator<Item = &'static str> {
        KNOB_TABLE.iter().map(|k| k.0)
    }

    /// The value of a knob as sysfs would print it.
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            THP_ENABLED => match self.thp_enabled {
                ThpEnabled::Always => "always",
                ThpEnabled::Madvise => "madvise",
                ThpEnabled::Never => "never",
            }
            .to_string(),
            THP_DEFRAG => match self.thp_defrag {
                ThpDefrag::Always => "always",
                ThpDefrag::Defer => "defer",
                ThpDefrag::DeferMadvise => "defer+madvise",
                ThpDefrag::Madvise => "madvise",
                ThpDefrag::Never => "never",
            }
            .to_string(),
            THP_USE_ZERO_PAGE => (self.thp_use_zero_page as u8).to_string(),
            FAIL_MIN_ORDER => match self.fail_min_order {
                None => "off".to_string(),
                Some(o) => o.to_string(),
            },
            FAIL_EVERY => self.fail_every.to_string(),
            FAULT_AROUND => self.fault_around_bytes.to_string(),
            _ => return None,
        })
    }

    /// Set a knob from its textual value (as `echo VALUE > /sys/...` would); the error names
    /// the knob and what it accepts.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let v = value.trim();
        let bad = |accepted: &str| format!("knob {name}: invalid value {v:?} (expected {accepted})");
        match name {
            THP_ENABLED => {
                self.thp_enabled = match v {
                    "always" => ThpEnabled::Always,
                    "madvise" => ThpEnabled::Madvise,
                    "never" => ThpEnabled::Never,
                    _ => return Err(bad("always, madvise or never")),
                }
            }
            THP_DEFRAG => {
                self.thp_defrag = match v {
                    "always" => ThpDefrag::Always,
                    "defer" => ThpDefrag::Defer,
                    "defer+madvise" => ThpDefrag::DeferMadvise,
                    "madvise" => ThpDefrag::Madvise,
                    "never" => ThpDefrag::Never,
                    _ => return Err(bad("always, defer, defer+madvise, madvise or never")),
                }
            }
            THP_USE_ZERO_PAGE => {
                self.thp_use_zero_page = match v {
                    "0" | "false" => false,
                    "1" | "true" => true,
                    _ => return Err(bad("0 or 1")),
                }
            }
            FAIL_MIN_ORDER => {
                self.fail_min_order = match v {
                    "off" | "-1" | "none" => None,
                    _ => match v.parse::<u32>() {
                        Ok(o) if o <= 10 => Some(o),
                        _ => return Err(bad("off or an order 0..10")),
                    },
                }
            }
            FAIL_EVERY => {
                self.fail_every = v.parse().map_err(|_| bad("a non-negative integer"))?;
            }
            FAULT_AROUND => {
                let n = crate::units::parse_size(v).map_err(|_| bad("a size"))?;
                if !n.is_power_of_two() || !(4096..=65536).contains(&n) {
                    return Err(bad("a power of two between 4096 and 65536"));
                }
                self.fault_around_bytes = n;
            }
            _ => {
                let known: Vec<&str> = Knobs::names().collect();
                return Err(format!("unknown knob {name:?} (known: {})", known.join(", ")));
            }
        }
        Ok(())
    }

    /// All knobs as name -> value, as a run reports its effective settings.
    pub fn effective(&self) -> Vec<(String, String)> {
        Knobs::names().map(|n| (n.to_string(), self.get(n).expect("known"))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_get_round_trip() {
        let mut k = Knobs::default();
        for info in Knobs::describe() {
            k.set(info.name, &info.default).unwrap();
        }
        assert_eq!(k, Knobs::default());
        k.set("transparent_hugepage/enabled", "always").unwrap();
        assert_eq!(k.thp_enabled, ThpEnabled::Always);
        k.set("fail_page_alloc/min_order", "9").unwrap();
        assert_eq!(k.fail_min_order, Some(9));
    }

    #[test]
    fn errors_name_the_knob() {
        let mut k = Knobs::default();
        let e = k.set("transparent_hugepage/enabled", "sometimes").unwrap_err();
        assert!(e.contains("transparent_hugepage/enabled"), "{e}");
        let e = k.set("no/such", "1").unwrap_err();
        assert!(e.contains("unknown knob"), "{e}");
        assert!(k.set("fault_around_bytes", "12345").is_err());
    }
}
