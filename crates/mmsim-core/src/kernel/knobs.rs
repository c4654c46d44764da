//! Kernel tunables under their Linux names (sysfs/procfs/debugfs paths relative to their
//! usual roots), one struct with Linux's defaults and validation, as mm/huge_memory.c's
//! `transparent_hugepage_flags` and the fault-injection attributes are. Each knob is declared
//! once, in `declare_knobs!` below (khugepaged's in knobs_khugepaged.rs, reclaim's in
//! knobs_reclaim.rs): its field, default, sysfs name, accepted values, help and the codec
//! that parses and prints it; `Knobs::get`, `set`, `describe`, `names`, `default` and
//! `BOOT_ONLY` all read that declaration.

use std::fmt;

use serde::Serialize;

use super::knobs_khugepaged::{KhugepagedKnobs, KHUGEPAGED_TABLE};
pub use super::knobs_reclaim::CgroupMemory;
use super::knobs_reclaim::{ReclaimKnobs, RECLAIM_TABLE};

/// How a knob's text is parsed and printed (its sysfs `store` and `show`), and what it accepts.
pub struct Codec<T: 'static> {
    /// The accepted values as `mmsim knobs` lists them (`always|madvise|never`).
    pub values: &'static str,
    /// Parse a trimmed value; the error is what an invalid-value message says is expected.
    pub parse: fn(&str) -> Result<T, &'static str>,
    /// The value as sysfs prints it.
    pub show: fn(&T) -> String,
}

/// One declared knob, as `declare_knobs!` writes it: its sysfs attribute on a `Knobs`.
pub struct Knob {
    /// The sysfs/procfs/debugfs path, relative to its usual root.
    pub name: &'static str,
    /// The accepted values as `mmsim knobs` lists them.
    pub values: &'static str,
    /// What the knob means, for `mmsim knobs`.
    pub help: &'static str,
    /// A kernel build, patch or boot parameter: it can be set before the run only.
    pub boot_only: bool,
    /// The knob's value as sysfs prints it.
    pub show: fn(&Knobs) -> String,
    /// Write a trimmed value (the field is untouched on error, which says what is expected).
    pub store: fn(&mut Knobs, &str) -> Result<(), &'static str>,
}

/// Why a knob write failed; `Display` is the message the run's error or event shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KnobError {
    /// No knob has this name (sysfs: no such file).
    UnknownKnob { name: String },
    /// The knob refused the value (sysfs: EINVAL); `expected` says what it accepts.
    InvalidValue { knob: &'static str, value: String, expected: &'static str },
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobError::UnknownKnob { name } => {
                let known: Vec<&str> = Knobs::names().collect();
                write!(f, "unknown knob {name:?} (known: {})", known.join(", "))
            }
            KnobError::InvalidValue { knob, value, expected } => {
                write!(f, "knob {knob}: invalid value {value:?} (expected {expected})")
            }
        }
    }
}

impl std::error::Error for KnobError {}

/// `a`, `a or b`, `a, b or c`: a list of literals as an invalid-value message says it.
macro_rules! or_list {
    ($only:literal) => { $only };
    ($a:literal, $b:literal) => { concat!($a, " or ", $b) };
    ($a:literal, $($rest:literal),+) => { concat!($a, ", ", $crate::kernel::knobs::or_list!($($rest),+)) };
}
pub(crate) use or_list;

/// `a|b|c`: a list of literals as `mmsim knobs` lists accepted values.
macro_rules! bar_list {
    ($first:literal $(, $rest:literal)*) => { concat!($first $(, "|", $rest)*) };
}
pub(crate) use bar_list;

/// An enum whose variants are sysfs words (`Always => "always"`), with its `CODEC`.
macro_rules! sysfs_enum {
    (
        $(#[$m:meta])*
        $vis:vis enum $E:ident { $($(#[$vm:meta])* $variant:ident => $word:literal),+ $(,)? }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $E { $($(#[$vm])* $variant),+ }
        impl $E {
            /// The knob's codec: one word per variant.
            pub const CODEC: $crate::kernel::knobs::Codec<Self> = $crate::kernel::knobs::Codec {
                values: $crate::kernel::knobs::bar_list!($($word),+),
                parse: |v| match v {
                    $($word => Ok(Self::$variant),)+
                    _ => Err($crate::kernel::knobs::or_list!($($word),+)),
                },
                show: |v| match v { $(Self::$variant => $word,)+ }.to_string(),
            };
        }
    };
}
pub(crate) use sysfs_enum;

/// A bool knob written as two words (`flag!("dirty", "separate")`: false, true).
macro_rules! flag {
    ($off:literal, $on:literal) => {
        $crate::kernel::knobs::Codec::<bool> {
            values: concat!($off, "|", $on),
            parse: |v| match v {
                $off => Ok(false),
                $on => Ok(true),
                _ => Err(concat!($off, " or ", $on)),
            },
            show: |&b| if b { $on } else { $off }.to_string(),
        }
    };
}

/// An integer knob taking any value of its type (`number!(values, expected)`).
macro_rules! number {
    ($values:literal, $expected:literal) => {
        $crate::kernel::knobs::Codec {
            values: $values,
            parse: |v| v.parse().map_err(|_| $expected),
            show: |n| n.to_string(),
        }
    };
}

/// An integer knob taking `lo..=hi` (`range!(lo, hi)`, or `range!(lo, hi, expected)` when the
/// message words it otherwise); `mmsim knobs` lists it as `lo..hi`.
macro_rules! range {
    ($lo:literal, $hi:literal) => {
        $crate::kernel::knobs::range!($lo, $hi, concat!($lo, "..", $hi))
    };
    ($lo:literal, $hi:literal, $expected:expr) => {
        $crate::kernel::knobs::Codec {
            values: concat!($lo, "..", $hi),
            parse: |v| v.parse().ok().filter(|n| ($lo..=$hi).contains(n)).ok_or($expected),
            show: |n| n.to_string(),
        }
    };
}
pub(crate) use range;

/// An integer knob taking one of a few values (`one_of!(100, 250, 300, 1000)`).
macro_rules! one_of {
    ($($n:literal),+) => {
        $crate::kernel::knobs::Codec {
            values: $crate::kernel::knobs::bar_list!($($n),+),
            parse: |v| {
                v.parse().ok().filter(|n| [$($n),+].contains(n)).ok_or($crate::kernel::knobs::or_list!($($n),+))
            },
            show: |n| n.to_string(),
        }
    };
}

/// A 0|1 knob (sysfs also takes true/false here).
pub const BOOL: Codec<bool> = Codec {
    values: "0|1",
    parse: |v| match v {
        "0" | "false" => Ok(false),
        "1" | "true" => Ok(true),
        _ => Err("0 or 1"),
    },
    show: |&b| (b as u8).to_string(),
};

/// An order knob: `off` (also `-1` or `none`) or a buddy order 0..10.
pub const ORDER_OR_OFF: Codec<Option<u32>> = Codec {
    values: "off|0..10",
    parse: |v| match v {
        "off" | "-1" | "none" => Ok(None),
        _ => v.parse::<u32>().ok().filter(|&o| o <= 10).map(Some).ok_or("off or an order 0..10"),
    },
    show: |o| o.map_or("off".to_string(), |o| o.to_string()),
};

/// Declares a struct of knobs, each field once with its default, sysfs name, codec and help,
/// and derives from that its `Default` and its table of `Knob`s (`TABLES` with its groups').
macro_rules! declare_knobs {
    (
        @ $(#[$m:meta])*
        $vis:vis struct $S:ident in $root:ident, table $TABLE:ident,
        groups [$($(#[$gm:meta])* $group:ident: $G:ident => $GTABLE:ident),* $(,)?];
        $(
            $(#[$fm:meta])*
            $field:ident: $ty:ty = $default:expr => {
                name: $name:literal,
                boot_only: $boot:literal,
                codec: $codec:expr,
                help: $help:literal $(,)?
            }
        ),* $(,)?
    ) => {
        $(#[$m])*
        $vis struct $S {
            $($(#[$fm])* pub $field: $ty,)*
            $($(#[$gm])* pub $group: $G,)*
        }

        impl Default for $S {
            fn default() -> Self {
                $S { $($field: $default,)* $($group: $G::default(),)* }
            }
        }

        /// The knobs of the struct, in `mmsim knobs` order.
        $vis const $TABLE: &[$crate::kernel::knobs::Knob] = &[$(
            $crate::kernel::knobs::Knob {
                name: $name,
                values: {
                    const CODEC: $crate::kernel::knobs::Codec<$ty> = $codec;
                    CODEC.values
                },
                help: $help,
                boot_only: $boot,
                show: |k: &$root| {
                    const CODEC: $crate::kernel::knobs::Codec<$ty> = $codec;
                    (CODEC.show)(&$S::in_root(k).$field)
                },
                store: |k: &mut $root, v: &str| -> Result<(), &'static str> {
                    const CODEC: $crate::kernel::knobs::Codec<$ty> = $codec;
                    $S::in_root_mut(k).$field = (CODEC.parse)(v)?;
                    Ok(())
                },
            },
        )*];

        impl $S {
            /// The struct's knob table, then its groups'.
            pub const TABLES: &'static [&'static [$crate::kernel::knobs::Knob]] = &[$TABLE $(, $GTABLE)*];
        }
    };
    (
        $(#[$m:meta])*
        $vis:vis struct $S:ident, table $TABLE:ident $(, groups [$($groups:tt)*])?;
        $($knobs:tt)*
    ) => {
        $crate::kernel::knobs::declare_knobs! {
            @ $(#[$m])* $vis struct $S in $S, table $TABLE, groups [$($($groups)*)?]; $($knobs)*
        }
        impl $S {
            /// The root of the table: this struct.
            fn in_root(k: &$S) -> &Self {
                k
            }
            /// The root of the table, to store a knob.
            fn in_root_mut(k: &mut $S) -> &mut Self {
                k
            }
        }
    };
    (
        $(#[$m:meta])*
        $vis:vis struct $S:ident in $root:ident $(. $path:ident)+, table $TABLE:ident;
        $($knobs:tt)*
    ) => {
        $crate::kernel::knobs::declare_knobs! {
            @ $(#[$m])* $vis struct $S in $root, table $TABLE, groups []; $($knobs)*
        }
        impl $S {
            /// This struct within the root of the table.
            fn in_root(k: &$root) -> &Self {
                &k $(.$path)+
            }
            /// This struct within the root, to store a knob.
            fn in_root_mut(k: &mut $root) -> &mut Self {
                &mut k $(.$path)+
            }
        }
    };
}
pub(crate) use declare_knobs;

/// How many knobs of `tables` are boot-only.
const fn count_boot_only(tables: &[&[Knob]]) -> usize {
    let (mut n, mut t) = (0, 0);
    while t < tables.len() {
        let mut i = 0;
        while i < tables[t].len() {
            n += tables[t][i].boot_only as usize;
            i += 1;
        }
        t += 1;
    }
    n
}

/// The names of the `N` boot-only knobs of `tables`, in table order.
const fn boot_only_names<const N: usize>(tables: &[&[Knob]]) -> [&'static str; N] {
    let mut names = [""; N];
    let (mut n, mut t) = (0, 0);
    while t < tables.len() {
        let mut i = 0;
        while i < tables[t].len() {
            if tables[t][i].boot_only {
                names[n] = tables[t][i].name;
                n += 1;
            }
            i += 1;
        }
        t += 1;
    }
    names
}

/// Knobs that stand for a kernel build, patch or boot parameter: they can be set before the
/// run only.
pub const BOOT_ONLY: &[&str] = &boot_only_names::<{ count_boot_only(Knobs::TABLES) }>(Knobs::TABLES);

sysfs_enum! {
    /// `/sys/kernel/mm/transparent_hugepage/enabled`.
    #[derive(Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum ThpEnabled {
        Always => "always",
        Madvise => "madvise",
        Never => "never",
    }
}

sysfs_enum! {
    /// `/sys/kernel/mm/transparent_hugepage/defrag`: whether a THP allocation may enter direct
    /// reclaim (mirrors `vma_thp_gfp_mask`).
    #[derive(Serialize)]
    pub enum ThpDefrag {
        Always => "always",
        Defer => "defer",
        DeferMadvise => "defer+madvise",
        Madvise => "madvise",
        Never => "never",
    }
}

sysfs_enum! {
    /// `transparent_hugepage/huge_zero_page_alloc` (mmsim's name for the allocation policies of
    /// seed 000's series and today's kernel): when the huge zero page exists.
    #[derive(Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum HzpAlloc {
        /// Allocated at boot, never freed (seed 000, patch 01).
        Boot => "boot",
        /// Allocated on first use, never freed (patch 09).
        Lazy => "lazy",
        /// Allocated on first use, refcounted, freed by a shrinker when unused (patch 10; Linux
        /// without CONFIG_PERSISTENT_HUGE_ZERO_FOLIO).
        Shrinkable => "shrinkable",
        /// CONFIG_PERSISTENT_HUGE_ZERO_FOLIO (Linux >= 6.18): allocated at boot, no refcounting.
        Persistent => "persistent",
    }
}

sysfs_enum! {
    /// `transparent_hugepage/huge_zero_page`: which implementation serves THP read faults when
    /// use_zero_page is 1 (mmsim's knob).
    #[derive(Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum HzpKind {
        /// A real 2 MiB page of zeros mapped by a huge pmd.
        Hzp => "hzp",
        /// The virtual huge zero page: a PTE table whose 512 entries map the 4 KiB zero page.
        Vhzp => "vhzp",
    }
}

sysfs_enum! {
    /// `transparent_hugepage/huge_zero_page_wp`: what a write to the huge zero page does when no
    /// THP can be allocated.
    #[derive(Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum HzpWp {
        /// Linux >= 6.13: try a THP; on failure split the pmd and take the 4 KiB COW path.
        Today => "today",
        /// Seed 000: try a THP; on failure build a PTE table with one new page and 511 zero ptes.
        Seed => "seed",
    }
}

sysfs_enum! {
    /// `transparent_hugepage/file_text` (mmsim's name): how read-only executable private file
    /// mappings get PMD pages (seed 004 and what Linux did instead).
    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum FileText {
        /// Linux 6.18 without CONFIG_READ_ONLY_THP_FOR_FS: 4 KiB pages, plus the large folios
        /// readahead builds (PMD order for a VM_HUGEPAGE mapping).
        Off => "off",
        /// Seed 004's 2018 prototype: the first fault in a PMD-aligned range allocates a PMD page
        /// outside the page cache, reads the range into it and maps it by the pmd.
        Seed => "seed",
        /// CONFIG_READ_ONLY_THP_FOR_FS: khugepaged (and MADV_COLLAPSE) collapse the page cache of
        /// files nobody has open for write into PMD folios, which later faults map by the pmd.
        Khugepaged => "khugepaged",
    }
}

sysfs_enum! {
    /// `transparent_hugepage/hzp_refcount`: how the huge zero page's refcount is taken.
    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum HzpRefcount {
        /// Every map and unmap takes and drops the global atomic (before seed 001).
        Global => "global",
        /// Once per mm (MMF_HUGE_ZERO_FOLIO), dropped when the mm goes (seed 001).
        PerMm => "per_mm",
    }
}

/// `page_alloc/pcp_batch`: pcp->batch of the order-0 per-CPU page lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PcpBatch {
    /// zone_batchsize() of Linux >= 4.19: a quarter of managed/1024 pages capped at 1 MiB,
    /// rounded down to a power of two minus one (63 on any zone over 1 GiB).
    Auto,
    /// zone_batchsize() before Linux 4.19 (commit d8a759b5 doubled the cap from 512 KiB): 31.
    Legacy,
    /// A batch of this many pages.
    Pages(u32),
}

sysfs_enum! {
    /// `vm/scrub_engine` (mmsim's name): what zeroes the blocks kscrubd takes (seed 002).
    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ScrubEngine {
        /// The CPU kscrubd runs on, with temporal stores through its caches (the seed's fallback
        /// `clear_page(addr, order)`, which "will likely thrash the cpu caches").
        Cpu => "cpu",
        /// The CPU with non-temporal stores: no cache fills, limited by memory bandwidth.
        CpuNt => "cpu_nt",
        /// A DMA engine like the SGI Altix BTE (the seed's patch 4/4): no CPU time and no cache
        /// pollution; its bandwidth and smallest block come from the profile
        /// (`memory.offload_bandwidth`, `memory.offload_min`). Blocks it refuses, and every block on
        /// a machine without one, are zeroed by the CPU with non-temporal stores (as with `cpu_nt`),
        /// as the seed's kscrubd zeroes a block no zero driver accepts.
        Offload => "offload",
    }
}

sysfs_enum! {
    /// `kernel/fault_locking` (mmsim's name): the locks an anonymous fault takes, by kernel era.
    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum FaultLocking {
        /// Linux >= 6.4: the vma's read lock (`lock_vma_under_rcu`) and the split PTE-table lock.
        PerVma => "per_vma",
        /// Linux 2.6.15 .. 6.3: mmap_lock's read side (one line per mm) and split PTE-table locks.
        MmapLock => "mmap_lock",
        /// Linux before 2.6.15 (seed 002's 2.6.10): mmap_sem's read side and the mm-wide
        /// `mm->page_table_lock`.
        PageTableLock => "page_table_lock",
    }
}

sysfs_enum! {
    /// `vm/ptshare_compat` (mmsim's name): which posting of seed 003's shared page tables.
    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum PtshareCompat {
        /// The rules the thread settled on (the default).
        Fixed => "fixed",
        /// The first posting's behaviour: a munmap of part of a shared range does not unshare (its
        /// tables stay attached and a new mapping there reuses them), madvise, mlock and
        /// split_vma do not unshare, and the first PTE table of an aligned region is never shared.
        Rfc => "rfc",
    }
}

/// Bits of `vm/ptshare` (the seed's CONFIG_PTSHARE_PTE/PMD/PUD): which table levels may be
/// shared. Bit `l` stands for the tables whose entries are at level `l` (0: PTE tables, 1: PMD
/// tables, 2: PUD tables).
pub mod ptshare {
    pub const PTE: u8 = 1 << 0;
    pub const PMD: u8 = 1 << 1;
    pub const PUD: u8 = 1 << 2;
}

/// `normalized_sysctl_sched_base_slice` (kernel/sched/fair.c, Linux >= 6.15): 0.7 ms.
pub const SCHED_BASE_SLICE_NS: u64 = 700_000;

/// `PID_MAX_DEFAULT` (include/linux/threads.h): 0x8000. Linux's pid_idr_init raises it to
/// 1024 per possible CPU on machines of more than 32 CPUs; mmsim keeps 32768 on every machine.
pub const PID_MAX_DEFAULT: u32 = 0x8000;
/// `pid_max_min` (kernel/pid.c): RESERVED_PIDS + 1.
pub const PID_MAX_MIN: u32 = 301;
/// `pid_max_max` (kernel/pid.c): PID_MAX_LIMIT on 64-bit, 4 * 1024 * 1024.
pub const PID_MAX_LIMIT: u32 = 4 * 1024 * 1024;

declare_knobs! {
    /// Every tunable the model honours. Defaults are Linux 6.18's with a distribution config
    /// (Debian/Fedora build THP as `madvise`).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Knobs, table KNOB_TABLE, groups [
        /// Reclaim's and swap's (`vm/swappiness`, ...).
        reclaim: ReclaimKnobs => RECLAIM_TABLE,
        /// `transparent_hugepage/khugepaged/*`.
        khugepaged: KhugepagedKnobs => KHUGEPAGED_TABLE,
    ];

    thp_enabled: ThpEnabled = ThpEnabled::Madvise => {
        name: "transparent_hugepage/enabled",
        boot_only: false,
        codec: ThpEnabled::CODEC,
        help: "THP for anonymous memory: every suitable vma, only MADV_HUGEPAGE vmas, or none",
    },
    thp_defrag: ThpDefrag = ThpDefrag::Madvise => {
        name: "transparent_hugepage/defrag",
        boot_only: false,
        codec: ThpDefrag::CODEC,
        help: "whether a THP fault allocation may reclaim (run shrinkers) before falling back",
    },
    thp_use_zero_page: bool = true => {
        name: "transparent_hugepage/use_zero_page",
        boot_only: false,
        codec: BOOL,
        help: "map the huge zero page on a read fault of a THP-suitable range",
    },
    /// `fail_page_alloc/min_order`: allocations of at least this order fail (None = off).
    fail_min_order: Option<u32> = None => {
        name: "fail_page_alloc/min_order",
        boot_only: false,
        codec: ORDER_OR_OFF,
        help: "fault injection: every page allocation of at least this order fails",
    },
    /// `fail_page_alloc/every`: every Kth allocation fails (0 = off).
    fail_every: u64 = 0 => {
        name: "fail_page_alloc/every",
        boot_only: false,
        codec: number!("0|K", "a non-negative integer"),
        help: "fault injection: every Kth page allocation fails (0 = off)",
    },
    /// debugfs `fault_around_bytes` (mm/memory.c), a power of two between self.geo.page_size() and 64 KiB.
    fault_around_bytes: u64 = 65536 => {
        name: "fault_around_bytes",
        boot_only: false,
        codec: Codec {
            values: "4096..65536 (power of two)",
            parse: |v| match crate::units::parse_size(v) {
                Err(_) => Err("a size"),
                Ok(n) if n.is_power_of_two() && (4096..=65536).contains(&n) => Ok(n),
                Ok(_) => Err("a power of two between 4096 and 65536"),
            },
            show: |n| n.to_string(),
        },
        help: "read faults on file/shmem mappings also map up to this many bytes of pages already cached",
    },
    hzp_kind: HzpKind = HzpKind::Hzp => {
        name: "transparent_hugepage/huge_zero_page",
        boot_only: false,
        codec: HzpKind::CODEC,
        help: "mmsim: what a THP read fault maps when use_zero_page is 1: the huge zero page (a 2 MiB page \
         of zeros under a huge pmd) or the virtual one (a PTE table of 512 entries to the 4 KiB zero page)",
    },
    hzp_alloc: HzpAlloc = HzpAlloc::Shrinkable => {
        name: "transparent_hugepage/huge_zero_page_alloc",
        boot_only: true,
        codec: HzpAlloc::CODEC,
        help: "mmsim, before the run only: when the huge zero page exists: from boot, from first use, from first \
         use and freed by a shrinker when unused (Linux 6.18 default), or always (CONFIG_PERSISTENT_HUGE_ZERO_FOLIO)",
    },
    hzp_refcount: HzpRefcount = HzpRefcount::PerMm => {
        name: "transparent_hugepage/hzp_refcount",
        boot_only: true,
        codec: HzpRefcount::CODEC,
        help: "mmsim, before the run only: every huge zero pmd takes the global refcount (before seed 001), or each mm \
         takes it once and drops it at exit (MMF_HUGE_ZERO_FOLIO, Linux >= 4.9)",
    },
    file_text: FileText = FileText::Off => {
        name: "transparent_hugepage/file_text",
        boot_only: true,
        codec: FileText::CODEC,
        help: "mmsim, before the run only: PMD pages for read-only executable private file mappings: none beyond the page cache's \
         large folios (Linux 6.18), seed 004's prototype (a private PMD page per mapping, read from the \
         file on the first fault in an aligned 2 MiB range; counted in ShmemPmdMapped), or \
         CONFIG_READ_ONLY_THP_FOR_FS (khugepaged and MADV_COLLAPSE collapse the page cache of a file nobody \
         has open for write into PMD folios that later faults map)",
    },
    hzp_wp: HzpWp = HzpWp::Today => {
        name: "transparent_hugepage/huge_zero_page_wp",
        boot_only: false,
        codec: HzpWp::CODEC,
        help: "mmsim: a write to the huge zero page that cannot get a THP splits the pmd and maps a new zeroed 4 KiB \
         page (Linux >= 6.13), or builds seed 000's PTE table of one new page and 511 zero-page entries",
    },
    pcp_batch: PcpBatch = PcpBatch::Auto => {
        name: "page_alloc/pcp_batch",
        boot_only: true,
        codec: Codec {
            values: "auto|legacy|1..4096",
            parse: |v| match v {
                "auto" => Ok(PcpBatch::Auto),
                "legacy" => Ok(PcpBatch::Legacy),
                _ => match v.parse::<u32>() {
                    Ok(n) if (1..=4096).contains(&n) => Ok(PcpBatch::Pages(n)),
                    _ => Err("auto, legacy or a number of pages 1..4096"),
                },
            },
            show: |b| match b {
                PcpBatch::Auto => "auto".to_string(),
                PcpBatch::Legacy => "legacy".to_string(),
                PcpBatch::Pages(n) => n.to_string(),
            },
        },
        help: "mmsim, before the run only: pages the per-CPU lists move to and from the buddy allocator under \
         zone->lock at a time: zone_batchsize() of Linux >= 4.19 (63 on large zones), of older kernels (31), \
         or a number; pcp->high is 6 x batch",
    },
    /// `/proc/sys/kernel/pid_max` (kernel/pid.c `pid_max`): fork and clone fail with EAGAIN
    /// once pids 1..pid_max-1 are all in use. Its range is proc_dointvec_minmax's between
    /// `PID_MAX_MIN` and `PID_MAX_LIMIT`.
    pid_max: u32 = PID_MAX_DEFAULT => {
        name: "kernel/pid_max",
        boot_only: false,
        codec: range!(301, 4194304, "an integer 301..4194304"),
        help: "fork and clone fail with EAGAIN once this many pids less one are in use (pids 1..pid_max-1; every \
         task not yet reaped counts, zombies included: an exited child until its parent's wait or exit)",
    },
    /// CONFIG_PT_RECLAIM (Linux >= 6.14, default y on x86-64): MADV_DONTNEED frees the PTE
    /// tables it empties over their whole 2 MiB.
    pt_reclaim: bool = true => {
        name: "kernel/pt_reclaim",
        boot_only: true,
        codec: BOOL,
        help: "mmsim, before the run only: CONFIG_PT_RECLAIM (Linux >= 6.14): MADV_DONTNEED frees a PTE table it \
         leaves empty over the table's whole 2 MiB (1), or keeps it until munmap or exit (0, older kernels)",
    },
    /// `init_on_alloc` boot parameter (CONFIG_INIT_ON_ALLOC_DEFAULT_ON): every allocation is
    /// cleared in post_alloc_hook.
    init_on_alloc: bool = false => {
        name: "init_on_alloc",
        boot_only: true,
        codec: BOOL,
        help: "boot parameter, before the run only: every page allocation is cleared (post_alloc_hook); the \
         anonymous fault then does not clear again (user_alloc_needs_zeroing)",
    },
    /// `init_on_free` boot parameter: every freed block is cleared; allocations then skip it.
    init_on_free: bool = false => {
        name: "init_on_free",
        boot_only: true,
        codec: BOOL,
        help: "boot parameter, before the run only: every freed page is cleared (free_pages_prepare) and a later \
         __GFP_ZERO allocation skips its clear; the anonymous fault still clears unless init_on_alloc is 1",
    },
    /// `vm/scrub_start` (seed 002): None = kscrubd disabled (the seed's default); else a free
    /// that coalesces a block of this order or higher wakes it.
    scrub_start: Option<u32> = None => {
        name: "vm/scrub_start",
        boot_only: false,
        codec: ORDER_OR_OFF,
        help: "seed 002: kscrubd, off by default; a free that coalesces a block of this order or higher wakes it, \
         and the anonymous fault asks for __GFP_ZERO memory that prezeroed blocks serve without a clear",
    },
    /// `vm/scrub_stop`: kscrubd zeroes until no free block of this order or higher is dirty.
    scrub_stop: u32 = 2 => {
        name: "vm/scrub_stop",
        boot_only: false,
        codec: range!(0, 10, "an order 0..10"),
        help: "seed 002: kscrubd zeroes until every free block of this order or higher is zeroed",
    },
    /// `vm/scrub_load`: kscrubd is not woken while the 1-minute load average is at or above it.
    scrub_load: u32 = 999 => {
        name: "vm/scrub_load",
        boot_only: false,
        codec: range!(0, 999, "an integer 0..999"),
        help: "seed 002: kscrubd is not woken while the 1-minute load average is at or above this (999: never held off)",
    },
    /// `vm/scrub_engine` (mmsim's).
    scrub_engine: ScrubEngine = ScrubEngine::Cpu => {
        name: "vm/scrub_engine",
        boot_only: false,
        codec: ScrubEngine::CODEC,
        help: "mmsim: what zeroes kscrubd's blocks: its CPU with temporal stores (through the caches), with \
         non-temporal stores (no cache fills, memory-bandwidth bound), or a DMA engine like the Altix BTE \
         (no CPU time, no cache pollution; memory.offload_bandwidth from the profile)",
    },
    /// `vm/scrub_merge=separate` (mmsim's): zeroed and dirty free buddies never coalesce.
    scrub_merge_separate: bool = false => {
        name: "vm/scrub_merge",
        boot_only: true,
        codec: flag!("dirty", "separate"),
        help: "mmsim, before the run only: a zeroed free block and its not-zeroed buddy coalesce into a block that is \
         not zeroed (dirty), or never coalesce (separate: the seed's V3 code, one buddy bitmap per list)",
    },
    /// `kernel/fault_locking` (mmsim's).
    fault_locking: FaultLocking = FaultLocking::PerVma => {
        name: "kernel/fault_locking",
        boot_only: true,
        codec: FaultLocking::CODEC,
        help: "mmsim, before the run only: the locks a page fault takes, so that threads of one process faulting at \
         once contend as the kernel of that era made them: the vma's read lock and split PTE-table locks \
         (Linux >= 6.4), mmap_lock's read side and split PTE-table locks (2.6.15 .. 6.3), or mmap_sem's read \
         side and the mm-wide page_table_lock (before 2.6.15: seed 002's 2.6.10)",
    },
    /// `vm/ptshare` (seed 003, mmsim's name): the levels of page tables processes may share
    /// (`ptshare::PTE | PMD | PUD`); 0 is Linux (off).
    ptshare: u8 = 0 => {
        name: "vm/ptshare",
        boot_only: false,
        codec: Codec {
            values: "off|a comma list of pte,pmd,pud",
            parse: |v| {
                let mut bits = 0;
                if v != "off" && v != "0" {
                    for level in v.split(',').map(str::trim) {
                        bits |= match level {
                            "pte" => ptshare::PTE,
                            "pmd" => ptshare::PMD,
                            "pud" => ptshare::PUD,
                            _ => return Err("off or a comma list of pte, pmd, pud"),
                        };
                    }
                }
                Ok(bits)
            },
            show: |&bits| {
                let names: Vec<&str> = [(ptshare::PTE, "pte"), (ptshare::PMD, "pmd"), (ptshare::PUD, "pud")]
                    .into_iter()
                    .filter(|&(b, _)| bits & b != 0)
                    .map(|(_, n)| n)
                    .collect();
                if names.is_empty() {
                    "off".to_string()
                } else {
                    names.join(",")
                }
            },
        },
        help: "seed 003 (mmsim's run-time form of CONFIG_PTSHARE_PTE/PMD/PUD): processes that map the same object at \
         the same address, read-only or shared-writable and without anonymous pages, share the page tables \
         of these levels whose whole range the mapping covers, found through the object's mappings at fault \
         time and taken over at fork; unshared (and refaulted) on munmap, mprotect, mremap, mlock, madvise \
         and vma splits. off is Linux (hugetlb then shares PMD tables as Linux does)",
    },
    /// `vm/ptshare_compat` (mmsim's name).
    ptshare_compat: PtshareCompat = PtshareCompat::Fixed => {
        name: "vm/ptshare_compat",
        boot_only: false,
        codec: PtshareCompat::CODEC,
        help: "mmsim: the rules the thread settled on (fixed), or the first posting's bugs: a munmap of part of a \
         shared range leaves its tables attached, madvise, mlock and vma splits do not unshare, and the first \
         PTE table of an aligned region is never shared (rfc)",
    },
    /// `/proc/sys/vm/nr_hugepages`: persistent 2 MiB hugetlb pages in the pool.
    nr_hugepages: u64 = 0 => {
        name: "vm/nr_hugepages",
        boot_only: false,
        codec: number!("0..", "a number of pages"),
        help: "persistent 2 MiB hugetlb pages in the pool (/proc/sys/vm/nr_hugepages): MAP_HUGETLB mappings reserve \
         from it at mmap and fault from it; writing it grows the pool from free memory or shrinks it by its \
         free pages",
    },
    /// `/proc/sys/vm/nr_overcommit_hugepages`: surplus hugetlb pages the pool may allocate
    /// from the buddy allocator beyond nr_hugepages.
    nr_overcommit_hugepages: u64 = 0 => {
        name: "vm/nr_overcommit_hugepages",
        boot_only: false,
        codec: number!("0..", "a number of pages"),
        help: "surplus hugetlb pages the pool may take from the buddy allocator beyond nr_hugepages when a \
         reservation or fault needs one (/proc/sys/vm/nr_overcommit_hugepages); freed when no longer used",
    },
    /// CONFIG_HUGETLB_PMD_PAGE_TABLE_SHARING (Linux >= 2.6.20, y on x86-64): shared hugetlb
    /// mappings share PMD tables (`huge_pmd_share`) while `vm/ptshare` is off.
    hugetlb_pmd_share: bool = true => {
        name: "kernel/hugetlb_pmd_share",
        boot_only: true,
        codec: BOOL,
        help: "mmsim, before the run only: CONFIG_HUGETLB_PMD_PAGE_TABLE_SHARING (Linux >= 2.6.20): a shared hugetlb \
         mapping holding a whole 1 GiB window shares a sibling's PMD table there (1), or never (0: older \
         kernels); with vm/ptshare set the seed's rules decide instead",
    },
    /// `kernel/pagecache_lock` (mmsim's): page-cache lookups take `mapping->tree_lock`'s read
    /// side (Linux 2.6.15 .. 2.6.26), not RCU (the lockless page cache of 2.6.27 on).
    pagecache_tree_lock: bool = false => {
        name: "kernel/pagecache_lock",
        boot_only: true,
        codec: flag!("rcu", "tree_lock"),
        help: "mmsim, before the run only: how a page-cache lookup in a file or shmem fault is serialised: RCU, no \
         shared line written (the lockless page cache, Linux >= 2.6.27), or the read side of the mapping's \
         tree_lock, two atomics on one line that every process faulting on the object shares (2.6.15 .. 2.6.26)",
    },
    /// debugfs `sched/base_slice_ns` (kernel/sched/fair.c `sysctl_sched_base_slice`): how long
    /// a task runs before the scheduler may switch to another runnable task of its CPU. None
    /// is Linux's default, 0.7 ms x (1 + ilog2(min(CPUs, 8))) (SCHED_TUNABLESCALING_LOG).
    sched_base_slice_ns: Option<u64> = None => {
        name: "sched/base_slice_ns",
        boot_only: false,
        codec: Codec {
            values: "auto|1..4294967295",
            parse: |v| match v {
                "auto" => Ok(None),
                _ => match v.parse::<u32>() {
                    Ok(n) if n > 0 => Ok(Some(u64::from(n))),
                    _ => Err("auto or a number of nanoseconds from 1 to 4294967295"),
                },
            },
            show: |s| s.map_or_else(|| "auto".to_string(), |v| v.to_string()),
        },
        help: "how long (ns) a task runs before its CPU may switch to another of its runnable tasks, ending at the \
         next tick (debugfs sched/base_slice_ns); auto is Linux's 700000 x (1 + ilog2(min(CPUs, 8))); \
         2.6's O(1) scheduler gave a nice-0 task 100 ms (DEF_TIMESLICE)",
    },
    /// `sched_child_runs_first`: a forked child (not CLONE_VM) placed on its parent's CPU runs
    /// before the parent goes on, with half the parent's remaining slice, the parent keeping
    /// the other half: 2.6's O(1) scheduler always (sched_fork's timeslice split,
    /// wake_up_new_task's child-first), CFS under the sysctl (default 0, removed in 6.x).
    sched_child_runs_first: bool = false => {
        name: "sched/child_runs_first",
        boot_only: false,
        codec: BOOL,
        help: "a forked child placed on its parent's CPU runs first, with half the parent's remaining slice, \
         the parent keeping the other half (1: Linux 2.6's O(1) scheduler, sched_fork and wake_up_new_task), \
         or the parent runs on and the child waits its turn (0: current Linux)",
    },
    /// Wakeup preemption: a woken task preempts the one running on its CPU at once (2.6's
    /// O(1) scheduler: `TASK_PREEMPTS_CURR` with the sleeper's interactivity bonus), or waits
    /// for the running task's slice to end (current Linux's EEVDF under RUN_TO_PARITY).
    sched_wakeup_preemption: bool = false => {
        name: "sched/wakeup_preemption",
        boot_only: false,
        codec: BOOL,
        help: "mmsim: a task woken from sleep preempts the task running on its CPU at once (1: 2.6's O(1) \
         scheduler, where a sleeper's priority bonus lets it preempt), or waits for that task's slice to end \
         (0: current Linux, EEVDF with RUN_TO_PARITY)",
    },
    /// SD_BALANCE_FORK: where a forked task goes (select_task_rq with SD_BALANCE_FORK,
    /// find_idlest_cpu), or mmsim's placement by pid.
    sched_balance_fork: bool = true => {
        name: "sched/balance_fork",
        boot_only: false,
        codec: BOOL,
        help: "mmsim: a new task goes to the idlest CPU, the one with the fewest runnable tasks, its parent's on a \
         tie, else the lowest-numbered (1: SD_BALANCE_FORK's find_idlest_cpu over one domain of every CPU, \
         2.6.15 and current Linux alike), or to CPU (pid - 1) mod CPUs (0: round robin by pid)",
    },
    /// Idle balancing: a CPU with nothing to run pulls a waiting task from the busiest run
    /// queue, at once when it goes idle (`newidle_balance`, 2.6's `idle_balance`) and at its
    /// next tick while it stays idle (the idle CPU's `rebalance_tick` / nohz idle balance).
    sched_idle_balance: bool = true => {
        name: "sched/idle_balance",
        boot_only: false,
        codec: BOOL,
        help: "mmsim: a CPU with nothing to run pulls a task waiting on the busiest CPU's run queue, at once when \
         it goes idle and at its next tick while it stays idle (1: newidle_balance and the idle CPU's periodic \
         balance, 2.6.15 and current Linux alike), or a task stays on the CPU it was placed on (0)",
    },
    /// CONFIG_HZ: the scheduler tick. A slice ends at the first tick after it is used up
    /// (update_deadline runs from the tick; no HRTICK).
    hz: u32 = 250 => {
        name: "kernel/hz",
        boot_only: true,
        codec: one_of!(100, 250, 300, 1000),
        help: "mmsim, before the run only: CONFIG_HZ, the scheduler tick at which a used-up slice ends",
    },
    /// The block device's `queue/read_ahead_kb` (its bdi's ra_pages in KiB).
    read_ahead_kb: u64 = 128 => {
        name: "block/read_ahead_kb",
        boot_only: false,
        codec: range!(0, 1048576, "0 to 1048576"),
        help: "the block device's read_ahead_kb (/sys/block/DEV/queue): the readahead window's limit; a file \
         takes the value when it is opened (128 is VM_READAHEAD_PAGES' default)",
    },
    /// The block device's `queue/max_sectors_kb`: the largest request (bdi io_pages), which
    /// a large read may read ahead up to.
    max_sectors_kb: u64 = 1280 => {
        name: "block/max_sectors_kb",
        boot_only: false,
        codec: range!(4, 1048576, "4 to 1048576"),
        help: "the block device's max_sectors_kb: the largest request, up to which one large read(2) reads ahead",
    },
    /// `vm/drop_caches`: the last value written (1: page cache, 2: slab, 3: both).
    drop_caches: u8 = 0 => {
        name: "vm/drop_caches",
        boot_only: false,
        codec: one_of!(0, 1, 2, 3),
        help: "writing 1 evicts the clean unmapped page cache, 2 shrinks the slab caches, 3 both",
    },
}

/// A knob's public description: name, default value (as sysfs would print it) and meaning.
#[derive(Clone, Debug, Serialize)]
pub struct KnobInfo {
    pub name: &'static str,
    pub default: String,
    pub values: &'static str,
    pub help: &'static str,
}

impl Knobs {
    /// The slice `sched/base_slice_ns` gives on a machine of `cpus` CPUs: the knob's value, or
    /// Linux's default scaled as `get_update_sysctl_factor` scales it (1 + ilog2 of at most 8
    /// CPUs): 1.4 ms on 2 CPUs, 2.8 ms on 8.
    pub fn sched_slice_ns(&self, cpus: usize) -> u64 {
        self.sched_base_slice_ns.unwrap_or_else(|| {
            let factor = 1 + cpus.clamp(1, 8).ilog2() as u64;
            SCHED_BASE_SLICE_NS * factor
        })
    }

    /// Every knob with its default and meaning.
    pub fn describe() -> Vec<KnobInfo> {
        let d = Knobs::default();
        Self::table()
            .map(|k| KnobInfo { name: k.name, default: (k.show)(&d), values: k.values, help: k.help })
            .collect()
    }

    /// Names of every knob.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::table().map(|k| k.name)
    }

    /// Every knob, in the order `mmsim knobs` lists them: the table, then khugepaged's.
    pub fn table() -> impl Iterator<Item = &'static Knob> {
        Self::TABLES.iter().flat_map(|t| t.iter())
    }

    /// The knob of this name.
    fn knob(name: &str) -> Option<&'static Knob> {
        Self::table().find(|k| k.name == name)
    }

    /// The value of a knob as sysfs would print it.
    pub fn get(&self, name: &str) -> Option<String> {
        Self::knob(name).map(|k| (k.show)(self))
    }

    /// Set a knob from its textual value (as `echo VALUE > /sys/...` would); the error names
    /// the knob and what it accepts.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        let v = value.trim();
        let knob = Self::knob(name).ok_or_else(|| KnobError::UnknownKnob { name: name.to_string() })?;
        (knob.store)(self, v).map_err(|expected| KnobError::InvalidValue {
            knob: knob.name,
            value: v.to_string(),
            expected,
        })
    }

    /// All knobs as name -> value, as a run reports its effective settings.
    pub fn effective(&self) -> Vec<(String, String)> {
        Self::table().map(|k| (k.name.to_string(), (k.show)(self))).collect()
    }
}

#[cfg(test)]
#[path = "knobs_tests.rs"]
mod tests;
