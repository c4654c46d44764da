//! mm/madvise.c: MADV_HUGEPAGE / MADV_NOHUGEPAGE / MADV_DONTFORK / MADV_DOFORK (vma flags,
//! with split and merge, as madvise_update_vma does), MADV_DONTNEED (zap the range, keep the
//! vmas and page tables), MADV_FREE (kernel/lazyfree.rs), MADV_REMOVE (punch a hole in a
//! shared mapping's file: kernel/truncate.rs) and MADV_POPULATE_READ / MADV_POPULATE_WRITE
//! (fault the range in through GUP, Linux >= 5.14).

use super::mm::{vm, Vma};
use super::mmap::Errno;
use super::{Kernel, MmId};
use crate::units::is_aligned;

pub use super::uapi::Advice;

impl Kernel {
    /// Where MADV_DONTNEED of [start, start + len) stops zapping: at the first mlocked vma
    /// (EINVAL) and at a hugetlb vma entered at an address not huge-page aligned (EINVAL); a
    /// hugetlb vma's range ends rounded down to a huge page. What precedes is zapped.
    pub fn madvise_dontneed_extent(&self, mm: MmId, start: u64, len: u64) -> u64 {
        let end = start.saturating_add(self.geo.page_align(len).unwrap_or(len));
        let hsize = self.geo.hpage_pmd_size();
        let stop = self.mm(mm).vmas_in(start, end).into_iter().find_map(|s| {
            let v = &self.mm(mm).vmas[&s];
            let from = v.start.max(start);
            if v.flags & vm::LOCKED != 0 || (v.flags & vm::HUGETLB != 0 && !is_aligned(from, hsize)) {
                return Some(from);
            }
            let to = v.end.min(end);
            (v.flags & vm::HUGETLB != 0 && !is_aligned(to, hsize)).then_some(self.geo.hpage_pmd_align_down(to))
        });
        stop.unwrap_or(end)
    }

    /// Where madvise(`advice`) of [start, start + len) stops with an error other than ENOMEM
    /// (the vmas before are advised, those after are not), or the range's end: for
    /// MADV_REMOVE the first vma that is mlocked (EINVAL), not a file's (EINVAL) or not a
    /// shared writable one (EACCES); for MADV_DONTFORK / MADV_DOFORK the first hugetlb vma the
    /// range would cut off a huge page boundary (EINVAL); for MADV_FREE the first mlocked,
    /// hugetlb or non-anonymous vma (EINVAL). An unaligned start advises nothing.
    pub fn madvise_stop(&self, mm: MmId, start: u64, len: u64, advice: Advice) -> u64 {
        if !self.geo.page_aligned(start) {
            return start;
        }
        let Some(end) = self.geo.page_align(len).and_then(|l| start.checked_add(l)) else {
            return start;
        };
        let hsize = self.geo.hpage_pmd_size();
        let stop = self.mm(mm).vmas_in(start, end).into_iter().find_map(|s| {
            let v = &self.mm(mm).vmas[&s];
            let (from, to) = (v.start.max(start), v.end.min(end));
            let bad = match advice {
                Advice::Remove => v.flags & vm::LOCKED != 0 || v.is_anonymous() || !Self::shared_maywrite(v),
                Advice::DontFork | Advice::DoFork => {
                    let newflags = Self::fork_advice_flags(v.flags, advice);
                    let cuts = (from > v.start && !is_aligned(from, hsize)) || (to < v.end && !is_aligned(to, hsize));
                    v.flags & vm::HUGETLB != 0 && newflags != v.flags && cuts
                }
                Advice::Free => v.flags & (vm::LOCKED | vm::HUGETLB) != 0 || !v.is_anonymous(),
                _ => false,
            };
            bad.then_some(from)
        });
        stop.unwrap_or(end)
    }

    /// `vma_is_shared_maywrite`: VM_SHARED and VM_MAYWRITE.
    fn shared_maywrite(v: &super::mm::Vma) -> bool {
        v.flags & (vm::SHARED | vm::MAYWRITE) == vm::SHARED | vm::MAYWRITE
    }

    /// A vma's flags after MADV_DONTFORK (VM_DONTCOPY set) or MADV_DOFORK (cleared).
    fn fork_advice_flags(flags: u32, advice: Advice) -> u32 {
        if advice == Advice::DontFork {
            flags | vm::DONTCOPY
        } else {
            flags & !vm::DONTCOPY
        }
    }

    /// `madvise_update_vma`: give [addr, stop) of `v` the flags `newflags`, splitting it off
    /// and merging it with its neighbours; nothing when they are its flags already. A
    /// hugetlb vma cut off a huge page boundary is EINVAL (`hugetlb_vm_op_split`).
    fn madvise_update_vma(
        &mut self,
        mm: MmId,
        v: &super::mm::Vma,
        addr: u64,
        stop: u64,
        newflags: u32,
    ) -> Result<(), Errno> {
        if newflags == v.flags {
            return Ok(());
        }
        if v.flags & vm::HUGETLB != 0 {
            self.hugetlb_split_ok(mm, addr, stop)?;
        }
        self.split_vma(mm, addr);
        self.split_vma(mm, stop);
        self.mm_mut(mm).vmas.get_mut(&addr).expect("isolated vma").flags = newflags;
        self.vma_merge_around(mm, addr);
        Ok(())
    }

    /// `madvise_remove`: punch a hole over [start, end) of the file a shared writable vma maps
    /// (`vfs_fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)`): shmem and tmpfs
    /// (`shmem_fallocate`), ext4 (`ext4_punch_hole`), hugetlbfs (`hugetlbfs_punch_hole`).
    /// An mlocked vma is EINVAL, one without a file (private anonymous memory) EINVAL, one
    /// not shared and writable EACCES.
    fn madvise_remove(&mut self, v: &super::mm::Vma, start: u64, end: u64) -> Result<(), Errno> {
        use super::mm::Backing;
        if v.flags & vm::LOCKED != 0 || v.is_anonymous() {
            return Err(Errno::EINVAL);
        }
        if !Self::shared_maywrite(v) {
            return Err(Errno::EACCES);
        }
        let offset = (start - v.start) + (v.pgoff << self.geo.page_shift);
        let len = end - start;
        match v.backing {
            Backing::Shmem(obj) => self.pagecache_punch_hole(obj, offset, len),
            Backing::File(f) => {
                let obj = self.filp(f).inode;
                self.pagecache_punch_hole(obj, offset, len);
            }
            Backing::Hugetlb(f) => self.hugetlbfs_punch_hole(f, offset, len),
            Backing::Anon => unreachable!("refused above"),
        }
        Ok(())
    }

    /// `do_madvise`: apply `advice` to every vma in [start, start+len). ENOMEM if part of the
    /// range is unmapped (the mapped parts are still advised, as Linux does).
    pub fn madvise_do_behavior(&mut self, mm: MmId, start: u64, len: u64, advice: Advice) -> Result<(), Errno> {
        if !self.geo.page_aligned(start) {
            return Err(Errno::EINVAL);
        }
        let end = self.geo.page_align(len).and_then(|l| start.checked_add(l)).ok_or(Errno::EINVAL)?;
        if end == start {
            return Ok(());
        }
        // The behaviours' I/O (MADV_PAGEOUT's swap writes, WILLNEED's reads) goes out under
        // one plug: contiguous bios merge into requests of up to max_sectors_kb.
        self.blk_start_plug();
        let r = self.madvise_do_behavior_plugged(mm, start, end, advice);
        self.blk_finish_plug();
        r
    }

    fn madvise_do_behavior_plugged(&mut self, mm: MmId, start: u64, end: u64, advice: Advice) -> Result<(), Errno> {
        if matches!(advice, Advice::PopulateRead | Advice::PopulateWrite) {
            return self.madvise_populate(mm, start, end, advice == Advice::PopulateWrite);
        }
        if advice == Advice::Collapse {
            return self.madvise_collapse(mm, start, end);
        }
        // Seed 003: whenever in doubt, unshare (Linux's hugetlb PMD sharing unshares only in
        // the zap below).
        if self.knobs.ptshare != 0 {
            self.pt_unshare_range(mm, start, end);
        }
        self.madvise_walk_vmas(mm, start, end, |k, v, addr, stop| k.madvise_vma_behavior(mm, v, addr, stop, advice))
    }

    /// `madvise_walk_vmas`: `visit` each vma's part [s, e) of [start, end) in address order,
    /// the first error returned at once; ENOMEM at the end if part of the range is unmapped
    /// (the mapped parts are still visited, as Linux does).
    pub(super) fn madvise_walk_vmas(
        &mut self,
        mm: MmId,
        start: u64,
        end: u64,
        mut visit: impl FnMut(&mut Kernel, &Vma, u64, u64) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let mut hole = false;
        let mut addr = start;
        while addr < end {
            let Some(v) = self.mm(mm).find_vma(addr).cloned() else {
                hole = true;
                break;
            };
            if v.start >= end {
                hole = true;
                break;
            }
            hole |= v.start > addr;
            let (s, e) = (addr.max(v.start), v.end.min(end));
            visit(self, &v, s, e)?;
            addr = e;
        }
        if hole {
            Err(Errno::ENOMEM)
        } else {
            Ok(())
        }
    }

    /// `madvise_vma_behavior`: apply `advice` to [addr, stop) of the vma `v`.
    fn madvise_vma_behavior(&mut self, mm: MmId, v: &Vma, addr: u64, stop: u64, advice: Advice) -> Result<(), Errno> {
        match advice {
            Advice::DontNeed => {
                // madvise_dontneed_free_valid_vma: not on a VM_LOCKED vma (the walk stops);
                // on a hugetlb vma the start must be huge-page aligned and the end is
                // rounded down to one.
                if v.flags & vm::LOCKED != 0 {
                    return Err(Errno::EINVAL);
                }
                if v.flags & vm::HUGETLB != 0 {
                    if !is_aligned(addr, self.geo.hpage_pmd_size()) {
                        return Err(Errno::EINVAL);
                    }
                    let stop = self.geo.hpage_pmd_align_down(stop);
                    if stop > addr {
                        self.unmap_hugepage_range(mm, v, addr, stop);
                    }
                    return Ok(());
                }
                // madvise_dontneed_single_vma -> zap_page_range_single (reclaim_pt).
                self.zap_page_range_reclaim_pt(mm, v, addr, stop);
            }
            Advice::Free => {
                // madvise_dontneed_free_valid_vma (not mlocked, not hugetlb), then
                // madvise_free_single_vma (anonymous memory only).
                if v.flags & (vm::LOCKED | vm::HUGETLB) != 0 || !v.is_anonymous() {
                    return Err(Errno::EINVAL);
                }
                self.madvise_free_single_vma(mm, v, addr, stop);
            }
            Advice::Remove => self.madvise_remove(v, addr, stop)?,
            Advice::Cold | Advice::PageOut => {
                self.madvise_cold_or_pageout(mm, v, addr, stop, advice == Advice::PageOut)?
            }
            Advice::DontFork | Advice::DoFork => {
                // MADV_DOFORK on a VM_IO vma is EINVAL; mmsim has none.
                self.madvise_update_vma(mm, v, addr, stop, Self::fork_advice_flags(v.flags, advice))?;
            }
            Advice::PopulateRead | Advice::PopulateWrite | Advice::Collapse => unreachable!("handled above"),
            Advice::WillNeed => {
                // madvise_willneed: a file's range is read ahead (vfs_fadvise WILLNEED;
                // shmem and anonymous memory have nothing to read).
                if let super::mm::Backing::File(f) = v.backing {
                    let off = ((addr - v.start) >> self.geo.page_shift) + v.pgoff;
                    let shift = self.geo.page_shift;
                    self.file_fadvise(f, off << shift, stop - addr, super::filemap::Fadvise::WillNeed);
                }
            }
            Advice::Sequential | Advice::Random | Advice::Normal => {
                let newflags = match advice {
                    Advice::Sequential => (v.flags & !vm::RAND_READ) | vm::SEQ_READ,
                    Advice::Random => (v.flags & !vm::SEQ_READ) | vm::RAND_READ,
                    _ => v.flags & !(vm::SEQ_READ | vm::RAND_READ),
                };
                if newflags != v.flags {
                    self.split_vma(mm, addr);
                    self.split_vma(mm, stop);
                    self.mm_mut(mm).vmas.get_mut(&addr).expect("isolated vma").flags = newflags;
                    self.vma_merge_around(mm, addr);
                }
            }
            Advice::HugePage | Advice::NoHugePage => {
                if v.flags & vm::HUGETLB != 0 {
                    self.hugetlb_split_ok(mm, addr, stop)?;
                }
                let newflags = match advice {
                    Advice::HugePage => (v.flags & !vm::NOHUGEPAGE) | vm::HUGEPAGE,
                    _ => (v.flags & !vm::HUGEPAGE) | vm::NOHUGEPAGE,
                };
                if newflags != v.flags {
                    self.split_vma(mm, addr);
                    self.split_vma(mm, stop);
                    self.mm_mut(mm).vmas.get_mut(&addr).expect("isolated vma").flags = newflags;
                    self.vma_merge_around(mm, addr);
                }
                if advice == Advice::HugePage {
                    // hugepage_madvise's khugepaged_enter_vma.
                    self.khugepaged_enter_vma(mm, addr);
                }
            }
        }
        Ok(())
    }

    /// `madvise_populate` -> `faultin_page_range`: fault in every page of [start, end) not
    /// mapped as the access needs (GUP faults with FOLL_MADV_POPULATE: counted in pgfault and
    /// `gup_faults`, no vma split, no unshare). A hole is ENOMEM; a vma `check_vma_flags`
    /// refuses without FOLL_FORCE is EINVAL (`__get_user_pages` under FOLL_MADV_POPULATE): a
    /// write to one without VM_WRITE, a read of one without VM_READ (PROT_NONE, but also
    /// PROT_WRITE-only and PROT_EXEC-only memory, which x86's page tables would let a load
    /// read), a special one. A fault that ends in SIGBUS is EFAULT; the vmas before are
    /// populated.
    fn madvise_populate(&mut self, mm: MmId, start: u64, end: u64, write: bool) -> Result<(), Errno> {
        let mut addr = start;
        while addr < end {
            let Some(v) = self.mm(mm).vma_lookup(addr).cloned() else {
                return Err(Errno::ENOMEM);
            };
            let needs = if write { vm::WRITE } else { vm::READ };
            let special = v.flags & vm::DONTEXPAND != 0 && v.flags & vm::HUGETLB == 0;
            if special || v.flags & needs == 0 {
                return Err(Errno::EINVAL);
            }
            let stop = v.end.min(end);
            self.get_user_pages(mm, &v, addr, stop, write).map_err(|ret| {
                if ret & super::vm_fault::OOM != 0 {
                    Errno::ENOMEM
                } else {
                    Errno::EFAULT
                }
            })?;
            addr = stop;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::sim::{run_with, RunOptions};
    use crate::workload::spec::parse_workload;

    /// MADV_DONTNEED frees a PTE table whose whole 2 MiB span it zaps (CONFIG_PT_RECLAIM), and
    /// keeps one it covers only in part: VmPTE back by 4 kB per freed table, exactly.
    #[test]
    fn dontneed_reclaims_the_page_tables_it_empties() {
        for pt_reclaim in ["1", "0"] {
            dontneed_with(pt_reclaim);
        }
    }

    /// With `kernel/pt_reclaim` 0 (kernels before 6.14, or built without it) the tables stay.
    fn dontneed_with(pt_reclaim: &str) {
        let w = json!({"knobs":{"transparent_hugepage/enabled":"never","kernel/pt_reclaim":pt_reclaim},"program":[
            {"op":"mmap","name":"p","size":"8M","align":"2M"},
            {"op":"snapshot","label":"mapped"},
            {"op":"write","region":"p"},
            {"op":"snapshot","label":"written"},
            {"op":"madvise","region":"p","advice":"dontneed","offset":"1M","length":"5M"},
            {"op":"snapshot","label":"dontneed"},
            {"op":"read","region":"p","offset":"2M","length":"2M"},
            {"op":"snapshot","label":"refault"}]});
        let w = parse_workload(&w.to_string()).expect("valid");
        let r = run_with(&w, &[], &RunOptions { check: true, invariants_each_op: true, ..Default::default() })
            .expect("runs");
        assert!(!r.events.iter().any(|e| e.kind == "invariant"), "{:?}", r.events);
        let pte = |l: &str| r.snapshots.iter().find(|s| s.label == l).expect(l).processes[0].vm_pte;
        assert_eq!(pte("written") - pte("mapped"), 16, "four PTE tables");
        if pt_reclaim == "0" {
            assert_eq!(pte("dontneed"), pte("written"), "no table freed");
            assert_eq!(pte("refault"), pte("dontneed"));
            return;
        }
        // [1M, 6M) covers the 2 MiB slots at 2M and 4M whole: their tables go; 0M and 6M stay.
        assert_eq!(pte("written") - pte("dontneed"), 8);
        assert_eq!(pte("refault") - pte("dontneed"), 4, "a fault there allocates a table again");
    }

    /// MADV_POPULATE_READ needs VM_READ and MADV_POPULATE_WRITE VM_WRITE, as
    /// `check_vma_flags` without FOLL_FORCE has it (selftests/mm/madv_populate.c's
    /// test_prot_read and test_prot_write): EINVAL before any fault, whatever x86's ptes allow.
    #[test]
    fn populate_needs_the_access_permission() {
        for (prot, read_ok, write_ok) in
            [("r", true, false), ("w", false, true), ("x", false, false), ("rw", true, true)]
        {
            let w = json!({"program":[
                {"op":"mmap","name":"p","size":"64K","prot":prot},
                {"op":"madvise","region":"p","advice":"populate_read"},
                {"op":"madvise","region":"p","advice":"populate_write"}]});
            let w = parse_workload(&w.to_string()).expect("valid");
            let r = run_with(&w, &[], &RunOptions { check: true, ..Default::default() }).expect("runs");
            let failed: Vec<&str> =
                r.events.iter().filter(|e| e.kind == "syscall").map(|e| e.message.as_str()).collect();
            let mut want = Vec::new();
            if !read_ok {
                want.push("madvise p populate_read: EINVAL");
            }
            if !write_ok {
                want.push("madvise p populate_write: EINVAL");
            }
            assert_eq!(failed, want, "prot {prot}");
            // 16 pages: a read fault each (the zero page), and a write fault each after it.
            assert_eq!(r.processes[0].minflt, 16 * (read_ok as i64 + write_ok as i64), "prot {prot}");
        }
    }
}
