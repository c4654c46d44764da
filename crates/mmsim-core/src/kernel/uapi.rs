//! The memory system calls' argument types, with Linux's values
//! (include/uapi/asm-generic/mman-common.h, mman.h, include/uapi/linux/mman.h, falloc.h,
//! memfd.h): `PROT_*`, `MAP_*`, `MADV_*`, `MREMAP_*`, `MLOCK_*`, `MCL_*`, `FALLOC_FL_*` and
//! `MFD_*`. Each closed vocabulary of the workload format is declared here once, with the
//! word a workload spells it with; the parser, the engine, the Python front (`schema()`) and
//! the native runner's generated header all read it from here.

use bitflags::bitflags;

use super::mm::vm;

bitflags! {
    /// `PROT_*` of mmap(2) and mprotect(2).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct Prot: u32 {
        const READ = 0x1;
        const WRITE = 0x2;
        const EXEC = 0x4;
    }
}

impl Prot {
    /// PROT_NONE.
    pub const NONE: Prot = Prot::empty();

    /// A workload's prot word: `none`, or any combination of `r`, `w` and `x` in that order
    /// (`"w"`, `"rx"`, `"rwx"`, ...).
    pub fn from_word(s: &str) -> Option<Prot> {
        if s == "none" {
            return Some(Prot::NONE);
        }
        let mut p = Prot::empty();
        let mut rest = s;
        for (c, bit) in [('r', Prot::READ), ('w', Prot::WRITE), ('x', Prot::EXEC)] {
            if let Some(r) = rest.strip_prefix(c) {
                p |= bit;
                rest = r;
            }
        }
        (rest.is_empty() && !p.is_empty()).then_some(p)
    }

    /// The word a workload spells it with (`"rw"`, `"none"`).
    pub fn word(self) -> String {
        if self.is_empty() {
            return "none".into();
        }
        [(Prot::READ, 'r'), (Prot::WRITE, 'w'), (Prot::EXEC, 'x')]
            .into_iter()
            .filter(|&(b, _)| self.contains(b))
            .map(|(_, c)| c)
            .collect()
    }

    /// `calc_vm_prot_bits`: the vma's VM_READ | VM_WRITE | VM_EXEC (the same bits).
    pub fn vm_flags(self) -> u32 {
        let mut f = 0;
        for (p, v) in [(Prot::READ, vm::READ), (Prot::WRITE, vm::WRITE), (Prot::EXEC, vm::EXEC)] {
            if self.contains(p) {
                f |= v;
            }
        }
        f
    }
}

bitflags! {
    /// `MAP_*` of mmap(2) (x86-64 values).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct MapFlags: u32 {
        const SHARED = 0x01;
        const PRIVATE = 0x02;
        const FIXED = 0x10;
        const ANONYMOUS = 0x20;
        /// VM_GROWSDOWN: a stack that `expand_stack` grows down on a fault below it.
        const GROWSDOWN = 0x100;
        const POPULATE = 0x8000;
        const HUGETLB = 0x40000;
        const FIXED_NOREPLACE = 0x100000;
    }
}

bitflags! {
    /// `CLONE_*` of clone(2) that decide the child's address space (fork(2) is none of them).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct CloneFlags: u64 {
        const VM = 0x100;
        const THREAD = 0x10000;
    }
}

bitflags! {
    /// `MREMAP_*` of mremap(2).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct MremapFlags: u32 {
        const MAYMOVE = 1;
        const FIXED = 2;
        const DONTUNMAP = 4;
    }
}

bitflags! {
    /// `MLOCK_*` of mlock2(2).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct MlockFlags: u32 {
        const ONFAULT = 1;
    }
}

bitflags! {
    /// `MCL_*` of mlockall(2).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct MclFlags: u32 {
        const CURRENT = 1;
        const FUTURE = 2;
        const ONFAULT = 4;
    }
}

bitflags! {
    /// `FALLOC_FL_*` of fallocate(2).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct FallocFlags: u32 {
        const KEEP_SIZE = 0x01;
        const PUNCH_HOLE = 0x02;
    }
}

bitflags! {
    /// `MFD_*` of memfd_create(2).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct MfdFlags: u32 {
        const CLOEXEC = 0x1;
        const ALLOW_SEALING = 0x2;
        const HUGETLB = 0x4;
    }
}

/// Declares a closed vocabulary once: each variant with the word a workload spells it with
/// and, where Linux has one, its value and name in the uapi headers.
macro_rules! declare_vocabulary {
    ($(#[$m:meta])* pub enum $name:ident { $($(#[$vm:meta])* $v:ident = ($word:literal, $value:expr, $linux:literal),)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $v,)* }

        impl $name {
            /// Every member, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v,)*];

            /// The word a workload spells it with.
            pub fn word(self) -> &'static str {
                match self { $($name::$v => $word,)* }
            }

            /// Its value in Linux's uapi headers (-1: mmsim's own, no Linux value).
            pub fn value(self) -> i64 {
                match self { $($name::$v => $value,)* }
            }

            /// Its name in Linux's uapi headers ("" where mmsim's own).
            pub fn linux_name(self) -> &'static str {
                match self { $($name::$v => $linux,)* }
            }

            /// The member a workload's word names.
            pub fn from_word(s: &str) -> Option<$name> {
                match s { $($word => Some($name::$v),)* _ => None }
            }

            /// The words, comma-separated, for error messages.
            pub fn words() -> String {
                Self::ALL.iter().map(|a| a.word()).collect::<Vec<_>>().join(", ")
            }
        }
    };
}

declare_vocabulary! {
    /// `MADV_*`: the advice of madvise(2) the model implements.
    pub enum Advice {
        HugePage = ("hugepage", 14, "MADV_HUGEPAGE"),
        NoHugePage = ("nohugepage", 15, "MADV_NOHUGEPAGE"),
        DontNeed = ("dontneed", 4, "MADV_DONTNEED"),
        /// MADV_POPULATE_READ: read faults where a page is not mapped.
        PopulateRead = ("populate_read", 22, "MADV_POPULATE_READ"),
        /// MADV_POPULATE_WRITE: write faults where a page is not mapped writable (breaking COW).
        PopulateWrite = ("populate_write", 23, "MADV_POPULATE_WRITE"),
        /// MADV_WILLNEED: read a file mapping's range ahead (`vfs_fadvise(WILLNEED)`).
        WillNeed = ("willneed", 3, "MADV_WILLNEED"),
        /// MADV_SEQUENTIAL / MADV_RANDOM / MADV_NORMAL: VM_SEQ_READ / VM_RAND_READ / neither.
        Sequential = ("sequential", 2, "MADV_SEQUENTIAL"),
        Random = ("random", 1, "MADV_RANDOM"),
        Normal = ("normal", 0, "MADV_NORMAL"),
        /// MADV_COLLAPSE: collapse the range's PMD-aligned parts into THPs now.
        Collapse = ("collapse", 25, "MADV_COLLAPSE"),
        /// MADV_FREE: private anonymous pages become lazily freeable: reclaim may discard
        /// them (they then read as zero) until they are written again.
        Free = ("free", 8, "MADV_FREE"),
        /// MADV_REMOVE: punch a hole in a shared mapping's file (shmem, tmpfs, ext4,
        /// hugetlbfs): its pages and their data go, in every mapping.
        Remove = ("remove", 9, "MADV_REMOVE"),
        /// MADV_DONTFORK / MADV_DOFORK: set / clear VM_DONTCOPY (fork does not copy the vma).
        DontFork = ("dontfork", 10, "MADV_DONTFORK"),
        DoFork = ("dofork", 11, "MADV_DOFORK"),
        /// MADV_COLD: the range's private folios become the first candidates for reclaim
        /// (deactivated, their accessed bits cleared).
        Cold = ("cold", 20, "MADV_COLD"),
        /// MADV_PAGEOUT: the range's private folios are reclaimed now (swapped out, or
        /// dropped from the page cache).
        PageOut = ("pageout", 21, "MADV_PAGEOUT"),
    }
}

declare_vocabulary! {
    /// The flags of the workload's `mmap` op: the `MAP_*` a mapping is made with, and
    /// mmsim's own `dontexpand` (VM_DONTEXPAND, which Linux sets only from a driver's mmap).
    pub enum MapFlag {
        Private = ("private", 0x02, "MAP_PRIVATE"),
        Shared = ("shared", 0x01, "MAP_SHARED"),
        Anonymous = ("anonymous", 0x20, "MAP_ANONYMOUS"),
        Hugetlb = ("hugetlb", 0x40000, "MAP_HUGETLB"),
        DontExpand = ("dontexpand", -1, ""),
        /// mmsim's own: a vma that never merges with a neighbour and is otherwise ordinary
        /// (validate's stand-ins of the native runner's file mappings, which mlockall locks).
        NoMerge = ("nomerge", -1, ""),
    }
}

declare_vocabulary! {
    /// The flags of the workload's `mlockall` op: `MCL_*` of mlockall(2).
    pub enum MclFlag {
        Current = ("current", 1, "MCL_CURRENT"),
        Future = ("future", 2, "MCL_FUTURE"),
        OnFault = ("onfault", 4, "MCL_ONFAULT"),
    }
}

impl MclFlag {
    /// The `MclFlags` a list of them asks for.
    pub fn flags(list: &[MclFlag]) -> MclFlags {
        list.iter().fold(MclFlags::empty(), |f, m| f | MclFlags::from_bits_retain(m.value() as u32))
    }
}

declare_vocabulary! {
    /// The mode of the workload's `fallocate` op: `FALLOC_FL_*` of fallocate(2) (none:
    /// allocate).
    pub enum FallocMode {
        PunchHole = ("punch_hole", 2, "FALLOC_FL_PUNCH_HOLE"),
        KeepSize = ("keep_size", 1, "FALLOC_FL_KEEP_SIZE"),
    }
}

impl FallocMode {
    /// The `FallocFlags` a list of them asks for.
    pub fn flags(list: &[FallocMode]) -> FallocFlags {
        list.iter().fold(FallocFlags::empty(), |f, m| f | FallocFlags::from_bits_retain(m.value() as u32))
    }
}

declare_vocabulary! {
    /// The order of a `read`, `write` or `fetch`'s accesses (mmsim's own).
    pub enum Pattern {
        /// Every `stride` from `offset` on.
        Sequential = ("sequential", -1, ""),
        /// `count` accesses to slots drawn uniformly (splitmix64 from `seed`).
        Random = ("random", -1, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prot_words_round_trip_and_refuse_other_orders() {
        for w in ["none", "r", "w", "x", "rw", "rx", "wx", "rwx"] {
            assert_eq!(Prot::from_word(w).unwrap().word(), w);
        }
        for bad in ["", "wr", "rr", "q", "rwxx", "none "] {
            assert_eq!(Prot::from_word(bad), None, "{bad:?}");
        }
        assert_eq!(Prot::from_word("wx").unwrap().vm_flags(), vm::WRITE | vm::EXEC);
    }

    #[test]
    fn vocabularies_carry_linux_values() {
        assert_eq!(Advice::from_word("dontneed").map(Advice::value), Some(4));
        assert_eq!(Advice::Collapse.linux_name(), "MADV_COLLAPSE");
        let v = |w| Advice::from_word(w).map(|a| (a.value(), a.linux_name()));
        assert_eq!(v("free"), Some((8, "MADV_FREE")));
        assert_eq!(v("remove"), Some((9, "MADV_REMOVE")));
        assert_eq!(v("dontfork"), Some((10, "MADV_DONTFORK")));
        assert_eq!(v("dofork"), Some((11, "MADV_DOFORK")));
        assert_eq!(MapFlag::from_word("hugetlb").map(MapFlag::value), Some(MapFlags::HUGETLB.bits() as i64));
        assert_eq!(Pattern::words(), "sequential, random");
        assert_eq!(MclFlag::flags(&[MclFlag::Current, MclFlag::OnFault]), MclFlags::CURRENT | MclFlags::ONFAULT);
        assert_eq!(MclFlag::Future.linux_name(), "MCL_FUTURE");
        let m = FallocMode::flags(&[FallocMode::PunchHole, FallocMode::KeepSize]);
        assert_eq!(m, FallocFlags::PUNCH_HOLE | FallocFlags::KEEP_SIZE);
        assert_eq!(FallocMode::from_word("keep_size").map(FallocMode::value), Some(1));
    }
}
