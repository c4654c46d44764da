//! The replay of a recorded program (`mmsim record`, crates/mmsim-trace): the `replay` op
//! execs the recorded process, and each record goes where a workload op's would. Basic-block
//! runs are instruction fetches through the iTLB and the L1i, loads and stores are data
//! accesses through the dTLB and the caches (taking page faults through the kernel), and the
//! system calls go through the same system-call layer (`kernel/syscall.rs`): mappings the
//! program fixed, and the image's, land at their recorded addresses (MAP_FIXED), files are
//! created in the simulated filesystem with their recorded sizes, a forked child becomes a
//! process replaying its own records, a thread a thread.
//!
//! A mapping the program did not fix goes where the simulated kernel's `get_unmapped_area`
//! puts it (`place: kernel`, the default: Valgrind chose the recorded address, without Linux's
//! THP alignment), and every later address of the program inside it is translated (`Relocs`);
//! `place: recorded` maps it at the recorded address.
//!
//! Threads of one process take turns in the order they were recorded (Valgrind ran one at a
//! time): a thread whose turn it is not waits, and wakes no earlier than the time its turn came.
//! Calls mmsim does not model are replayed as no-ops and counted by name (`ReplayReport`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;

use mmsim_trace::{syscall_name, FileInfo, ProcessStream, Record};
use serde::Serialize;

use super::*;
use crate::kernel::filemap::{FMode, Fadvise};
use crate::kernel::memfd::FileRef;
use crate::kernel::shmem::Fs;
use crate::kernel::syscall::MmapReq;
use crate::kernel::uapi::{
    Advice, CloneFlags, FallocFlags, MapFlags, MclFlags, MfdFlags, MlockFlags, MremapFlags, Prot,
};
use crate::units::VirtAddr;
use crate::workload::spec::{Placement, TraceFormat};
use syscalls::Call;

/// Records replayed per scheduler step (`engine.max_ops` counts steps).
pub const RECORDS_PER_STEP: u64 = 256;

/// x86-64 system call numbers the replay models.
mod nr {
    pub const READ: u32 = 0;
    pub const WRITE: u32 = 1;
    pub const OPEN: u32 = 2;
    pub const MMAP: u32 = 9;
    pub const MPROTECT: u32 = 10;
    pub const MUNMAP: u32 = 11;
    pub const BRK: u32 = 12;
    pub const PREAD64: u32 = 17;
    pub const PWRITE64: u32 = 18;
    pub const READV: u32 = 19;
    pub const WRITEV: u32 = 20;
    pub const MREMAP: u32 = 25;
    pub const MADVISE: u32 = 28;
    pub const SHMGET: u32 = 29;
    pub const SHMAT: u32 = 30;
    pub const SHMCTL: u32 = 31;
    pub const CLONE: u32 = 56;
    pub const FORK: u32 = 57;
    pub const VFORK: u32 = 58;
    pub const EXIT: u32 = 60;
    pub const WAIT4: u32 = 61;
    pub const SHMDT: u32 = 67;
    pub const FSYNC: u32 = 74;
    pub const FDATASYNC: u32 = 75;
    pub const FTRUNCATE: u32 = 77;
    pub const CREAT: u32 = 85;
    pub const MLOCK: u32 = 149;
    pub const MUNLOCK: u32 = 150;
    pub const MLOCKALL: u32 = 151;
    pub const MUNLOCKALL: u32 = 152;
    pub const FADVISE64: u32 = 221;
    pub const EXIT_GROUP: u32 = 231;
    pub const WAITID: u32 = 247;
    pub const OPENAT: u32 = 257;
    pub const FALLOCATE: u32 = 285;
    pub const PREADV: u32 = 295;
    pub const PWRITEV: u32 = 296;
    pub const MEMFD_CREATE: u32 = 319;
    pub const MLOCK2: u32 = 325;
    pub const OPENAT2: u32 = 437;
}

const CLONE_VFORK: u64 = 0x4000;
const O_TRUNC: u64 = 0o1000;
const SHM_RDONLY: u64 = 0o10000;
const SHM_EXEC: u64 = 0o100000;
const IPC_RMID: u64 = 0;

/// One recorded process's records, shared by the tasks replaying its threads.
pub(super) struct ProcState {
    stream: ProcessStream,
    /// The clock of the CPU that ended the last thread's turn (the next thread wakes no earlier).
    turn_clock: f64,
}

/// The recorded ranges the simulated kernel placed elsewhere (`Placement::Kernel`), of one mm:
/// sorted, disjoint, page-aligned (start, end, simulated start). An address outside them is
/// where it was recorded. Tasks sharing an mm share it; a fork copies it, an exec starts empty.
#[derive(Clone, Debug, Default)]
pub(super) struct Relocs {
    v: Vec<(u64, u64, u64)>,
    /// The last two ranges lookups fell in, an entry or a gap between entries, as (start, end,
    /// offset to add): accesses run in streaks, and alternate between the stack and the data.
    memo: Cell<[(u64, u64, u64); 2]>,
}

impl Relocs {
    /// The simulated address of recorded `addr`.
    #[inline]
    pub(super) fn get(&self, addr: u64) -> u64 {
        if self.v.is_empty() {
            return addr;
        }
        let memo = self.memo.get();
        for &(s, e, off) in &memo {
            if addr >= s && addr < e {
                return addr.wrapping_add(off);
            }
        }
        let hit = self.range_of(addr);
        self.memo.set([hit, memo[0]]);
        addr.wrapping_add(hit.2)
    }

    /// The entry or gap `addr` lies in, as (start, end, offset to add).
    fn range_of(&self, addr: u64) -> (u64, u64, u64) {
        let i = self.v.partition_point(|x| x.1 <= addr);
        let gap_start = if i == 0 { 0 } else { self.v[i - 1].1 };
        match self.v.get(i) {
            Some(&(s, e, to)) if addr >= s => (s, e, to.wrapping_sub(s)),
            Some(&(s, _, _)) => (gap_start, s, 0),
            None => (gap_start, u64::MAX, 0),
        }
    }

    /// [addr, addr + len) cut where the translation changes: (simulated start, length) each.
    pub(super) fn pieces(&self, addr: u64, len: u64) -> Vec<(u64, u64)> {
        let end = addr.saturating_add(len);
        let mut out = Vec::new();
        let mut at = addr;
        while at < end {
            let i = self.v.partition_point(|x| x.1 <= at);
            let stop = match self.v.get(i) {
                Some(&(s, e, _)) if at >= s => e.min(end),
                Some(&(s, _, _)) => s.min(end),
                None => end,
            };
            out.push((self.get(at), stop - at));
            at = stop;
        }
        if out.is_empty() {
            out.push((self.get(addr), 0));
        }
        out
    }

    /// Recorded [start, end) is where it was recorded again (unmapped, or mapped anew).
    pub(super) fn remove(&mut self, start: u64, end: u64) {
        let mut kept = Vec::with_capacity(self.v.len() + 1);
        for &(s, e, to) in &self.v {
            if e <= start || s >= end {
                kept.push((s, e, to));
                continue;
            }
            if s < start {
                kept.push((s, start, to));
            }
            if e > end {
                kept.push((end, e, to + (end - s)));
            }
        }
        self.v = kept;
        self.memo.set([(0, 0, 0); 2]);
    }

    /// Recorded [start, end) is at simulated `to`.
    pub(super) fn insert(&mut self, start: u64, end: u64, to: u64) {
        self.remove(start, end);
        if to != start && end > start {
            let i = self.v.partition_point(|x| x.1 <= start);
            self.v.insert(i, (start, end, to));
        }
    }
}

/// Where a replaying task's records come from.
pub(super) enum Source {
    /// An mmsim trace: its process's records, shared by the tasks replaying its threads.
    Mmsim(Rc<RefCell<ProcState>>),
    /// A ChampSim trace (`champsim.rs`).
    Champsim(Rc<RefCell<super::champsim::ChampState>>),
}

/// A task's part in a replay.
pub(super) struct ReplayTask {
    pub(super) proc: Source,
    /// Its mm's relocations (`Relocs`).
    pub(super) relocs: Rc<RefCell<Relocs>>,
    /// The recorded thread this task replays, and its process.
    pub(super) tid: u32,
    pub(super) pid: u32,
    /// Its exit_group has been taken a snapshot of: it exits when it next runs.
    pub(super) exiting: bool,
    /// The replay (`Interp::replays`).
    pub(super) r: usize,
}

/// What a replaying task waits for.
#[derive(Clone, Copy, Debug)]
pub(super) enum ReplayWait {
    /// Its thread's turn in its process's records.
    Turn,
    /// wait4: the child task (an index) to exit.
    Child(usize),
    /// vfork: the child task to exec or exit.
    Vfork(usize),
}

/// A system call replayed as a no-op, by name: how often, and the bytes its mappings of
/// files mmsim does not model took (mapped as anonymous memory, so later accesses work).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct NoopCall {
    pub count: u64,
    pub bytes_mapped: u64,
}

/// The report's `replay` section.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ReplayReport {
    pub trace: String,
    /// The recorded command line.
    pub command: Vec<String>,
    /// Whether the program's files started uncached (`--cold`).
    pub cold: bool,
    pub records: u64,
    /// Records of threads that had exited (Valgrind's own after a thread's exit), not replayed.
    pub records_skipped: u64,
    pub instructions: u64,
    pub loads: u64,
    pub stores: u64,
    /// Processes and threads the replay created (the first included).
    pub processes: u64,
    pub threads: u64,
    /// Every system call replayed, by name.
    pub syscalls: BTreeMap<String, u64>,
    /// The calls replayed as no-ops (mmsim does not model them), by name.
    pub unmodelled: BTreeMap<String, NoopCall>,
    /// Files the replay created in the simulated filesystem, and the bytes read into the page
    /// cache to warm them (none with `cold`).
    pub files: u64,
    pub warmed_bytes: u64,
    /// The recorded exit status of each process (recorded pid, status).
    pub exit_status: Vec<(u32, i64)>,
    /// The largest peak RSS (VmHWM, kB) of an image an execve replaced: Linux keeps it in
    /// the process's `signal->maxrss`, which getrusage and wait4 report.
    pub exec_hwm_kb: i64,
    /// Where mappings the program did not fix went (`Placement`), and how many of them the
    /// simulated kernel placed elsewhere than recorded, with their bytes.
    pub place: Placement,
    pub relocated: u64,
    pub relocated_bytes: u64,
    /// The trace's format: `mmsim`, `champsim` or `champsim-cloudsuite`, and for ChampSim's
    /// its compression (`xz`, `gzip`, `bzip2`, `raw`).
    pub format: String,
    pub compression: String,
    /// The address space the replay gave a trace without system calls (ChampSim's), said in
    /// every report of it; the vmas it mapped on first touch, and the accesses outside user
    /// space it did not replay.
    pub address_space: String,
    pub first_touch_vmas: u64,
    pub outside_user_space: u64,
}

/// One `replay` op's state.
pub struct Replay {
    pub report: ReplayReport,
    /// Recorded thread id -> task.
    pub(super) tasks: HashMap<u32, usize>,
    /// SysV shared memory: shmid -> the tmpfs file standing for the segment; an attach's
    /// address -> its length.
    shm: HashMap<u64, String>,
    shm_at: HashMap<u64, u64>,
}

/// What a record did to the task replaying it.
pub(super) enum Flow {
    Go,
    /// The task stopped (it exited, waits, or asked for a snapshot).
    Stop,
}

impl Replay {
    /// The state of replay `op` of the recorded `command`, whose first task `root` is task `t`.
    pub(super) fn new(op: &ReplayOp, command: Vec<String>, root: u32, t: usize) -> Replay {
        Replay {
            report: ReplayReport {
                trace: op.trace.clone(),
                command,
                cold: op.cold,
                place: op.place,
                format: "mmsim".into(),
                processes: 1,
                threads: 1,
                ..Default::default()
            },
            tasks: HashMap::from([(root, t)]),
            shm: HashMap::new(),
            shm_at: HashMap::new(),
        }
    }
}

impl Interp {
    /// The `replay` op: task `t` execs the trace's first process.
    pub(super) fn start_replay(&mut self, t: usize, op: &ReplayOp) {
        if self.sample.is_some() {
            // engine.sample samples loops; a trace's sampling does not yet keep its counters
            // inside their intervals (issue 39), and a replay is never silently unsampled.
            let msg = format!("{}: engine.sample (--sample) does not apply to a replayed trace yet", op.trace);
            return self.replay_failed(t, msg);
        }
        let path = Path::new(&op.trace);
        let champsim = match op.format {
            TraceFormat::Mmsim => false,
            TraceFormat::Champsim | TraceFormat::Cloudsuite => true,
            TraceFormat::Auto => mmsim_trace::champsim::is_champsim(path),
        };
        if champsim {
            return self.start_champsim(t, op);
        }
        let opened = mmsim_trace::TraceReader::open(path).and_then(|mut r| {
            let index = r.read_index()?;
            Ok((r.header.command.clone(), index))
        });
        let (command, index) = match opened {
            Ok(x) => x,
            Err(e) => return self.replay_failed(t, e.to_string()),
        };
        let Some(&(root, _)) = index.processes.first() else {
            return self.replay_failed(t, format!("{}: the trace has no process", op.trace));
        };
        let stream = match ProcessStream::open(path, root) {
            Ok(s) => s,
            Err(e) => return self.replay_failed(t, e.to_string()),
        };
        let r = self.replays.len();
        self.replays.push(Replay::new(op, command, root, t));
        let proc = Source::Mmsim(Rc::new(RefCell::new(ProcState { stream, turn_clock: 0.0 })));
        let relocs = Rc::default();
        self.tasks[t].replay = Some(Box::new(ReplayTask { proc, relocs, tid: root, pid: root, r, exiting: false }));
        self.tasks[t].cursor = Cursor::Replay;
    }

    /// The trace cannot be replayed: the run ends with the error.
    pub(super) fn replay_failed(&mut self, t: usize, msg: String) {
        self.replay_error.get_or_insert(msg);
        self.tasks[t].cursor = Cursor::Idle;
        self.tasks[t].replay = None;
        self.exit_task(t, TaskState::Killed);
    }

    /// Replay task `t`'s records for up to `budget` steps; returns the steps used.
    pub(super) fn continue_replay(&mut self, t: usize, budget: u64) -> u64 {
        let Some(rt) = self.tasks[t].replay.as_ref() else {
            self.tasks[t].cursor = Cursor::Idle;
            return 0;
        };
        if rt.exiting {
            self.replay_exit_now(t);
            return 1;
        }
        let (proc, tid, r) = match &rt.proc {
            Source::Mmsim(p) => (p.clone(), rt.tid, rt.r),
            Source::Champsim(_) => return self.continue_champsim(t, budget),
        };
        let mut p = proc.borrow_mut();
        let mut used = 0u64;
        let mut records = 0u64;
        // Instructions, loads and stores replayed (added to the report at the end).
        let mut counts = [0u64; 3];
        // What ended the slice early: an error, or a wait for another thread's turn.
        let mut failed = None;
        let mut turn = false;
        while used < budget && (used == 0 || self.tasks[t].perf.cycles <= self.time_limit) {
            match p.stream.tid() {
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
                Ok(None) => {
                    // The process's records ended without its exit (a killed recording): the
                    // task goes on with the ops after the replay, or exits.
                    self.tasks[t].cursor = Cursor::Idle;
                    self.tasks[t].replay = None;
                    break;
                }
                Ok(Some(x)) if x != tid => {
                    // Another thread's turn: wait for it (it may be waiting for this one).
                    p.turn_clock = self.task_now(t);
                    turn = true;
                    break;
                }
                Ok(Some(_)) => {}
            }
            let mut stop = false;
            let ran = p.stream.run(RECORDS_PER_STEP as usize, |rec| {
                match *rec {
                    Record::Run { instrs, .. } => counts[0] += u64::from(instrs),
                    Record::Load { .. } => counts[1] += 1,
                    Record::Store { .. } => counts[2] += 1,
                    _ => {}
                }
                let go = matches!(self.replay_record(t, r, rec), Flow::Go);
                stop = !go;
                go
            });
            used += 1;
            self.steps += 1;
            match ran {
                Ok(n) => records += n as u64,
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            }
            if stop {
                break;
            }
        }
        drop(p);
        let rep = &mut self.replays[r].report;
        rep.records += records;
        rep.instructions += counts[0];
        rep.loads += counts[1];
        rep.stores += counts[2];
        if let Some(e) = failed {
            self.replay_failed(t, e);
        } else if turn {
            self.replay_wait(t, ReplayWait::Turn);
        }
        used.max(1)
    }

    /// Task `t`'s CPU clock now (within its quantum).
    pub(super) fn task_now(&self, t: usize) -> f64 {
        self.machine.clock[self.tasks[t].cpu] + self.tasks[t].perf.cycles - self.quantum_base
    }

    /// Task `t` blocks until `w` is met (`replay_wait_done`).
    pub(super) fn replay_wait(&mut self, t: usize, w: ReplayWait) {
        self.tasks[t].replay_wait = Some(w);
        self.tasks[t].state = TaskState::Waiting;
        self.waiters.push(t);
        self.finish_gen += 1;
    }

    /// A waiting replay task's condition: the clock it wakes no earlier than, once it is met.
    pub(super) fn replay_wait_done(&mut self, t: usize) -> Option<f64> {
        let done = |x: &Task| matches!(x.state, TaskState::Exited | TaskState::Killed);
        match self.tasks[t].replay_wait? {
            ReplayWait::Child(c) => done(&self.tasks[c]).then(|| self.tasks[c].exit_clock),
            ReplayWait::Vfork(c) => {
                let k = &self.tasks[c];
                if done(k) {
                    Some(k.exit_clock)
                } else {
                    k.vfork_done.then_some(0.0)
                }
            }
            ReplayWait::Turn => {
                let rt = self.tasks[t].replay.as_ref()?;
                let (Source::Mmsim(proc), r) = (&rt.proc, rt.r) else { return self.champ_turn_done(t) };
                let proc = proc.clone();
                let mut p = proc.borrow_mut();
                loop {
                    match p.stream.tid() {
                        Ok(Some(x)) if x != rt.tid => {
                            let live = self.replays[r].tasks.get(&x).is_some_and(|&c| !done(&self.tasks[c]));
                            if live {
                                return None;
                            }
                            // Records of a thread that has exited (or was never cloned): passed
                            // over, counted.
                            match p.stream.skip_thread() {
                                Ok(n) => self.replays[r].report.records_skipped += n,
                                Err(_) => return Some(p.turn_clock),
                            }
                        }
                        // Its turn, the end of the records, or an error it will find when it runs.
                        _ => return Some(p.turn_clock),
                    }
                }
            }
        }
    }

    /// One record of task `t` (replay `r`).
    #[inline]
    fn replay_record(&mut self, t: usize, r: usize, rec: &Record<'_>) -> Flow {
        match *rec {
            Record::Run { pc, bytes, instrs } => self.replay_fetch(t, pc, bytes, instrs),
            Record::Load { addr, size } => self.replay_access(t, addr, u64::from(size.max(1)), false),
            Record::Store { addr, size } => self.replay_access(t, addr, u64::from(size.max(1)), true),
            Record::Syscall { nr, args, result, file } => self.replay_syscall(t, r, nr, args, result, &file),
            Record::Map { start, len, prot, kind, offset, file } => {
                self.replay_map(t, r, start, len, prot, kind, offset, &file);
                Flow::Go
            }
            Record::Proc { how: 0, .. } => self.replay_exec(t),
            Record::Proc { .. } | Record::Thread { .. } => Flow::Go,
            Record::Exit { status } => {
                let pid = self.replay_pid(t);
                if !self.replays[r].report.exit_status.iter().any(|x| x.0 == pid) {
                    self.replays[r].report.exit_status.push((pid, status));
                }
                self.replay_exit_group(t);
                Flow::Stop
            }
        }
    }

    /// The recorded pid of task `t`'s process.
    fn replay_pid(&self, t: usize) -> u32 {
        self.tasks[t].replay.as_ref().map_or(0, |rt| rt.pid)
    }

    /// The simulated address of task `t`'s recorded `addr` (`Relocs`).
    #[inline]
    fn replay_addr(&self, t: usize, addr: u64) -> u64 {
        match self.tasks[t].replay.as_ref() {
            Some(rt) => rt.relocs.borrow().get(addr),
            None => addr,
        }
    }

    /// Task `t`'s recorded [addr, addr + len) as simulated pieces (`Relocs::pieces`).
    fn replay_range(&self, t: usize, addr: u64, len: u64) -> Vec<(u64, u64)> {
        match self.tasks[t].replay.as_ref() {
            Some(rt) => rt.relocs.borrow().pieces(addr, len),
            None => vec![(addr, len)],
        }
    }

    /// Task `t`'s mm's relocations.
    fn replay_relocs(&self, t: usize) -> Option<Rc<RefCell<Relocs>>> {
        self.tasks[t].replay.as_ref().map(|rt| rt.relocs.clone())
    }

    /// A run of `instrs` instructions over `bytes` bytes from `pc`: its lines through the
    /// iTLB (once per page) and the L1i, each line with its share of the instructions.
    #[inline]
    pub(super) fn replay_fetch(&mut self, t: usize, pc: u64, bytes: u32, instrs: u32) -> Flow {
        let g = self.kernel.geo;
        let shift = self.machine.line_shift();
        let end = pc.saturating_add(u64::from(bytes.max(1)));
        let (first, last) = (pc >> shift, (end - 1) >> shift);
        let ipf = f64::from(instrs) / (last - first + 1) as f64;
        let mut line = first;
        while line <= last {
            let addr = (line << shift).max(pc);
            let page = g.page_align_down(addr);
            let Ok(pfn) = self.access_page(t, self.replay_addr(t, addr), Access::Exec) else { return Flow::Stop };
            let cpu = self.tasks[t].cpu;
            let page_last = last.min((page + g.page_size() - 1) >> shift);
            while line <= page_last {
                self.machine.one_fetch(cpu, pfn, (line << shift) - page, ipf, &mut self.tasks[t].perf);
                line += 1;
            }
        }
        Flow::Go
    }

    /// A load or store of `size` bytes at `addr` (split where it crosses a page): one access
    /// of its first line in each page; the instructions are the runs'.
    #[inline]
    pub(super) fn replay_access(&mut self, t: usize, addr: u64, size: u64, write: bool) -> Flow {
        self.replay_pages(t, addr, size, write, |m, cpu, pfn, ps, _, perf| m.one_access(cpu, pfn, ps, write, perf))
    }

    /// What a system call's copy to or from user memory touches (read(2)'s buffer is
    /// written, write(2)'s read): line by line, taking the faults the kernel's copy takes.
    fn replay_touch(&mut self, t: usize, addr: u64, len: u64, write: bool) -> Flow {
        let line = self.machine.line_size();
        self.replay_pages(t, addr, len, write, |m, cpu, pfn, ps, pe, perf| {
            m.page_accesses(cpu, pfn, ps, pe, line, write, 0.0, perf)
        })
    }

    /// [addr, addr + len) a page at a time: each page made accessible (walk, fault), then
    /// `f(machine, cpu, pfn, ps, pe, perf)` with the bytes [ps, pe) of it the range covers.
    #[inline(always)]
    fn replay_pages(
        &mut self,
        t: usize,
        addr: u64,
        len: u64,
        write: bool,
        mut f: impl FnMut(&mut Machine, usize, Pfn, u64, u64, &mut PerfCounters),
    ) -> Flow {
        let g = self.kernel.geo;
        let kind = if write { Access::Write } else { Access::Read };
        let end = addr.saturating_add(len);
        let mut next = addr;
        while next < end {
            let page = g.page_align_down(next);
            let pe = (page + g.page_size()).min(end) - page;
            let Ok(pfn) = self.access_page(t, self.replay_addr(t, next), kind) else { return Flow::Stop };
            let cpu = self.tasks[t].cpu;
            f(&mut self.machine, cpu, pfn, next - page, pe, &mut self.tasks[t].perf);
            next = page + pe;
        }
        Flow::Go
    }

    /// A process image starts (execve, or the replay's first image): a new mm replaces the
    /// task's (`exec_mmap`), the other threads of its group go (`de_thread`), and a snapshot
    /// is taken.
    pub(super) fn replay_exec(&mut self, t: usize) -> Flow {
        let Some(old) = self.tasks[t].mm else { return Flow::Stop };
        let tgid = self.tasks[t].tgid;
        for v in 0..self.tasks.len() {
            if v != t && self.tasks[v].tgid == tgid && self.tasks[v].mm.is_some() {
                self.exit_task(v, TaskState::Killed);
            }
        }
        let Some(mm) = self.kernel.bprm_mm_init() else {
            let pid = self.tasks[t].pid;
            self.event(pid, "syscall", "execve: ENOMEM".into());
            self.exit_task(t, TaskState::Killed);
            return Flow::Stop;
        };
        self.tasks[t].mm = Some(mm);
        self.set_mm_owner(mm, t);
        let kb = (self.kernel.geo.page_size() / 1024) as i64;
        let hwm = self.kernel.mm(old).hiwater_rss * kb;
        if let Some(rt) = self.tasks[t].replay.as_ref() {
            let rep = &mut self.replays[rt.r].report;
            rep.exec_hwm_kb = rep.exec_hwm_kb.max(hwm);
        }
        let _ = self.kernel.do_exit(old);
        self.charge_work(t);
        let cpu = self.tasks[t].cpu;
        self.machine.switch_mm(cpu, mm, &mut self.tasks[t].perf);
        // A vfork parent waits no more; the new image's first thread is the process.
        self.tasks[t].vfork_done = true;
        self.finish_gen += 1;
        let pid = self.replay_pid(t);
        if let Some(rt) = self.tasks[t].replay.as_mut() {
            rt.tid = pid;
            // The new image's addresses are its own.
            rt.relocs = Rc::default();
        }
        self.outputs += 1;
        self.snapshot_requests.push((format!("execve {pid}"), self.tasks[t].pid));
        Flow::Stop
    }

    /// exit_group: a snapshot of the process as it is (its mm still whole), then, when the
    /// task next runs (`continue_replay`), every thread of it ends.
    pub(super) fn replay_exit_group(&mut self, t: usize) {
        let pid = self.replay_pid(t);
        self.outputs += 1;
        self.snapshot_requests.push((format!("exit {pid}"), self.tasks[t].pid));
        if let Some(rt) = self.tasks[t].replay.as_mut() {
            rt.exiting = true;
        }
    }

    /// The exit_group `replay_exit_group` began: every thread of task `t`'s process ends.
    pub(super) fn replay_exit_now(&mut self, t: usize) {
        let tgid = self.tasks[t].tgid;
        for v in 0..self.tasks.len() {
            if v != t && self.tasks[v].tgid == tgid && self.tasks[v].mm.is_some() {
                self.exit_task(v, TaskState::Exited);
            }
        }
        self.tasks[t].replay = None;
        self.exit_task(t, TaskState::Exited);
        self.charge_syscall(t);
    }

    /// A file of the trace, by its recorded path (a memfd by its name and inode), created in
    /// the simulated filesystem at its recorded size the first time the replay meets it and,
    /// unless cold, read into the page cache then.
    fn replay_file(&mut self, r: usize, file: &FileInfo<'_>) -> Option<(String, FileRef)> {
        if file.path.is_empty() {
            return None;
        }
        let path = String::from_utf8_lossy(file.path).into_owned();
        let memfd = path.starts_with("/memfd:");
        let name = if memfd { format!("{path}#{}", file.ino) } else { path.clone() };
        if let Some(f) = self.kernel.file_ref(&name) {
            return Some((name, f));
        }
        if !file.is_regular() {
            return None;
        }
        let fs = if memfd || path.starts_with("/dev/shm/") { Fs::Tmpfs } else { Fs::Ext4 };
        let obj = self.kernel.file_create(&name, file.size, fs).ok()?;
        self.replays[r].report.files += 1;
        if fs == Fs::Ext4 && file.size > 0 && !self.replays[r].report.cold {
            // Warm: the file was cached before the program ran (not the program's time).
            if let Ok(filp) = self.kernel.file_open(obj, FMode::Read) {
                let got = self.kernel.ksys_pread64(filp, 0, file.size, None);
                self.replays[r].report.warmed_bytes += got.ret.map_or(0, |x| x.0);
                self.kernel.fput(filp);
                self.kernel.work.clear();
            }
        }
        Some((name, FileRef::Inode(obj)))
    }

    /// A mapping of the address space at an image's start.
    #[allow(clippy::too_many_arguments)]
    fn replay_map(
        &mut self,
        t: usize,
        r: usize,
        start: u64,
        len: u64,
        prot: u32,
        kind: u32,
        offset: u64,
        file: &FileInfo<'_>,
    ) {
        let Some(mm) = self.tasks[t].mm else { return };
        if kind == 4 {
            // The brk heap: its start, and the break where the recording found it.
            let m = self.kernel.mm_mut(mm);
            (m.start_brk, m.brk) = (start, start);
            if len > 0 {
                let r = self.kernel.sys_brk(mm, VirtAddr(start + len));
                self.finish_call(t, r.effects, Call::Other);
            }
            return;
        }
        let shared = kind == 2;
        // A trace whose maps carry no file size: the file reaches at least the mapping's end.
        let mut info = *file;
        if info.size == 0 {
            info.size = offset.saturating_add(len);
        }
        let f = if kind == 1 || kind == 2 { self.replay_file(r, &info) } else { None };
        let mut flags = MapFlags::FIXED | if shared { MapFlags::SHARED } else { MapFlags::PRIVATE };
        if kind == 3 {
            flags |= MapFlags::GROWSDOWN;
        }
        self.replay_mmap(t, start, len, Prot::from_bits_truncate(prot), flags, f.map(|x| x.1), offset, true);
    }

    /// mmap(2) of `file` from byte `offset`, or anonymous: at `addr` (MAP_FIXED) when `fixed`,
    /// else where `get_unmapped_area` puts it with `addr` a hint. Returns where it went.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn replay_mmap(
        &mut self,
        t: usize,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        file: Option<FileRef>,
        offset: u64,
        fixed: bool,
    ) -> Option<u64> {
        let mm = self.tasks[t].mm?;
        let pgoff = offset >> self.kernel.geo.page_shift;
        let flags = flags & !(MapFlags::FIXED | MapFlags::FIXED_NOREPLACE);
        let mut req = MmapReq {
            addr: VirtAddr(addr),
            len,
            prot,
            flags: if fixed { flags | MapFlags::FIXED } else { flags },
            pgoff,
            ..Default::default()
        };
        let mut filp = None;
        match file {
            Some(FileRef::Hugetlbfs(h)) => req.hugetlbfs = Some(h),
            Some(FileRef::Inode(obj)) => {
                let mode = if flags.contains(MapFlags::SHARED) && prot.contains(Prot::WRITE) {
                    FMode::Write
                } else {
                    FMode::Read
                };
                filp = self.kernel.file_open(obj, mode).or_else(|_| self.kernel.file_open(obj, FMode::Read)).ok();
                req.file = filp;
            }
            None => req.flags |= MapFlags::ANONYMOUS,
        }
        let ret = self.kernel.vm_mmap_pgoff(mm, req);
        if let Some(f) = filp {
            self.kernel.fput(f);
        }
        if let Err(e) = ret.ret {
            let pid = self.tasks[t].pid;
            self.event(pid, "syscall", format!("replayed mmap at {addr:#x} ({len} bytes): {}", e.name()));
        }
        self.finish_call(t, ret.effects, Call::Other);
        ret.ret.ok()
    }

    /// A mapping the program let the kernel place, recorded at [rec, rec + len): under
    /// `Placement::Kernel` placed by `place(hint)` (the hint translated) and its recorded range
    /// translated to where it went; else `place` at the recorded address itself.
    fn replay_placed(
        &mut self,
        t: usize,
        r: usize,
        rec: u64,
        hint: u64,
        len: u64,
        place: impl FnOnce(&mut Self, u64, bool) -> Option<u64>,
    ) {
        if self.replays[r].report.place == Placement::Recorded {
            place(self, rec, true);
            return;
        }
        let hint = if hint == 0 { 0 } else { self.replay_addr(t, hint) };
        let Some(at) = place(self, hint, false) else { return };
        self.replay_relocate(t, r, rec, len, at);
    }

    /// Recorded [rec, rec + len) is at simulated `at` now.
    fn replay_relocate(&mut self, t: usize, r: usize, rec: u64, len: u64, at: u64) {
        let end = rec.saturating_add(self.kernel.geo.page_align(len).unwrap_or(len));
        if let Some(relocs) = self.replay_relocs(t) {
            relocs.borrow_mut().insert(rec, end, at);
        }
        if at != rec {
            let rep = &mut self.replays[r].report;
            rep.relocated += 1;
            rep.relocated_bytes += end - rec;
        }
    }

    /// Recorded [rec, rec + len) is no longer placed elsewhere (unmapped).
    fn replay_unrelocate(&mut self, t: usize, rec: u64, len: u64) {
        if let Some(relocs) = self.replay_relocs(t) {
            let end = rec.saturating_add(self.kernel.geo.page_align(len).unwrap_or(len));
            relocs.borrow_mut().remove(rec, end);
        }
    }

    /// A call replayed as a no-op: counted under `name`, with the bytes it mapped.
    fn replay_noop(&mut self, r: usize, name: String, bytes: u64) {
        let e = self.replays[r].report.unmodelled.entry(name).or_default();
        e.count += 1;
        e.bytes_mapped += bytes;
    }

    /// One recorded system call of task `t`.
    fn replay_syscall(&mut self, t: usize, r: usize, nr: u32, a: [u64; 6], result: i64, file: &FileInfo<'_>) -> Flow {
        let name = syscall_name(nr);
        *self.replays[r].report.syscalls.entry(name.clone()).or_default() += 1;
        let Some(mm) = self.tasks[t].mm else { return Flow::Stop };
        let ok = result >= 0;
        let res = result as u64;
        let mut flow = Flow::Go;
        match nr {
            nr::MMAP if ok => {
                let flags = MapFlags::from_bits_truncate(a[3] as u32);
                let prot = Prot::from_bits_truncate(a[2] as u32);
                let f = if flags.contains(MapFlags::ANONYMOUS) { None } else { self.replay_file(r, file) };
                if !flags.contains(MapFlags::ANONYMOUS) && f.is_none() {
                    // A device or an anonymous inode (/dev/zero, an io_uring ring, ...): anonymous
                    // memory, listed.
                    let what = String::from_utf8_lossy(file.path);
                    self.replay_noop(r, format!("mmap of {what}"), a[1]);
                }
                let file = f.map(|x| x.1);
                if flags.intersects(MapFlags::FIXED | MapFlags::FIXED_NOREPLACE) {
                    let at = self.replay_addr(t, res);
                    self.replay_mmap(t, at, a[1], prot, flags, file, a[5], true);
                } else {
                    self.replay_placed(t, r, res, a[0], a[1], |s, at, fixed| {
                        s.replay_mmap(t, at, a[1], prot, flags, file, a[5], fixed)
                    });
                }
            }
            nr::MUNMAP if ok => {
                for (at, len) in self.replay_range(t, a[0], a[1]) {
                    let ret = self.kernel.do_vmi_munmap(mm, VirtAddr(at), len);
                    self.finish_call(t, ret.effects, Call::Munmap { addr: at, len });
                }
                self.replay_unrelocate(t, a[0], a[1]);
            }
            nr::MPROTECT if ok => {
                let prot = Prot::from_bits_truncate(a[2] as u32);
                for (at, len) in self.replay_range(t, a[0], a[1]) {
                    let ret = self.kernel.do_mprotect_pkey(mm, VirtAddr(at), len, prot);
                    let call = Call::Mprotect { addr: at, len, prot, ret: ret.ret };
                    self.finish_call(t, ret.effects, call);
                }
            }
            nr::MADVISE if ok => match Advice::ALL.iter().find(|x| x.value() == a[2] as i64) {
                Some(&adv) => {
                    for (at, len) in self.replay_range(t, a[0], a[1]) {
                        let ret = self.kernel.do_madvise(mm, VirtAddr(at), len, adv);
                        self.finish_call(t, ret.effects, Call::Other);
                    }
                }
                None => self.replay_noop(r, format!("madvise({})", a[2]), 0),
            },
            nr::MREMAP if ok && self.replays[r].report.place == Placement::Recorded => {
                let mut flags = MremapFlags::from_bits_truncate(a[3] as u32);
                if res != a[0] {
                    flags |= MremapFlags::MAYMOVE | MremapFlags::FIXED;
                }
                let ret = self.kernel.do_mremap(mm, VirtAddr(a[0]), a[1], a[2], flags, VirtAddr(res));
                self.finish_call(t, ret.effects, Call::Other);
            }
            nr::MREMAP if ok => {
                // Placed by the kernel: a fixed target translated, else in place if the kernel
                // can (with MREMAP_MAYMOVE it moves only when it cannot grow there).
                let flags = MremapFlags::from_bits_truncate(a[3] as u32);
                let old = self.replay_addr(t, a[0]);
                let to = if flags.contains(MremapFlags::FIXED) { self.replay_addr(t, res) } else { 0 };
                let ret = self.kernel.do_mremap(mm, VirtAddr(old), a[1], a[2], flags, VirtAddr(to));
                self.finish_call(t, ret.effects, Call::Other);
                if let Ok(at) = ret.ret {
                    if !flags.contains(MremapFlags::DONTUNMAP) {
                        self.replay_unrelocate(t, a[0], a[1]);
                    }
                    self.replay_relocate(t, r, res, a[2], at);
                }
            }
            nr::BRK if a[0] == 0 && ok && self.kernel.mm(mm).start_brk == 0 => {
                // The first query of the break: the heap starts there. Valgrind, which runs the
                // program's brk itself, maps the heap's first page ahead: that page goes, so that
                // the break grows from it as the kernel's does.
                let m = self.kernel.mm_mut(mm);
                (m.start_brk, m.brk) = (res, res);
                let ahead =
                    self.kernel.mm(mm).vma_lookup(res).filter(|v| v.start == res && v.is_anonymous()).map(|v| v.end);
                if let Some(end) = ahead {
                    let ret = self.kernel.do_vmi_munmap(mm, VirtAddr(res), end - res);
                    self.finish_call(t, ret.effects, Call::Munmap { addr: res, len: end - res });
                }
            }
            nr::BRK if a[0] != 0 && res == a[0] => {
                let ret = self.kernel.sys_brk(mm, VirtAddr(a[0]));
                self.finish_call(t, ret.effects, Call::Other);
            }
            nr::BRK => {}
            nr::MLOCK | nr::MLOCK2 if ok => {
                let flags =
                    if nr == nr::MLOCK2 { MlockFlags::from_bits_truncate(a[2] as u32) } else { MlockFlags::empty() };
                for (at, len) in self.replay_range(t, a[0], a[1]) {
                    let ret = self.kernel.do_mlock(mm, VirtAddr(at), len, flags);
                    self.finish_call(t, ret.effects, Call::Other);
                }
            }
            nr::MUNLOCK if ok => {
                for (at, len) in self.replay_range(t, a[0], a[1]) {
                    let ret = self.kernel.sys_munlock(mm, VirtAddr(at), len);
                    self.finish_call(t, ret.effects, Call::Other);
                }
            }
            nr::MLOCKALL if ok => {
                let ret = self.kernel.sys_mlockall(mm, MclFlags::from_bits_truncate(a[0] as u32));
                self.finish_call(t, ret.effects, Call::Other);
            }
            nr::MUNLOCKALL if ok => {
                let ret = self.kernel.sys_munlockall(mm);
                self.finish_call(t, ret.effects, Call::Other);
            }
            nr::SHMGET if ok => {
                let name = format!("SYSV{res:08x}");
                if self.kernel.file_lookup(&name).is_none() && self.kernel.file_create(&name, a[1], Fs::Tmpfs).is_ok() {
                    self.replays[r].report.files += 1;
                }
                self.replays[r].shm.insert(res, name);
            }
            nr::SHMAT if ok => {
                if let Some(name) = self.replays[r].shm.get(&a[0]).cloned() {
                    let obj = self.kernel.file_lookup(&name).expect("created by shmget");
                    let size = self.kernel.inode(obj).i_size;
                    let prot = if a[2] & SHM_RDONLY != 0 { Prot::READ } else { Prot::READ | Prot::WRITE };
                    let prot = if a[2] & SHM_EXEC != 0 { prot | Prot::EXEC } else { prot };
                    self.replays[r].shm_at.insert(res, size);
                    let file = Some(FileRef::Inode(obj));
                    if a[1] != 0 {
                        let at = self.replay_addr(t, res);
                        self.replay_mmap(t, at, size, prot, MapFlags::SHARED, file, 0, true);
                    } else {
                        self.replay_placed(t, r, res, 0, size, |s, at, fixed| {
                            s.replay_mmap(t, at, size, prot, MapFlags::SHARED, file, 0, fixed)
                        });
                    }
                } else {
                    self.replay_noop(r, "shmat of a segment created before the recording".into(), 0);
                }
            }
            nr::SHMDT if ok => {
                if let Some(len) = self.replays[r].shm_at.remove(&a[0]) {
                    let at = self.replay_addr(t, a[0]);
                    let ret = self.kernel.do_vmi_munmap(mm, VirtAddr(at), len);
                    self.finish_call(t, ret.effects, Call::Munmap { addr: at, len });
                    self.replay_unrelocate(t, a[0], len);
                }
            }
            nr::SHMCTL if ok && a[1] == IPC_RMID => {
                if let Some(name) = self.replays[r].shm.remove(&a[0]) {
                    self.kernel.file_unlink(&name);
                }
            }
            nr::MEMFD_CREATE if ok => {
                let path = String::from_utf8_lossy(file.path);
                let name = format!("{path}#{}", file.ino);
                if a[1] & u64::from(MfdFlags::HUGETLB.bits()) != 0 {
                    let _ = self.kernel.sys_memfd_create(&name, MfdFlags::HUGETLB);
                } else {
                    let _ = self.kernel.file_create(&name, 0, Fs::Tmpfs);
                }
                self.replays[r].report.files += 1;
            }
            nr::OPEN | nr::OPENAT | nr::CREAT | nr::OPENAT2 if ok => {
                let flags = match nr {
                    nr::OPEN => a[1],
                    nr::OPENAT => a[2],
                    _ => 0,
                };
                if let Some((_, FileRef::Inode(obj))) = self.replay_file(r, file) {
                    if (flags & O_TRUNC != 0 || nr == nr::CREAT) && self.kernel.inode(obj).i_size != file.size {
                        let ret = self.kernel.do_ftruncate(FileRef::Inode(obj), file.size);
                        self.finish_call(t, ret.effects, Call::Other);
                    }
                }
            }
            nr::FTRUNCATE if ok => {
                if let Some((_, f)) = self.replay_file(r, file) {
                    let ret = self.kernel.do_ftruncate(f, a[1]);
                    self.finish_call(t, ret.effects, Call::Other);
                }
            }
            nr::FALLOCATE if ok => {
                if let Some((_, f)) = self.replay_file(r, file) {
                    let ret = self.kernel.vfs_fallocate(f, FallocFlags::from_bits_truncate(a[1] as u32), a[2], a[3]);
                    self.finish_call(t, ret.effects, Call::Other);
                }
            }
            nr::READ | nr::WRITE | nr::PREAD64 | nr::PWRITE64 | nr::READV | nr::WRITEV | nr::PREADV | nr::PWRITEV
                if ok =>
            {
                flow = self.replay_rw(t, r, nr, a, res, file);
            }
            nr::FSYNC | nr::FDATASYNC | nr::FADVISE64 if ok => {
                if let Some((_, FileRef::Inode(obj))) = self.replay_file(r, file) {
                    if let Ok(filp) = self.kernel.file_open(obj, FMode::Read) {
                        // POSIX_FADV_WILLNEED 3, DONTNEED 4; the others only set the file's
                        // readahead mode, which a replay's per-call open does not keep.
                        let ret = match (nr, a[3]) {
                            (nr::FADVISE64, 3) => {
                                Some(self.kernel.ksys_fadvise64_64(filp, a[1], a[2], Fadvise::WillNeed))
                            }
                            (nr::FADVISE64, 4) => {
                                Some(self.kernel.ksys_fadvise64_64(filp, a[1], a[2], Fadvise::DontNeed))
                            }
                            (nr::FADVISE64, _) => None,
                            _ => Some(self.kernel.do_fsync(filp)),
                        };
                        self.kernel.fput(filp);
                        if let Some(ret) = ret {
                            self.finish_call(t, ret.effects, Call::Other);
                        }
                    }
                }
            }
            nr::CLONE | nr::FORK | nr::VFORK if ok && res > 0 => {
                let flags = match nr {
                    nr::CLONE => a[0],
                    nr::VFORK => CloneFlags::VM.bits() | CLONE_VFORK,
                    _ => 0,
                };
                flow = self.replay_clone(t, r, flags, res as u32);
            }
            // The child's side of a fork or clone (it returns 0 there).
            nr::CLONE | nr::FORK | nr::VFORK => {}
            nr::WAIT4 | nr::WAITID if ok => {
                let child = if nr == nr::WAIT4 { res as u32 } else { a[1] as u32 };
                if let Some(&c) = self.replays[r].tasks.get(&child) {
                    if !matches!(self.tasks[c].state, TaskState::Exited | TaskState::Killed) {
                        self.charge_syscall(t);
                        self.replay_wait(t, ReplayWait::Child(c));
                        return Flow::Stop;
                    }
                }
            }
            nr::EXIT => {
                self.tasks[t].replay = None;
                self.exit_task(t, TaskState::Exited);
                self.charge_syscall(t);
                return Flow::Stop;
            }
            nr::EXIT_GROUP => {
                let pid = self.replay_pid(t);
                self.replays[r].report.exit_status.push((pid, a[0] as i32 as i64));
                self.replay_exit_group(t);
                return Flow::Stop;
            }
            _ if !ok => {}
            _ => self.replay_noop(r, name, 0),
        }
        self.charge_syscall(t);
        if self.tasks[t].state != TaskState::Running {
            return Flow::Stop;
        }
        flow
    }

    /// read(2), write(2) and their p- and v- forms: the file's page cache (a regular file), and
    /// the copy to or from the buffer (not for the vector forms: their iovecs are not recorded).
    fn replay_rw(&mut self, t: usize, r: usize, nr: u32, a: [u64; 6], res: u64, file: &FileInfo<'_>) -> Flow {
        let write = matches!(nr, nr::WRITE | nr::PWRITE64 | nr::WRITEV | nr::PWRITEV);
        let pos = match nr {
            nr::PREAD64 | nr::PWRITE64 | nr::PREADV | nr::PWRITEV => a[3] as i64,
            _ => file.pos,
        };
        if res > 0 && pos >= 0 && file.is_regular() {
            if let Some((_, FileRef::Inode(obj))) = self.replay_file(r, file) {
                let mode = if write { FMode::Write } else { FMode::Read };
                if let Ok(filp) = self.kernel.file_open(obj, mode) {
                    let effects = if write {
                        self.kernel.ksys_pwrite64(filp, pos as u64, res, 0).effects
                    } else {
                        self.kernel.ksys_pread64(filp, pos as u64, res, None).effects
                    };
                    self.kernel.fput(filp);
                    self.finish_call(t, effects, Call::Other);
                }
            }
        }
        if res > 0 && matches!(nr, nr::READ | nr::WRITE | nr::PREAD64 | nr::PWRITE64) {
            // copy_to_user / copy_from_user.
            return self.replay_touch(t, a[1], res, !write);
        }
        Flow::Go
    }

    /// clone(2), fork(2), vfork(2) with recorded `flags`, whose child is recorded task `child`:
    /// a thread replays the child's frames of this process, a process its own records.
    fn replay_clone(&mut self, t: usize, r: usize, flags: u64, child: u32) -> Flow {
        let cflags = CloneFlags::from_bits_truncate(flags) & (CloneFlags::VM | CloneFlags::THREAD);
        let thread = cflags.contains(CloneFlags::THREAD);
        let before = self.tasks.len();
        self.fork(t, Rc::new(Vec::new()), None, cflags);
        if self.tasks.len() == before {
            return Flow::Go;
        }
        let c = self.tasks.len() - 1;
        self.replays[r].tasks.insert(child, c);
        let proc = if thread {
            self.replays[r].report.threads += 1;
            match &self.tasks[t].replay.as_ref().expect("replaying").proc {
                Source::Mmsim(p) => Source::Mmsim(p.clone()),
                Source::Champsim(c) => Source::Champsim(c.clone()),
            }
        } else {
            self.replays[r].report.processes += 1;
            self.replays[r].report.threads += 1;
            match ProcessStream::open(Path::new(&self.replays[r].report.trace), child) {
                Ok(stream) => Source::Mmsim(Rc::new(RefCell::new(ProcState { stream, turn_clock: 0.0 }))),
                // A child that left no records (killed before it ran) just exits.
                Err(_) => return Flow::Go,
            }
        };
        let pid = if thread { self.tasks[t].replay.as_ref().map_or(child, |x| x.pid) } else { child };
        // A child sharing the mm shares its relocations; a forked one has a copy of them.
        let parent = self.replay_relocs(t).unwrap_or_default();
        let relocs =
            if cflags.contains(CloneFlags::VM) { parent } else { Rc::new(RefCell::new(parent.borrow().clone())) };
        self.tasks[c].replay = Some(Box::new(ReplayTask { proc, relocs, tid: child, pid, r, exiting: false }));
        self.tasks[c].cursor = Cursor::Replay;
        if !thread && flags & CLONE_VFORK != 0 && cflags.contains(CloneFlags::VM) {
            self.charge_syscall(t);
            self.replay_wait(t, ReplayWait::Vfork(c));
            return Flow::Stop;
        }
        Flow::Go
    }
}
