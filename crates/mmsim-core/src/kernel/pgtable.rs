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

/// _PAGE_SWP_EXCLUSIVE (x86-64: the PWT bit of a non-present entry): the swapped-out page
/// was exclusive to this mapping (a swap-in may map it writable).
pub const SWP_EXCLUSIVE: u64 = 1 << 3;
/// Bits of a swap entry's type (SWP_TYPE_BITS), at the top of the entry.
const SWP_TYPE_BITS: u32 = 5;
/// The offset's first bit (SWP_OFFSET_FIRST_BIT: above _PAGE_PROTNONE).
const SWP_OFFSET_FIRST_BIT: u32 = 9;
/// Bits of a swap entry's offset mmsim keeps in `struct page` (27: swap areas up to 512 GiB).
pub const SWP_OFFSET_BITS: u32 = 27;

/// `swp_entry_t`: a swap device (`type`, an index of the swap areas) and a page slot in it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SwpEntry(pub u32);

impl SwpEntry {
    /// `swp_entry(type, offset)`.
    #[inline]
    pub fn new(ty: u32, offset: u32) -> SwpEntry {
        debug_assert!(ty < 1 << SWP_TYPE_BITS && offset < 1 << SWP_OFFSET_BITS);
        SwpEntry(ty << SWP_OFFSET_BITS | offset)
    }
    /// `swp_type`.
    #[inline]
    pub fn ty(self) -> usize {
        (self.0 >> SWP_OFFSET_BITS) as usize
    }
    /// `swp_offset`.
    #[inline]
    pub fn offset(self) -> u32 {
        self.0 & ((1 << SWP_OFFSET_BITS) - 1)
    }
    /// The entry `n` slots on in the same area.
    #[inline]
    #[allow(clippy::should_implement_trait)] // Linux's swp_entry arithmetic, not an operator
    pub fn add(self, n: u32) -> SwpEntry {
        SwpEntry(self.0 + n)
    }
}

impl std::fmt::Debug for SwpEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "swp({}:{:#x})", self.ty(), self.offset())
    }
}

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
    /// `swp_entry_to_pte` (x86-64's `__swp_entry`): the type in the top five bits, the offset
    /// inverted (the L1TF mitigation) from bit 9 on; not present, so the walker faults.
    #[inline]
    pub fn swp(e: SwpEntry, exclusive: bool) -> Entry {
        let inv = (!(e.offset() as u64)) << (SWP_OFFSET_FIRST_BIT + SWP_TYPE_BITS) >> SWP_TYPE_BITS;
        let ty = (e.ty() as u64) << (64 - SWP_TYPE_BITS);
        Entry(ty | inv | if exclusive { SWP_EXCLUSIVE } else { 0 })
    }
    /// `is_swap_pte`: neither none nor present.
    #[inline]
    pub fn is_swap(self) -> bool {
        !self.none() && !self.present()
    }
    /// `pte_to_swp_entry` of a swap pte.
    #[inline]
    pub fn swp_entry(self) -> SwpEntry {
        debug_assert!(self.is_swap());
        let ty = (self.0 >> (64 - SWP_TYPE_BITS)) as u32;
        let off = (!self.0) << SWP_TYPE_BITS >> (SWP_OFFSET_FIRST_BIT + SWP_TYPE_BITS);
        SwpEntry::new(ty, (off & ((1 << SWP_OFFSET_BITS) - 1)) as u32)
    }
    /// `pte_swp_exclusive`.
    #[inline]
    pub fn swp_exclusive(self) -> bool {
        self.0 & SWP_EXCLUSIVE != 0
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
        if self.is_swap() {
            let x = if self.swp_exclusive() { " excl" } else { "" };
            return write!(f, "{:?}{x}", self.swp_entry());
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

    #[test]
    fn swap_entries_round_trip_and_are_not_present() {
        for (ty, off) in [(0, 1), (3, 0x7ff_ffff), (23, 12345)] {
            let s = SwpEntry::new(ty, off);
            for excl in [false, true] {
                let e = Entry::swp(s, excl);
                assert!(e.is_swap() && !e.present() && !e.hw_present() && !e.none());
                assert_eq!((e.swp_entry(), e.swp_exclusive()), (s, excl));
            }
        }
        assert_eq!(format!("{:?}", Entry::swp(SwpEntry::new(1, 0x10), true)), "swp(1:0x10) excl");
    }
}
