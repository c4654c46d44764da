//! The architecture's page-fault handler (arch/x86/mm/fault.c, do_user_addr_fault): find the
//! vma, check the access (access_error -> SIGSEGV), call handle_mm_fault, and account the
//! fault (mm_account_fault: PGFAULT always, min_flt only for faults that did not fail).

use super::knobs::FaultLocking;
use super::mm::vm;
use super::vmstat::VmEvent;
use super::{vm_fault, Kernel, MmId, Work};

/// The kind of access that faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Exec,
}

/// What a fault came to, for the task that took it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOutcome {
    /// Handled: the access can be retried (counts as a minor fault).
    Handled,
    /// Handled after waiting for I/O (VM_FAULT_MAJOR, or a retried fault): a major fault.
    Major,
    /// No vma or no permission: SIGSEGV (bad_area / access_error).
    Segv,
    /// VM_FAULT_OOM: the page could not be allocated (the task retries or dies).
    Oom,
    /// VM_FAULT_SIGBUS.
    Bus,
}

/// RLIMIT_STACK's default (`_STK_LIM`, 8 MiB): the most a growsdown stack vma may span.
pub const STK_LIM: u64 = 8 << 20;

impl Kernel {
    /// `expand_stack` (mm/mmap.c, from `lock_mm_and_find_vma`): a fault below a VM_GROWSDOWN
    /// vma moves its start down to the faulting page, if the stack then spans at most
    /// RLIMIT_STACK (`acct_stack_growth`) and keeps `stack_guard_gap` above the vma below.
    /// True when it grew. Differs from Linux: no RLIMIT_AS or mlock accounting of the growth.
    pub fn expand_stack(&mut self, mm: MmId, addr: u64) -> bool {
        let g = self.geo;
        let m = self.mm(mm);
        let Some((&start, v)) = m.vmas.range(addr..).next() else { return false };
        if v.flags & vm::GROWSDOWN == 0 || v.end - g.page_align_down(addr) > STK_LIM {
            return false;
        }
        let new_start = g.page_align_down(addr);
        let guard = super::mmap::STACK_GUARD_GAP_PAGES * g.page_size();
        if let Some((_, prev)) = m.vmas.range(..new_start).next_back() {
            if prev.end > new_start.saturating_sub(guard) {
                return false;
            }
        }
        let mut v = self.mm_mut(mm).vmas.remove(&start).expect("vma");
        v.pgoff -= (start - new_start) >> g.page_shift;
        v.start = new_start;
        self.mm_mut(mm).vmas.insert(new_start, v);
        true
    }

    /// `do_user_addr_fault`.
    pub fn do_user_addr_fault(&mut self, mm: MmId, addr: u64, access: Access) -> FaultOutcome {
        self.current.fault_path = "bad_area";
        let found = self.mm(mm).vma_lookup(addr).cloned();
        let vma = match found {
            Some(v) => v,
            None => {
                if !self.expand_stack(mm, addr) {
                    return FaultOutcome::Segv;
                }
                let Some(v) = self.mm(mm).vma_lookup(addr) else {
                    return FaultOutcome::Segv;
                };
                v.clone()
            }
        };
        let (flags, vma_start) = (vma.flags, vma.start);
        let ok = match access {
            Access::Write => flags & vm::WRITE != 0,
            Access::Exec => flags & vm::EXEC != 0,
            Access::Read => flags & (vm::READ | vm::WRITE | vm::EXEC) != 0,
        };
        if !ok {
            return FaultOutcome::Segv;
        }
        // The fault's locks (`kernel/fault_locking`): the vma's read lock (Linux >= 6.4) or
        // mmap_lock's read side, then the page-table lock around the pte update. Only threads
        // of this process can take them, so they are booked only when it has more than one
        // (alone, their cost is the uncontended one already in `cost.fault_handler`).
        let threaded = self.mm(mm).users > 1;
        let (enter, leave) = match self.knobs.fault_locking {
            FaultLocking::PerVma => ("lock_vma_under_rcu", "vma_end_read"),
            _ => ("down_read", "up_read"),
        };
        let lock = self.fault_lock_line(mm, vma_start);
        if threaded {
            self.work.push(Work::FaultLock { line: lock, hold: false, func: enter });
        }
        let mut ret = self.handle_mm_fault_vma(mm, vma, addr, access == Access::Write);
        let mut major = false;
        let mut tries = 0;
        while ret & vm_fault::RETRY != 0 && tries < 3 {
            // The fault dropped its lock to wait for I/O or to start readahead: it is done
            // again (under mmap_lock). After a major fault the retry is FAULT_FLAG_TRIED and
            // counts as major (mm_account_fault); PGFAULT is counted once, for the fault that
            // completed.
            if ret & vm_fault::MAJOR != 0 {
                self.fault_tried = true;
                major = true;
            }
            ret = self.handle_mm_fault(mm, addr, access == Access::Write);
            tries += 1;
        }
        self.fault_tried = false;
        major |= ret & vm_fault::MAJOR != 0;
        if threaded {
            // The table the fault filled (it may have allocated it).
            let ptl = self.ptl_line(mm, addr);
            self.work.push(Work::FaultLock { line: ptl, hold: true, func: "_raw_spin_lock" });
            self.work.push(Work::FaultLock { line: lock, hold: false, func: leave });
        }
        self.stat.count(VmEvent::PgFault);
        // count_memcg_event_mm.
        if let Some(m) = self.mms.get(mm as usize).and_then(|m| m.as_ref()) {
            self.count_memcg_events(m.memcg, VmEvent::PgFault, 1);
        }
        if ret & vm_fault::OOM != 0 {
            FaultOutcome::Oom
        } else if ret & vm_fault::SIGBUS != 0 {
            FaultOutcome::Bus
        } else if ret & vm_fault::SIGSEGV != 0 {
            FaultOutcome::Segv
        } else if major {
            FaultOutcome::Major
        } else {
            FaultOutcome::Handled
        }
    }
}
