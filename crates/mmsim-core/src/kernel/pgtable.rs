//! x86-64 page-table entries (arch/x86/include/asm/pgtable_types.h) and the table pages that
//! hold them. Entries are the hardware format: pfn in bits 12..51 plus flag bits, so a
//! hardware walker can read them from the simulated table frames.

use crate::units::Pfn;

/// Present (_PAGE_PRESENT).
pub const P: u64 = 1 << 0;
/// Writable (_PAGE_RW).
pub const RW: u64 = 1 << 1;
/// User accessible (_PAGE_USER).
pub const USER: u64 = 1 << 2;
/// Accessed (_PAGE_ACCESSED), set by the hardware walker.
pub const ACCESSED: u64 = 1 << 5;
/// Dirty (_PAGE_DIRTY), set by the hardware on a write.
pub const DIRTY: u64 = 1 << 6;
/// Page size (_PAGE_PSE): this PMD/PUD entry maps a huge page.
pub const PSE: u64 = 1 << 7;
/// PROT_NONE mapping: not present to the hardware, still present to the kernel
/// (_PAGE_PROTNONE, which x86 overlays on _PAGE_GLOBAL).
pub const PROTNONE: u64 = 1 << 8;
/// Software bit: special mapping with no struct page refcount (_PAGE_SPECIAL, zero page).
pub const SPECIAL: u64 = 1 << 9;
/// Software bit on a PMD: the table below maps only the 4 KiB zero page (mmsim's mark for the
/// virtual huge zero page, seed 000; Linux has no such bit).
pub const ZERO_TABLE: u64 = 1 << 10;
/// No execute (_PAGE_NX, bit 63): an instruction fetch through this entry faults.
pub const NX: u64 = 1 << 63;
/// Bits holding the frame number.
pub const PFN_MASK: u64 = 0x000f_ffff_ffff_f000;

/// Level names as Linux uses them, lowest first.
pub const LEVEL_NAMES: [&str; 4] = ["pte", "pmd", "pud", "pgd"];

/// One page-table entry at any level.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry(pub u64);

impl Entry {
    pub const NONE: Entry = Entry(0);

    /// `pfn_pte` / `pfn_pmd`: an entry mapping `pfn` with `flags`.
    #[inline]
    pub fn new(pfn: Pfn, flags: u64) -> Entry {
        Entry(((pfn.0 as u64) << 12) | flags)
    }
    /// `pte_none`.
    #[inline]
    pub fn none(self) -> bool {
        self.0 == 0
    }
    /// `pte_present`: present to the kernel (a PROT_NONE entry is).
    #[inline]
    pub fn present(self) -> bool {
        self.0 & (P | PROTNONE) != 0
    }
    /// Present to the hardware walker.
    #[inline]
    pub fn hw_present(self) -> bool {
        self.0 & P != 0
    }
    #[inline]
    pub fn write(self) -> bool {
        self.0 & RW != 0
    }
    /// `pmd_trans_huge`: a leaf at PMD level.
    #[inline]
    pub fn huge(self) -> bool {
        self.0 & PSE != 0
    }
    #[inline]
    pub fn special(self) -> bool {
        self.0 & SPECIAL != 0
    }
    #[inline]
    pub fn pfn(self) -> Pfn {
        Pfn(((self.0 & PFN_MASK) >> 12) as u32)
    }
    #[inline]
    pub fn has(self, bit: u64) -> bool {
        self.0 & bit != 0
    }
    #[inline]
    pub fn with(self, bit: u64) -> Entry {
        Entry(self.0 | bit)
    }
    #[inline]
    pub fn without(self, bit: u64) -> Entry {
        Entry(self.0 & !bit)
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.none() {
            return write!(f, "none");
        }
        let flags = [
            (P, "P"),
            (RW, "W"),
            (USER, "U"),
            (ACCESSED, "A"),
            (DIRTY, "D"),
            (PSE, "PS"),
            (PROTNONE, "N"),
            (SPECIAL, "S"),
            (ZERO_TABLE, "Z"),
        ];
        write!(f, "pfn {:#x} [", self.pfn().0)?;
        for (b, n) in flags {
            if self.0 & b != 0 {
                write!(f, "{n}")?;
            }
        }
        write!(f, "]")
    }
}

/// Flags of a table (non-leaf) entry: present, writable, user; permissions are decided at the
/// leaf, as Linux's `_PAGE_TABLE` does.
pub const TABLE_FLAGS: u64 = P | RW | USER | ACCESSED;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode() {
        let e = Entry::new(Pfn(0x1234), P | RW | USER);
        assert_eq!(e.pfn(), Pfn(0x1234));
        assert!(e.present() && e.write() && !e.huge());
        assert_eq!(e.0, 0x0123_4000 | 7);
        assert_eq!(format!("{:?}", e.without(RW)), "pfn 0x1234 [PU]");
    }
}
