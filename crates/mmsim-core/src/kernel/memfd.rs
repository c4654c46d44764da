//! memfd_create(2) (mm/memfd.c), ftruncate(2) of its file, and fallocate(2)
//! (`vfs_fallocate`) on tmpfs (`shmem_fallocate`, mm/shmem.c) and hugetlbfs
//! (`hugetlbfs_fallocate`, `hugetlbfs_punch_hole`, fs/hugetlbfs/inode.c), as Linux 6.18 has
//! them.
//!
//! A memfd is a file of the kernel's internal tmpfs (shmem) mount, or with MFD_HUGETLB of its
//! internal hugetlbfs mount (default huge page size, no size limit: only the pool limits it).
//! A workload names it as it names the files `create` makes (one namespace): the name's
//! reference stands for the program's open descriptor, which it never closes.
//!
//! - tmpfs fallocate allocates order-0 pages into the page cache without clearing them
//!   (SGP_FALLOC: !uptodate, `pg::FALLOC`): Shmem grows, no process's RSS; fault-around skips
//!   them, the first fault or write clears them, and so does a later fallocate of them
//!   (then they are uptodate). A failure frees the pages the call added.
//!   PUNCH_HOLE|KEEP_SIZE unmaps the whole pages of the range from every mapping (a private
//!   mapping's own copies stay: `unmap_mapping_range(even_cows = 0)`), frees them, and zeroes
//!   the bytes of partial pages at its ends.
//! - hugetlbfs fallocate rounds the range out to huge pages and allocates each missing one
//!   from the pool (consuming the index's reservation if an mmap made one): HugePages_Free
//!   drops; an empty pool is ENOSPC, the pages allocated before it stay. PUNCH_HOLE rounds
//!   in: whole huge pages are unmapped everywhere and freed (their reservation entry goes,
//!   the global reservation count does not change), partial ones are zeroed.
//! - ext4: EOPNOTSUPP (not modelled: ext4_fallocate's block allocation and punch_hole's
//!   writeback and partial-block reads are not in mmsim).
//!
//! Differs from Linux: a large shmem folio (only MADV_COLLAPSE makes one) that a hole covers
//! only in part is zeroed there, not split; no seals.

use super::filemap::FMode;
use super::hugetlb::HugetlbFile;
use super::mm::Backing;
use super::mm_types::{pg, NIL};
use super::mmap::Errno;
use super::page_alloc::gfp;
use super::shmem::Fs;
use super::uapi::{FallocFlags, MfdFlags};
use super::{Kernel, MmId};
use crate::units::Pfn;

/// A file by name: an inode of the page cache (ext4, tmpfs, a tmpfs memfd) or a hugetlbfs
/// file (a memfd of MFD_HUGETLB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRef {
    /// `Kernel::shmem`'s inode.
    Inode(u32),
    /// `Hstate::files`' file.
    Hugetlbfs(u32),
}

/// `MAX_LFS_FILESIZE`: the largest file of tmpfs and hugetlbfs (`s_maxbytes`).
const MAX_LFS_FILESIZE: u64 = i64::MAX as u64;

impl Kernel {
    /// The file a name names, on any filesystem.
    pub fn file_ref(&self, name: &str) -> Option<FileRef> {
        if let Some(&f) = self.hugetlb.names.get(name) {
            return Some(FileRef::Hugetlbfs(f));
        }
        self.file_lookup(name).map(FileRef::Inode)
    }

    /// The hugetlbfs file a name names.
    pub fn hugetlbfs_lookup(&self, name: &str) -> Option<u32> {
        self.hugetlb.names.get(name).copied()
    }

    /// The name goes, whatever file it names (its inode lives while mappings hold it).
    pub fn unlink_any(&mut self, name: &str) {
        if let Some(f) = self.hugetlb.names.remove(name) {
            self.hugetlb_iput(f);
        }
        self.file_unlink(name);
    }

    /// `memfd_create(name, flags)`: a new empty file of the internal tmpfs mount, or of the
    /// hugetlbfs one with MFD_HUGETLB, under `name` (an old file of the name is unlinked).
    /// A flag Linux does not have: EINVAL.
    pub(super) fn memfd_create_inner(&mut self, name: &str, flags: MfdFlags) -> Result<FileRef, Errno> {
        if !MfdFlags::all().contains(flags) {
            return Err(Errno::EINVAL);
        }
        self.unlink_any(name);
        if flags.contains(MfdFlags::HUGETLB) {
            let file = HugetlbFile {
                shared: true,
                i_size: 0,
                pages: Vec::new(),
                resv: Vec::new(),
                refs: 1,
                mms: Vec::new(),
                owner: None,
                unmapped: Vec::new(),
            };
            let f = self.hugetlb_file_insert(file);
            self.hugetlb.names.insert(name.to_string(), f);
            return Ok(FileRef::Hugetlbfs(f));
        }
        self.file_create(name, 0, Fs::Tmpfs).map(FileRef::Inode)
    }

    /// Room in a hugetlbfs file's page cache and reservation map for indices below `n`.
    fn hugetlbfs_extend(&mut self, f: u32, n: usize) {
        let o = self.hfile_mut(f);
        if o.pages.len() < n {
            o.pages.resize(n, NIL);
            o.resv.resize(n, false);
        }
    }

    /// ftruncate(2) to `size` (`do_truncate` -> `shmem_setattr` / `hugetlbfs_setattr`): a
    /// hugetlbfs size must be a multiple of the huge page size (EINVAL); a smaller size
    /// frees what lies past it (`hugetlb_vmtruncate`, `shmem_truncate_range`).
    pub(super) fn do_ftruncate_inner(&mut self, file: FileRef, size: u64) -> Result<(), Errno> {
        if size > MAX_LFS_FILESIZE {
            return Err(Errno::EINVAL);
        }
        match file {
            FileRef::Inode(obj) => {
                let old = self.inode(obj).i_size;
                if size < old {
                    self.shmem_punch(obj, size, old - size, true);
                }
                let ps = self.geo.page_size();
                let o = self.shmem[obj as usize].as_mut().expect("inode");
                o.i_size = size;
                o.pages.extend_to(size.div_ceil(ps));
            }
            FileRef::Hugetlbfs(f) => {
                let hsize = self.geo.hpage_pmd_size();
                if !size.is_multiple_of(hsize) {
                    return Err(Errno::EINVAL);
                }
                let old = self.hfile(f).i_size;
                self.hfile_mut(f).i_size = size;
                if size < old {
                    // hugetlb_vmtruncate: unmap, free the pages, give back the reservations.
                    let end = self.hfile(f).pages.len() as u64 * hsize;
                    if end > size {
                        self.hugetlbfs_remove_pages(f, size, end, true);
                    }
                }
                self.hugetlbfs_extend(f, (size / hsize) as usize);
            }
        }
        Ok(())
    }

    /// `vfs_fallocate(file, mode, offset, len)`: EINVAL for an offset or length that is
    /// negative as a `loff_t` or a zero length; EOPNOTSUPP for PUNCH_HOLE without KEEP_SIZE;
    /// EFBIG past the largest file; then the filesystem's (see the module comment).
    pub(super) fn vfs_fallocate_inner(
        &mut self,
        file: FileRef,
        mode: FallocFlags,
        offset: u64,
        len: u64,
    ) -> Result<(), Errno> {
        if offset > MAX_LFS_FILESIZE || len == 0 || len > MAX_LFS_FILESIZE {
            return Err(Errno::EINVAL);
        }
        if !FallocFlags::all().contains(mode)
            || (mode.contains(FallocFlags::PUNCH_HOLE) && !mode.contains(FallocFlags::KEEP_SIZE))
        {
            return Err(Errno::EOPNOTSUPP);
        }
        if offset + len > MAX_LFS_FILESIZE {
            return Err(Errno::EFBIG);
        }
        let punch = mode.contains(FallocFlags::PUNCH_HOLE);
        let keep = mode.contains(FallocFlags::KEEP_SIZE);
        match file {
            FileRef::Inode(obj) if !self.inode(obj).is_shmem() => Err(Errno::EOPNOTSUPP),
            FileRef::Inode(obj) if punch => {
                self.shmem_punch(obj, offset, len, false);
                Ok(())
            }
            FileRef::Inode(obj) => self.shmem_fallocate(obj, offset, len, keep),
            FileRef::Hugetlbfs(f) if punch => {
                self.hugetlbfs_punch_hole(f, offset, len);
                Ok(())
            }
            FileRef::Hugetlbfs(f) => self.hugetlbfs_fallocate(f, offset, len, keep),
        }
    }

    /// `shmem_fallocate` without PUNCH_HOLE: every page of [offset, offset + len) rounded out
    /// that is not cached is allocated, not cleared (SGP_FALLOC). If one cannot be, the pages
    /// this call added go again (`shmem_undo_range`) and the call fails with ENOMEM. Then
    /// i_size grows to offset + len unless KEEP_SIZE.
    fn shmem_fallocate(&mut self, obj: u32, offset: u64, len: u64, keep_size: bool) -> Result<(), Errno> {
        let ps = self.geo.page_size();
        let (start, end) = (offset / ps, (offset + len).div_ceil(ps));
        self.shmem[obj as usize].as_mut().expect("inode").pages.extend_to(end);
        let mut added: Vec<Pfn> = Vec::new();
        for index in start..end {
            if self.shmem_swap_entry(obj, index).is_some() && !self.shmem_swapin_range(obj, index, index + 1) {
                // SGP_FALLOC reads a page in swap back; memory ran out.
                self.shmem_fallocate_undo(obj, added);
                return Err(Errno::ENOMEM);
            }
            if let Some(p) = self.shmem_find_folio(obj, index) {
                if self.mem.pages[p.idx()].test(pg::FALLOC) {
                    // SGP_FALLOC on a folio an earlier fallocate left !uptodate: cleared now
                    // and marked uptodate ("lest undo on failure cancel our earlier
                    // guarantee"), so fault-around maps it from then on.
                    self.mem.pages[p.idx()].clear(pg::FALLOC);
                    self.clear_pages(p, 1, 1, super::page_alloc::ClearPath::User);
                }
                // "mark it dirty so that memory pressure will swap rather than free the
                // folios we are allocating (and SGP_CACHE folios might still be clean)".
                let head = self.head_of(p);
                self.folio_mark_dirty(head);
                continue;
            }
            let got = self.alloc_pages(0, gfp::HIGHUSER_MOVABLE).and_then(|a| {
                if self.filemap_add_folio(obj, index, a.pfn, 0, gfp::HIGHUSER_MOVABLE) {
                    Some(a)
                } else {
                    self.folio_put(a.pfn);
                    None
                }
            });
            match got {
                Some(a) => {
                    // Not cleared now: the frame reads as zeroes once the first use clears it.
                    self.mem.set_data(a.pfn.idx(), super::mm_types::FrameData::Zero);
                    self.mem.pages[a.pfn.idx()].set(pg::FALLOC);
                    self.folio_mark_dirty(a.pfn);
                    added.push(a.pfn);
                }
                None => {
                    self.shmem_fallocate_undo(obj, added);
                    return Err(Errno::ENOMEM);
                }
            }
        }
        if !keep_size && offset + len > self.inode(obj).i_size {
            self.shmem[obj as usize].as_mut().expect("inode").i_size = offset + len;
        }
        Ok(())
    }

    /// `shmem_undo_range` of a failed fallocate: the folios it added and nobody used go.
    fn shmem_fallocate_undo(&mut self, obj: u32, added: Vec<Pfn>) {
        for p in added {
            if self.mem.pages[p.idx()].test(pg::FALLOC) {
                self.mem.pages[p.idx()].clear(pg::FALLOC);
                self.filemap_remove_folio(obj, p);
            }
        }
    }

    /// `shmem_fallocate(PUNCH_HOLE)` (and a truncation, `to_end`: everything from `offset`):
    /// `unmap_mapping_range` of the whole pages inside (page-cache pages only), then
    /// `shmem_truncate_range`: whole folios inside leave the page cache (unmapped again where
    /// a fault raced), the bytes of partial ones are zeroed (a partial page in swap is read
    /// back first: `shmem_get_partial_folio`), and the swap entries of the whole pages go
    /// (`shmem_free_swap`).
    fn shmem_punch(&mut self, obj: u32, offset: u64, len: u64, to_end: bool) {
        let ps = self.geo.page_size();
        let end = offset.saturating_add(len);
        let last = self.shmem_size(obj);
        if !offset.is_multiple_of(ps) {
            self.shmem_swapin_range(obj, offset / ps, offset / ps + 1);
        }
        if !to_end && !end.is_multiple_of(ps) {
            self.shmem_swapin_range(obj, end / ps, end / ps + 1);
        }
        self.shmem_free_swap_range(obj, offset.div_ceil(ps), if to_end { u64::MAX } else { end / ps });
        let mut i = offset / ps;
        while i < last && i * ps < end {
            let Some(p) = self.shmem_find_folio(obj, i) else {
                i += 1;
                continue;
            };
            let head = self.head_of(p);
            let (fi, nr) = (self.mem.pages[head.idx()].index, self.folio_nr_pages(head));
            let (fs, fe) = (fi * ps, (fi + nr) * ps);
            if fs >= offset && (fe <= end || to_end) {
                self.try_to_unmap_file_folio(obj, head);
                self.filemap_remove_folio(obj, head);
            } else {
                // A partial folio: zero the bytes of the hole in it (truncate_inode_partial_folio).
                let (zs, ze) = (offset.max(fs), end.min(fe));
                let mut b = zs;
                while b < ze {
                    let sub = Pfn(head.0 + ((b - fs) / ps) as u32);
                    let stop = ((b / ps + 1) * ps).min(ze);
                    let (from, to) = (self.geo.offset_in_page(b), self.geo.offset_in_page(stop - 1) + 1);
                    self.write_page_content(sub, from as usize, to as usize, 1, 0);
                    b = stop;
                }
            }
            i = fi + nr;
        }
    }

    /// `hugetlbfs_file_mmap` of [pgoff, pgoff + len) (pages) of a hugetlbfs file: the offset
    /// must be huge-page aligned (EINVAL); a shared mapping reserves the indices the file's
    /// reservation map does not hold yet (`hugetlb_reserve_pages`: ENOMEM when the pool cannot
    /// promise them); a writable mapping grows i_size to its end. The vma's reference.
    pub(super) fn hugetlbfs_file_mmap(
        &mut self,
        mm: MmId,
        f: u32,
        pgoff: u64,
        len: u64,
        shared: bool,
        write: bool,
    ) -> Result<(), Errno> {
        let nr = self.hpage_nr();
        let hsize = self.geo.hpage_pmd_size();
        if !pgoff.is_multiple_of(nr) || !shared {
            // A private mapping of a hugetlbfs file is not modelled (refused by the workload's
            // validation); the offset's alignment is Linux's EINVAL.
            return Err(Errno::EINVAL);
        }
        let from = (pgoff / nr) as usize;
        let to = from + (len / hsize) as usize;
        self.hugetlbfs_extend(f, to);
        let chg = self.hfile(f).resv[from..to].iter().filter(|&&r| !r).count();
        self.hugetlb_acct_memory(chg as i64)?;
        for r in &mut self.hfile_mut(f).resv[from..to] {
            *r = true;
        }
        let end = (pgoff << self.geo.page_shift) + len;
        if write && self.hfile(f).i_size < end {
            self.hfile_mut(f).i_size = end;
        }
        self.hugetlb_file_get(f, mm);
        Ok(())
    }

    /// `hugetlbfs_fallocate` without PUNCH_HOLE: each huge page of the range rounded out that
    /// is not cached is allocated and cleared (from the index's reservation if it has one).
    /// ENOSPC when the pool has none (the pages allocated before stay, i_size does not move).
    fn hugetlbfs_fallocate(&mut self, f: u32, offset: u64, len: u64, keep_size: bool) -> Result<(), Errno> {
        let hsize = self.geo.hpage_pmd_size();
        let (start, end) = ((offset / hsize) as usize, (offset + len).div_ceil(hsize) as usize);
        self.hugetlbfs_extend(f, end);
        for index in start..end {
            if self.hfile(f).pages[index] != NIL {
                continue;
            }
            if self.hugetlb_add_file_page(f, index, index as u64 * hsize).is_none() {
                return Err(Errno::ENOSPC);
            }
        }
        if !keep_size && offset + len > self.hfile(f).i_size {
            self.hfile_mut(f).i_size = offset + len;
        }
        Ok(())
    }

    /// `hugetlbfs_punch_hole`: the whole huge pages of [offset, offset + len) are unmapped from
    /// every mapping and removed; the bytes of partial ones at the ends are zeroed.
    pub(super) fn hugetlbfs_punch_hole(&mut self, f: u32, offset: u64, len: u64) {
        let hsize = self.geo.hpage_pmd_size();
        let end = offset + len;
        let hole_start = offset.next_multiple_of(hsize);
        let hole_end = end / hsize * hsize;
        if offset < hole_start {
            self.hugetlbfs_zero_partial_page(f, offset, end.min(hole_start));
        }
        if end > hole_end && end > hole_start {
            self.hugetlbfs_zero_partial_page(f, hole_end, end);
        }
        if hole_end > hole_start {
            self.hugetlbfs_remove_pages(f, hole_start, hole_end, false);
        }
    }

    /// `hugetlbfs_zero_partial_page`: zero [start, end) (inside one huge page) if it is cached.
    fn hugetlbfs_zero_partial_page(&mut self, f: u32, start: u64, end: u64) {
        let hsize = self.geo.hpage_pmd_size();
        let ps = self.geo.page_size();
        let idx = (start / hsize) as usize;
        let Some(&head) = self.hfile(f).pages.get(idx) else { return };
        if head == NIL {
            return;
        }
        let base = idx as u64 * hsize;
        let mut b = start;
        while b < end {
            let stop = ((b / ps + 1) * ps).min(end);
            let sub = Pfn(head + ((b - base) / ps) as u32);
            let (from, to) = (self.geo.offset_in_page(b), self.geo.offset_in_page(stop - 1) + 1);
            self.write_page_content(sub, from as usize, to as usize, 1, 0);
            b = stop;
        }
    }

    /// `hugetlb_vmdelete_list` + `remove_inode_hugepages` over the huge pages of bytes
    /// [start, end): every mapping of them is zapped, each cached page leaves the page cache
    /// and its reservation entry (`hugetlb_unreserve_pages(index, index + 1, 1)`: no change
    /// to the global count); a truncation (`truncate`) also gives back the reservations of
    /// the indices with no page.
    fn hugetlbfs_remove_pages(&mut self, f: u32, start: u64, end: u64, truncate: bool) {
        let hsize = self.geo.hpage_pmd_size();
        let shift = self.geo.page_shift;
        let (pstart, pend) = (start >> shift, end >> shift);
        let mms: Vec<MmId> = self.hfile(f).mms.iter().map(|e| e.0).collect();
        for m in mms {
            let vmas: Vec<_> = self.mm(m).vmas.values().filter(|v| v.backing == Backing::Hugetlb(f)).cloned().collect();
            for v in vmas {
                let vpages = v.len() >> shift;
                let (lo, hi) = (pstart.max(v.pgoff), pend.min(v.pgoff + vpages));
                if lo < hi {
                    let a = v.start + ((lo - v.pgoff) << shift);
                    let b = v.start + ((hi - v.pgoff) << shift);
                    self.unmap_hugepage_range(m, &v, a, b);
                }
            }
        }
        let (from, to) = ((start / hsize) as usize, ((end / hsize) as usize).min(self.hfile(f).pages.len()));
        let mut unreserve = 0i64;
        for idx in from..to {
            let p = self.hfile(f).pages[idx];
            if p != NIL {
                self.hfile_mut(f).pages[idx] = NIL;
                self.hfile_mut(f).resv[idx] = false;
                self.folio_put(Pfn(p));
            } else if truncate && self.hfile(f).resv[idx] {
                self.hfile_mut(f).resv[idx] = false;
                unreserve += 1;
            }
        }
        if unreserve > 0 {
            let _ = self.hugetlb_acct_memory(-unreserve);
        }
    }

    /// Open a file for fallocate(2) (O_RDWR): ETXTBSY while it is executed.
    pub fn file_open_ref(&mut self, file: FileRef) -> Result<Option<u32>, Errno> {
        match file {
            FileRef::Inode(obj) => self.file_open(obj, FMode::Write).map(Some),
            FileRef::Hugetlbfs(_) => Ok(None),
        }
    }
}
