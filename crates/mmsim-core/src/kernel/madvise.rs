//! mm/madvise.c: MADV_HUGEPAGE / MADV_NOHUGEPAGE (vma flags, with split and merge, as
//! madvise_update_vma does), MADV_DONTNEED (zap the range, keep the vmas and page tables) and
//! MADV_POPULATE_READ / MADV_POPULATE_WRITE (fault the range in through GUP, Linux >= 5.14).

use super::mm::vm;
use super::mmap::Errno;
use super::{Kernel, MmId};

pub use super::uapi::Advice;

impl Kernel {
    /// Where MADV_DONTNEED of [start, start + len) stops zapping: at the first mlocked vma
    /// (EINVAL) and at a hugetlb vma entered at an address not huge-page aligned (EINVAL); a
    /// hugetlb vma's range ends rounded down to a huge page. What precedes is zapped.
    pub fn madvise_dontneed_extent(&self, mm: MmId, start: u64, len: u64) -> u64 {
        let end = start.saturating_add(self.geo.page_align(len).unwrap_or(len));
        let hmask = self.geo.hpage_pmd_size() - 1;
        let stop = self.mm(mm).vmas_in(start, end).into_iter().find_map(|s| {
            let v = &self.mm(mm).vmas[&s];
            let from = v.start.max(start);
            if v.flags & vm::LOCKED != 0 || (v.flags & vm::HUGETLB != 0 && from & hmask != 0) {
                return Some(from);
            }
            let to = v.end.min(end);
            (v.flags & vm::HUGETLB != 0 && to & hmask != 0).then_some(to & !hmask)
        });
        stop.unwrap_or(end)
    }

    /// `do_madvise`: apply `advice` to every vma in [start, start+len). ENOMEM if part of the
    /// range is unmapped (the mapped parts are still advised, as Linux does).
    pub fn madvise_do_behavior(&mut self, mm: MmId, start: u64, len: u64, advice: Advice) -> Result<(), Errno> {
        if start & (self.geo.page_size() - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let end = self.geo.page_align(len).and_then(|l| start.checked_add(l)).ok_or(Errno::EINVAL)?;
        if end == start {
            return Ok(());
        }
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
            if v.start > addr {
                hole = true;
                addr = v.start;
            }
            let stop = v.end.min(end);
            match advice {
                Advice::DontNeed => {
                    // madvise_dontneed_free_valid_vma: not on a VM_LOCKED vma (the walk stops);
                    // on a hugetlb vma the start must be huge-page aligned and the end is
                    // rounded down to one.
                    if v.flags & vm::LOCKED != 0 {
                        return Err(Errno::EINVAL);
                    }
                    if v.flags & vm::HUGETLB != 0 {
                        let hmask = self.geo.hpage_pmd_size() - 1;
                        if addr & hmask != 0 {
                            return Err(Errno::EINVAL);
                        }
                        let stop = stop & !hmask;
                        if stop > addr {
                            self.unmap_hugepage_range(mm, &v, addr, stop);
                        }
                        addr = v.end.min(end);
                        continue;
                    }
                    // madvise_dontneed_single_vma -> zap_page_range_single (reclaim_pt).
                    self.zap_page_range_reclaim_pt(mm, &v, addr, stop);
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
            addr = stop;
        }
        if hole {
            Err(Errno::ENOMEM)
        } else {
            Ok(())
        }
    }

    /// `madvise_populate` -> `faultin_page_range`: fault in every page of [start, end) not
    /// mapped as the access needs (GUP faults with FOLL_MADV_POPULATE: counted in pgfault and
    /// `gup_faults`, no vma split, no unshare). A hole is ENOMEM, a vma the access may not make
    /// (PROT_NONE, a write to a read-only one, a special one) EINVAL, a fault that ends in
    /// SIGBUS EFAULT; the vmas before are populated.
    fn madvise_populate(&mut self, mm: MmId, start: u64, end: u64, write: bool) -> Result<(), Errno> {
        let mut addr = start;
        while addr < end {
            let Some(v) = self.mm(mm).vma_lookup(addr).cloned() else {
                return Err(Errno::ENOMEM);
            };
            let accessible = v.flags & (vm::READ | vm::WRITE | vm::EXEC) != 0;
            let special = v.flags & vm::DONTEXPAND != 0 && v.flags & vm::HUGETLB == 0;
            if !accessible || special || (write && v.flags & vm::WRITE == 0) {
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
}
