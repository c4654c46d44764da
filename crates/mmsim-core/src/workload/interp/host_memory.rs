//! The simulator's own host memory: an estimate from its largest data structures, checked
//! against `engine.max_host_memory` (mmsim's own; no Linux counterpart).

use super::{Frame, Interp, Task};

/// Checks of `engine.max_host_memory` (one a round and one a forked task) between recounts of
/// the mms' host bytes.
pub(super) const HOST_RECOUNT_CHECKS: u64 = 1024;
/// Host bytes of a heap allocation beyond its contents (glibc's chunk header and rounding).
pub(super) const ALLOC_OVERHEAD: u64 = 16;

/// The simulator's own memory by what holds it (`Interp::host_usage`), in host bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostUsage {
    /// `struct page` and the content slot of every simulated frame (fixed at boot).
    pub frames: u64,
    /// Page-table pages with entries (4 KiB each).
    pub page_tables: u64,
    /// Written data pages (a fill byte and the bytes that differ).
    pub data: u64,
    /// Task records (exited ones too, for the report), mms and vmas.
    pub tasks: u64,
    /// The hardware model and what the caller holds (snapshots).
    pub other: u64,
    /// Tasks created so far.
    pub nr_tasks: usize,
}

impl HostUsage {
    pub fn total(&self) -> u64 {
        self.frames + self.page_tables + self.data + self.tasks + self.other
    }
}

/// Estimated host bytes of a task's record: the struct, its regions and frames, its slot in
/// its parent's children, its perf profile, and once it exited its last status.
pub(super) fn task_host_bytes(t: &Task) -> u64 {
    let regions: u64 = t.regions.keys().map(|k| k.capacity() as u64 + ALLOC_OVERHEAD).sum::<u64>()
        + t.regions.capacity() as u64 * (std::mem::size_of::<(String, (u64, u64))>() as u64 + 1);
    let status = t.last_status.as_deref().map_or(0, status_host_bytes);
    std::mem::size_of::<Task>() as u64
        + regions
        + t.frames.capacity() as u64 * std::mem::size_of::<Frame>() as u64
        + t.perf.profile.capacity() as u64 * std::mem::size_of::<(&str, f64)>() as u64
        + 4
        + status
        + 4 * ALLOC_OVERHEAD
}

/// Estimated host bytes of a process status kept for the report (its perf metrics by name).
pub(super) fn status_host_bytes(s: &crate::report::ProcessStatus) -> u64 {
    let metric = std::mem::size_of::<(String, f64)>() as u64 + ALLOC_OVERHEAD;
    std::mem::size_of_val(s) as u64 + s.perf.0.iter().map(|(k, _)| k.capacity() as u64 + metric).sum::<u64>()
}

/// Estimated host bytes of an mm slot and, when live, its vmas (BTreeMap nodes).
pub(super) fn mm_host_bytes(m: Option<&crate::kernel::mm::MmStruct>) -> u64 {
    let vma = std::mem::size_of::<(u64, crate::kernel::mm::Vma)>() as u64 * 3 / 2;
    std::mem::size_of::<Option<crate::kernel::mm::MmStruct>>() as u64 + m.map_or(0, |m| m.vmas.len() as u64 * vma)
}

impl Interp {
    /// The simulator's own memory, estimated from its largest data structures (mmsim's own;
    /// no Linux counterpart): frame metadata, page contents (page tables, written data),
    /// task records, mms and vmas, the hardware model, and what the caller holds
    /// (`host_bytes_extra`). Not counted: the reference model of `--check`.
    pub fn host_usage(&self) -> HostUsage {
        let mem = &self.kernel.mem;
        HostUsage {
            frames: mem.metadata_bytes(),
            page_tables: mem.table_bytes(),
            data: mem.content_bytes - mem.table_bytes(),
            tasks: self.task_bytes + self.mm_bytes,
            other: self.hw_bytes + self.host_bytes_extra,
            nr_tasks: self.tasks.len(),
        }
    }

    /// Recount the host bytes of the live mms and their vmas (O(mms)).
    pub(super) fn recount_host_bytes(&mut self) {
        self.checks_since_recount = 0;
        self.mm_bytes = self.kernel.mms.iter().map(|m| mm_host_bytes(m.as_ref())).sum::<u64>()
            + self.mm_owner.capacity() as u64 * 8
            + self.machine.mm_host_bytes(self.kernel.mms.len());
    }

    /// Check the estimate against `max_host_memory` (cheap: counters, and every
    /// `HOST_RECOUNT_CHECKS` checks a recount of the mms); sets `host_limit_hit`.
    pub fn check_host_memory(&mut self) -> bool {
        self.checks_since_recount += 1;
        if self.checks_since_recount >= HOST_RECOUNT_CHECKS {
            self.recount_host_bytes();
        }
        if self.host_usage().total() > self.max_host_memory {
            self.host_limit_hit = true;
        }
        self.host_limit_hit
    }
}
