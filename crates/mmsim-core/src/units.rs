//! Addresses, page numbers and sizes: newtypes with checked arithmetic, and the size parser
//! of the workload format ("200M", "2G": powers of 1024).

use std::fmt;

use serde::de::{self, Deserializer};
use serde::Deserialize;

/// The page geometry of the simulated architecture: its base page size and, from it, the
/// fan-out and reach of each page-table level. Mirrors an architecture's compile-time
/// PAGE_SHIFT, PTRS_PER_PTE and PMD_SHIFT (arch/x86/include/asm/pgtable_64_types.h,
/// arch/ia64/include/asm/pgtable.h); mmsim chooses it per run from the profile
/// (`memory.page_size`) and always keeps four levels of 8-byte entries, each level one page
/// of PTRS_PER_TABLE entries (Linux folds unused levels: ia64 with 16 KiB pages had three).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// log2 of the base page size (PAGE_SHIFT).
    pub page_shift: u32,
}

impl Geometry {
    /// x86-64: 4 KiB pages, 512-entry tables, 2 MiB PMDs, 1 GiB PUDs.
    pub const X86_64: Geometry = Geometry { page_shift: 12 };

    /// The geometry of a base page size in bytes, or why it is not one mmsim models.
    pub fn from_page_size(bytes: u64) -> Result<Geometry, SizeError> {
        match bytes {
            4096 | 16384 | 65536 => Ok(Geometry { page_shift: bytes.trailing_zeros() }),
            _ => Err(SizeError::PageSize(bytes)),
        }
    }
    /// The base page size in bytes (PAGE_SIZE).
    #[inline(always)]
    pub const fn page_size(self) -> u64 {
        1 << self.page_shift
    }
    /// `addr` rounded down to its base page.
    #[inline(always)]
    pub const fn page_mask(self) -> u64 {
        !(self.page_size() - 1)
    }
    /// log2 of the entries in one table page (8-byte entries: PAGE_SHIFT - 3).
    #[inline(always)]
    pub const fn table_shift(self) -> u32 {
        self.page_shift - 3
    }
    /// Entries per page-table page (PTRS_PER_PTE = PTRS_PER_PMD = ...).
    #[inline(always)]
    pub const fn ptrs_per_table(self) -> usize {
        1 << self.table_shift()
    }
    /// log2 of the range one entry at `level` maps (0 = PTE: PAGE_SHIFT, 1 = PMD_SHIFT,
    /// 2 = PUD_SHIFT, 3 = PGDIR_SHIFT).
    #[inline(always)]
    pub const fn level_shift(self, level: u32) -> u32 {
        self.page_shift + self.table_shift() * level
    }
    /// Index of `addr` in the table at `level` (pte_index, pmd_index, ...).
    #[inline(always)]
    pub const fn table_index(self, addr: u64, level: u32) -> usize {
        ((addr >> self.level_shift(level)) as usize) & (self.ptrs_per_table() - 1)
    }
    /// log2 of the range one PMD entry maps (x86-64: 21; ia64 16 KiB: 25).
    #[inline(always)]
    pub const fn pmd_shift(self) -> u32 {
        self.level_shift(1)
    }
    /// log2 of the range one PUD entry maps (x86-64: 30).
    #[inline(always)]
    pub const fn pud_shift(self) -> u32 {
        self.level_shift(2)
    }
    /// log2 of the range one PGD entry maps (x86-64: 39).
    #[inline(always)]
    pub const fn pgdir_shift(self) -> u32 {
        self.level_shift(3)
    }
    /// Bytes mapped by one PMD entry: a PMD-sized THP (HPAGE_PMD_SIZE).
    #[inline(always)]
    pub const fn hpage_pmd_size(self) -> u64 {
        1 << self.pmd_shift()
    }
    /// Base pages in a PMD-sized THP (HPAGE_PMD_NR).
    #[inline(always)]
    pub const fn hpage_pmd_nr(self) -> u64 {
        1 << self.table_shift()
    }
    /// Order of a PMD-sized THP (HPAGE_PMD_ORDER).
    #[inline(always)]
    pub const fn hpage_pmd_order(self) -> u32 {
        self.table_shift()
    }
    /// Bytes one entry at `level` maps (PMD_SIZE = 1 << PMD_SHIFT, ...).
    #[inline(always)]
    pub const fn level_size(self, level: u32) -> u64 {
        1 << self.level_shift(level)
    }
    /// PMD_MASK: clears the offset within a PMD's range.
    #[inline(always)]
    pub const fn pmd_mask(self) -> u64 {
        !(self.hpage_pmd_size() - 1)
    }
    /// `offset_in_page`: the byte offset of `addr` within its page (`addr & ~PAGE_MASK`).
    #[inline(always)]
    pub const fn offset_in_page(self, addr: u64) -> u64 {
        addr & (self.page_size() - 1)
    }
    /// `PAGE_ALIGNED`: is `addr` at the start of a page.
    #[inline(always)]
    pub const fn page_aligned(self, addr: u64) -> bool {
        self.offset_in_page(addr) == 0
    }
    /// PAGE_ALIGN: round up to a page, or None on overflow.
    #[inline(always)]
    pub const fn page_align(self, x: u64) -> Option<u64> {
        match x.checked_add(self.page_size() - 1) {
            Some(v) => Some(v & self.page_mask()),
            None => None,
        }
    }
    /// `PAGE_ALIGN_DOWN`: `x` rounded down to its page (`x & PAGE_MASK`).
    #[inline(always)]
    pub const fn page_align_down(self, x: u64) -> u64 {
        x & self.page_mask()
    }
    /// `addr & HPAGE_PMD_MASK`: the start of the PMD-sized THP range holding `addr`.
    #[inline(always)]
    pub const fn hpage_pmd_align_down(self, addr: u64) -> u64 {
        addr & self.pmd_mask()
    }
    /// `addr & ~HPAGE_PMD_MASK`: the byte offset of `addr` within its PMD-sized range.
    #[inline(always)]
    pub const fn offset_in_pmd(self, addr: u64) -> u64 {
        addr & !self.pmd_mask()
    }
    /// `pmd_addr_end`: the end of the PMD range holding `addr`, or `end` if that comes first.
    #[inline(always)]
    pub const fn pmd_addr_end(self, addr: u64, end: u64) -> u64 {
        addr_end(addr, end, self.hpage_pmd_size())
    }
    /// `pud_addr_end`: the end of the PUD range holding `addr`, or `end` if that comes first.
    #[inline(always)]
    pub const fn pud_addr_end(self, addr: u64, end: u64) -> u64 {
        addr_end(addr, end, self.level_size(2))
    }
    /// `pgd_addr_end`: the end of the PGD range holding `addr`, or `end` if that comes first.
    #[inline(always)]
    pub const fn pgd_addr_end(self, addr: u64, end: u64) -> u64 {
        addr_end(addr, end, self.level_size(3))
    }
    /// Base pages mapped by one PUD entry.
    #[inline(always)]
    pub const fn pud_nr(self) -> u64 {
        1 << (2 * self.table_shift())
    }
    /// The user address-space limit: x86-64's 47-bit TASK_SIZE minus the guard page, at every
    /// page size (ia64 regions were larger; no seed workload comes near either).
    #[inline(always)]
    pub const fn task_size(self) -> u64 {
        (1 << 47) - self.page_size()
    }
}

/// `ALIGN_DOWN(x, a)`: `x` rounded down to a multiple of `a` (a power of two).
#[inline(always)]
pub const fn align_down(x: u64, a: u64) -> u64 {
    x & !(a - 1)
}

/// `ALIGN(x, a)`: `x` rounded up to a multiple of `a` (a power of two), or None on overflow.
#[inline(always)]
pub const fn align_up(x: u64, a: u64) -> Option<u64> {
    match x.checked_add(a - 1) {
        Some(v) => Some(align_down(v, a)),
        None => None,
    }
}

/// `IS_ALIGNED(x, a)`: is `x` a multiple of `a` (a power of two).
#[inline(always)]
pub const fn is_aligned(x: u64, a: u64) -> bool {
    x & (a - 1) == 0
}

/// `pgd_addr_end` and friends: the end of the `size`-aligned block holding `addr`, or `end`
/// if that comes first (both taken minus one, so that an `end` of 0 is the top of memory and
/// a block ending at the top wraps to 0 as in the kernel).
#[inline(always)]
const fn addr_end(addr: u64, end: u64, size: u64) -> u64 {
    let boundary = align_down(addr, size).wrapping_add(size);
    if boundary.wrapping_sub(1) < end.wrapping_sub(1) {
        boundary
    } else {
        end
    }
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry::X86_64
    }
}

/// The x86-64 geometry's constants, for tests written in 4 KiB pages.
#[cfg(test)]
pub mod x86 {
    use super::Geometry;
    const G: Geometry = Geometry::X86_64;
    pub const PAGE_SHIFT: u32 = G.page_shift;
    pub const PAGE_SIZE: u64 = G.page_size();
    pub const PTRS_PER_TABLE: usize = G.ptrs_per_table();
    pub const PMD_SHIFT: u32 = G.pmd_shift();
    pub const HPAGE_PMD_SIZE: u64 = G.hpage_pmd_size();
    pub const HPAGE_PMD_NR: u64 = G.hpage_pmd_nr();
    pub const HPAGE_PMD_ORDER: u32 = G.hpage_pmd_order();
    pub const PUD_SHIFT: u32 = G.pud_shift();
    pub const TASK_SIZE: u64 = G.task_size();
    /// `addr & HPAGE_PMD_MASK` at 4 KiB pages (Geometry::hpage_pmd_align_down).
    pub const fn hpage_pmd_align_down(addr: u64) -> u64 {
        G.hpage_pmd_align_down(addr)
    }
}

/// A user virtual address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VirtAddr(pub u64);

impl VirtAddr {
    /// `ALIGN_DOWN`: round down to a multiple of `align` (a power of two).
    #[inline(always)]
    pub const fn align_down(self, align: u64) -> VirtAddr {
        VirtAddr(align_down(self.0, align))
    }
}

impl fmt::Debug for VirtAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Display for VirtAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A physical page frame number.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct Pfn(pub u32);

impl Pfn {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
    /// The frame's physical address (PFN_PHYS).
    #[inline(always)]
    pub fn phys(self, g: Geometry) -> u64 {
        (self.0 as u64) << g.page_shift
    }
}

/// A size: an integer number of bytes or a string such as "200M".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        // A required size left out keeps serde's "missing field `NAME`".
        let raw = Raw::deserialize(d).map_err(|e: D::Error| {
            if e.to_string().starts_with("missing field") {
                e
            } else {
                de::Error::custom("expected a size: bytes as an integer, or a string like \"200M\"")
            }
        })?;
        match raw {
            Raw::Int(n) => Ok(Size(n)),
            Raw::Str(s) => parse_size(&s).map(Size).map_err(de::Error::custom),
        }
    }
}

/// A signed size: a `Size`, or one with a leading minus ("-4M", -4096).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SignedSize(pub i64);

impl<'de> Deserialize<'de> for SignedSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SignedSize, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Str(String),
        }
        let expected = "expected a size: bytes as an integer, or a string like \"4M\" or \"-4M\"";
        let n = match Raw::deserialize(d).map_err(|_| de::Error::custom(expected))? {
            Raw::Int(n) => return Ok(SignedSize(n)),
            Raw::Str(s) => match s.trim().strip_prefix('-') {
                Some(rest) => parse_size(rest).map(|n| (n, true)),
                None => parse_size(&s).map(|n| (n, false)),
            },
        };
        let (n, neg) = n.map_err(de::Error::custom)?;
        let n = i64::try_from(n).map_err(|_| de::Error::custom("size out of range"))?;
        Ok(SignedSize(if neg { -n } else { n }))
    }
}

/// Why a size was refused, with the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("empty size")]
    Empty,
    #[error("bad hex size {0:?}")]
    Hex(String),
    #[error("bad size {0:?} (expected bytes or a number with K/M/G/T)")]
    Syntax(String),
    #[error("size {0:?} overflows 64 bits")]
    Overflow(String),
    #[error("{0} is not a modelled page size (4K, 16K or 64K)")]
    PageSize(u64),
}

/// Parse a size: an integer number of bytes, or a string with an optional K/M/G/T suffix
/// (powers of 1024, optional trailing "B"/"iB"), e.g. "200M", "4KiB", "0x200000".
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(SizeError::Empty);
    }
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| SizeError::Hex(s.into()));
    }
    let upper = t.to_ascii_uppercase();
    let body = upper.strip_suffix("IB").or_else(|| upper.strip_suffix('B')).unwrap_or(&upper);
    let (num, shift) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 10),
        Some('M') => (&body[..body.len() - 1], 20),
        Some('G') => (&body[..body.len() - 1], 30),
        Some('T') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let num = num.trim();
    let n: u64 = num.parse().map_err(|_| SizeError::Syntax(s.into()))?;
    n.checked_mul(1u64 << shift).ok_or_else(|| SizeError::Overflow(s.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("200M").unwrap(), 200 << 20);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("2MiB").unwrap(), 2 << 20);
        assert_eq!(parse_size("0x200000").unwrap(), 2 << 20);
        assert_eq!(parse_size("17").unwrap(), 17);
        assert!(parse_size("12X").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn table_index() {
        let g = Geometry::X86_64;
        assert_eq!(g.table_index(0x7fff_eb60_0000, 3), 255);
        assert_eq!(g.table_index(0x7fff_eb60_0000, 0), 0);
        assert_eq!(g.table_index(0x1000, 0), 1);
        assert_eq!(g.table_index(1 << 21, 1), 1);
        assert_eq!((g.pmd_shift(), g.pud_shift(), g.pgdir_shift(), g.hpage_pmd_nr()), (21, 30, 39, 512));
    }

    #[test]
    fn align_helpers() {
        assert_eq!((align_down(0, 4096), align_down(4095, 4096), align_down(4096, 4096)), (0, 0, 4096));
        assert_eq!(align_down(u64::MAX, 1 << 21), u64::MAX - ((1 << 21) - 1));
        assert_eq!(align_down(0x1234, 1), 0x1234);
        assert_eq!((align_up(0, 4096), align_up(1, 4096), align_up(4096, 4096)), (Some(0), Some(4096), Some(4096)));
        assert_eq!(align_up(4097, 4096), Some(8192));
        assert_eq!(align_up(u64::MAX - 4095, 4096), Some(u64::MAX - 4095), "aligned at the top: no overflow");
        assert_eq!(align_up(u64::MAX - 4094, 4096), None, "rounding up past the top overflows");
        assert_eq!(align_up(u64::MAX, 1), Some(u64::MAX));
        assert!(is_aligned(0, 1 << 21) && is_aligned(6 << 21, 1 << 21) && is_aligned(7, 1));
        assert!(!is_aligned(0x1000, 1 << 21) && !is_aligned((1 << 21) - 1, 1 << 21));
        assert_eq!(VirtAddr(0x20_1234).align_down(0x1000), VirtAddr(0x20_1000));
    }

    #[test]
    fn geometry_align_helpers() {
        let g = Geometry::X86_64;
        assert_eq!((g.page_align_down(0), g.page_align_down(0xfff), g.page_align_down(0x1000)), (0, 0, 0x1000));
        assert_eq!(g.page_align_down(u64::MAX), u64::MAX - 0xfff);
        let m2 = 2 << 20;
        assert_eq!((g.hpage_pmd_align_down(0), g.hpage_pmd_align_down(m2 - 1), g.hpage_pmd_align_down(m2)), (0, 0, m2));
        assert_eq!(g.hpage_pmd_align_down(3 * m2 + 0x1234), 3 * m2);
        assert_eq!(x86::hpage_pmd_align_down(3 * m2 + 0x1234), 3 * m2);
        assert_eq!((g.offset_in_pmd(0), g.offset_in_pmd(m2), g.offset_in_pmd(m2 + 0x1234)), (0, 0, 0x1234));
        assert_eq!(g.offset_in_pmd(u64::MAX), m2 - 1);
        let ia64 = Geometry::from_page_size(16384).unwrap();
        assert_eq!((ia64.page_align_down(0x7fff), ia64.hpage_pmd_align_down((5 << 25) + 1)), (0x4000, 5 << 25));
        assert_eq!(ia64.offset_in_pmd((5 << 25) + 0x4001), 0x4001);
    }

    #[test]
    fn addr_end_helpers() {
        let g = Geometry::X86_64;
        let (m2, g1, t512) = (2u64 << 20, 1u64 << 30, 1u64 << 39);
        // The next boundary, or `end` when it comes first.
        assert_eq!(
            (g.pmd_addr_end(0, 10 * m2), g.pmd_addr_end(m2 + 1, 10 * m2), g.pmd_addr_end(m2, m2 + 5)),
            (m2, 2 * m2, m2 + 5)
        );
        assert_eq!(g.pmd_addr_end(m2 - 1, 10 * m2), m2, "the last byte of a range ends it");
        assert_eq!(g.pmd_addr_end(m2, 2 * m2), 2 * m2, "end on the boundary");
        assert_eq!(
            (g.pud_addr_end(5, 3 * g1), g.pud_addr_end(g1, 3 * g1), g.pud_addr_end(g1, g1 + 7)),
            (g1, 2 * g1, g1 + 7)
        );
        assert_eq!((g.pgd_addr_end(0, u64::MAX), g.pgd_addr_end(t512 + 1, 3 * t512)), (t512, 2 * t512));
        // An end of 0 is the top of memory; the last block's boundary wraps to 0 and is taken.
        assert_eq!(g.pmd_addr_end(5, 0), m2);
        assert_eq!(g.pmd_addr_end(u64::MAX - 5, 0), 0);
        assert_eq!(g.pmd_addr_end(u64::MAX - 5, u64::MAX), u64::MAX);
    }

    #[test]
    fn ia64_geometry() {
        assert_eq!((Geometry::X86_64.offset_in_page(0x1234), Geometry::X86_64.page_aligned(0x3000)), (0x234, true));
        let g = Geometry::from_page_size(16384).unwrap();
        assert_eq!((g.page_shift, g.ptrs_per_table(), g.pmd_shift(), g.hpage_pmd_order()), (14, 2048, 25, 11));
        assert_eq!(g.table_index((5 << 25) | (7 << 14) | 123, 0), 7);
        assert_eq!(g.table_index((5 << 25) | (7 << 14), 1), 5);
        assert!(Geometry::from_page_size(8192).is_err());
    }
}
