//! The simulated kernel's events, as Linux's tracepoints name them (`mmsim run --events`,
//! `engine.events`): what `perf record -e` and `perf script` show of a real kernel. A glob
//! list selects them; a run without it checks one `Option` at each site and formats nothing.
//!
//! Deliberate differences from Linux: an event's fields are those of Linux's format where
//! mmsim has them (no struct page pointer, no migratetype); the `mmsim:` events are mmsim's
//! own, for mechanisms Linux has no tracepoint for; events raised inside the kernel (page
//! allocation, the page cache, khugepaged, TLB flushes) carry the time of the system call or
//! fault that raised them; the `memcg:` events name a statistic (`item`) by its /proc/vmstat
//! or memory.stat name where Linux prints its enum's number (which depends on the kernel's
//! configuration), and a memcg (`memcg_id`) by mmsim's index where Linux prints its cgroup's
//! inode number.

use serde::Serialize;

/// Every event: its name, whether it is mmsim's own (no such tracepoint in Linux), and its
/// fields.
pub const EVENTS: &[(&str, bool, &str)] = &[
    ("exceptions:page_fault_user", false, "address ip error_code"),
    ("kmem:mm_page_alloc", false, "pfn order gfp_flags"),
    ("kmem:mm_page_free", false, "pfn order"),
    ("huge_memory:mm_khugepaged_scan_pmd", false, "mm pfn writable referenced none_or_zero status unmapped"),
    ("huge_memory:mm_collapse_huge_page", false, "mm isolated status"),
    ("filemap:mm_filemap_add_to_page_cache", false, "ino pfn ofs order"),
    ("tlb:tlb_flush", false, "pages reason"),
    ("sched:sched_switch", false, "prev_comm prev_pid prev_state next_comm next_pid"),
    ("sched:sched_process_fork", false, "comm pid child_comm child_pid"),
    ("mmsim:huge_zero_page_map", true, "address"),
    ("mmsim:kscrubd_zero", true, "pfn order"),
    ("mmsim:lock_wait", true, "lock func ns"),
    ("mmsim:io_wait", true, "pages ns"),
    ("sched:sched_migrate_task", false, "comm pid prio orig_cpu dest_cpu"),
    ("vmscan:mm_vmscan_kswapd_sleep", false, "nid"),
    ("vmscan:mm_vmscan_kswapd_wake", false, "nid order"),
    ("vmscan:mm_vmscan_wakeup_kswapd", false, "nid order gfp_flags"),
    ("vmscan:mm_vmscan_direct_reclaim_begin", false, "order gfp_flags"),
    ("vmscan:mm_vmscan_direct_reclaim_end", false, "nr_reclaimed"),
    ("vmscan:mm_vmscan_memcg_reclaim_begin", false, "order gfp_flags"),
    ("vmscan:mm_vmscan_memcg_reclaim_end", false, "nr_reclaimed"),
    ("vmscan:mm_vmscan_lru_isolate", false, "classzone order nr_requested nr_scanned nr_skipped nr_taken lru"),
    ("vmscan:mm_vmscan_write_folio", false, "pfn flags"),
    ("vmscan:mm_vmscan_reclaim_pages", false, "nid nr_scanned nr_reclaimed nr_dirty nr_writeback nr_congested nr_immediate nr_activate_anon nr_activate_file nr_ref_keep nr_unmap_fail"),
    ("vmscan:mm_vmscan_lru_shrink_inactive", false, "nid nr_scanned nr_reclaimed nr_dirty nr_writeback nr_congested nr_immediate nr_activate_anon nr_activate_file nr_ref_keep nr_unmap_fail priority flags"),
    ("vmscan:mm_vmscan_lru_shrink_active", false, "nid nr_taken nr_active nr_deactivated nr_referenced priority flags"),
    ("vmscan:mm_vmscan_throttled", false, "nid usec_timeout usect_delayed reason"),
    ("writeback:writeback_written", false, "bdi sb_dev nr_pages sync_mode kupdate range_cyclic background reason"),
    ("memcg:count_memcg_events", false, "memcg_id item val"),
    ("memcg:mod_memcg_state", false, "memcg_id item val"),
    ("memcg:mod_memcg_lruvec_state", false, "memcg_id item val"),
    ("memcg:memcg_flush_stats", false, "memcg_id stats_updates force needs_flush"),
    ("kmem:kmem_cache_alloc", false, "name bytes_alloc accounted memcg_id"),
    ("kmem:kmem_cache_free", false, "name memcg_id"),
];

/// An event's index in `EVENTS`.
pub mod ev {
    pub const PAGE_FAULT_USER: u8 = 0;
    pub const MM_PAGE_ALLOC: u8 = 1;
    pub const MM_PAGE_FREE: u8 = 2;
    pub const KHUGEPAGED_SCAN_PMD: u8 = 3;
    pub const COLLAPSE_HUGE_PAGE: u8 = 4;
    pub const FILEMAP_ADD: u8 = 5;
    pub const TLB_FLUSH: u8 = 6;
    pub const SCHED_SWITCH: u8 = 7;
    pub const SCHED_PROCESS_FORK: u8 = 8;
    pub const HUGE_ZERO_PAGE_MAP: u8 = 9;
    pub const KSCRUBD_ZERO: u8 = 10;
    /// A wait for a contended line (a spinlock, a refcount), raised when it ends.
    pub const LOCK_WAIT: u8 = 11;
    /// A task's wait for the block device (`io_schedule`), raised when it ends.
    pub const IO_WAIT: u8 = 12;
    /// Idle balancing moved a task (raised by the CPU that pulled it).
    pub const SCHED_MIGRATE_TASK: u8 = 13;
    pub const VMSCAN_KSWAPD_SLEEP: u8 = 14;
    pub const VMSCAN_KSWAPD_WAKE: u8 = 15;
    pub const VMSCAN_WAKEUP_KSWAPD: u8 = 16;
    pub const VMSCAN_DIRECT_RECLAIM_BEGIN: u8 = 17;
    pub const VMSCAN_DIRECT_RECLAIM_END: u8 = 18;
    pub const VMSCAN_MEMCG_RECLAIM_BEGIN: u8 = 19;
    pub const VMSCAN_MEMCG_RECLAIM_END: u8 = 20;
    pub const VMSCAN_LRU_ISOLATE: u8 = 21;
    pub const VMSCAN_WRITE_FOLIO: u8 = 22;
    pub const VMSCAN_RECLAIM_PAGES: u8 = 23;
    pub const VMSCAN_LRU_SHRINK_INACTIVE: u8 = 24;
    pub const VMSCAN_LRU_SHRINK_ACTIVE: u8 = 25;
    pub const VMSCAN_THROTTLED: u8 = 26;
    pub const WRITEBACK_WRITTEN: u8 = 27;
    /// A memcg event count (`__count_memcg_events`); `item` by its /proc/vmstat name.
    pub const MEMCG_COUNT_EVENTS: u8 = 28;
    /// A memcg-only statistic (`__mod_memcg_state`: MEMCG_SWAP, MEMCG_KMEM).
    pub const MEMCG_MOD_STATE: u8 = 29;
    /// A node statistic of a memcg (`__mod_memcg_lruvec_state`).
    pub const MEMCG_MOD_LRUVEC_STATE: u8 = 30;
    /// A flush attempt (`__mem_cgroup_flush_stats`): the pending updates and whether they
    /// were enough.
    pub const MEMCG_FLUSH_STATS: u8 = 31;
    /// A slab object of an accounted cache allocated (`memcg_id`: the memcg charged, none for
    /// the root's tasks and kernel threads; Linux's event has no such field).
    pub const KMEM_CACHE_ALLOC: u8 = 32;
    /// One freed (`memcg_id`: the memcg uncharged).
    pub const KMEM_CACHE_FREE: u8 = 33;
}

/// One event of a run, as `perf script` prints it: the task, its CPU, the time, the event
/// and its fields.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TraceEvent {
    pub comm: String,
    pub pid: u32,
    pub cpu: u32,
    /// Seconds of simulated time (the CPU's clock).
    pub time: f64,
    pub event: &'static str,
    pub fields: String,
}

/// The events selected, and those raised inside the kernel waiting for their task and time.
#[derive(Clone, Debug, Default)]
pub struct Tracepoints {
    enabled: u64,
    pub pending: Vec<(u8, String)>,
}

impl Tracepoints {
    /// The events a comma list of globs (`*` any run of characters, `?` one) selects, as
    /// `perf record -e` takes them; every glob must select at least one.
    pub fn parse(spec: &str) -> Result<Tracepoints, String> {
        let mut enabled = 0u64;
        for g in spec.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            let hits: u64 = EVENTS.iter().enumerate().filter(|(_, e)| glob(g, e.0)).map(|(i, _)| 1u64 << i).sum();
            if hits == 0 {
                let known: Vec<&str> = EVENTS.iter().map(|e| e.0).collect();
                return Err(format!("{g:?} selects no event (known: {})", known.join(", ")));
            }
            enabled |= hits;
        }
        if enabled == 0 {
            return Err("no event named".into());
        }
        Ok(Tracepoints { enabled, pending: Vec::new() })
    }

    #[inline]
    pub fn on(&self, id: u8) -> bool {
        self.enabled & (1 << id) != 0
    }
}

/// Whether `name` matches `pattern` (`*`, `?`; everything else literal).
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == b'?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == b'*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

/// Raise event `id` on `tp` (if tracing selects it), its fields formatted only then.
#[inline]
pub fn raise(tp: &mut Option<Box<Tracepoints>>, id: u8, fields: impl FnOnce() -> String) {
    if let Some(t) = tp {
        if t.on(id) {
            t.pending.push((id, fields()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_select_events_as_perf_record_e_does() {
        assert!(glob("exceptions:*", "exceptions:page_fault_user"));
        assert!(glob("*:mm_page_*", "kmem:mm_page_free"));
        assert!(glob("kmem:mm_page_allo?", "kmem:mm_page_alloc"));
        assert!(!glob("kmem:mm_page_alloc", "kmem:mm_page_alloc_zone"));
        assert!(!glob("sched:*", "kmem:mm_page_alloc"));
        let t = Tracepoints::parse("exceptions:*,kmem:mm_page_alloc").unwrap();
        assert!(t.on(ev::PAGE_FAULT_USER) && t.on(ev::MM_PAGE_ALLOC) && !t.on(ev::MM_PAGE_FREE));
        assert!(Tracepoints::parse("*").unwrap().on(ev::KSCRUBD_ZERO));
        let e = Tracepoints::parse("exceptions:*,nosuch:*").unwrap_err();
        assert!(e.starts_with("\"nosuch:*\" selects no event (known: exceptions:page_fault_user,"), "{e}");
    }

    #[test]
    fn the_indices_name_their_events() {
        assert_eq!(EVENTS[ev::PAGE_FAULT_USER as usize].0, "exceptions:page_fault_user");
        assert_eq!(EVENTS[ev::SCHED_PROCESS_FORK as usize].0, "sched:sched_process_fork");
        assert_eq!(EVENTS[ev::KSCRUBD_ZERO as usize].0, "mmsim:kscrubd_zero");
        assert!(EVENTS.len() <= 64);
    }
}
