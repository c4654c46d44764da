//! `/sys/kernel/mm/transparent_hugepage/khugepaged/` (mm/khugepaged.c `khugepaged_attr[]`):
//! the tunables of the khugepaged thread, under their sysfs names. Defaults are Linux 6.18's
//! on x86-64 with 4 KiB pages (`khugepaged_init`). The thread runs in mmsim only with
//! `transparent_hugepage/file_text=khugepaged` (kernel/khugepaged_scan.rs). `Knobs` holds
//! them as its `khugepaged` group, after its own knobs in `mmsim knobs`.

use super::knobs::{declare_knobs, range, Knobs, BOOL};

declare_knobs! {
    /// The khugepaged tunables.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct KhugepagedKnobs in Knobs.khugepaged, table KHUGEPAGED_TABLE;

    /// `pages_to_scan`: the budget of one wake-up (a file range costs 512, plus 1 for the mm's
    /// lock and 1 per vma skipped). Writing 0 is EINVAL.
    pages_to_scan: u32 = 4096 => {
        name: "transparent_hugepage/khugepaged/pages_to_scan",
        boot_only: false,
        codec: range!(1, 4294967295),
        help: "khugepaged: the budget of one wake-up: a 2 MiB range scanned costs 512, the mm's lock and each \
         vma skipped 1 (with 4096, 8 file ranges a wake-up)",
    },
    /// `scan_sleep_millisecs`: the sleep between wake-ups while there is work (0: none).
    scan_sleep_millisecs: u32 = 10_000 => {
        name: "transparent_hugepage/khugepaged/scan_sleep_millisecs",
        boot_only: false,
        codec: range!(0, 4294967295),
        help: "khugepaged: how long it sleeps between wake-ups while an mm is registered (0: no sleep)",
    },
    /// `alloc_sleep_millisecs`: the sleep after a failed PMD allocation.
    alloc_sleep_millisecs: u32 = 60_000 => {
        name: "transparent_hugepage/khugepaged/alloc_sleep_millisecs",
        boot_only: false,
        codec: range!(0, 4294967295),
        help: "khugepaged: how long it sleeps after a PMD allocation failed; a second failure ends the wake-up",
    },
    /// `max_ptes_none`: a range is collapsed by khugepaged only if at least 512 - this many
    /// of its pages are present (for a file: in the page cache).
    max_ptes_none: u32 = 511 => {
        name: "transparent_hugepage/khugepaged/max_ptes_none",
        boot_only: false,
        codec: range!(0, 511),
        help: "khugepaged: a range is collapsed only if at least 512 minus this many of its pages are in the \
         page cache (a file) or mapped (anonymous memory); MADV_COLLAPSE ignores it",
    },
    /// `max_ptes_swap`: more value entries (swap, or a regular file's shadow entries) than
    /// this in a range stop khugepaged's scan of it.
    max_ptes_swap: u32 = 64 => {
        name: "transparent_hugepage/khugepaged/max_ptes_swap",
        boot_only: false,
        codec: range!(0, 511),
        help: "khugepaged: more swap or shadow entries than this in a range stop its scan (SCAN_EXCEED_SWAP_PTE)",
    },
    /// `max_ptes_shared`: more pages of an anonymous range mapped by another process too than
    /// this stop khugepaged's collapse of it (MADV_COLLAPSE ignores it).
    max_ptes_shared: u32 = 256 => {
        name: "transparent_hugepage/khugepaged/max_ptes_shared",
        boot_only: false,
        codec: range!(0, 511),
        help: "khugepaged: an anonymous range with more pages shared with another process than this is not \
         collapsed (MADV_COLLAPSE ignores it)",
    },
    /// `defrag`: khugepaged's allocation may reclaim and compact (GFP_TRANSHUGE) or not
    /// (GFP_TRANSHUGE_LIGHT).
    defrag: bool = true => {
        name: "transparent_hugepage/khugepaged/defrag",
        boot_only: false,
        codec: BOOL,
        help: "khugepaged: its PMD allocation may reclaim (GFP_TRANSHUGE, 1) or not (GFP_TRANSHUGE_LIGHT, 0)",
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_linux_s_and_limits_hold() {
        let k = Knobs::default();
        let got: Vec<_> = KHUGEPAGED_TABLE.iter().map(|t| k.get(t.name).unwrap()).collect();
        assert_eq!(got, ["4096", "10000", "60000", "511", "64", "256", "1"]);
        let mut k = Knobs::default();
        let e = k.set("transparent_hugepage/khugepaged/pages_to_scan", "0").unwrap_err().to_string();
        assert!(e.contains("pages_to_scan") && e.contains("1..4294967295"), "{e}");
        assert!(k.set("transparent_hugepage/khugepaged/max_ptes_none", "512").is_err());
        k.set("transparent_hugepage/khugepaged/max_ptes_none", "0").unwrap();
        assert_eq!(k.khugepaged.max_ptes_none, 0);
        let e = k.set("transparent_hugepage/khugepaged/nope", "1").unwrap_err();
        assert!(matches!(e, super::super::knobs::KnobError::UnknownKnob { .. }), "{e}");
        let names: Vec<&str> = Knobs::names().collect();
        assert_eq!(names[names.len() - 7..], KHUGEPAGED_TABLE.iter().map(|t| t.name).collect::<Vec<_>>()[..]);
    }
}
