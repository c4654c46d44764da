//! The workload interpreter: processes running programs under a deterministic round-robin
//! scheduler, turning ops into system calls and memory accesses, with the reference model
//! checking every byte read when asked.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use super::spec::*;
use crate::hw::machine::{Machine, Translation};
use crate::hw::perf::PerfCounters;
use crate::kernel::content::PageContent;
use crate::kernel::fault::{Access, FaultOutcome};
use crate::kernel::{Kernel, MmId, Work};
use crate::oracle::Oracle;
use crate::report::{CheckSummary, Event};
use crate::units::Pfn;

mod access;
mod champsim;
#[cfg(test)]
mod champsim_tests;
mod events;
#[cfg(test)]
mod events_tests;
mod fast_forward;
mod files;
mod host_memory;
mod khugepaged;
mod kscrubd;
#[cfg(test)]
mod kscrubd_tests;
mod kswapd;
#[cfg(test)]
mod limit_tests;
mod process;
mod relocs;
mod replay;
mod replay_syscalls;
#[cfg(test)]
mod replay_tests;
mod runqueue;
mod sample;
#[cfg(test)]
mod sample_tests;
mod sched;
#[cfg(test)]
mod sched_tests;
#[cfg(test)]
mod serial_tests;
mod syscalls;

pub use host_memory::HostUsage;
use host_memory::*;
pub use khugepaged::Khugepaged;
pub use kscrubd::{Kscrubd, LoadAvg};
pub use kswapd::Kswapd;
pub use replay::{NoopCall, Replay, ReplayReport};
pub use sample::{student_t95, SampleSpec, SamplingStats};

/// Pages a task touches (or syscalls it makes) before the scheduler moves on.
pub const QUANTUM: u64 = 64;
/// Cycles a CPU may run ahead of the next-earliest busy CPU before it yields (keeps shared
/// state such as a contended atomic interleaved in time order).
const SLICE_SLACK: f64 = 500.0;
/// Consecutive VM_FAULT_OOM retries of one access before the task is killed.
const OOM_RETRIES: u32 = 64;
/// Events kept in the report (the rest are counted).
const MAX_EVENTS: usize = 200;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    Running,
    Waiting,
    /// In a `sleep` op until its wake time.
    Sleeping,
    Exited,
    Killed,
}

impl TaskState {
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Running | TaskState::Waiting | TaskState::Sleeping => "running",
            TaskState::Exited => "exited",
            TaskState::Killed => "killed",
        }
    }
}

struct Frame {
    ops: Rc<Vec<Op>>,
    pc: usize,
    /// Further iterations of this body after the current one.
    remaining: u64,
    /// The state when the current iteration began (loops long enough to fast-forward).
    mark: Option<IterMark>,
    /// `engine.sample`: the loop's warm-up, units and extrapolation.
    sample: Option<Box<sample::SampleState>>,
}

/// What a loop iteration started from: if the next one starts from the same state, every
/// later iteration repeats it exactly.
struct IterMark {
    digest: u64,
    perf: PerfCounters,
    faults: i64,
    /// A digest of every vmstat counter: an iteration that changes one (a system call, a
    /// fault, kernel work) does not repeat in the counts the report shows.
    kernel: u64,
    steps: u64,
    /// `Interp::outputs` then: an iteration that takes a snapshot or reports an event has an
    /// output of its own, which a skipped iteration would lose.
    outputs: u64,
    /// The loop's remaining iterations when the mark was taken.
    remaining: u64,
}

/// Iterations shorter than this many steps are not considered for fast-forward (the state
/// digest would cost more than running them).
const FAST_FORWARD_MIN_STEPS: u64 = 2048;

/// A read/write/compare in progress (so a long op can be preempted).
#[derive(Clone, Copy)]
enum Cursor {
    Idle,
    Access {
        write: bool,
        next: u64,
        end: u64,
        stride: u64,
        /// Bytes touched at each step, every `block_stride` (0: one access per step).
        block: u64,
        block_stride: u64,
        value: u8,
        expect: Option<u8>,
        failed: bool,
    },
    Compare {
        a: u64,
        b: u64,
        pos: u64,
        len: u64,
        expect: Option<bool>,
        stride: u64,
    },
    Atomic {
        addr: u64,
        remaining: u64,
        hold: u64,
    },
    Fetch {
        next: u64,
        end: u64,
        stride: u64,
    },
    /// A `replay` op: the task replays its recorded thread (`Task::replay`).
    Replay,
    /// A `pattern: "random"` read, write or fetch: `left` more accesses, each to one of
    /// `slots` slots of `stride` bytes from `base`, drawn with splitmix64 (state `rng`).
    Random {
        kind: Access,
        base: u64,
        slots: u64,
        stride: u64,
        left: u64,
        rng: u64,
        block: u64,
        block_stride: u64,
        value: u8,
        expect: Option<u8>,
        failed: bool,
    },
}

/// How an access is named in an event.
fn access_name(a: Access) -> &'static str {
    match a {
        Access::Read => "read",
        Access::Write => "write",
        Access::Exec => "instruction fetch",
    }
}

/// A simulated process.
pub struct Task {
    pub pid: u32,
    /// Thread group: the pid of the process this task is a thread of (its own pid for a
    /// process). The reference model keys address spaces by it.
    pub tgid: u32,
    pub ppid: u32,
    pub mm: Option<MmId>,
    frames: Vec<Frame>,
    regions: HashMap<String, (u64, u64)>,
    pub state: TaskState,
    /// min_flt.
    pub minflt: i64,
    /// maj_flt: faults that waited for the block device (a retried fault counts as major).
    pub majflt: i64,
    /// Hardware page faults taken (perf's page-faults: every #PF, failed ones included).
    pub page_faults: i64,
    children: Vec<u32>,
    cursor: Cursor,
    /// Status captured when the task exited (rss and VmPTE just before teardown).
    pub last_status: Option<Box<crate::report::ProcessStatus>>,
    /// The CPU the task runs on (placed at creation; idle balancing may move it).
    pub cpu: usize,
    /// Its CPU was given (the workload's `cpu`): its affinity is that one CPU
    /// (`sched_setaffinity`), so no balancing moves it.
    pub pinned: bool,
    /// The memcg its kernel stack is charged to (`alloc_thread_stack`: its creator's; NO_MEMCG
    /// for the first process, made before the workload, and where nothing was charged).
    pub stack_memcg: u16,
    /// Serial schedule: the memcg to charge its kernel stack to when it starts (a task of an
    /// op after the first: the runner makes it only once the one before has ended).
    pub stack_pending: Option<u16>,
    /// Hardware and software event counts of this task.
    pub perf: PerfCounters,
    /// The CPU clock when the task exited (a parent waiting on it wakes no earlier).
    pub exit_clock: f64,
    /// Kernel work on a contended line (zone->lock, an atomic) that this task queued but has
    /// not yet done: it waits here while the task is ahead of another CPU's clock, so that
    /// CPUs take their turns on the line in time order (see `charge_work`).
    pending: VecDeque<Work>,
    /// `release_task` has run: the task's pid is free again (see `Interp::pid_allocated`).
    reaped: bool,
    /// `wait`: the children before this index have exited and been reaped by this task.
    waited: usize,
    /// `wait`: the latest exit clock of the children reaped so far (it wakes no earlier).
    wait_clock: f64,
    /// `sleep`: the clock at which it wakes.
    wake_at: f64,
    /// A `replay`: the recorded thread the task replays, what it waits for, and whether it
    /// has exec'd (a vfork parent waits for that).
    replay: Option<Box<replay::ReplayTask>>,
    replay_wait: Option<replay::ReplayWait>,
    vfork_done: bool,
    /// `wake_at` is a time of the machine (`sleep` with `until_ms`), not a delay.
    wake_absolute: bool,
}

impl Task {
    /// A task about to run `ops` from their start, with nothing counted yet (`copy_process`'s
    /// fresh task_struct; the first process's, or a fork's or clone's child's).
    fn new(
        pid: u32,
        tgid: u32,
        ppid: u32,
        mm: MmId,
        ops: Rc<Vec<Op>>,
        regions: HashMap<String, (u64, u64)>,
        cpu: usize,
    ) -> Task {
        Task {
            pid,
            tgid,
            ppid,
            mm: Some(mm),
            frames: vec![Frame { ops, pc: 0, remaining: 0, mark: None, sample: None }],
            regions,
            state: TaskState::Running,
            minflt: 0,
            majflt: 0,
            page_faults: 0,
            children: Vec::new(),
            cursor: Cursor::Idle,
            last_status: None,
            cpu,
            pinned: false,
            stack_memcg: crate::kernel::memcontrol::NO_MEMCG,
            stack_pending: None,
            perf: PerfCounters::default(),
            exit_clock: 0.0,
            pending: VecDeque::new(),
            reaped: false,
            waited: 0,
            wait_clock: 0.0,
            wake_at: 0.0,
            wake_absolute: false,
            replay: None,
            replay_wait: None,
            vfork_done: false,
        }
    }

    /// The scheduler may run it: its program, or its pending kernel work after it exited.
    fn runnable(&self) -> bool {
        self.state == TaskState::Running || !self.pending.is_empty()
    }
}

/// A task's place in the scheduler (`struct sched_entity`'s part mmsim keeps).
#[derive(Clone, Copy, Debug, Default)]
struct SchedEntity {
    /// Scheduling order among tasks sharing a CPU: the `run_seq` of its last quantum.
    last_run: u64,
    /// In its CPU's runqueue (`on_rq`): `rq_update` keeps it equal to `Task::runnable`.
    queued: bool,
    /// Cycles of slice it was given to run when next switched in, instead of a new slice
    /// (0: none): the O(1) scheduler's split of a parent's timeslice at fork (`sched_fork`).
    slice_left: f64,
    /// The CPU time at which it last became runnable or last stopped running (an idle CPU
    /// that pulls it runs it no earlier).
    ready_at: f64,
}

/// Why an access stopped the task.
enum Stop {
    Dead,
}

/// The interpreter state.
pub struct Interp {
    pub kernel: Kernel,
    pub machine: Machine,
    run_seq: u64,
    /// The running task's cycle count when its quantum began.
    quantum_base: f64,
    /// The running task yields once its cycle count passes this (another CPU is behind).
    time_limit: f64,
    pub tasks: Vec<Task>,
    pub oracle: Option<Oracle>,
    pub check: CheckSummary,
    pub events: Vec<Event>,
    pub events_dropped: u64,
    /// Labels reached by `snapshot` ops, in order, for the caller to record.
    /// Snapshots asked for since the last round: (label, pid of the asking task).
    pub snapshot_requests: Vec<(String, u32)>,
    /// Check invariants after every system call and every handled fault (fuzz mode).
    pub check_invariants_each_op: bool,
    /// Faults handled in the run (the fuzz mode's check spacing: `fault_check_due`).
    pub faults_handled: u64,
    pub invariant_violation: Option<String>,
    /// Memory operations executed (steps), for limits and statistics.
    pub steps: u64,
    /// Loop iterations skipped by exact fast-forward, and the steps they stand for.
    pub fast_forwarded: u64,
    /// Snapshots asked for and events reported so far (fast-forward skips no iteration that
    /// has either).
    outputs: u64,
    pub fast_forward_steps: u64,
    /// Whether loops may be fast-forwarded.
    pub fast_forward: bool,
    /// `engine.sample`: loops are sampled (and not fast-forwarded).
    pub sample: Option<SampleSpec>,
    /// What sampling did, and its confidence intervals.
    pub sampling: SamplingStats,
    pub max_steps: u64,
    /// `engine.schedule=serial` (mmsim's own): a task created by a fork or thread op runs to
    /// its end before the next task of its batch, and the batch before its creator goes on.
    pub serial: bool,
    /// `engine.fork_cgroup=root` (mmsim's own): fork ops fork from the root cgroup.
    pub fork_from_root: bool,
    /// Set by a serial fork or thread op for its tasks after the first: their kernel stacks
    /// are charged when they start (`Task::stack_pending`).
    defer_stack: bool,
    /// Serial schedule: the batches of tasks that fork and thread ops created and that have
    /// not all finished, innermost last.
    serial_stack: Vec<SerialBatch>,
    /// Each CPU's runqueue (`struct rq`, kernel/sched/sched.h): its runnable tasks by
    /// (last_run, index), so the first is the one that ran least recently (tasks that never
    /// ran by pid). Unlike Linux's, no task migrates between CPUs.
    rq: Vec<runqueue::RunQueue>,
    /// Each task's scheduling state, compactly (`round` reads every busy CPU's current task's).
    sched: Vec<SchedEntity>,
    /// Each busy CPU's `pick_next_task` as `round` last computed it, and the CPUs whose
    /// runqueue, current task or slice changed since (their clocks' changes are recorded by
    /// `Clocks`): only those are computed again.
    next_task: Vec<(u64, usize)>,
    sched_changed: runqueue::CpuSet,
    /// The CPUs whose runqueue is not empty.
    busy_cpus: runqueue::CpuSet,
    /// Each CPU's current task (`rq->curr`) and the CPU clock at which its slice ends (the
    /// first tick after `sched/base_slice_ns` of running): until then it keeps the CPU while
    /// it is runnable, as EEVDF's RUN_TO_PARITY keeps it to its deadline (a task that wakes
    /// meanwhile waits; Linux may let it preempt a task that has run less than its slice).
    curr: Vec<Option<usize>>,
    slice_end: Vec<f64>,
    /// Bumped when a task becomes runnable or stops being so, or a CPU switches tasks: only
    /// then can an idle CPU find a task to pull that it did not find before (`idle_balance`).
    balance_gen: u64,
    balance_seen: u64,
    /// Tasks blocked in `wait` (indices), in the order they began waiting.
    waiters: Vec<usize>,
    /// Bumped whenever a task may have finished (exited, or done the last of its pending work
    /// after exiting) or began to wait; `waiters_seen`: its value when `round` last looked at
    /// the waiters (no waiter can wake before it changes).
    finish_gen: u64,
    waiters_seen: u64,
    /// Tasks in all runqueues (`nr_running`).
    nr_running: u64,
    /// Pids in use (`pid_namespace->pid_allocated`): every task not yet reaped, zombies
    /// included. mmsim's pids keep counting up (a task's pid is its index + 1, never reused);
    /// `kernel/pid_max` bounds only how many are in use at once.
    pub pid_allocated: u32,
    /// The task that created each mm (by MmId): the first of its users (`mm->owner`).
    mm_owner: Vec<usize>,
    /// The child mm of a fork in progress (no task uses it yet): reclaim's discards of its
    /// lazyfree pages wait for the reference model's copy of the parent.
    forking: Option<MmId>,
    /// `engine.max_host_memory`: the run stops when the simulator's own memory
    /// (`host_usage`) would pass this many bytes.
    pub max_host_memory: u64,
    /// Set when `host_usage` passed `max_host_memory`: the run stops (the caller reports it).
    pub host_limit_hit: bool,
    /// Host bytes the caller holds for the run (snapshots taken), counted in `host_usage`.
    pub host_bytes_extra: u64,
    /// Estimated host bytes of the task records (see `task_host_bytes`).
    task_bytes: u64,
    /// Estimated host bytes of the live mms and their vmas, recounted every
    /// `HOST_RECOUNT_CHECKS` checks and grown by each fork in between.
    mm_bytes: u64,
    /// Host bytes of the hardware model (caches, TLBs: fixed at boot).
    hw_bytes: u64,
    /// Checks since `mm_bytes` was recounted.
    checks_since_recount: u64,
    /// Seed 002's kscrubd kernel thread.
    pub kscrubd: Kscrubd,
    /// khugepaged (`transparent_hugepage/file_text=khugepaged`).
    pub khugepaged: Khugepaged,
    /// kswapd (woken below the low watermark).
    pub kswapd: Kswapd,
    /// The load average (`avenrun`), in simulated time.
    pub loadavg: LoadAvg,
    /// Tasks in a `sleep` op (indices), in the order they wake (ties: the order they fell asleep).
    pub(super) sleepers: Vec<usize>,
    /// Pages of I/O that system calls and faults waited for and no task has been charged
    /// for yet (`charge_io`, khugepaged).
    io_wait_pages: u64,
    /// The `replay` ops run so far, and the error that stopped one (a trace it cannot read).
    pub replays: Vec<Replay>,
    pub replay_error: Option<String>,
    /// The events `engine.events` selected, in the order they happened (`events.rs`), and
    /// those past `events::MAX_TRACE_EVENTS`, dropped.
    pub trace_events: Vec<crate::tracepoints::TraceEvent>,
    pub trace_events_dropped: u64,
    /// What runs on each CPU, as the switch events have told it.
    tp_on_cpu: Vec<events::Occupant>,
    /// The name events give a task that replays no program (the workload's).
    pub comm: String,
}

/// A batch of tasks one fork or thread op created (pids `next..=last` still to finish), and
/// the task that created it (blocked until they have).
struct SerialBatch {
    creator: usize,
    first: u32,
    next: u32,
    last: u32,
}

impl Interp {
    /// Start the first process running `program`.
    pub fn new(
        kernel: Kernel,
        machine: Machine,
        program: Vec<Op>,
        first_cpu: usize,
        check: bool,
    ) -> Result<Interp, crate::error::Error> {
        let geo = kernel.geo;
        if geo != machine.geo {
            return Err(crate::error::Error::Profile(format!(
                "the kernel's {geo:?} is not the machine's {:?}",
                machine.geo
            )));
        }
        let mut it = Interp {
            kernel,
            machine,
            run_seq: 0,
            quantum_base: 0.0,
            time_limit: f64::INFINITY,
            tasks: Vec::new(),
            oracle: check.then(|| Oracle::new(geo)),
            check: CheckSummary { enabled: check, ..Default::default() },
            events: Vec::new(),
            events_dropped: 0,
            snapshot_requests: Vec::new(),
            check_invariants_each_op: false,
            faults_handled: 0,
            invariant_violation: None,
            steps: 0,
            fast_forwarded: 0,
            outputs: 0,
            fast_forward_steps: 0,
            fast_forward: true,
            sample: None,
            sampling: SamplingStats::default(),
            max_steps: u64::MAX,
            serial: false,
            fork_from_root: false,
            defer_stack: false,
            serial_stack: Vec::new(),
            rq: Vec::new(),
            sched: Vec::new(),
            next_task: Vec::new(),
            sched_changed: runqueue::CpuSet::default(),
            busy_cpus: runqueue::CpuSet::default(),
            curr: Vec::new(),
            slice_end: Vec::new(),
            balance_gen: 0,
            balance_seen: 0,
            waiters: Vec::new(),
            finish_gen: 0,
            waiters_seen: 0,
            nr_running: 0,
            pid_allocated: 1,
            mm_owner: Vec::new(),
            forking: None,
            max_host_memory: u64::MAX,
            host_limit_hit: false,
            host_bytes_extra: 0,
            task_bytes: 0,
            mm_bytes: 0,
            hw_bytes: 0,
            checks_since_recount: 0,
            kscrubd: Kscrubd::default(),
            khugepaged: Khugepaged::default(),
            kswapd: Kswapd::default(),
            loadavg: LoadAvg::default(),
            sleepers: Vec::new(),
            io_wait_pages: 0,
            replays: Vec::new(),
            replay_error: None,
            trace_events: Vec::new(),
            trace_events_dropped: 0,
            tp_on_cpu: Vec::new(),
            comm: String::new(),
        };
        // The reference model follows reclaim's discards of lazyfree pages.
        it.kernel.lazyfree.record = check;
        it.rq = vec![runqueue::RunQueue::default(); it.machine.cpus.len()];
        it.next_task = vec![(0, 0); it.machine.cpus.len()];
        it.curr = vec![None; it.machine.cpus.len()];
        it.slice_end = vec![0.0; it.machine.cpus.len()];
        it.hw_bytes = it.machine.host_bytes();
        // The first process exists before the workload starts: fault injection does not apply.
        let (fmo, fe) = (it.kernel.mem.fail_min_order.take(), std::mem::take(&mut it.kernel.mem.fail_every));
        let mm = it
            .kernel
            .exec_mm()
            .ok_or_else(|| crate::error::Error::Limit("machine too small to start the first process".into()))?;
        (it.kernel.mem.fail_min_order, it.kernel.mem.fail_every) = (fmo, fe);
        it.tasks.push(Task::new(1, 1, 0, mm, Rc::new(program), HashMap::new(), first_cpu));
        // Its kernel stack, made by whoever started it (charged to no cgroup of the workload).
        let _ = it.kernel.alloc_thread_stack(crate::kernel::memcontrol::ROOT_MEMCG);
        it.kernel.work.clear();
        it.task_bytes = task_host_bytes(&it.tasks[0]);
        it.set_mm_owner(mm, 0);
        it.rq_update(0);
        it.recount_host_bytes();
        // `vm/scrub_start` set before the run was written at boot: its handler wakes kscrubd.
        it.kernel.mem.scrub_wake = it.kernel.knobs.scrub_start.is_some();
        it.wakeup_kscrubd(0.0);
        if let Some(o) = it.oracle.as_mut() {
            o.new_process(1);
        }
        Ok(it)
    }

    fn event(&mut self, pid: u32, kind: &str, message: String) {
        self.outputs += 1;
        if self.events.len() < MAX_EVENTS {
            self.events.push(Event { pid, kind: kind.into(), message });
        } else {
            self.events_dropped += 1;
        }
    }

    /// Run task `t` for up to `budget` steps.
    fn run_task(&mut self, t: usize, budget: u64) {
        let mut budget = budget;
        self.kernel.cur_cpu = self.tasks[t].cpu;
        loop {
            // Work left pending (on a contended line) comes before the task's next step; an
            // exited task only has that left to do.
            if !self.charge_work(t) || budget == 0 || self.tasks[t].state != TaskState::Running {
                return;
            }
            // Atomics keep exact time order across CPUs; other work may run a little ahead.
            let slack = if matches!(self.tasks[t].cursor, Cursor::Atomic { .. }) { SLICE_SLACK } else { 0.0 };
            if self.steps >= self.max_steps
                || self.host_limit_hit
                || self.tasks[t].perf.cycles > self.time_limit - slack
            {
                return;
            }
            if !matches!(self.tasks[t].cursor, Cursor::Idle) {
                let used = self.continue_cursor(t, budget);
                budget = budget.saturating_sub(used.max(1));
                // A replay's snapshot (at an execve or an exit) is of the state now.
                if !self.snapshot_requests.is_empty() {
                    return;
                }
                continue;
            }
            let Some(op) = self.next_op(t) else {
                // The end of the program is exit_group(): the task tears its mm down itself
                // (the frees, zone->lock holds and hzp puts are its cycles, not the next
                // task's to drain the kernel's work log).
                self.exit_task(t, TaskState::Exited);
                self.charge_syscall(t);
                return;
            };
            self.steps += 1;
            budget -= 1;
            self.exec_op(t, &op);
            if matches!(
                op,
                Op::Mmap(_)
                    | Op::Exec(_)
                    | Op::Brk(_)
                    | Op::Munmap(_)
                    | Op::Mremap(_)
                    | Op::Mlock(_)
                    | Op::Munlock(_)
                    | Op::Mlockall(_)
                    | Op::Munlockall(_)
                    | Op::Mprotect(_)
                    | Op::Madvise(_)
                    | Op::Fork(_)
                    | Op::Thread(_)
                    | Op::Exit(_)
            ) {
                self.charge_syscall(t);
            }
            if !self.snapshot_requests.is_empty() {
                return;
            }
            // Serial schedule: the tasks this op created run first (the scheduler picks them).
            if self.serial && matches!(op, Op::Fork(_) | Op::Thread(_)) {
                return;
            }
        }
    }

    /// Fetch the next op, unwinding finished loop bodies.
    fn next_op(&mut self, t: usize) -> Option<Op> {
        loop {
            let f = self.tasks[t].frames.last_mut()?;
            if f.pc < f.ops.len() {
                f.pc += 1;
                return Some(f.ops[f.pc - 1].clone());
            }
            if f.remaining > 0 {
                self.iteration_boundary(t);
                let f = self.tasks[t].frames.last_mut().expect("frame");
                if f.remaining > 0 {
                    f.remaining -= 1;
                    f.pc = 0;
                }
                continue;
            }
            self.tasks[t].frames.pop();
        }
    }

    fn region(&self, t: usize, name: &str) -> (u64, u64) {
        *self.tasks[t].regions.get(name).expect("validated: region mapped before use")
    }

    fn range(&self, t: usize, region: &str, offset: u64, length: Option<u64>) -> (u64, u64) {
        let (base, size) = self.region(t, region);
        let len = length.unwrap_or(size.saturating_sub(offset));
        (base.saturating_add(offset), len)
    }

    /// A `read`, `write` or `fetch` begins: its cursor walks `range` (`byte`: the value a
    /// write stores, or the value a read expects).
    fn start_access(&mut self, t: usize, kind: Access, range: &AccessRange, byte: Option<u8>) {
        let AccessRange { region, offset, length, stride, block, block_stride, pattern, count, seed } = range;
        let (a, len) = self.range(t, region, offset.0, length.map(|l| l.0));
        let write = kind == Access::Write;
        let stride = stride.map_or(if kind == Access::Exec { DEFAULT_FETCH_STRIDE } else { DEFAULT_STRIDE }, |s| s.0);
        let block = block.map_or(0, |b| b.0);
        // A fetch has no blocks.
        let block_stride = if kind == Access::Exec { 0 } else { block_stride.map_or(DEFAULT_BLOCK_STRIDE, |s| s.0) };
        let value = if write { byte.unwrap_or(DEFAULT_VALUE) } else { 0 };
        let expect = if kind == Access::Read { byte } else { None };
        self.tasks[t].cursor = match (pattern, kind) {
            (Pattern::Random, _) => Cursor::Random {
                kind,
                base: a,
                slots: len.div_ceil(stride),
                stride,
                left: count.unwrap_or(0),
                rng: seed.unwrap_or(0),
                block,
                block_stride,
                value,
                expect,
                failed: false,
            },
            (Pattern::Sequential, Access::Exec) => Cursor::Fetch { next: a, end: a.saturating_add(len), stride },
            (Pattern::Sequential, _) => Cursor::Access {
                write,
                next: a,
                end: a.saturating_add(len),
                stride,
                block,
                block_stride,
                value,
                expect,
                failed: false,
            },
        };
    }

    fn exec_op(&mut self, t: usize, op: &Op) {
        let pid = self.tasks[t].pid;
        self.enter_kernel(t);
        match op {
            // The ELF loader's mmap of the text segment.
            Op::Exec(e) => self.sys_mmap(t, &e.to_mmap(), true),
            Op::Mmap(m) => self.sys_mmap(t, m, false),
            Op::Munmap(m) => self.sys_munmap(t, m),
            Op::Mlock(m) => self.sys_mlock(t, &m.range(), Some(m.onfault)),
            Op::Munlock(m) => self.sys_mlock(t, m, None),
            Op::Mlockall(m) => self.sys_mlockall(t, Some(m)),
            Op::Munlockall(_) => self.sys_mlockall(t, None),
            Op::Mremap(m) => self.sys_mremap(t, m),
            Op::Mprotect(m) => self.sys_mprotect(t, m),
            Op::Madvise(m) => self.sys_madvise(t, m),
            Op::Brk(b) => self.sys_brk(t, b),
            Op::Read(ReadOp { range, expect }) => self.start_access(t, Access::Read, range, *expect),
            Op::Write(WriteOp { range, value }) => self.start_access(t, Access::Write, range, *value),
            Op::Fetch(FetchOp { range }) => self.start_access(t, Access::Exec, range, None),
            Op::Compare(CompareOp { a, b, length, expect, stride }) => {
                let (ab, _) = self.region(t, &a.region);
                let (bb, _) = self.region(t, &b.region);
                self.tasks[t].cursor = Cursor::Compare {
                    a: ab.saturating_add(a.offset.0),
                    b: bb.saturating_add(b.offset.0),
                    pos: 0,
                    len: length.0,
                    expect: *expect,
                    stride: stride.map_or(0, |s| s.0),
                };
            }
            Op::Atomic(AtomicOp { region, offset, count, hold }) => {
                let (a, _) = self.range(t, region, offset.0, Some(8));
                self.tasks[t].cursor = Cursor::Atomic { addr: a & !7, remaining: *count, hold: *hold };
            }
            Op::Loop(LoopOp { count, body }) => {
                if *count > 0 {
                    self.tasks[t].frames.push(Frame {
                        ops: Rc::new(body.clone()),
                        pc: 0,
                        remaining: count - 1,
                        mark: None,
                        sample: None,
                    });
                }
            }
            Op::Replay(r) => self.start_replay(t, r),
            Op::Fork(f) => self.sys_clone(t, f, false),
            Op::Thread(f) => self.sys_clone(t, f, true),
            Op::Wait(_) => {
                self.tasks[t].state = TaskState::Waiting;
                self.waiters.push(t);
                self.finish_gen += 1;
            }
            Op::Sleep(op) => self.sys_nanosleep(t, op),
            Op::Exit(_) => self.exit_task(t, TaskState::Exited),
            Op::Snapshot(SnapshotOp { label }) => {
                self.outputs += 1;
                self.snapshot_requests.push((label.clone(), pid));
            }
            Op::Create(_)
            | Op::MemfdCreate(_)
            | Op::Fallocate(_)
            | Op::Pwrite(_)
            | Op::Pread(_)
            | Op::Fadvise(_)
            | Op::Fsync(_) => self.exec_file_op(t, op),
            Op::MemoryReclaim(r) => {
                let value = match r.swappiness {
                    Some(s) => format!("{} swappiness={s}", r.bytes.0),
                    None => r.bytes.0.to_string(),
                };
                self.sys_cgroup_write(t, r.cgroup.as_deref(), "memory.reclaim", &value);
            }
            Op::CgroupWrite(w) => self.sys_cgroup_write(t, Some(&w.cgroup), &w.file, &w.value.0),
            Op::Set(SetOp { knob, value }) => {
                if crate::kernel::knobs::BOOT_ONLY.contains(&knob.as_str()) {
                    self.event(
                        pid,
                        "syscall",
                        format!("set {knob}: can only be set before the run (a kernel build, patch or boot parameter)"),
                    );
                } else if let Err(e) = self.kernel.set_knob(knob, &value.0) {
                    self.event(pid, "syscall", e.to_string());
                } else if knob == "vm/scrub_start" && self.kernel.knobs.scrub_start.is_some() {
                    // The seed's scrub_start_handler wakes kscrubd.
                    self.kernel.mem.scrub_wake = true;
                } else if khugepaged::KHUGEPAGED_WAKE_KNOBS.contains(&knob.as_str()) {
                    self.kernel.khugepaged.wake = true;
                }
            }
        }
    }

    /// Charge a system call and the kernel work it queued to task `t`'s CPU.
    fn charge_syscall(&mut self, t: usize) {
        let cpu = self.tasks[t].cpu;
        // The system call instruction serialises: outstanding translations complete first.
        self.machine.drain_translations(cpu, &mut self.tasks[t].perf);
        let cost = self.machine.exec_cycles(cpu, self.machine.p.cost.syscall);
        self.tasks[t].perf.charge("entry_SYSCALL_64", cost);
        self.charge_work(t);
    }

    /// Do the kernel work queued so far (clearing, copying, flushes, locks, atomics) on task
    /// `t`'s CPU, as its cycles. Work on a contended line (zone->lock, an atomic) that would
    /// start past this slice's time limit stays pending, and the task ends its slice after
    /// the step it is in: the CPUs behind it take the line first, as they would in time.
    /// Other work (clearing, copying, TLB flushes) is done at once, ahead of pending work, so
    /// that what the task sees next never depends on it. Deliberately different from Linux
    /// only in when the simulator computes a cost; every piece runs on the task's CPU.
    /// Returns true when nothing is left pending.
    #[inline]
    pub(super) fn charge_work(&mut self, t: usize) -> bool {
        // Nothing queued, pending or discarded (the common case, inline): nothing to do.
        if self.kernel.work.is_empty()
            && self.tasks[t].pending.is_empty()
            && self.kernel.lazyfree.discards.is_empty()
            && self.kernel.tp.is_none()
        {
            return true;
        }
        self.charge_work_queued(t)
    }

    #[inline(never)]
    fn charge_work_queued(&mut self, t: usize) -> bool {
        if self.kernel.tp.is_some() {
            self.tp_drain(t);
        }
        // After a fault (or a system call): the reference model learns what reclaim discarded.
        self.apply_lazyfree_discards(None);
        let cpu = self.tasks[t].cpu;
        let base = self.machine.clock[cpu] - self.quantum_base;
        loop {
            // Newly queued work, in order: contended work joins the pending queue, the rest
            // runs now (a shootdown's flush it queues comes round again).
            while !self.kernel.work.is_empty() {
                let mut batch = std::mem::take(&mut self.kernel.work);
                for w in batch.drain(..) {
                    if w.on_shared_line() {
                        self.tasks[t].pending.push_back(w);
                    } else {
                        self.machine.do_work(cpu, &mut self.kernel, w, &mut self.tasks[t].perf, base);
                    }
                }
                if self.kernel.work.is_empty() {
                    self.kernel.work = batch;
                }
            }
            let task = &mut self.tasks[t];
            let Some(&w) = task.pending.front() else { return true };
            if task.perf.cycles > self.time_limit {
                return false;
            }
            task.pending.pop_front();
            self.finish_gen += task.pending.is_empty() as u64;
            self.machine.do_work(cpu, &mut self.kernel, w, &mut self.tasks[t].perf, base);
        }
    }

    fn after_syscall(&mut self) {
        if let Some(b) = self.kernel.bug.take() {
            self.invariant_violation.get_or_insert(b);
        }
        if self.check_invariants_each_op && self.invariant_violation.is_none() {
            self.check.invariant_checks += 1;
            if let Err(e) = self.kernel.check_invariants() {
                self.invariant_violation = Some(e.0);
            }
        }
    }
}
