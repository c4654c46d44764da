//! A whole run: boot the machine, apply knobs, interpret the workload, take snapshots, check
//! conservation at the end, and build the report.

use crate::error::Error;
use crate::hw::perf::PerfCounters;
use crate::kernel::knobs::Knobs;
use crate::kernel::mm::MmCounter;
use crate::kernel::vmstat::VmItem;
use crate::kernel::{Kernel, MmId};
use crate::report::{CheckSummary, Counters, Metrics, ProcessStatus, Report, Snapshot, Strings};
use crate::units::align_up;
use crate::workload::interp::{Interp, Task, TaskState};
use crate::workload::spec::Workload;

/// kB in one base page of `k` (the unit of /proc's page counts).
fn kb_per_page(k: &Kernel) -> i64 {
    (k.geo.page_size() / 1024) as i64
}

/// Options of a run beyond the workload.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Run the reference model and check every read.
    pub check: bool,
    /// Check the kernel's invariants after every system call (fuzz mode).
    pub invariants_each_op: bool,
    /// Stop after this many steps (None = no limit).
    pub max_steps: Option<u64>,
    /// Deliberate bugs (tests of the checkers only).
    pub sabotage: crate::kernel::Sabotage,
    /// Exact fast-forward of repeating loop iterations (default on).
    pub fast_forward: Option<bool>,
    /// `engine.sample=UNITS[:WARMUP]`: sample loop iterations (SMARTS) instead.
    pub sample: Option<crate::workload::interp::SampleSpec>,
    /// Largest simulated memory (bytes) a run may have (None = DEFAULT_MAX_MEMORY): each
    /// simulated GiB takes about 15 MB of the host's memory (frame metadata and contents).
    pub max_memory: Option<u64>,
    /// `engine.schedule=serial`: each task a fork or thread op creates runs to its end before
    /// the next, and all of them before their creator goes on (None or false: the CPUs
    /// interleave tasks in time order). `mmsim validate` runs both sides so, so that no count
    /// depends on the timing of concurrent tasks.
    pub serial: Option<bool>,
    /// `engine.fork_cgroup=root`: a fork op's fork(2) is made from the root cgroup, the
    /// process back in its own at once and the child in its parent's (or the op's), as
    /// `mmsim validate`'s runner forks (native/runner.c do_fork), so that what the fork itself
    /// charges (the child's copied page tables) is not the workload's cgroup's (None or false:
    /// from the process's own cgroup).
    pub fork_from_root: Option<bool>,
    /// Largest estimate of the simulator's own memory (host bytes: frames, page tables,
    /// written data, tasks, mms, snapshots) before the run stops (None =
    /// DEFAULT_MAX_HOST_MEMORY); checked every round and after each forked task.
    pub max_host_memory: Option<u64>,
    /// Called every PROGRESS_ROUNDS rounds with how far the run has got (a front end's
    /// progress line; the engine itself prints nothing).
    pub progress: Option<ProgressFn>,
    /// `engine.events=GLOB,...`: the kernel's events to record (`tracepoints`); None: none.
    pub events: Option<String>,
}

/// Rounds between calls of `RunOptions::progress`.
pub const PROGRESS_ROUNDS: u64 = 4096;

/// How far a run has got, for a progress line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Operations simulated so far, and the limit (`engine.max_ops`).
    pub steps: u64,
    pub max_steps: u64,
    /// Tasks created so far, and the pids in use now.
    pub tasks: usize,
    pub pids: u32,
    /// The estimate of the simulator's own memory, and its limit.
    pub host_bytes: u64,
    pub max_host_bytes: u64,
}

/// A progress callback (see `RunOptions::progress`).
#[derive(Clone)]
pub struct ProgressFn(pub std::sync::Arc<dyn Fn(&Progress) + Send + Sync>);

impl std::fmt::Debug for ProgressFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressFn")
    }
}

/// The default limit on simulated operations (pages touched, system calls; fast-forwarded
/// iterations do not count): 10^9, minutes of simulation, so that a runaway workload stops.
pub const DEFAULT_MAX_OPS: u64 = 1_000_000_000;

/// The default limit on a machine's simulated memory: 256 GiB (about 4 GB of host memory).
pub const DEFAULT_MAX_MEMORY: u64 = 256 << 30;

/// The default limit on the simulator's own memory: 8 GiB, a third of a 24 GiB machine, and
/// room for the largest machine DEFAULT_MAX_MEMORY allows with all of its memory written
/// (3.5 GiB of frame metadata and 3 GiB of page contents).
pub const DEFAULT_MAX_HOST_MEMORY: u64 = 8 << 30;

/// Host bytes of a snapshot beyond its process table (perf, profile, vmstat, meminfo).
const SNAPSHOT_HOST_BYTES: u64 = 16 << 10;
/// Host bytes of one process's row in a snapshot.
const STATUS_HOST_BYTES: u64 = 2 << 10;

/// A size as `--set` takes it: in the largest unit that divides it (K, M, G, T), else bytes.
fn size_text(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes != 0 && bytes.trailing_zeros() >= shift {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A size for limit messages: GiB with one decimal from 1 GiB, else whole MiB.
fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{} MiB", (bytes + (1 << 19)) >> 20)
    }
}

/// The error of a run stopped by `engine.max_host_memory`, with what the estimate holds.
fn host_limit_error(it: &Interp, limit: u64, w: &Workload) -> Error {
    let u = it.host_usage();
    let tasks = if u.nr_tasks == 1 { "1 task".to_string() } else { format!("{} tasks", u.nr_tasks) };
    Error::Limit(format!(
        "the simulator's own memory would pass engine.max_host_memory ({}): about {} estimated, {} of frame \
         metadata ({} simulated), {} of page tables, {} of written data, {} for {tasks} and their mms, {} other \
         (caches, TLBs, snapshots); raise it with --set engine.max_host_memory=SIZE",
        size_text(limit),
        human(u.total()),
        human(u.frames),
        human(w.machine.memory.0),
        human(u.page_tables),
        human(u.data),
        human(u.tasks),
        human(u.other)
    ))
}

/// Run `w` with knob overrides `sets` (applied after the workload's own knobs).
pub fn run(w: &Workload, sets: &[(String, String)], check: bool) -> Result<Report, Error> {
    run_with(w, sets, &RunOptions { check, ..Default::default() })
}

/// `run` with all options.
pub fn run_with(w: &Workload, sets: &[(String, String)], opts: &RunOptions) -> Result<Report, Error> {
    let (knobs, hw_sets, opts) = apply_sets(w, sets, opts)?;
    if opts.check && w.program.iter().any(|op| matches!(op, crate::workload::spec::Op::Replay(_))) {
        return Err(Error::Workload(
            "program: a replay cannot run under --check (a trace records addresses, not the bytes the reference \
             model checks)"
                .into(),
        ));
    }
    let (mut it, effective) = boot(w, knobs, &hw_sets, &opts)?;
    let baseline = snapshot(&mut it, "baseline", 0);
    let snapshots = run_rounds(&mut it, &opts, w)?;
    let end = snapshot(&mut it, "end", 0);
    if it.kernel.tp.is_some() {
        let last = (0..it.machine.cpus.len()).map(|c| it.machine.clock[c]).fold(0.0, f64::max);
        it.tp_drain_end(last);
    }
    let (check, failed, events) = final_checks(&mut it);
    let machine = Strings(vec![
        ("profile".into(), w.machine.profile.clone()),
        ("memory".into(), w.machine.memory.0.to_string()),
        ("cpus".into(), w.machine.cpus.to_string()),
    ]);
    Ok(Report {
        workload: w.name.clone(),
        machine,
        knobs: Strings(effective),
        perf: end.perf.clone(),
        profile: end.profile.clone(),
        vmstat: end.vmstat.clone(),
        meminfo: end.meminfo.clone(),
        cgroups: end.cgroups.clone(),
        swaps: end.swaps.clone(),
        baseline,
        processes: end.processes.clone(),
        snapshots,
        events,
        check,
        coherence: coherence_counters(&it.machine),
        engine: crate::report::EngineStats {
            steps: it.steps,
            fast_forwarded_iterations: it.fast_forwarded,
            fast_forwarded_steps: it.fast_forward_steps,
            events_dropped: it.events_dropped,
            trace_events_dropped: it.trace_events_dropped,
        },
        sampling: it.sample.map(|spec| sampling_report(&it, spec)),
        replay: it.replays.iter().map(|r| r.report.clone()).collect(),
        trace_events: std::mem::take(&mut it.trace_events),
        failed,
    })
}

/// The report's `coherence` section.
fn coherence_counters(m: &crate::hw::machine::Machine) -> crate::report::Counters {
    let (st, lines) = m.coherence_stats();
    let mut c = crate::report::Counters::default();
    c.push("transfers-smt", st.transfers_smt as i64);
    c.push("transfers-socket", st.transfers_socket as i64);
    c.push("transfers-remote", st.transfers_remote as i64);
    c.push("atomic-transfers", st.atomic_transfers as i64);
    c.push("invalidations", st.invalidations as i64);
    c.push("transfer-cycles", st.transfer_cycles.round() as i64);
    c.push("directory-lines", lines as i64);
    c
}

/// What `apply_sets` makes of a run's settings: the kernel's knobs, the profile's overrides
/// and the engine's options.
type Settings = (Knobs, Vec<(String, String)>, RunOptions);

/// The workload's knobs, then `--set`'s overrides: kernel knobs, `hw.` profile overrides
/// (returned for the profile) and `engine.` options (merged into the options).
fn apply_sets(w: &Workload, sets: &[(String, String)], opts: &RunOptions) -> Result<Settings, Error> {
    let mut knobs = Knobs::default();
    for (k, v) in &w.knobs {
        knobs.set(k, &v.0).map_err(|e| Error::Knob(format!("knobs.{k}: {e}")))?;
    }
    let mut hw_sets = Vec::new();
    let mut opts = opts.clone();
    for (k, v) in sets {
        if let Some(name) = k.strip_prefix("engine.") {
            set_engine_option(&mut opts, k, name, v)?;
        } else if let Some(path) = k.strip_prefix("hw.") {
            hw_sets.push((path.to_string(), v.clone()));
        } else {
            knobs.set(k, v).map_err(|e| Error::Knob(format!("--set {k}={v}: {e}")))?;
        }
    }
    Ok((knobs, hw_sets, opts))
}

/// `--set engine.NAME=v`.
fn set_engine_option(opts: &mut RunOptions, k: &str, name: &str, v: &str) -> Result<(), Error> {
    let bad = || {
        Error::Knob(format!(
            "--set {k}={v}: expected {}",
            match name {
                "fast_forward" => "0 or 1",
                "sample" => "UNITS[:WARMUP] (UNITS at least 2), or 0 for no sampling",
                "schedule" => "parallel or serial",
                "fork_cgroup" => "own or root",
                _ => "a positive integer",
            }
        ))
    };
    let size = || {
        crate::units::parse_size(v)
            .map_err(|_| Error::Knob(format!("--set {k}={v}: expected a size (bytes, or with K/M/G/T)")))
    };
    match name {
        "fast_forward" => {
            opts.fast_forward = Some(
                matches!(v, "1" | "true")
                    .then_some(true)
                    .or(matches!(v, "0" | "false").then_some(false))
                    .ok_or_else(bad)?,
            )
        }
        "schedule" => {
            opts.serial = Some(match v {
                "serial" => true,
                "parallel" => false,
                _ => return Err(bad()),
            })
        }
        "fork_cgroup" => {
            opts.fork_from_root = Some(match v {
                "root" => true,
                "own" => false,
                _ => return Err(bad()),
            })
        }
        "sample" => {
            opts.sample = if v == "0" {
                None
            } else {
                Some(
                    crate::workload::interp::SampleSpec::parse(v)
                        .map_err(|e| Error::Knob(format!("--set {k}={v}: {e} (expected UNITS[:WARMUP], e.g. 10:1)")))?,
                )
            }
        }
        "max_ops" => opts.max_steps = Some(v.parse().map_err(|_| bad())?),
        "events" => {
            crate::tracepoints::Tracepoints::parse(v).map_err(|e| Error::Knob(format!("--set {k}={v}: {e}")))?;
            opts.events = (!v.is_empty()).then(|| v.to_string());
        }
        "max_host_memory" => opts.max_host_memory = Some(size()?),
        "max_memory" => opts.max_memory = Some(size()?),
        _ => {
            return Err(Error::Knob(format!(
                "--set {k}: unknown engine option (known: engine.fast_forward, engine.sample, \
                 engine.max_ops, engine.max_memory, engine.max_host_memory, engine.schedule, engine.events, \
                 engine.fork_cgroup)"
            )))
        }
    }
    Ok(())
}

/// Boot the machine and its kernel and start the first process, within the limits; also the
/// knobs' effective values, as the report names them.
fn boot(
    w: &Workload,
    knobs: Knobs,
    hw_sets: &[(String, String)],
    opts: &RunOptions,
) -> Result<(Interp, Vec<(String, String)>), Error> {
    let profile = crate::hw::profile::builtin(&w.machine.profile, hw_sets)?;
    let geo = profile.geometry();
    let limit = opts.max_memory.unwrap_or(DEFAULT_MAX_MEMORY);
    if w.machine.memory.0 > limit {
        return Err(Error::Limit(format!(
            "machine.memory: {} GiB is over the limit of {} GiB of simulated memory (each simulated GiB takes \
             about 15 MB of host memory; raise it with --max-memory / --set engine.max_memory=SIZE)",
            w.machine.memory.0 >> 30,
            limit >> 30
        )));
    }
    // The frames' metadata is allocated at boot: refuse a machine whose metadata alone would
    // pass the host-memory limit before allocating it.
    let host_limit = opts.max_host_memory.unwrap_or(DEFAULT_MAX_HOST_MEMORY);
    let metadata = w.machine.memory.0 / geo.page_size() * crate::kernel::page_alloc::FRAME_METADATA_BYTES;
    if metadata > host_limit {
        return Err(Error::Limit(format!(
            "machine.memory: {} of simulated memory takes {} of frame metadata, over engine.max_host_memory ({}); \
             raise it with --set engine.max_host_memory=SIZE",
            human(w.machine.memory.0),
            human(metadata),
            size_text(host_limit)
        )));
    }
    let machine = crate::hw::machine::Machine::with_memory(profile, w.machine.cpus as usize, w.machine.memory.0);
    let effective = knobs.effective();
    let mut kernel = Kernel::new(w.machine.memory.0, knobs, geo);
    kernel.sabotage = opts.sabotage;
    let b = &machine.p.block;
    kernel.blk.timing = crate::kernel::blkdev::BlockTiming {
        read_latency_ns: b.read_latency_ns,
        read_bandwidth: b.read_bandwidth,
        write_latency_ns: b.write_latency_ns,
        write_bandwidth: b.write_bandwidth,
        rotational: b.rotational,
    };
    kernel.cost = crate::kernel::ReclaimCost {
        reclaim_scan: machine.p.cost.reclaim_scan,
        reclaim_pageout: machine.p.cost.reclaim_pageout,
        freq_ghz: machine.p.cpu.freq_ghz,
    };
    kernel.slab_sizes = machine.p.slab.sizes();
    kernel.nr_cpus = w.machine.cpus as usize;
    kernel.swapon_all(&w.machine.swap);
    kernel.mem_cgroup_create_all(&w.cgroups);
    let first_cpu = w.cpu.unwrap_or(0) as usize % w.machine.cpus as usize;
    let mut it = Interp::new(kernel, machine, w.program.clone(), first_cpu, opts.check)?;
    // A CPU given pins the first process there (sched_setaffinity), as a fork's `cpu` does.
    it.tasks[0].pinned = w.cpu.is_some();
    if let (Some(c), Some(mm)) = (&w.cgroup, it.tasks[0].mm) {
        let id = it.kernel.memcg.lookup(c).expect("validated: the cgroup is declared");
        it.kernel.mm_move_memcg(mm, id);
    }
    // A workload that names the first process's CPU pins it there.
    it.tasks[0].pinned = w.cpu.is_some();
    if let (Some(b), Some(mm)) = (w.start_brk, it.tasks[0].mm) {
        let m = it.kernel.mm_mut(mm);
        (m.start_brk, m.brk) = (b.0, b.0);
    }
    it.check_invariants_each_op = opts.invariants_each_op;
    it.fast_forward = opts.fast_forward.unwrap_or(true);
    it.comm = w.name.clone();
    if let Some(spec) = &opts.events {
        let tp =
            crate::tracepoints::Tracepoints::parse(spec).map_err(|e| Error::Knob(format!("engine.events: {e}")))?;
        it.kernel.tp = Some(Box::new(tp));
        // Every event happens: no loop iteration is skipped by fast-forward.
        it.fast_forward = false;
    }
    it.sample = opts.sample;
    it.max_steps = opts.max_steps.unwrap_or(DEFAULT_MAX_OPS);
    it.serial = opts.serial.unwrap_or(false);
    it.fork_from_root = opts.fork_from_root.unwrap_or(false);
    it.max_host_memory = host_limit;
    if it.check_host_memory() {
        return Err(host_limit_error(&it, host_limit, w));
    }
    Ok((it, effective))
}

/// Run the scheduler's rounds to the end, taking the snapshots asked for and reporting
/// progress; an error when a limit stops the run.
fn run_rounds(it: &mut Interp, opts: &RunOptions, w: &Workload) -> Result<Vec<Snapshot>, Error> {
    let host_limit = it.max_host_memory;
    let mut snapshots = Vec::new();
    let mut rounds = 0u64;
    loop {
        let more = it.round();
        rounds += 1;
        if let Some(p) = opts.progress.as_ref().filter(|_| rounds.is_multiple_of(PROGRESS_ROUNDS)) {
            (p.0)(&Progress {
                steps: it.steps,
                max_steps: it.max_steps,
                tasks: it.tasks.len(),
                pids: it.pid_allocated,
                host_bytes: it.host_usage().total(),
                max_host_bytes: host_limit,
            });
        }
        for (label, pid) in std::mem::take(&mut it.snapshot_requests) {
            snapshots.push(snapshot(it, &label, pid));
            it.host_bytes_extra += SNAPSHOT_HOST_BYTES + it.tasks.len() as u64 * STATUS_HOST_BYTES;
            it.check_host_memory();
        }
        if let Some(e) = it.replay_error.take() {
            return Err(Error::Trace(e));
        }
        if it.steps >= it.max_steps {
            return Err(Error::Limit(format!("the run exceeded --max-ops ({} operations)", it.max_steps)));
        }
        if it.host_limit_hit {
            return Err(host_limit_error(it, host_limit, w));
        }
        if !more {
            return Ok(snapshots);
        }
    }
}

/// The run's checks at its end: conservation once every process is gone, and the events
/// with the invariant violation found, if any.
fn final_checks(it: &mut Interp) -> (CheckSummary, bool, Vec<crate::report::Event>) {
    let mut check = it.check.clone();
    let mut failed = check.expect_failures > 0 || check.mismatches > 0;
    // Conservation: with every process gone, every frame is free but the reserved ones.
    if it.tasks.iter().all(|t| matches!(t.state, TaskState::Exited | TaskState::Killed)) {
        check.invariant_checks += 1;
        // The LRU batches' references go (lru_add_drain_all) before frames are counted.
        it.kernel.lru_add_drain_all();
        let inv = it.kernel.check_invariants().and_then(|_| {
            if it.kernel.all_free() {
                Ok(())
            } else {
                Err(crate::kernel::check::Violation(format!(
                    "conservation: {} frames still allocated after every process exited (page cache {})",
                    it.kernel.mem.nr_pages()
                        - it.kernel.mem.free_pages
                        - it.kernel.mem.reserved
                        - it.kernel.huge_zero_pages(),
                    it.kernel.stat.items[crate::kernel::vmstat::VmItem::NrFilePages]
                )))
            }
        });
        if let Err(e) = inv {
            it.invariant_violation.get_or_insert(e.0);
        }
    }
    let mut events = it.events.clone();
    if let Some(v) = &it.invariant_violation {
        failed = true;
        events.push(crate::report::Event { pid: 0, kind: "invariant".into(), message: v.clone() });
    }
    (check, failed, events)
}

/// The report's `sampling`: what was extrapolated, and each counter's 95% half-width.
fn sampling_report(it: &Interp, spec: crate::workload::interp::SampleSpec) -> crate::report::SamplingReport {
    let st = &it.sampling;
    let mut ci95 = Metrics::default();
    let freq = it.machine.p.cpu.freq_ghz * 1e9;
    let cycles = st.ci_sq.iter().find(|e| e.0 == "cycles").map_or(0.0, |e| e.1.sqrt());
    for (name, sq) in &st.ci_sq {
        ci95.push(name, sq.sqrt().round());
        if *name == "instructions" {
            ci95.push("task-clock", (cycles / freq * 1e6).round() / 1e3);
            ci95.push("seconds", (cycles / freq * 1e6).round() / 1e6);
        }
    }
    crate::report::SamplingReport {
        units: spec.units,
        warmup: spec.warmup,
        units_measured: st.units_measured,
        extrapolations: st.extrapolations,
        extrapolated_iterations: st.extrapolated_iterations,
        extrapolated_steps: st.extrapolated_steps,
        ci95,
    }
}

/// PMD-mapped anonymous THPs of one mm (smaps AnonHugePages; page-cache and shmem PMDs are
/// FilePmdMapped / ShmemPmdMapped), in kB.
fn anon_huge_kb(k: &Kernel, mm: MmId) -> i64 {
    use crate::kernel::mm::Backing;
    let mut n = 0;
    // smaps counts a shmem vma's huge pmds as ShmemPmdMapped and walks a hugetlb vma with
    // smaps_hugetlb_range: neither maps an anonymous THP, and their (often very many) ranges
    // are not looked at.
    let vmas = k.mm(mm).vmas.values().filter(|v| !matches!(v.backing, Backing::Shmem(_) | Backing::Hugetlb(_)));
    for v in vmas {
        let Some(mut a) = align_up(v.start, k.geo.hpage_pmd_size()) else { continue };
        while a + k.geo.hpage_pmd_size() <= v.end {
            if let Some(slot) = k.pmd_slot(mm, a) {
                let en = k.entry(slot.table, slot.idx);
                if en.present() && en.huge() && !k.is_huge_zero_pmd(en) && !k.is_hugetlb_pmd(en) && !k.is_file_pmd(en) {
                    n += 1;
                }
            }
            a += k.geo.hpage_pmd_size();
        }
    }
    n * k.geo.hpage_pmd_nr() as i64 * kb_per_page(k)
}

/// /proc/PID/status of a task (its last status if it has exited).
pub fn process_status(k: &Kernel, t: &Task, cpu: &crate::hw::profile::CpuSpec) -> ProcessStatus {
    if let (None, Some(s)) = (t.mm, &t.last_status) {
        let mut s = (**s).clone();
        s.perf = perf_metrics(&t.perf, t.page_faults, t.minflt, t.majflt, cpu, None);
        s.majflt = t.majflt;
        return s;
    }
    let mut st = ProcessStatus {
        pid: t.pid,
        tgid: t.tgid,
        ppid: t.ppid,
        state: t.state.name().into(),
        minflt: t.minflt,
        majflt: t.majflt,
        vm_rss: 0,
        vm_hwm: 0,
        rss_anon: 0,
        rss_file: 0,
        rss_shmem: 0,
        vm_pte: 0,
        vm_lck: 0,
        anon_huge_pages: 0,
        lazy_free: 0,
        hugetlb_pages: 0,
        vm_swap: 0,
        processor: t.cpu as u32,
        perf: perf_metrics(&t.perf, t.page_faults, t.minflt, t.majflt, cpu, None),
    };
    if let Some(mm) = t.mm {
        let m = k.mm(mm);
        st.rss_anon = m.rss[MmCounter::AnonPages as usize] * kb_per_page(k);
        st.rss_file = m.rss[MmCounter::FilePages as usize] * kb_per_page(k);
        st.rss_shmem = m.rss[MmCounter::ShmemPages as usize] * kb_per_page(k);
        st.vm_rss = st.rss_anon + st.rss_file + st.rss_shmem;
        st.vm_hwm = m.hiwater_rss * kb_per_page(k);
        st.vm_pte = m.pgtables_bytes / 1024;
        st.vm_lck = m.locked_vm * kb_per_page(k);
        st.anon_huge_pages = anon_huge_kb(k, mm);
        st.lazy_free = k.lazyfree_pages(mm) as i64 * kb_per_page(k);
        st.hugetlb_pages = m.hugetlb_usage * kb_per_page(k);
        st.vm_swap = m.swapents * kb_per_page(k);
    }
    st
}

/// The machine's counters now.
fn snapshot(it: &mut Interp, label: &str, pid: u32) -> Snapshot {
    // As the native runner's snapshot does (its mlock of a page drains the CPU's batches), so
    // that pglazyfree and LazyFree count what MADV_FREE has queued.
    it.kernel.lru_add_drain();
    it.kernel.sync_items();
    // Each cgroup's memory.stat read (memcg1_stat_format / memory_stat_format) flushes its
    // subtree's statistics, if enough updates are pending (mem_cgroup_flush_stats).
    for m in 1..it.kernel.memcg.groups.len() as u16 {
        it.kernel.mem_cgroup_flush_stats(m);
    }
    let k = &it.kernel;
    let mut total = PerfCounters::default();
    for t in &it.tasks {
        total.add(&t.perf);
    }
    // System-wide, as `perf stat -a` counts: kernel threads too.
    total.add(&it.kscrubd.perf);
    total.add(&it.khugepaged.perf);
    total.add(&it.kswapd.perf);
    let faults: i64 = it.tasks.iter().map(|t| t.page_faults).sum();
    let minflt: i64 = it.tasks.iter().map(|t| t.minflt).sum();
    let majflt: i64 = it.tasks.iter().map(|t| t.majflt).sum();
    let freq = it.machine.p.cpu.freq_ghz * 1e9;
    let elapsed = it.machine.clock.iter().fold(0.0, f64::max) / freq;
    let perf = perf_metrics(&total, faults, minflt, majflt, &it.machine.p.cpu, Some(elapsed));
    let profile = Metrics(total.profile.iter().map(|(k, v)| (k.to_string(), v.round())).collect());
    let mut vmstat = Counters::default();
    for (n, v) in k.stat.entries() {
        vmstat.push(n, v);
    }
    let items = &k.stat.items;
    let mut meminfo = Counters::default();
    meminfo.push("MemTotal", ((k.mem.nr_pages() - k.mem.reserved) as i64) * kb_per_page(k));
    meminfo.push("MemFree", items[VmItem::NrFreePages] * kb_per_page(k));
    meminfo.push("AnonPages", items[VmItem::NrAnonPages] * kb_per_page(k));
    meminfo.push("Buffers", 0);
    // Cached: the page cache (shmem included) less the swap cache and buffers (mmsim has none).
    meminfo.push("Cached", (items[VmItem::NrFilePages] - items[VmItem::NrSwapcached]) * kb_per_page(k));
    meminfo.push("Dirty", items[VmItem::NrDirty] * kb_per_page(k));
    meminfo.push("Mapped", items[VmItem::NrMapped] * kb_per_page(k));
    meminfo.push("Shmem", items[VmItem::NrShmem] * kb_per_page(k));
    meminfo.push("PageTables", items[VmItem::NrPageTablePages] * kb_per_page(k));
    let lru = |i: VmItem| items[i] * kb_per_page(k);
    meminfo.push("SwapCached", lru(VmItem::NrSwapcached));
    meminfo.push("Active", lru(VmItem::NrActiveAnon) + lru(VmItem::NrActiveFile));
    meminfo.push("Inactive", lru(VmItem::NrInactiveAnon) + lru(VmItem::NrInactiveFile));
    meminfo.push("Active(anon)", lru(VmItem::NrActiveAnon));
    meminfo.push("Inactive(anon)", lru(VmItem::NrInactiveAnon));
    meminfo.push("Active(file)", lru(VmItem::NrActiveFile));
    meminfo.push("Inactive(file)", lru(VmItem::NrInactiveFile));
    meminfo.push("Unevictable", lru(VmItem::NrUnevictable));
    meminfo.push("Mlocked", items[VmItem::NrMlock] * kb_per_page(k));
    let (swap_total, swap_free) = k.si_swapinfo();
    meminfo.push("SwapTotal", swap_total * kb_per_page(k));
    meminfo.push("SwapFree", swap_free * kb_per_page(k));
    meminfo.push("AnonHugePages", items[VmItem::NrAnonThps] * k.geo.hpage_pmd_nr() as i64 * kb_per_page(k));
    let thp_kb = k.geo.hpage_pmd_nr() as i64 * kb_per_page(k);
    meminfo.push("ShmemHugePages", items[VmItem::NrShmemThps] * thp_kb);
    meminfo.push("ShmemPmdMapped", items[VmItem::NrShmemPmdmapped] * thp_kb);
    meminfo.push("FileHugePages", items[VmItem::NrFileThps] * thp_kb);
    meminfo.push("FilePmdMapped", items[VmItem::NrFilePmdmapped] * thp_kb);
    // hugetlb_report_meminfo: page counts, not kB, but for Hugepagesize and Hugetlb.
    let h = &k.hugetlb;
    let hkb = k.geo.hpage_pmd_nr() as i64 * kb_per_page(k);
    meminfo.push("HugePages_Total", h.nr_huge_pages as i64);
    meminfo.push("HugePages_Free", h.free_huge_pages as i64);
    meminfo.push("HugePages_Rsvd", h.resv_huge_pages as i64);
    meminfo.push("HugePages_Surp", h.surplus_huge_pages as i64);
    meminfo.push("Hugepagesize", hkb);
    meminfo.push("Hugetlb", h.nr_huge_pages as i64 * hkb);
    let processes = it.tasks.iter().map(|t| process_status(k, t, &it.machine.p.cpu)).collect();
    let time = match pid {
        0 => elapsed,
        p => it.machine.clock[it.tasks[(p - 1) as usize].cpu] / freq,
    };
    let cpus = it
        .machine
        .cpus
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut m = Metrics::default();
            m.push("cpu", i as f64);
            m.push("busy-seconds", (c.busy / freq * 1e6).round() / 1e6);
            let ks = it.kscrubd.cpu_cycles.get(i).copied().unwrap_or(0.0);
            m.push("kscrubd-seconds", (ks / freq * 1e6).round() / 1e6);
            m
        })
        .collect();
    let ks = &it.kscrubd;
    let mut kthreads = vec![crate::report::KthreadStatus {
        name: "kscrubd".into(),
        running: ks.running,
        cpu: ks.cpu as u32,
        blocks: ks.blocks,
        pages: ks.pages,
        perf: perf_metrics(&ks.perf, 0, 0, 0, &it.machine.p.cpu, None),
        khugepaged: None,
    }];
    if k.knobs.file_text == crate::kernel::knobs::FileText::Khugepaged {
        let kh = &it.khugepaged;
        let state = &k.khugepaged;
        kthreads.push(crate::report::KthreadStatus {
            name: "khugepaged".into(),
            running: kh.ready_at.is_some() && !kh.sleeping,
            cpu: kh.cpu as u32,
            blocks: 0,
            pages: 0,
            perf: perf_metrics(&kh.perf, 0, 0, 0, &it.machine.p.cpu, None),
            khugepaged: Some(crate::report::KhugepagedStatus {
                pages_collapsed: state.pages_collapsed,
                full_scans: state.full_scans,
                wakeups: kh.wakeups,
                scan_results: state.results.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            }),
        });
    }
    if it.kswapd.wakeups > 0 {
        let kw = &it.kswapd;
        kthreads.push(crate::report::KthreadStatus {
            name: "kswapd0".into(),
            running: kw.ready_at.is_some(),
            cpu: kw.cpu as u32,
            blocks: 0,
            pages: 0,
            perf: perf_metrics(&kw.perf, 0, 0, 0, &it.machine.p.cpu, None),
            khugepaged: None,
        });
    }
    let gbps = it.machine.p.memory.bandwidth;
    let memory = it
        .machine
        .dram_bytes()
        .into_iter()
        .enumerate()
        .map(|(node, bytes)| {
            let mut m = Metrics::default();
            m.push("node", node as f64);
            m.push("dram-bytes", bytes as f64);
            m.push("dram-busy-seconds", (bytes as f64 / (gbps * 1e9) * 1e6).round() / 1e6);
            m
        })
        .collect();
    let cgroups = cgroup_status(k);
    let swaps = k
        .proc_swaps()
        .into_iter()
        .map(|(filename, kind, size, used, priority)| crate::report::SwapStatus {
            filename,
            kind: kind.into(),
            size,
            used,
            priority,
        })
        .collect();
    Snapshot {
        label: label.into(),
        pid,
        perf,
        profile,
        vmstat,
        meminfo,
        processes,
        time,
        cpus,
        kthreads,
        memory,
        cgroups,
        swaps,
    }
}

/// The declared memory cgroups' files, as cgroup v2 shows them: the page counters in bytes,
/// `memory.stat` as a read shows it (the statistics rstat last flushed: `memcg_stat`), the live
/// statistics beside it (`memory.stat.live`), `memory.events` and `memory.swap.events`.
fn cgroup_status(k: &Kernel) -> std::collections::BTreeMap<String, crate::report::CgroupStatus> {
    use crate::kernel::memcontrol::{MEMCG_EVENT_NAMES, ROOT_MEMCG};
    use crate::report::Counters;
    let ps = k.geo.page_size() as i64;
    let mut out = std::collections::BTreeMap::new();
    for (i, g) in k.memcg.groups.iter().enumerate() {
        if i as u16 == ROOT_MEMCG {
            continue;
        }
        let named = |v: &[u64]| {
            let mut c = Counters::default();
            for (n, x) in MEMCG_EVENT_NAMES.iter().zip(v) {
                c.push(n, *x as i64);
            }
            c
        };
        let mut swap_events = Counters::default();
        for (n, x) in ["high", "max", "fail"].iter().zip(g.swap_events) {
            swap_events.push(n, x as i64);
        }
        let max =
            if g.memory.max >= crate::kernel::memcontrol::PAGE_COUNTER_MAX { -1 } else { g.memory.max as i64 * ps };
        let v1 = k.memcg_v1().then(|| memcg1_status(k, i));
        out.insert(
            g.name.clone(),
            crate::report::CgroupStatus {
                current: g.memory.usage as i64 * ps,
                peak: g.memory.local_watermark as i64 * ps,
                swap_current: g.swap.usage as i64 * ps,
                swap_peak: g.swap.local_watermark as i64 * ps,
                max,
                stat: memcg_stat(k, i, true),
                stat_live: memcg_stat(k, i, false),
                events: named(&g.events),
                events_local: named(&g.events_local),
                swap_events,
                v1,
            },
        );
    }
    out
}

/// A cgroup's memory.stat: v2's (`memory_stat_format`) or, under `cgroup/memory=v1`, v1's
/// (`memcg1_stat_format`), from the statistics as rstat last flushed them (`flushed`: what a
/// read of the file shows) or as they stand.
fn memcg_stat(k: &Kernel, i: usize, flushed: bool) -> crate::report::Counters {
    use crate::kernel::vmstat::VmEvent as E;
    use crate::report::Counters;
    if k.memcg_v1() {
        return memcg1_stat_format(k, i, flushed);
    }
    let ps = k.geo.page_size() as i64;
    let thp = ps * k.geo.hpage_pmd_nr() as i64;
    let g = &k.memcg.groups[i];
    let st = if flushed { &g.flushed } else { &g.stat };
    let it = &st.items;
    let ev = &st.events;
    let mut stat = Counters::default();
    let extra = if flushed { &g.extra_flushed } else { &g.extra };
    stat.push("anon", it[VmItem::NrAnonPages] * ps);
    stat.push("file", it[VmItem::NrFilePages] * ps);
    // MEMCG_KMEM: every page charged as kernel memory (page tables, kernel stacks).
    stat.push("kernel", extra[crate::kernel::memcontrol::EXTRA_KMEM] * ps);
    stat.push("kernel_stack", it[VmItem::NrKernelStack] * 1024);
    for (name, item) in [
        ("pagetables", VmItem::NrPageTablePages),
        ("shmem", VmItem::NrShmem),
        ("file_mapped", VmItem::NrMapped),
        ("file_dirty", VmItem::NrDirty),
        ("file_writeback", VmItem::NrWriteback),
        ("swapcached", VmItem::NrSwapcached),
    ] {
        stat.push(name, it[item] * ps);
    }
    stat.push("anon_thp", it[VmItem::NrAnonThps] * thp);
    for (name, item) in [
        ("inactive_anon", VmItem::NrInactiveAnon),
        ("active_anon", VmItem::NrActiveAnon),
        ("inactive_file", VmItem::NrInactiveFile),
        ("active_file", VmItem::NrActiveFile),
        ("unevictable", VmItem::NrUnevictable),
    ] {
        stat.push(name, it[item] * ps);
    }
    // The slab objects charged to it (NR_SLAB_*_B, in bytes), then their sum.
    use crate::kernel::memcontrol::{EXTRA_SLAB_RECLAIMABLE_B, EXTRA_SLAB_UNRECLAIMABLE_B};
    stat.push("slab_reclaimable", extra[EXTRA_SLAB_RECLAIMABLE_B]);
    stat.push("slab_unreclaimable", extra[EXTRA_SLAB_UNRECLAIMABLE_B]);
    stat.push("slab", extra[EXTRA_SLAB_RECLAIMABLE_B] + extra[EXTRA_SLAB_UNRECLAIMABLE_B]);
    stat.push("pgscan", ev[E::PgscanKswapd] + ev[E::PgscanDirect] + ev[E::PgscanKhugepaged] + ev[E::PgscanProactive]);
    stat.push(
        "pgsteal",
        ev[E::PgstealKswapd] + ev[E::PgstealDirect] + ev[E::PgstealKhugepaged] + ev[E::PgstealProactive],
    );
    for (name, e) in [
        ("pswpin", E::Pswpin),
        ("pswpout", E::Pswpout),
        ("pgscan_kswapd", E::PgscanKswapd),
        ("pgscan_direct", E::PgscanDirect),
        ("pgscan_khugepaged", E::PgscanKhugepaged),
        ("pgscan_proactive", E::PgscanProactive),
        ("pgsteal_kswapd", E::PgstealKswapd),
        ("pgsteal_direct", E::PgstealDirect),
        ("pgsteal_khugepaged", E::PgstealKhugepaged),
        ("pgsteal_proactive", E::PgstealProactive),
        ("pgfault", E::PgFault),
        ("pgmajfault", E::PgMajFault),
        ("pgrefill", E::PgRefill),
        ("pgactivate", E::PgActivate),
        ("pgdeactivate", E::PgDeactivate),
        ("pglazyfree", E::PgLazyFree),
        ("pglazyfreed", E::PgLazyFreed),
        ("swpin_zero", E::SwpinZero),
        ("swpout_zero", E::SwpoutZero),
        ("thp_fault_alloc", E::ThpFaultAlloc),
        ("thp_swpout", E::ThpSwpout),
        ("thp_swpout_fallback", E::ThpSwpoutFallback),
    ] {
        stat.push(name, ev[e]);
    }
    for (name, item) in [
        ("workingset_refault_anon", VmItem::WorkingsetRefaultAnon),
        ("workingset_refault_file", VmItem::WorkingsetRefaultFile),
        ("workingset_activate_anon", VmItem::WorkingsetActivateAnon),
        ("workingset_activate_file", VmItem::WorkingsetActivateFile),
        ("workingset_restore_anon", VmItem::WorkingsetRestoreAnon),
        ("workingset_restore_file", VmItem::WorkingsetRestoreFile),
    ] {
        stat.push(name, it[item]);
    }
    stat
}

/// cgroup v1's memory.stat (`memcg1_stat_format`): the local statistics, the limits of the
/// hierarchy, then the hierarchical `total_*` ones. Sizes in bytes, workingset in pages.
fn memcg1_stat_format(k: &Kernel, i: usize, flushed: bool) -> crate::report::Counters {
    use crate::kernel::memcontrol::{EXTRA_PGPGIN, EXTRA_PGPGOUT, EXTRA_SWAP, PAGE_COUNTER_MAX};
    use crate::kernel::vmstat::VmEvent as E;
    let ps = k.geo.page_size() as i64;
    let thp = ps * k.geo.hpage_pmd_nr() as i64;
    let g = &k.memcg.groups[i];
    let mut out = crate::report::Counters::default();
    for total in [false, true] {
        let (st, extra) = match (total, flushed) {
            (true, true) => (&g.flushed, &g.extra_flushed),
            (true, false) => (&g.stat, &g.extra),
            (false, true) => (&g.flushed_local, &g.extra_flushed_local),
            (false, false) => (&g.stat_local, &g.extra_local),
        };
        let p = if total { "total_" } else { "" };
        let it = &st.items;
        for (name, v) in [
            ("cache", it[VmItem::NrFilePages] * ps),
            ("rss", it[VmItem::NrAnonPages] * ps),
            ("rss_huge", it[VmItem::NrAnonThps] * thp),
            ("shmem", it[VmItem::NrShmem] * ps),
            ("mapped_file", it[VmItem::NrMapped] * ps),
            ("dirty", it[VmItem::NrDirty] * ps),
            ("writeback", it[VmItem::NrWriteback] * ps),
            ("workingset_refault_anon", it[VmItem::WorkingsetRefaultAnon]),
            ("workingset_refault_file", it[VmItem::WorkingsetRefaultFile]),
            ("swap", extra[EXTRA_SWAP] * ps),
            ("swapcached", it[VmItem::NrSwapcached] * ps),
            ("pgpgin", extra[EXTRA_PGPGIN]),
            ("pgpgout", extra[EXTRA_PGPGOUT]),
            ("pgfault", st.events[E::PgFault]),
            ("pgmajfault", st.events[E::PgMajFault]),
            ("inactive_anon", it[VmItem::NrInactiveAnon] * ps),
            ("active_anon", it[VmItem::NrActiveAnon] * ps),
            ("inactive_file", it[VmItem::NrInactiveFile] * ps),
            ("active_file", it[VmItem::NrActiveFile] * ps),
            ("unevictable", it[VmItem::NrUnevictable] * ps),
        ] {
            out.push(&format!("{p}{name}"), v);
        }
        if !total {
            let (mut memory, mut memsw) = (PAGE_COUNTER_MAX, PAGE_COUNTER_MAX);
            let mut cur = Some(i as u16);
            while let Some(c) = cur {
                let m = &k.memcg.groups[c as usize];
                memory = memory.min(m.memory.max);
                memsw = memsw.min(m.memsw.max);
                cur = m.parent;
            }
            out.push("hierarchical_memory_limit", memory as i64 * ps);
            out.push("hierarchical_memsw_limit", memsw as i64 * ps);
        }
    }
    out
}

/// The files only cgroup v1's memory controller has (mm/memcontrol-v1.c's cftypes).
fn memcg1_status(k: &Kernel, i: usize) -> crate::report::CgroupV1Status {
    use crate::kernel::memcontrol::MemcgEvent;
    let ps = k.geo.page_size() as i64;
    let g = &k.memcg.groups[i];
    let mut oom_control = crate::report::Counters::default();
    // oom_kill_disable is not modelled: 0, and so no task ever waits under_oom.
    oom_control.push("oom_kill_disable", 0);
    oom_control.push("under_oom", 0);
    oom_control.push("oom_kill", g.events_local[MemcgEvent::OomKill as usize] as i64);
    crate::report::CgroupV1Status {
        usage_in_bytes: g.memory.usage as i64 * ps,
        max_usage_in_bytes: g.memory.watermark as i64 * ps,
        limit_in_bytes: g.memory.max as i64 * ps,
        failcnt: g.memory.failcnt as i64,
        memsw_usage_in_bytes: g.memsw.usage as i64 * ps,
        memsw_max_usage_in_bytes: g.memsw.watermark as i64 * ps,
        memsw_limit_in_bytes: g.memsw.max as i64 * ps,
        oom_control,
    }
}

/// The perf-stat view of a set of counts (`seconds` only for the whole run).
pub fn perf_metrics(
    p: &PerfCounters,
    faults: i64,
    minflt: i64,
    majflt: i64,
    cpu: &crate::hw::profile::CpuSpec,
    elapsed: Option<f64>,
) -> Metrics {
    let freq = cpu.freq_ghz * 1e9;
    let mut m = Metrics::default();
    m.push("page-faults", faults as f64);
    m.push("minor-faults", minflt as f64);
    m.push("major-faults", majflt as f64);
    // perf stat's order: task-clock and the elapsed time after the instructions.
    for (name, v) in p.fields() {
        let v = if name == "stalled-cycles-frontend" { cpu.stalled_frontend(p.cycles, p.instructions, v) } else { v };
        m.push(name, v.round());
        if name == "instructions" {
            m.push("task-clock", (p.cycles / freq * 1e3 * 1e3).round() / 1e3);
            if let Some(e) = elapsed {
                m.push("seconds", (e * 1e6).round() / 1e6);
            }
        }
    }
    m
}
