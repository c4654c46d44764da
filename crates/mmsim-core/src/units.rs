//! Addresses, page numbers and sizes: newtypes with checked arithmetic, and the size parser
//! of the workload format ("200M", "2G": powers of 1024).

use std::fmt;

/// log2 of the base page size (x86-64: 4 KiB).
pub const PAGE_SHIFT: u32 = 12;
/// The base page size in bytes.
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Entries per page-table page (x86-64: 512 eight-byte entries).
pub const PTRS_PER_TABLE: usize = 512;
/// log2 of the range one PMD entry maps (2 MiB).
pub const PMD_SHIFT: u32 = 21;
/// Bytes mapped by one PMD entry (a PMD-sized THP).
pub const HPAGE_PMD_SIZE: u64 = 1 << PMD_SHIFT;
/// Base pages in a PMD-sized THP.
pub const HPAGE_PMD_NR: u64 = HPAGE_PMD_SIZE / PAGE_SIZE;
/// Order of a PMD-sized THP.
pub const HPAGE_PMD_ORDER: u32 = PMD_SHIFT - PAGE_SHIFT;
/// log2 of the range one PUD entry maps (1 GiB).
pub const PUD_SHIFT: u32 = 30;
/// log2 of the range one PGD entry maps (512 GiB).
pub const PGDIR_SHIFT: u32 = 39;
/// x86-64 TASK_SIZE with 4-level paging (47-bit user space, minus the guard page).
pub const TASK_SIZE: u64 = (1 << 47) - PAGE_SIZE;

/// A user virtual address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VirtAddr(pub u64);

impl VirtAddr {
    /// Round down to a multiple of `align` (a power of two).
    pub fn align_down(self, align: u64) -> VirtAddr {
        VirtAddr(self.0 & !(align - 1))
    }
    /// Offset of the address inside its base page.
    pub fn page_offset(self) -> u64 {
        self.0 & (PAGE_SIZE - 1)
    }
    /// Index into the table at `level` (0 = PTE, 1 = PMD, 2 = PUD, 3 = PGD).
    pub fn table_index(self, level: u32) -> usize {
        ((self.0 >> (PAGE_SHIFT + 9 * level)) & 511) as usize
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
    pub fn phys(self) -> u64 {
        (self.0 as u64) << PAGE_SHIFT
    }
}

/// Parse a size: an integer number of bytes, or a string with an optional K/M/G/T suffix
/// (powers of 1024, optional trailing "B"/"iB"), e.g. "200M", "4KiB", "0x200000".
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty size".into());
    }
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| format!("bad hex size {s:?}"));
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
    let n: u64 = num.parse().map_err(|_| format!("bad size {s:?} (expected bytes or a number with K/M/G/T)"))?;
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("size {s:?} overflows 64 bits"))
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
        let a = VirtAddr(0x7fff_eb60_0000);
        assert_eq!(a.table_index(3), 255);
        assert_eq!(a.table_index(0), 0);
        assert_eq!(VirtAddr(0x1000).table_index(0), 1);
        assert_eq!(VirtAddr(1 << 21).table_index(1), 1);
    }
}
