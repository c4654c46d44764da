//! mm/mmap.c and mm/vma.c: do_mmap with top-down get_unmapped_area (and THP alignment of
//! large anonymous mappings), vma merging and splitting, and do_munmap with unmap_region and
//! free_pgtables.

use super::mm::{vm, Backing, Vma};
use super::Kernel;
use super::MmId;
use crate::units::{align_up, is_aligned};

/// Lowest address mmap hands out (vm.mmap_min_addr default).
pub const MMAP_MIN_ADDR: u64 = 65536;
/// stack_guard_gap: 256 pages kept free below a stack vma.
pub const STACK_GUARD_GAP_PAGES: u64 = 256;

/// Errors of the memory system calls (errno).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    EINVAL,
    ENOMEM,
    EACCES,
    EEXIST,
    /// mremap of an address no vma maps, or of a range past its vma's end.
    EFAULT,
    /// A write open of a file being executed, or an exec of a file open for write.
    ETXTBSY,
    /// MADV_COLLAPSE: khugepaged's limits refused the range (SCAN_EXCEED_NONE_PTE).
    EBUSY,
    /// MADV_COLLAPSE: a page is in use, trying again may succeed (SCAN_PAGE_COUNT).
    EAGAIN,
    /// fallocate(2) of a mode the filesystem does not have (or PUNCH_HOLE without KEEP_SIZE).
    EOPNOTSUPP,
    /// hugetlbfs: no huge page left in the pool for fallocate(2).
    ENOSPC,
    /// fallocate(2) past the filesystem's largest file.
    EFBIG,
}

impl Errno {
    pub fn name(self) -> &'static str {
        match self {
            Errno::EINVAL => "EINVAL",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EEXIST => "EEXIST",
            Errno::EFAULT => "EFAULT",
            Errno::ETXTBSY => "ETXTBSY",
            Errno::EBUSY => "EBUSY",
            Errno::EAGAIN => "EAGAIN",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
            Errno::ENOSPC => "ENOSPC",
            Errno::EFBIG => "EFBIG",
        }
    }
}

/// What the caller asks of mmap.
#[derive(Clone, Copy, Debug, Default)]
pub struct MmapArgs {
    pub addr: u64,
    pub len: u64,
    /// vm::READ | vm::WRITE | vm::EXEC.
    pub prot: u32,
    pub shared: bool,
    pub fixed: bool,
    /// Required alignment of the start (0 = none): the posix_memalign of the seeds. Not a
    /// kernel feature: done as user code does it, by mapping `len + align` and unmapping what
    /// lies outside the first aligned `len` (the runner does exactly this). The padded mapping
    /// merges with a neighbour as any mmap does, and the kept part keeps its anon_vma.
    pub align: u64,
    /// VM_DONTEXPAND on the new vma (mmsim's `dontexpand` flag): it never merges.
    pub dontexpand: bool,
    /// MAP_GROWSDOWN: VM_GROWSDOWN on the new anonymous vma (a stack; `expand_stack`).
    pub growsdown: bool,
    /// mmsim's `nomerge` flag: vm::NOMERGE on the new vma, which never merges (and is
    /// otherwise ordinary: mlock locks it, as it does the file mappings it stands for).
    pub nomerge: bool,
    /// MAP_HUGETLB: huge pages from the hugetlb pool (the length is rounded up to one, the
    /// address is aligned to one, the pages are reserved).
    pub hugetlb: bool,
    /// A file mapping: the open file (`Kernel::filps`) the vma will hold, and the offset in
    /// pages it maps from.
    pub file: Option<u32>,
    pub pgoff: u64,
    /// A mapping of a named hugetlbfs file (a memfd_create(MFD_HUGETLB) file,
    /// `Hstate::files`) from `pgoff`, instead of a new unlinked one; implies `hugetlb`.
    pub hugetlbfs: Option<u32>,
}

impl Kernel {
    /// `do_mmap` -> `mmap_region`: place and insert a new vma (merging with a compatible
    /// neighbour, as vma_merge_new_range does).
    pub fn do_mmap(&mut self, mm: MmId, a: MmapArgs) -> Result<u64, Errno> {
        if a.len == 0 {
            return Err(Errno::EINVAL);
        }
        let hsize = self.geo.hpage_pmd_size();
        // ksys_mmap_pgoff: a MAP_HUGETLB length is rounded up to the huge page size.
        let len = if a.hugetlb { a.len.checked_next_multiple_of(hsize) } else { self.geo.page_align(a.len) };
        let len = len.ok_or(Errno::ENOMEM)?;
        if len > self.geo.task_size() {
            return Err(Errno::ENOMEM);
        }
        if a.align != 0 && (!a.align.is_power_of_two() || a.align < self.geo.page_size()) {
            return Err(Errno::EINVAL);
        }
        // A hugetlb mapping is aligned to its huge page size already.
        let align = if a.hugetlb && a.align <= hsize { 0 } else { a.align };
        let a = MmapArgs { align, ..a };
        if (a.file.is_some() || a.hugetlb)
            && !a.fixed
            && a.align > self.geo.page_size()
            && !self.hint_is_free(mm, a.addr, len, a.align)
        {
            // A file or a hugetlb mapping is aligned as user space does it: reserve len + align
            // of PROT_NONE anonymous memory, map the region MAP_FIXED at the aligned address
            // inside, and unmap the rest of the reservation (a file's offset stays the one
            // asked for; a hugetlb mapping reserves only its own huge pages).
            let padded = len.checked_add(a.align).ok_or(Errno::ENOMEM)?;
            let reserve = MmapArgs {
                addr: 0,
                len: padded,
                align: 0,
                prot: 0,
                shared: false,
                file: None,
                hugetlb: false,
                hugetlbfs: None,
                dontexpand: false,
                nomerge: false,
                ..a
            };
            let p = self.do_mmap(mm, reserve)?;
            let start = align_up(p, a.align).ok_or(Errno::ENOMEM)?;
            self.do_mmap(mm, MmapArgs { addr: start, len, align: 0, fixed: true, ..a })?;
            if start > p {
                self.do_munmap(mm, p, start - p)?;
            }
            self.do_munmap(mm, start + len, p + padded - (start + len))?;
            return Ok(start);
        }
        if !a.fixed && a.align > self.geo.page_size() && !self.hint_is_free(mm, a.addr, len, a.align) {
            // Over-allocate and trim, as user space aligns.
            let padded = len.checked_add(a.align).ok_or(Errno::ENOMEM)?;
            let p = self.do_mmap(mm, MmapArgs { addr: 0, len: padded, align: 0, ..a })?;
            let start = align_up(p, a.align).ok_or(Errno::ENOMEM)?;
            if start > p {
                self.do_munmap(mm, p, start - p)?;
            }
            self.do_munmap(mm, start + len, p + padded - (start + len))?;
            return Ok(start);
        }
        if a.hugetlb {
            return self.do_mmap_hugetlb(mm, a, len);
        }
        let addr = if a.fixed {
            if !self.geo.page_aligned(a.addr)
                || a.addr < MMAP_MIN_ADDR
                || a.addr.checked_add(len).is_none_or(|e| e > self.geo.task_size())
            {
                return Err(Errno::EINVAL);
            }
            self.do_munmap(mm, a.addr, len)?;
            a.addr
        } else if let Some(f) = a.file {
            self.file_get_unmapped_area(mm, a.addr, len, a.pgoff, f)?
        } else {
            self.get_unmapped_area(mm, a.addr, len, a.shared)?
        };
        // do_mmap: the mm's def_flags too (mlockall's MCL_FUTURE: VM_LOCKED).
        let mut flags = a.prot | vm::MAYREAD | vm::MAYWRITE | vm::MAYEXEC | self.mm(mm).def_flags;
        if a.dontexpand {
            flags |= vm::DONTEXPAND;
        }
        if a.nomerge {
            flags |= vm::NOMERGE;
        }
        if a.growsdown && a.file.is_none() && !a.shared {
            flags |= vm::GROWSDOWN;
        }
        let backing = if let Some(f) = a.file {
            if a.shared {
                flags |= vm::SHARED | vm::MAYSHARE;
            } else if a.prot & vm::WRITE != 0 {
                flags |= vm::ACCOUNT;
            }
            self.vma_file_get(mm, Backing::File(f));
            Backing::File(f)
        } else if a.shared {
            flags |= vm::SHARED | vm::MAYSHARE;
            Backing::Shmem(self.shmem_new(len >> self.geo.page_shift, mm))
        } else {
            if a.prot & vm::WRITE != 0 {
                flags |= vm::ACCOUNT;
            }
            Backing::Anon
        };
        let pgoff = match backing {
            Backing::Anon => addr >> self.geo.page_shift,
            Backing::File(_) => a.pgoff,
            _ => 0,
        };
        let populate = flags & vm::LOCKED != 0;
        let flags = self.mmap_locked_flags(mm, flags, len);
        let vma = Vma::new_unallocated(addr, addr + len, flags, pgoff, backing);
        self.mm_mut(mm).vmas.insert(addr, vma);
        let at = self.vma_merge_around(mm, addr);
        self.vm_area_alloc_new(mm, at);
        if matches!(backing, Backing::File(_) | Backing::Anon) {
            // __mmap_new_vma's khugepaged_enter_vma.
            self.khugepaged_enter_vma(mm, addr);
        }
        if populate {
            // vm_mmap_pgoff's mm_populate: do_mmap's vm_flags had VM_LOCKED (from
            // def_flags), whatever the vma kept; errors ignored.
            let _ = self.mm_populate(mm, addr, addr + len, true);
        }
        Ok(addr)
    }

    /// `__mmap_complete` of a mapping whose vm_flags have VM_LOCKED (from def_flags): a
    /// special vma (VM_DONTEXPAND; hugetlb's is too) loses VM_LOCKED_MASK, any other adds its
    /// pages to locked_vm. The vma's flags.
    fn mmap_locked_flags(&mut self, mm: MmId, flags: u32, len: u64) -> u32 {
        if flags & vm::LOCKED == 0 {
            return flags;
        }
        if flags & vm::DONTEXPAND != 0 {
            return flags & !vm::LOCKED_MASK;
        }
        self.mm_mut(mm).locked_vm += (len >> self.geo.page_shift) as i64;
        flags
    }

    /// `do_mmap` of MAP_HUGETLB (`hugetlb_file_setup`, `hugetlb_get_unmapped_area`,
    /// `hugetlbfs_file_mmap`): `len` is a multiple of the huge page size; a fixed address
    /// must be aligned to it (EINVAL), a hint is rounded up to it, a search finds the highest
    /// aligned place (vm_unmapped_area with the huge page's align_mask). The file's pages are
    /// reserved (ENOMEM if the pool cannot promise them). The vma is VM_HUGETLB |
    /// VM_DONTEXPAND and never merges.
    fn do_mmap_hugetlb(&mut self, mm: MmId, a: MmapArgs, len: u64) -> Result<u64, Errno> {
        let hsize = self.geo.hpage_pmd_size();
        let addr = if a.fixed {
            if !is_aligned(a.addr, hsize)
                || a.addr < MMAP_MIN_ADDR
                || a.addr.checked_add(len).is_none_or(|e| e > self.geo.task_size())
            {
                return Err(Errno::EINVAL);
            }
            a.addr
        } else {
            let hint = a.addr.checked_next_multiple_of(hsize).unwrap_or(0);
            if hint != 0 && self.hint_is_free(mm, hint, len, 0) {
                hint
            } else {
                let pad = hsize - self.geo.page_size();
                let padded = len.checked_add(pad).ok_or(Errno::ENOMEM)?;
                let p = self.unmapped_area_topdown(mm, padded).ok_or(Errno::ENOMEM)?;
                self.geo.hpage_pmd_align_down(p + padded - len)
            }
        };
        let file = match a.hugetlbfs {
            Some(f) => {
                self.hugetlbfs_file_mmap(mm, f, a.pgoff, len, a.shared, a.prot & vm::WRITE != 0)?;
                f
            }
            None => self.hugetlb_file_setup(mm, len, a.shared)?,
        };
        if a.fixed {
            if let Err(e) = self.do_munmap(mm, addr, len) {
                self.hugetlb_file_put(file, mm);
                return Err(e);
            }
        }
        let mut flags = a.prot | vm::MAYREAD | vm::MAYWRITE | vm::MAYEXEC | vm::HUGETLB | vm::DONTEXPAND;
        if a.shared {
            flags |= vm::SHARED | vm::MAYSHARE;
        }
        // def_flags' VM_LOCKED: not on a hugetlb vma, but do_mmap's populate all the same.
        let populate = self.mm(mm).def_flags & vm::LOCKED != 0;
        let backing = Backing::Hugetlb(file);
        let pgoff = if a.hugetlbfs.is_some() { a.pgoff } else { 0 };
        let vma = Vma::new_unallocated(addr, addr + len, flags, pgoff, backing);
        self.mm_mut(mm).vmas.insert(addr, vma);
        self.vm_area_alloc_new(mm, addr);
        if populate {
            let _ = self.mm_populate(mm, addr, addr + len, true);
        }
        Ok(addr)
    }

    /// The hugetlb vma piece [start, end) of `v` is going away (munmap, exit):
    /// `hugetlb_vm_op_close` and the file's reference.
    /// `keep_resv`: mremap moved the vma, whose hugetlb reservation stays with the moved
    /// vma (`clear_vma_resv_huge_pages` on the old one).
    pub(super) fn vma_close(&mut self, mm: MmId, v: &Vma, keep_resv: bool) {
        if let (Backing::Hugetlb(_), false) = (v.backing, keep_resv) {
            self.hugetlb_vm_op_close(mm, v, v.start, v.end);
        }
        self.vma_file_put(mm, v.backing);
    }

    /// `get_file` for a vma's backing object.
    pub(super) fn vma_file_get(&mut self, mm: MmId, b: Backing) {
        match b {
            Backing::Shmem(o) => self.shmem_get(o, mm),
            Backing::Hugetlb(f) => self.hugetlb_file_get(f, mm),
            Backing::File(f) => {
                self.get_file(f);
                let obj = self.filp(f).inode;
                super::mm_types::i_mmap_insert(&mut self.shmem[obj as usize].as_mut().expect("inode").mms, mm);
            }
            Backing::Anon => {}
        }
    }

    /// `fput` for a vma's backing object.
    pub(super) fn vma_file_put(&mut self, mm: MmId, b: Backing) {
        match b {
            Backing::Shmem(o) => self.shmem_put(o, mm),
            Backing::Hugetlb(f) => self.hugetlb_file_put(f, mm),
            Backing::File(f) => {
                let obj = self.filp(f).inode;
                super::mm_types::i_mmap_remove(&mut self.shmem[obj as usize].as_mut().expect("inode").mms, mm);
                self.fput(f);
            }
            Backing::Anon => {}
        }
    }

    /// `for_each_vma_range` as mprotect and mlock walk it: `fixup` each vma's part [s, e) of
    /// [start, end) in address order; ENOMEM at the first hole (the parts before it changed).
    pub(super) fn for_each_vma_range(
        &mut self,
        mm: MmId,
        start: u64,
        end: u64,
        mut fixup: impl FnMut(&mut Kernel, &Vma, u64, u64),
    ) -> Result<(), Errno> {
        let mut addr = start;
        while addr < end {
            let Some(v) = self.mm(mm).vma_lookup(addr).cloned() else {
                return Err(Errno::ENOMEM);
            };
            let stop = v.end.min(end);
            fixup(self, &v, addr, stop);
            addr = stop;
        }
        Ok(())
    }

    /// `hugetlb_vm_op_split`: a hugetlb vma may be cut only at a huge page boundary. EINVAL
    /// if a vma of [start, end) would be cut elsewhere.
    pub(super) fn hugetlb_split_ok(&self, mm: MmId, start: u64, end: u64) -> Result<(), Errno> {
        let hsize = self.geo.hpage_pmd_size();
        for s in self.mm(mm).vmas_in(start, end) {
            let v = &self.mm(mm).vmas[&s];
            if v.flags & vm::HUGETLB == 0 {
                continue;
            }
            if (v.start < start && !is_aligned(start, hsize)) || (v.end > end && !is_aligned(end, hsize)) {
                return Err(Errno::EINVAL);
            }
        }
        Ok(())
    }

    /// A hint mmap may take as it is: page-aligned after rounding, inside the user address
    /// space, free, and (for mmsim's `align`) aligned.
    fn hint_is_free(&self, mm: MmId, hint: u64, len: u64, align: u64) -> bool {
        let h = self.geo.page_align_down(hint);
        hint != 0
            && (align == 0 || hint.is_multiple_of(align))
            && h >= MMAP_MIN_ADDR
            && h.checked_add(len).is_some_and(|e| e <= self.geo.task_size())
            && self.range_free(mm, h, h + len)
    }

    /// `get_unmapped_area`: the hint if free, else top-down below mmap_base
    /// (vm_unmapped_area). Private anonymous lengths that are multiples of 2 MiB are
    /// PMD-aligned as `__thp_get_unmapped_area` does it (Linux >= 6.7): search for
    /// `len + 2 MiB`, align inside it, and only if that fails search for `len` alone.
    pub fn get_unmapped_area(&self, mm: MmId, hint: u64, len: u64, shared: bool) -> Result<u64, Errno> {
        if self.hint_is_free(mm, hint, len, 0) {
            return Ok(self.geo.page_align_down(hint));
        }
        if !shared && hint == 0 && len.is_multiple_of(self.geo.hpage_pmd_size()) {
            if let Some(p) =
                len.checked_add(self.geo.hpage_pmd_size()).and_then(|padded| self.unmapped_area_topdown(mm, padded))
            {
                // Top-down, an already aligned start is moved up by the padding (MMF_TOPDOWN).
                let off_sub = self.geo.offset_in_pmd(p.wrapping_neg());
                return Ok(if off_sub == 0 { p + self.geo.hpage_pmd_size() } else { p + off_sub });
            }
        }
        self.unmapped_area_topdown(mm, len).ok_or(Errno::ENOMEM)
    }

    /// `thp_get_unmapped_area` (ext4's `get_unmapped_area`; tmpfs's `shmem_get_unmapped_area`
    /// aligns only where shmem may be huge, which mmsim's never is): the hint if free; else,
    /// when the file range [pgoff, pgoff + len) holds a whole PMD-aligned 2 MiB, a place whose
    /// address is congruent to the file offset modulo 2 MiB (search len + 2 MiB, align inside;
    /// top-down, an already congruent start moves up by 2 MiB); else top-down.
    fn file_get_unmapped_area(&self, mm: MmId, hint: u64, len: u64, pgoff: u64, filp: u32) -> Result<u64, Errno> {
        if self.hint_is_free(mm, hint, len, 0) {
            return Ok(self.geo.page_align_down(hint));
        }
        let size = self.geo.hpage_pmd_size();
        let off = pgoff << self.geo.page_shift;
        let off_end = off + len;
        let off_align = off.next_multiple_of(size);
        let ext4 = !self.inode(self.filp(filp).inode).is_shmem();
        if ext4 && self.has_transparent_hugepage() && off_end > off_align && off_end - off_align >= size {
            if let Some(p) = len.checked_add(size).and_then(|padded| self.unmapped_area_topdown(mm, padded)) {
                let off_sub = self.geo.offset_in_pmd(off.wrapping_sub(p));
                return Ok(if off_sub == 0 { p + size } else { p + off_sub });
            }
        }
        self.unmapped_area_topdown(mm, len).ok_or(Errno::ENOMEM)
    }

    /// `unmapped_area_topdown`: the highest page-aligned start of `len` bytes in a free gap
    /// below mmap_base (a growsdown vma above a gap keeps its stack guard gap).
    pub(super) fn unmapped_area_topdown(&self, mm: MmId, len: u64) -> Option<u64> {
        let m = self.mm(mm);
        let mut gap_end = m.mmap_base;
        let mut iter = m.vmas.range(..m.mmap_base).rev().peekable();
        // A vma straddling mmap_base limits the first gap.
        if let Some(v) = m.vma_lookup(m.mmap_base.saturating_sub(1)) {
            gap_end = gap_end.min(v.start);
        }
        let next_growsdown = |end: u64| -> u64 {
            match m.vmas.range(end..).next() {
                Some((_, v)) if v.start == end && v.flags & vm::GROWSDOWN != 0 => {
                    end.saturating_sub(STACK_GUARD_GAP_PAGES * self.geo.page_size())
                }
                _ => end,
            }
        };
        loop {
            let gap_start = match iter.peek() {
                Some((_, v)) if v.end <= gap_end => v.end,
                Some((_, v)) => {
                    gap_end = gap_end.min(v.start);
                    iter.next();
                    continue;
                }
                None => MMAP_MIN_ADDR,
            };
            let top = next_growsdown(gap_end);
            if top >= len && top - len >= gap_start.max(MMAP_MIN_ADDR) {
                return Some(top - len);
            }
            match iter.next() {
                Some((_, v)) => gap_end = v.start,
                None => return None,
            }
        }
    }

    /// True when no vma intersects [start, end).
    pub fn range_free(&self, mm: MmId, start: u64, end: u64) -> bool {
        self.mm(mm).vmas_in(start, end).is_empty()
    }

    /// `is_mergeable_vma` + `is_mergeable_anon_vma`: can `a` (below) and `b` (above) be one vma.
    /// Where only one has an anon_vma, it must not be a fork child's (it would be dup'ed).
    pub(super) fn can_merge(a: &Vma, b: &Vma, geo: crate::units::Geometry) -> bool {
        if a.end != b.start || a.flags != b.flags || a.flags & (vm::DONTEXPAND | vm::NOMERGE) != 0 {
            return false;
        }
        match (a.backing, b.backing) {
            (Backing::Anon, Backing::Anon) => {
                let anon_ok = match (a.anon_vma, b.anon_vma) {
                    (None, None) => true,
                    (Some(_), None) => !a.fork_child,
                    (None, Some(_)) => !b.fork_child,
                    (Some(x), Some(y)) => x == y,
                };
                anon_ok && a.pgoff + ((a.end - a.start) >> geo.page_shift) == b.pgoff
            }
            (Backing::Shmem(x), Backing::Shmem(y)) | (Backing::File(x), Backing::File(y)) => {
                x == y && a.pgoff + ((a.end - a.start) >> geo.page_shift) == b.pgoff
            }
            _ => false,
        }
    }

    /// Merge the vma at `start` with compatible neighbours (vma_merge). Returns the start of
    /// the resulting vma.
    pub fn vma_merge_around(&mut self, mm: MmId, start: u64) -> u64 {
        let mut start = start;
        let cur = self.mm(mm).vmas[&start].clone();
        // With the next vma.
        if let Some(next) = self.mm(mm).vmas.get(&cur.end).cloned() {
            if Self::can_merge(&cur, &next, self.geo) {
                self.mm_mut(mm).vmas.remove(&next.start);
                let v = self.mm_mut(mm).vmas.get_mut(&start).expect("vma");
                v.end = next.end;
                v.anon_vma = v.anon_vma.or(next.anon_vma);
                v.fork_child |= next.fork_child;
                // Linux expands next over the range and frees the vma it replaces.
                let gone = Self::vma_merge_objcg(v, next.objcg);
                self.vm_area_free(gone);
                self.vma_file_put(mm, next.backing);
            }
        }
        let cur = self.mm(mm).vmas[&start].clone();
        let prev = self.mm(mm).vmas.range(..start).next_back().map(|(_, v)| v.clone());
        if let Some(prev) = prev {
            if Self::can_merge(&prev, &cur, self.geo) {
                self.mm_mut(mm).vmas.remove(&start);
                let v = self.mm_mut(mm).vmas.get_mut(&prev.start).expect("vma");
                v.end = cur.end;
                v.anon_vma = v.anon_vma.or(cur.anon_vma);
                v.fork_child |= cur.fork_child;
                // prev expands; the vma after it is freed.
                let keep = v.objcg;
                v.objcg = cur.objcg;
                let gone = Self::vma_merge_objcg(v, keep);
                self.vm_area_free(gone);
                self.vma_file_put(mm, cur.backing);
                start = prev.start;
            }
        }
        start
    }

    /// `split_vma` -> `__split_vma`: cut the vma containing `addr` in two at `addr`; a huge
    /// pmd straddling the cut is split first (vma_adjust_trans_huge).
    pub fn split_vma(&mut self, mm: MmId, addr: u64) {
        let Some(v) = self.mm(mm).vma_lookup(addr).cloned() else {
            return;
        };
        if v.start == addr {
            return;
        }
        self.pt_unshare_straddling(mm, addr);
        self.split_huge_pmd_address(mm, addr);
        let mut hi = v.clone();
        hi.start = addr;
        hi.pgoff = v.pgoff + ((addr - v.start) >> self.geo.page_shift);
        // __split_vma's vm_area_dup.
        hi.objcg = self.vm_area_alloc();
        self.vma_file_get(mm, v.backing);
        self.mm_mut(mm).vmas.get_mut(&v.start).expect("vma").end = addr;
        self.mm_mut(mm).vmas.insert(addr, hi);
    }

    /// `do_munmap` -> `do_vmi_align_munmap`: split the vmas at the range's ends, zap their
    /// pages, free the page tables no one else needs (free_pgtables between the neighbours),
    /// and drop the vmas.
    pub fn do_munmap(&mut self, mm: MmId, start: u64, len: u64) -> Result<(), Errno> {
        self.do_vmi_align_munmap(mm, start, len, false)
    }

    /// `do_munmap`'s work; `keep_resv`: mremap is unmapping the source of a move, whose
    /// hugetlb reservation stays with the moved vma.
    pub(super) fn do_vmi_align_munmap(&mut self, mm: MmId, start: u64, len: u64, keep_resv: bool) -> Result<(), Errno> {
        if !self.geo.page_aligned(start) || len == 0 {
            return Err(Errno::EINVAL);
        }
        let len = self.geo.page_align(len).ok_or(Errno::EINVAL)?;
        let end = start.checked_add(len).filter(|&e| e <= self.geo.task_size()).ok_or(Errno::EINVAL)?;
        let vmas = self.mm(mm).vmas_in(start, end);
        if vmas.is_empty() {
            return Ok(());
        }
        self.hugetlb_split_ok(mm, start, end)?;
        // Seed 003: unshare what the range maps; the first posting (`rfc`) did not when the
        // munmap took only part of a vma, and left the shared tables attached.
        let partial = vmas.iter().any(|s| {
            let v = &self.mm(mm).vmas[s];
            v.start < start || v.end > end
        });
        if !(partial && self.knobs.ptshare_compat == super::knobs::PtshareCompat::Rfc) {
            self.pt_unshare_range(mm, start, end);
        }
        self.split_vma(mm, start);
        self.split_vma(mm, end);
        let victims: Vec<Vma> =
            self.mm(mm).vmas_in(start, end).into_iter().map(|s| self.mm(mm).vmas[&s].clone()).collect();
        for v in &victims {
            self.zap_page_range(mm, v, v.start, v.end);
            if v.flags & vm::LOCKED != 0 {
                self.mm_mut(mm).locked_vm -= (v.len() >> self.geo.page_shift) as i64;
            }
        }
        for v in &victims {
            self.mm_mut(mm).vmas.remove(&v.start);
        }
        let floor = self.mm(mm).vmas.range(..start).next_back().map_or(0, |(_, v)| v.end);
        let ceiling = self.mm(mm).vmas.range(end..).next().map_or(0, |(_, v)| v.start);
        self.free_pgtables(mm, &victims, floor, ceiling);
        for v in &victims {
            self.vma_close(mm, v, keep_resv);
            // remove_vma's vm_area_free.
            self.vm_area_free(v.objcg);
        }
        Ok(())
    }

    /// `free_pgtables`: free the page tables of removed vmas, gathering neighbours closer than
    /// a PMD into one free_pgd_range call, as Linux does.
    pub fn free_pgtables(&mut self, mm: MmId, removed: &[Vma], floor: u64, ceiling: u64) {
        let mut i = 0;
        while i < removed.len() {
            let start = removed[i].start;
            let mut j = i;
            while j + 1 < removed.len() && removed[j + 1].start <= removed[j].end + self.geo.hpage_pmd_size() {
                j += 1;
            }
            let next_start = if j + 1 < removed.len() { removed[j + 1].start } else { ceiling };
            self.free_pgd_range(mm, start, removed[j].end, floor, next_start);
            i = j + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::knobs::Knobs;
    use crate::kernel::madvise::Advice;
    use crate::units::x86::{hpage_pmd_align_down, HPAGE_PMD_SIZE, PAGE_SIZE};

    const P: u64 = PAGE_SIZE;

    fn setup() -> (Kernel, MmId, u64) {
        let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
        let mm = k.exec_mm().unwrap();
        let a = k.do_mmap(mm, MmapArgs { len: 16 * P, prot: vm::READ | vm::WRITE, ..Default::default() }).unwrap();
        (k, mm, a)
    }

    #[test]
    fn munmap_in_the_middle_splits_the_vma() {
        let (mut k, mm, a) = setup();
        assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AAAAAAAAAAAAAAAA");
        k.do_munmap(mm, a + 4 * P, 4 * P).unwrap();
        assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AAAA    BBBBBBBB");
        k.check_invariants().unwrap();
    }

    /// mprotect_fixup uncharges a private mapping made read-only while it has no anon_vma
    /// (VM_ACCOUNT dropped): it then no longer merges with a neighbour that had pages and keeps
    /// VM_ACCOUNT (found by `validate --random`: fork copied a table the kernel did not).
    #[test]
    fn mprotect_uncharges_a_mapping_without_anon_vma_and_it_stops_merging() {
        let (mut k, mm, a) = setup();
        k.anon_vma_prepare(mm, a);
        k.do_mprotect(mm, a + 8 * P, 8 * P, vm::READ).unwrap();
        let hi = k.mm(mm).vma_lookup(a + 8 * P).unwrap().clone();
        assert_eq!(hi.flags & vm::ACCOUNT, vm::ACCOUNT, "split from a vma with an anon_vma: still charged");
        let (mut k, mm, a) = setup();
        k.do_mprotect(mm, a + 4 * P, 4 * P, vm::READ).unwrap();
        assert_eq!(k.mm(mm).vma_lookup(a + 4 * P).unwrap().flags & vm::ACCOUNT, 0, "no anon_vma: uncharged");
        k.anon_vma_prepare(mm, a);
        // PROT_NONE over [2, 12): the head of the first vma keeps VM_ACCOUNT (it has an
        // anon_vma), the middle and the tail's head drop it; two vmas, not one.
        k.do_mprotect(mm, a + 2 * P, 10 * P, 0).unwrap();
        assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AABBCCCCCCCCDDDD");
        assert!(k.mm(mm).vma_lookup(a + 2 * P).unwrap().anon_vma.is_some());
        assert!(k.mm(mm).vma_lookup(a + 4 * P).unwrap().anon_vma.is_none(), "fork will not copy it");
        k.do_mprotect(mm, a + 4 * P, 4 * P, vm::READ | vm::WRITE).unwrap();
        assert_eq!(k.mm(mm).vma_lookup(a + 4 * P).unwrap().flags & vm::ACCOUNT, vm::ACCOUNT, "recharged");
        k.check_invariants().unwrap();
    }

    /// A fork child's vma with an anon_vma (its anon_vma_chain also links the parent's) does
    /// not merge with a new mapping beside it, which has none; in the parent it does (Linux
    /// >= 6.16 `is_mergeable_anon_vma`, `vma_is_fork_child`).
    #[test]
    fn a_fork_childs_anon_vma_keeps_a_new_neighbour_apart() {
        let (mut k, mm, a) = setup();
        k.anon_vma_prepare(mm, a);
        let child = k.dup_mm(mm).unwrap();
        let rw = vm::READ | vm::WRITE;
        let below = |k: &mut Kernel, m| {
            k.do_mmap(m, MmapArgs { addr: a - 4 * P, len: 4 * P, prot: rw, fixed: true, ..Default::default() }).unwrap()
        };
        below(&mut k, child);
        assert_eq!(k.mm(child).draw(a - 4 * P, a + 4 * P, P), "AAAABBBB", "the child keeps them apart");
        below(&mut k, mm);
        assert_eq!(k.mm(mm).draw(a - 4 * P, a + 4 * P, P), "AAAAAAAA", "the parent merges");
        k.check_invariants().unwrap();
    }

    #[test]
    fn mprotect_splits_and_merges_back() {
        let (mut k, mm, a) = setup();
        k.do_mprotect(mm, a + 2 * P, 3 * P, vm::READ).unwrap();
        assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AABBBCCCCCCCCCCC");
        k.do_mprotect(mm, a + 2 * P, 3 * P, vm::READ | vm::WRITE).unwrap();
        assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AAAAAAAAAAAAAAAA");
        assert_eq!(k.do_mprotect(mm, a + 15 * P, 4 * P, vm::READ), Err(Errno::ENOMEM), "hole after the vma");
    }

    #[test]
    fn madvise_hugepage_splits_vma_flags_only() {
        let (mut k, mm, a) = setup();
        k.madvise_do_behavior(mm, a + 8 * P, 8 * P, Advice::HugePage).unwrap();
        assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AAAAAAAABBBBBBBB");
        k.madvise_do_behavior(mm, a + 8 * P, 8 * P, Advice::NoHugePage).unwrap();
        k.madvise_do_behavior(mm, a, 16 * P, Advice::NoHugePage).unwrap();
        assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AAAAAAAAAAAAAAAA");
    }

    #[test]
    fn adjacent_anonymous_mmaps_merge_and_thp_sized_ones_are_aligned() {
        let (mut k, mm, a) = setup();
        let b = k.do_mmap(mm, MmapArgs { len: 16 * P, prot: vm::READ | vm::WRITE, ..Default::default() }).unwrap();
        assert_eq!(b + 16 * P, a, "top-down, right below");
        assert_eq!(k.mm(mm).draw(b, a + 16 * P, P), "A".repeat(32), "merged into one vma");
        let c = k.do_mmap(mm, MmapArgs { len: 4 << 20, prot: vm::READ, ..Default::default() }).unwrap();
        assert!(is_aligned(c, HPAGE_PMD_SIZE), "lengths that are multiples of 2 MiB get PMD alignment");
        let s = k.do_mmap(mm, MmapArgs { len: 16 * P, prot: vm::READ, shared: true, ..Default::default() }).unwrap();
        assert!(k.mm(mm).vma_lookup(s).unwrap().is_shared());
    }

    #[test]
    fn fixed_mapping_replaces_what_was_there() {
        let (mut k, mm, a) = setup();
        let f = k
            .do_mmap(mm, MmapArgs { addr: a + 4 * P, len: 2 * P, prot: vm::READ, fixed: true, ..Default::default() })
            .unwrap();
        assert_eq!(f, a + 4 * P);
        assert_eq!(k.mm(mm).draw(a, a + 16 * P, P), "AAAABBCCCCCCCCCC");
        assert_eq!(
            k.do_mmap(mm, MmapArgs { addr: a + 1, len: P, prot: vm::READ, fixed: true, ..Default::default() }),
            Err(Errno::EINVAL)
        );
    }

    /// An aligned mapping is the tail of a padded one that merged with the mapping above it:
    /// it keeps that neighbour's anon_vma, so fork copies its page tables (found by
    /// `validate --random`: a grandchild's 1 fault and 4 kB of VmPTE fewer on the kernel).
    #[test]
    fn an_aligned_mapping_keeps_the_anon_vma_of_the_mapping_it_was_padded_against() {
        let (mut k, mm, a) = setup();
        let av = k.anon_vma_prepare(mm, a);
        let rw = vm::READ | vm::WRITE;
        let x = k.do_mmap(mm, MmapArgs { len: 20 * P, prot: rw, align: HPAGE_PMD_SIZE, ..Default::default() }).unwrap();
        assert!(is_aligned(x, HPAGE_PMD_SIZE));
        assert!(x + 20 * P < a, "not adjacent: the padding's tail was unmapped");
        assert_eq!(k.mm(mm).vma_lookup(x).unwrap().anon_vma, Some(av));
        assert_eq!((k.mm(mm).vma_lookup(x).unwrap().start, k.mm(mm).vma_lookup(x).unwrap().end), (x, x + 20 * P));
        assert_eq!(k.mm(mm).vma_lookup(a).unwrap().start, a, "the neighbour is as it was");
        k.check_invariants().unwrap();
    }

    /// A VM_DONTEXPAND vma (VM_SPECIAL) never merges, neither at mmap nor when madvise makes
    /// its neighbour's flags equal; an ordinary anonymous neighbour does.
    #[test]
    fn a_dontexpand_vma_never_merges() {
        let (mut k, mm, a) = setup();
        let rw = vm::READ | vm::WRITE;
        let below =
            MmapArgs { addr: a - 4 * P, len: 4 * P, prot: rw, fixed: true, dontexpand: true, ..Default::default() };
        k.do_mmap(mm, below).unwrap();
        assert_eq!(k.mm(mm).draw(a - 4 * P, a + 4 * P, P), "AAAABBBB", "not merged at mmap");
        k.madvise_do_behavior(mm, a - 4 * P, 8 * P, Advice::NoHugePage).unwrap();
        assert_eq!(k.mm(mm).draw(a - 4 * P, a + 4 * P, P), "AAAABBBB", "not merged by madvise either");
        let plain = MmapArgs { addr: a - 8 * P, len: 4 * P, prot: rw, fixed: true, ..Default::default() };
        k.do_mmap(mm, plain).unwrap();
        k.madvise_do_behavior(mm, a - 8 * P, 4 * P, Advice::NoHugePage).unwrap();
        assert_eq!(k.mm(mm).draw(a - 8 * P, a, P), "AAAABBBB", "a dontexpand vma is also no one's neighbour");
        k.check_invariants().unwrap();
    }

    /// A 2 MiB gap at the top holds a 2 MiB-aligned 4 KiB region and a 2 MiB-aligned 2 MiB
    /// region, but neither `len + align` nor `len + 2 MiB`: the kernel's padded searches (user
    /// space's over-allocate-and-trim, `__thp_get_unmapped_area`) go below it, and so does mmsim.
    /// Found by `validate --random` (a PTE table the kernel allocated and mmsim shared).
    #[test]
    fn padded_placements_skip_a_gap_that_only_fits_the_aligned_length() {
        const M2: u64 = HPAGE_PMD_SIZE;
        let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
        let mm = k.exec_mm().unwrap();
        let (r, rw) = (vm::READ, vm::READ | vm::WRITE);
        let top = hpage_pmd_align_down(k.mm(mm).mmap_base);
        let fixed = |addr: u64, len: u64| MmapArgs { addr, len, prot: r, fixed: true, ..Default::default() };
        if top < k.mm(mm).mmap_base {
            k.do_mmap(mm, fixed(top, k.mm(mm).mmap_base - top)).unwrap();
        }
        // Read-only (so nothing merges) at [top - 4 MiB, top - 2 MiB): the top gap is 2 MiB.
        k.do_mmap(mm, fixed(top - 2 * M2, M2)).unwrap();
        let small = k.do_mmap(mm, MmapArgs { len: P, prot: rw, align: M2, ..Default::default() }).unwrap();
        assert_eq!(small, top - 3 * M2, "mapped 2 MiB + 4 KiB below the gap, kept the aligned 4 KiB");
        let thp = k.do_mmap(mm, MmapArgs { len: M2, prot: rw, ..Default::default() }).unwrap();
        assert_eq!(thp, top - 4 * M2, "4 MiB found below `small`, aligned inside it, moved up by the pad");
        assert!(k.range_free(mm, top - M2, top), "the 2 MiB gap stays unused");
        k.check_invariants().unwrap();
    }

    #[test]
    fn a_free_hint_is_taken_a_busy_one_is_not() {
        let (mut k, mm, a) = setup();
        let rw = vm::READ | vm::WRITE;
        let hint = 0x1000_0000;
        let h = k.do_mmap(mm, MmapArgs { addr: hint, len: 4 * P, prot: rw, ..Default::default() }).unwrap();
        assert_eq!(h, hint, "a free hint is where the mapping goes");
        let busy = k.do_mmap(mm, MmapArgs { addr: a + 2 * P, len: 4 * P, prot: rw, ..Default::default() }).unwrap();
        assert_ne!(busy, a + 2 * P, "a busy hint is only a hint: no MAP_FIXED replacement");
        assert!(busy + 4 * P <= a || busy >= a + 16 * P, "placed outside the existing mapping");
        let v = k.mm(mm).vma_lookup(a).unwrap();
        assert!(v.start <= a && v.end >= a + 16 * P, "the existing mapping is still there (merged at most)");
        let al = 2 << 20;
        let x = k.do_mmap(mm, MmapArgs { addr: 0x4000_0000, len: P, prot: rw, align: al, ..Default::default() });
        assert_eq!(x, Ok(0x4000_0000), "an aligned free hint is taken");
        let y = k.do_mmap(mm, MmapArgs { addr: 0x5000_1000, len: P, prot: rw, align: al, ..Default::default() });
        assert_eq!(y.unwrap() % al, 0, "a misaligned hint gives way to the alignment");
        k.check_invariants().unwrap();
    }
}
