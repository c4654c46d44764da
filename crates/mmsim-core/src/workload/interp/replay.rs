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

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;

use mmsim_trace::{FileInfo, ProcessStream, Record};
use serde::Serialize;

use super::relocs::Relocs;
use super::*;
use crate::kernel::filemap::FMode;
use crate::kernel::memfd::FileRef;
use crate::kernel::shmem::Fs;
use crate::kernel::syscall::MmapReq;
use crate::kernel::uapi::{Advice, MapFlags, Prot};
use crate::units::VirtAddr;
use crate::workload::spec::{Placement, TraceFormat};
use syscalls::Call;

/// Records replayed per scheduler step (`engine.max_ops` counts steps).
pub const RECORDS_PER_STEP: u64 = 256;

/// One recorded process's records, shared by the tasks replaying its threads.
pub(super) struct ProcState {
    pub(super) stream: ProcessStream,
    /// The clock of the CPU that ended the last thread's turn (the next thread wakes no earlier).
    pub(super) turn_clock: f64,
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
    /// Whether private executable file mappings were madvised MADV_HUGEPAGE as they were
    /// mapped (`hugepage_text`), and how many.
    pub hugepage_text: bool,
    pub hugepage_text_mappings: u64,
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
    pub(super) shm: HashMap<u64, String>,
    pub(super) shm_at: HashMap<u64, u64>,
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
                hugepage_text: op.hugepage_text,
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
    pub(super) fn replay_pid(&self, t: usize) -> u32 {
        self.tasks[t].replay.as_ref().map_or(0, |rt| rt.pid)
    }

    /// The simulated address of task `t`'s recorded `addr` (`Relocs`).
    #[inline]
    pub(super) fn replay_addr(&self, t: usize, addr: u64) -> u64 {
        match self.tasks[t].replay.as_ref() {
            Some(rt) => rt.relocs.borrow().get(addr),
            None => addr,
        }
    }

    /// Task `t`'s recorded [addr, addr + len) as simulated pieces (`Relocs::pieces`).
    pub(super) fn replay_range(&self, t: usize, addr: u64, len: u64) -> Vec<(u64, u64)> {
        match self.tasks[t].replay.as_ref() {
            Some(rt) => rt.relocs.borrow().pieces(addr, len),
            None => vec![(addr, len)],
        }
    }

    /// Task `t`'s mm's relocations.
    pub(super) fn replay_relocs(&self, t: usize) -> Option<Rc<RefCell<Relocs>>> {
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
    pub(super) fn replay_touch(&mut self, t: usize, addr: u64, len: u64, write: bool) -> Flow {
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
            if write {
                self.kernel.mark_page_written(pfn);
            }
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
        let memcg = self.kernel.mm_memcg(old);
        let Some(mm) = self.kernel.bprm_mm_init(memcg) else {
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
    pub(super) fn replay_file(&mut self, r: usize, file: &FileInfo<'_>) -> Option<(String, FileRef)> {
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
            // Warm: the file was cached before the program ran (not the program's time), by
            // someone else: its page cache is charged to the root memory cgroup, as a host's
            // libraries and binaries are, not to a cgroup the program runs in.
            let saved = self.kernel.cur_mm.take();
            if let Ok(filp) = self.kernel.file_open(obj, FMode::Read) {
                let got = self.kernel.ksys_pread64(filp, 0, file.size, None);
                self.replays[r].report.warmed_bytes += got.ret.map_or(0, |x| x.0);
                self.kernel.fput(filp);
                self.kernel.work.clear();
            }
            self.kernel.cur_mm = saved;
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
        let at = ret.ret.ok()?;
        let exec_text =
            matches!(file, Some(FileRef::Inode(_))) && prot.contains(Prot::EXEC) && flags.contains(MapFlags::PRIVATE);
        let r = self.tasks[t].replay.as_ref().map(|rt| rt.r);
        if let Some(r) = r.filter(|&r| exec_text && self.replays[r].report.hugepage_text) {
            self.replays[r].report.hugepage_text_mappings += 1;
            let ret = self.kernel.do_madvise(mm, VirtAddr(at), len, Advice::HugePage);
            self.finish_call(t, ret.effects, Call::Other);
        }
        Some(at)
    }

    /// A mapping the program let the kernel place, recorded at [rec, rec + len): under
    /// `Placement::Kernel` placed by `place(hint)` (the hint translated) and its recorded range
    /// translated to where it went; else `place` at the recorded address itself.
    pub(super) fn replay_placed(
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
    pub(super) fn replay_relocate(&mut self, t: usize, r: usize, rec: u64, len: u64, at: u64) {
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
    pub(super) fn replay_unrelocate(&mut self, t: usize, rec: u64, len: u64) {
        if let Some(relocs) = self.replay_relocs(t) {
            let end = rec.saturating_add(self.kernel.geo.page_align(len).unwrap_or(len));
            relocs.borrow_mut().remove(rec, end);
        }
    }
}
