//! What a run reports, in the vocabulary of `perf stat`, /proc/meminfo, /proc/vmstat and
//! /proc/PID/status. Plain data, separate from printers (the front ends format it).

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// An ordered name -> integer map (serialised as a JSON object in declaration order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters(pub Vec<(String, i64)>);

impl Counters {
    pub fn get(&self, name: &str) -> Option<i64> {
        self.0.iter().find(|e| e.0 == name).map(|e| e.1)
    }
    pub fn push(&mut self, name: &str, v: i64) {
        self.0.push((name.to_string(), v));
    }
}

impl Serialize for Counters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// An ordered name -> number map; whole numbers serialise as JSON integers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics(pub Vec<(String, f64)>);

impl Metrics {
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|e| e.0 == name).map(|e| e.1)
    }
    pub fn push(&mut self, name: &str, v: f64) {
        self.0.push((name.to_string(), v));
    }
}

impl Serialize for Metrics {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            if v.fract() == 0.0 && v.abs() < 9.0e15 {
                m.serialize_entry(k, &(*v as i64))?;
            } else {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

/// An ordered name -> string map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Strings(pub Vec<(String, String)>);

impl Serialize for Strings {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// One process as /proc/PID/status shows it (sizes in kB).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProcessStatus {
    pub pid: u32,
    /// Thread group (the process a thread belongs to; its own pid for a process).
    #[serde(rename = "Tgid")]
    pub tgid: u32,
    pub ppid: u32,
    /// "running", "exited" or "killed".
    pub state: String,
    pub minflt: i64,
    /// maj_flt: faults that read from the block device.
    pub majflt: i64,
    #[serde(rename = "VmRSS")]
    pub vm_rss: i64,
    #[serde(rename = "VmHWM")]
    pub vm_hwm: i64,
    #[serde(rename = "RssAnon")]
    pub rss_anon: i64,
    #[serde(rename = "RssFile")]
    pub rss_file: i64,
    #[serde(rename = "RssShmem")]
    pub rss_shmem: i64,
    #[serde(rename = "VmPTE")]
    pub vm_pte: i64,
    /// kB of the process's mlocked vmas (mm->locked_vm).
    #[serde(rename = "VmLck")]
    pub vm_lck: i64,
    #[serde(rename = "AnonHugePages")]
    pub anon_huge_pages: i64,
    /// kB of smaps' LazyFree: mapped pages MADV_FREE made lazyfree, not written since.
    #[serde(rename = "LazyFree")]
    pub lazy_free: i64,
    /// kB of hugetlb pages this mm counts (mm->hugetlb_usage).
    #[serde(rename = "HugetlbPages")]
    pub hugetlb_pages: i64,
    /// Swap entries of the process's private memory, in kB (MM_SWAPENTS).
    #[serde(rename = "VmSwap")]
    pub vm_swap: i64,
    /// The CPU the task last ran on (/proc/PID/stat's `processor`, field 39).
    pub processor: u32,
    /// This process's perf counters.
    pub perf: Metrics,
}

/// The state of the machine at one moment.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Snapshot {
    pub label: String,
    /// The process (task) whose `snapshot` op took it (0 for the run's baseline and end).
    pub pid: u32,
    pub perf: Metrics,
    /// Cycles per kernel function so far.
    pub profile: Metrics,
    pub vmstat: Counters,
    pub meminfo: Counters,
    pub processes: Vec<ProcessStatus>,
    /// Seconds of simulated time at the snapshot on the CPU of the task that took it (the
    /// machine's elapsed time for the baseline and the end).
    pub time: f64,
    /// Per CPU: `cpu`, `busy-seconds` (running tasks and kernel threads) and
    /// `kscrubd-seconds` (of those, kscrubd's).
    pub cpus: Vec<Metrics>,
    /// The kernel threads (seed 002's kscrubd): name and counts.
    pub kthreads: Vec<KthreadStatus>,
    /// Per NUMA node: `node`, `dram-bytes` (the traffic its memory channel has carried: clears,
    /// copies, a zeroing engine's writes and program lines fetched from memory) and
    /// `dram-busy-seconds` (that traffic at `memory.bandwidth`).
    pub memory: Vec<Metrics>,
    /// The memory cgroups the workload declared, by name: their interface files as cgroup
    /// v2 shows them (`memory.current`, `memory.stat`, `memory.events`, ...).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub cgroups: std::collections::BTreeMap<String, CgroupStatus>,
    /// The swap areas, as /proc/swaps lists them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub swaps: Vec<SwapStatus>,
}

/// One memory cgroup's files (cgroup v2's names; sizes in bytes).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CgroupStatus {
    #[serde(rename = "memory.current")]
    pub current: i64,
    #[serde(rename = "memory.peak")]
    pub peak: i64,
    #[serde(rename = "memory.swap.current")]
    pub swap_current: i64,
    #[serde(rename = "memory.swap.peak")]
    pub swap_peak: i64,
    /// `memory.max` in bytes (-1: max).
    #[serde(rename = "memory.max")]
    pub max: i64,
    /// v2's memory.stat (`memory_stat_format`); under `cgroup/memory=v1`, v1's
    /// (`memcg1_stat_format`: local keys, then the hierarchical `total_*` ones), as a read
    /// shows it: the statistics rstat last flushed.
    #[serde(rename = "memory.stat")]
    pub stat: Counters,
    /// memory.stat from the statistics as they stand: what the file shows once rstat flushes
    /// them (a read flushes only past MEMCG_CHARGE_BATCH updates a CPU pending; the periodic
    /// flush every 2 s flushes all).
    #[serde(rename = "memory.stat.live")]
    pub stat_live: Counters,
    #[serde(rename = "memory.events")]
    pub events: Counters,
    #[serde(rename = "memory.events.local")]
    pub events_local: Counters,
    #[serde(rename = "memory.swap.events")]
    pub swap_events: Counters,
    /// Under `cgroup/memory=v1`, the files only cgroup v1's memory controller has (the v2
    /// files above stay: mmsim's view of the same counters).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub v1: Option<CgroupV1Status>,
}

/// One memory cgroup's files as cgroup v1 shows them (mm/memcontrol-v1.c; sizes in bytes,
/// an unlimited limit as PAGE_COUNTER_MAX's bytes, 9223372036854771712).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CgroupV1Status {
    #[serde(rename = "memory.usage_in_bytes")]
    pub usage_in_bytes: i64,
    #[serde(rename = "memory.max_usage_in_bytes")]
    pub max_usage_in_bytes: i64,
    #[serde(rename = "memory.limit_in_bytes")]
    pub limit_in_bytes: i64,
    #[serde(rename = "memory.failcnt")]
    pub failcnt: i64,
    #[serde(rename = "memory.memsw.usage_in_bytes")]
    pub memsw_usage_in_bytes: i64,
    #[serde(rename = "memory.memsw.max_usage_in_bytes")]
    pub memsw_max_usage_in_bytes: i64,
    #[serde(rename = "memory.memsw.limit_in_bytes")]
    pub memsw_limit_in_bytes: i64,
    /// `oom_kill_disable`, `under_oom` and `oom_kill` (`memcg1_oom_control_read`).
    #[serde(rename = "memory.oom_control")]
    pub oom_control: Counters,
}

/// A row of /proc/swaps (sizes in kB).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SwapStatus {
    #[serde(rename = "Filename")]
    pub filename: String,
    #[serde(rename = "Type")]
    pub kind: String,
    #[serde(rename = "Size")]
    pub size: u64,
    #[serde(rename = "Used")]
    pub used: u64,
    #[serde(rename = "Priority")]
    pub priority: i32,
}

/// A kernel thread's status (not a process of the workload: it has no pid of its own here).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct KthreadStatus {
    pub name: String,
    /// Awake (zeroing or waiting for its engine) at the snapshot.
    pub running: bool,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// Blocks and base pages it zeroed (kscrubd; 0 for khugepaged).
    pub blocks: u64,
    pub pages: u64,
    pub perf: Metrics,
    /// khugepaged's sysfs counts and its scan's results (only khugepaged has them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub khugepaged: Option<KhugepagedStatus>,
}

/// khugepaged's counts: sysfs `transparent_hugepage/khugepaged/pages_collapsed` and
/// `full_scans`, its wake-ups, and how many ranges each SCAN_* result ended.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct KhugepagedStatus {
    pub pages_collapsed: u64,
    pub full_scans: u64,
    pub wakeups: u64,
    pub scan_results: std::collections::BTreeMap<String, u64>,
}

/// Something a process ran into: a segmentation fault, a failed system call, an OOM kill, an
/// `expect` that failed, a `--check` mismatch.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Event {
    pub pid: u32,
    /// "segfault", "syscall", "oom-kill", "expect", "mismatch", "fork-failed".
    pub kind: String,
    pub message: String,
}

/// The reference-model check's summary.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct CheckSummary {
    pub enabled: bool,
    pub reads_checked: u64,
    pub mismatches: u64,
    pub expect_failures: u64,
    pub invariant_checks: u64,
}

/// How the engine ran the workload.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct EngineStats {
    /// Operations simulated step by step (pages touched, system calls).
    pub steps: u64,
    /// Loop iterations not simulated one by one because the state before and after an
    /// iteration was identical: their counts are exact multiples of that iteration's.
    pub fast_forwarded_iterations: u64,
    pub fast_forwarded_steps: u64,
    /// Events beyond the first 200, counted but not kept in `events`.
    pub events_dropped: u64,
    /// Events of `engine.events` past the most a run keeps (absent when none were dropped,
    /// so that a run without events reports what it did before them).
    #[serde(skip_serializing_if = "is_zero")]
    pub trace_events_dropped: u64,
}

/// What `engine.sample` did (`mmsim run --sample`): the extrapolated loop iterations, and a
/// 95% confidence interval (half-width) for each extrapolated counter of `perf`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SamplingReport {
    /// Units measured per extrapolation, and warm-up iterations before them.
    pub units: u32,
    pub warmup: u32,
    pub units_measured: u64,
    pub extrapolations: u64,
    pub extrapolated_iterations: u64,
    pub extrapolated_steps: u64,
    /// Half-widths of the 95% intervals, by `perf` name (page faults and every kernel count
    /// are exact and have none). `seconds` and `task-clock` take the interval of all tasks'
    /// cycles, an upper bound when tasks ran in parallel.
    pub ci95: Metrics,
}

/// The whole run: what `mmsim run --json` prints.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub workload: String,
    pub machine: Strings,
    pub knobs: Strings,
    pub perf: Metrics,
    /// Cycles per kernel function (a perf report of the kernel's share).
    pub profile: Metrics,
    pub vmstat: Counters,
    pub meminfo: Counters,
    /// The memory cgroups at the end (see `Snapshot::cgroups`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub cgroups: std::collections::BTreeMap<String, CgroupStatus>,
    /// The swap areas at the end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub swaps: Vec<SwapStatus>,
    /// The state before the first operation (so deltas can be taken).
    pub baseline: Snapshot,
    pub processes: Vec<ProcessStatus>,
    pub snapshots: Vec<Snapshot>,
    pub events: Vec<Event>,
    pub check: CheckSummary,
    /// What kept the CPUs' private caches coherent over the run (`hw::coherence`): modified
    /// lines moved by distance, those of atomics, copies invalidated, the cycles of
    /// core-to-core latency and the directory's lines at the end.
    pub coherence: Counters,
    pub engine: EngineStats,
    /// Present when the run sampled its loops (`engine.sample`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingReport>,
    /// What each `replay` op replayed (`mmsim run --trace`): records, system calls by name,
    /// the calls replayed as no-ops.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replay: Vec<crate::workload::interp::ReplayReport>,
    /// The events `engine.events` selected (`mmsim run --events`), as perf script lists them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trace_events: Vec<crate::tracepoints::TraceEvent>,
    /// True when the run should exit non-zero (an expect failed or the check found a mismatch).
    pub failed: bool,
}

/// Serde's test for a count left out of the report when zero.
fn is_zero(n: &u64) -> bool {
    *n == 0
}
