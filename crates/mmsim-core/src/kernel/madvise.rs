//! mm/madvise.c: MADV_HUGEPAGE / MADV_NOHUGEPAGE (vma flags, with split and merge, as
//! madvise_update_vma does) and MADV_DONTNEED (zap the range, keep the vmas and page tables).

use super::mm::vm;
use super::mmap::{page_align, Errno};
use super::{Kernel, MmId};
use crate::units::PAGE_SIZE;

/// The advice values the model implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    HugePage,
    NoHugePage,
    DontNeed,
}

impl Kernel {
    /// `do_madvise`: apply `advice` to every vma in [start, start+len). ENOMEM if part of the
    /// range is unmapped (the mapped parts are still advised, as Linux does).
    pub fn do_madvise(&mut self, mm: MmId, start: u64, len: u64, advice: Advice) -> Result<(), Errno> {
        if start & (PAGE_SIZE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let end = page_align(len).and_then(|l| start.checked_add(l)).ok_or(Errno::EINVAL)?;
        if end == start {
            return Ok(());
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
                    // madvise_dontneed_single_vma -> zap_page_range_single.
                    self.zap_page_range(mm, &v, addr, stop);
                }
                Advice::HugePage | Advice::NoHugePage => {
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
}
