//! The architecture's page-fault handler (arch/x86/mm/fault.c, do_user_addr_fault): find the
//! vma, check the access (access_error -> SIGSEGV), call handle_mm_fault, and account the
//! fault (mm_account_fault: PGFAULT always, min_flt only for faults that did not fail).

use super::mm::vm;
use super::vmstat::VmEvent;
use super::{vm_fault, Kernel, MmId};

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
    /// No vma or no permission: SIGSEGV (bad_area / access_error).
    Segv,
    /// VM_FAULT_OOM: the page could not be allocated (the task retries or dies).
    Oom,
    /// VM_FAULT_SIGBUS.
    Bus,
}

impl Kernel {
    /// `do_user_addr_fault`.
    pub fn do_user_addr_fault(&mut self, mm: MmId, addr: u64, access: Access) -> FaultOutcome {
        self.fault_path = "bad_area";
        let Some(v) = self.mm(mm).vma_lookup(addr) else {
            return FaultOutcome::Segv;
        };
        let ok = match access {
            Access::Write => v.flags & vm::WRITE != 0,
            Access::Exec => v.flags & vm::EXEC != 0,
            Access::Read => v.flags & (vm::READ | vm::WRITE | vm::EXEC) != 0,
        };
        if !ok {
            return FaultOutcome::Segv;
        }
        let ret = self.handle_mm_fault(mm, addr, access == Access::Write);
        self.stat.count(VmEvent::PgFault);
        if ret & vm_fault::OOM != 0 {
            FaultOutcome::Oom
        } else if ret & vm_fault::SIGBUS != 0 {
            FaultOutcome::Bus
        } else if ret & vm_fault::SIGSEGV != 0 {
            FaultOutcome::Segv
        } else {
            FaultOutcome::Handled
        }
    }
}
