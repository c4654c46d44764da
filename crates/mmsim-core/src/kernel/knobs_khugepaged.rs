//! `/sys/kernel/mm/transparent_hugepage/khugepaged/` (mm/khugepaged.c `khugepaged_attr[]`):
//! the tunables of the khugepaged thread, under their sysfs names. Defaults are Linux 6.18's
//! on x86-64 with 4 KiB pages (`khugepaged_init`). The thread runs in mmsim only with
//! `transparent_hugepage/file_text=khugepaged` (kernel/khugepaged_scan.rs).

/// The khugepaged tunables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KhugepagedKnobs {
    /// `pages_to_scan`: the budget of one wake-up (a file range costs 512, plus 1 for the mm's
    /// lock and 1 per vma skipped). Writing 0 is EINVAL.
    pub pages_to_scan: u32,
    /// `scan_sleep_millisecs`: the sleep between wake-ups while there is work (0: none).
    pub scan_sleep_millisecs: u32,
    /// `alloc_sleep_millisecs`: the sleep after a failed PMD allocation.
    pub alloc_sleep_millisecs: u32,
    /// `max_ptes_none`: a range is collapsed by khugepaged only if at least 512 - this many
    /// of its pages are present (for a file: in the page cache).
    pub max_ptes_none: u32,
    /// `max_ptes_swap`: more value entries (swap, or a regular file's shadow entries) than
    /// this in a range stop khugepaged's scan of it.
    pub max_ptes_swap: u32,
    /// `max_ptes_shared`: anonymous collapse only (not modelled); kept for its sysfs name.
    pub max_ptes_shared: u32,
    /// `defrag`: khugepaged's allocation may reclaim and compact (GFP_TRANSHUGE) or not
    /// (GFP_TRANSHUGE_LIGHT).
    pub defrag: bool,
}

impl Default for KhugepagedKnobs {
    fn default() -> Self {
        KhugepagedKnobs {
            pages_to_scan: 4096,
            scan_sleep_millisecs: 10_000,
            alloc_sleep_millisecs: 60_000,
            max_ptes_none: 511,
            max_ptes_swap: 64,
            max_ptes_shared: 256,
            defrag: true,
        }
    }
}

const PREFIX: &str = "transparent_hugepage/khugepaged/";

/// (name, accepted values, meaning) of each khugepaged knob, in `mmsim knobs` order.
pub const TABLE: &[(&str, &str, &str)] = &[
    (
        "transparent_hugepage/khugepaged/pages_to_scan",
        "1..4294967295",
        "khugepaged: the budget of one wake-up: a 2 MiB range scanned costs 512, the mm's lock and each \
         vma skipped 1 (with 4096, 8 file ranges a wake-up)",
    ),
    (
        "transparent_hugepage/khugepaged/scan_sleep_millisecs",
        "0..4294967295",
        "khugepaged: how long it sleeps between wake-ups while an mm is registered (0: no sleep)",
    ),
    (
        "transparent_hugepage/khugepaged/alloc_sleep_millisecs",
        "0..4294967295",
        "khugepaged: how long it sleeps after a PMD allocation failed; a second failure ends the wake-up",
    ),
    (
        "transparent_hugepage/khugepaged/max_ptes_none",
        "0..511",
        "khugepaged: a file range is collapsed only if at least 512 minus this many of its pages are in \
         the page cache (MADV_COLLAPSE ignores it)",
    ),
    (
        "transparent_hugepage/khugepaged/max_ptes_swap",
        "0..511",
        "khugepaged: more swap or shadow entries than this in a range stop its scan (SCAN_EXCEED_SWAP_PTE)",
    ),
    (
        "transparent_hugepage/khugepaged/max_ptes_shared",
        "0..511",
        "khugepaged: the shared-page limit of anonymous collapse, which mmsim does not model",
    ),
    (
        "transparent_hugepage/khugepaged/defrag",
        "0|1",
        "khugepaged: its PMD allocation may reclaim (GFP_TRANSHUGE, 1) or not (GFP_TRANSHUGE_LIGHT, 0)",
    ),
];

impl KhugepagedKnobs {
    /// The value of a knob (its full name) as sysfs prints it; None if not a khugepaged knob.
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name.strip_prefix(PREFIX)? {
            "pages_to_scan" => self.pages_to_scan.to_string(),
            "scan_sleep_millisecs" => self.scan_sleep_millisecs.to_string(),
            "alloc_sleep_millisecs" => self.alloc_sleep_millisecs.to_string(),
            "max_ptes_none" => self.max_ptes_none.to_string(),
            "max_ptes_swap" => self.max_ptes_swap.to_string(),
            "max_ptes_shared" => self.max_ptes_shared.to_string(),
            "defrag" => (self.defrag as u8).to_string(),
            _ => return None,
        })
    }

    /// Set a knob (its full name); None if not a khugepaged knob, else the error naming it.
    pub fn set(&mut self, name: &str, v: &str) -> Option<Result<(), String>> {
        let short = name.strip_prefix(PREFIX)?;
        let bad = |accepted: &str| format!("knob {name}: invalid value {v:?} (expected {accepted})");
        let num = |lo: u32, hi: u32, accepted: &str| {
            v.parse::<u32>().ok().filter(|n| (lo..=hi).contains(n)).ok_or_else(|| bad(accepted))
        };
        let r = (|| {
            match short {
                "pages_to_scan" => self.pages_to_scan = num(1, u32::MAX, "1..4294967295")?,
                "scan_sleep_millisecs" => self.scan_sleep_millisecs = num(0, u32::MAX, "0..4294967295")?,
                "alloc_sleep_millisecs" => self.alloc_sleep_millisecs = num(0, u32::MAX, "0..4294967295")?,
                "max_ptes_none" => self.max_ptes_none = num(0, 511, "0..511")?,
                "max_ptes_swap" => self.max_ptes_swap = num(0, 511, "0..511")?,
                "max_ptes_shared" => self.max_ptes_shared = num(0, 511, "0..511")?,
                "defrag" => {
                    self.defrag = match v {
                        "0" | "false" => false,
                        "1" | "true" => true,
                        _ => return Err(bad("0 or 1")),
                    }
                }
                _ => return Err(String::new()),
            }
            Ok(())
        })();
        if r.as_ref().is_err_and(|e| e.is_empty()) {
            return None;
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_linux_s_and_limits_hold() {
        let k = KhugepagedKnobs::default();
        let got: Vec<_> = TABLE.iter().map(|t| k.get(t.0).unwrap()).collect();
        assert_eq!(got, ["4096", "10000", "60000", "511", "64", "256", "1"]);
        let mut k = KhugepagedKnobs::default();
        let e = k.set("transparent_hugepage/khugepaged/pages_to_scan", "0").unwrap().unwrap_err();
        assert!(e.contains("pages_to_scan") && e.contains("1..4294967295"), "{e}");
        assert!(k.set("transparent_hugepage/khugepaged/max_ptes_none", "512").unwrap().is_err());
        k.set("transparent_hugepage/khugepaged/max_ptes_none", "0").unwrap().unwrap();
        assert_eq!(k.max_ptes_none, 0);
        assert!(k.set("transparent_hugepage/khugepaged/nope", "1").is_none());
        assert!(k.set("transparent_hugepage/enabled", "always").is_none());
    }
}
