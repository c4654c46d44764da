//! The replay of a ChampSim trace (`mmsim_trace::champsim`): each record is one instruction,
//! its fetch through the iTLB and the L1i and its loads and stores through the dTLB and the
//! data caches, as `replay.rs` replays mmsim's records.
//!
//! ChampSim's traces carry no system calls, so the replay gives them the address space
//! ChampSim's users assume, and says so in the report (`ReplayReport::address_space`):
//! anonymous private memory (read, write, execute) mapped on first touch, one 2 MiB-aligned
//! range at a time, so that THP and the huge zero page can apply as they would to a program's
//! heap. Addresses outside user space (below mmap_min_addr, above TASK_SIZE) are not replayed
//! and are counted (`outside_user_space`).
//!
//! A CloudSuite trace (`cloudsuite_instr`) interleaves several address spaces on one core:
//! each ASID (the instruction's, `asid[0]`) is a process of its own, created by fork and exec
//! when the trace first names it, and the processes take turns in the order of the records,
//! as the threads of a recorded process do.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::rc::Rc;

use mmsim_trace::champsim::{ChampsimReader, Instr, Layout};

use super::replay::{Flow, Replay, ReplayTask, ReplayWait, Source, RECORDS_PER_STEP};
use super::*;
use crate::kernel::mmap::MMAP_MIN_ADDR;
use crate::kernel::uapi::{CloneFlags, MapFlags, Prot};
use crate::workload::spec::TraceFormat;

/// What a ChampSim replay's report says of the address space it gave the trace.
pub const FIRST_TOUCH: &str =
    "ChampSim trace (no system calls): anonymous memory mapped on first touch, in 2 MiB-aligned vmas";

/// One ChampSim trace's records, shared by the tasks replaying its address spaces.
pub(in crate::workload::interp) struct ChampState {
    reader: ChampsimReader,
    /// An instruction read but not replayed yet: the next, of another ASID's turn.
    pending: Option<Instr>,
    ended: bool,
    /// The clock of the CPU that ended the last turn (the next ASID wakes no earlier).
    turn_clock: f64,
    /// The tasks (ASIDs) that have exec'd their image.
    execd: HashSet<u32>,
    /// The 2 MiB ranges mapped, per ASID, and the last one an access fell in.
    regions: HashMap<u32, HashSet<u64>>,
    last: Option<(u32, u64)>,
}

impl Interp {
    /// The `replay` op on a ChampSim trace: task `t` execs an empty image and replays it.
    pub(super) fn start_champsim(&mut self, t: usize, op: &ReplayOp) {
        let layout = match op.format {
            TraceFormat::Champsim => Some(Layout::Standard),
            TraceFormat::Cloudsuite => Some(Layout::Cloudsuite),
            _ => None,
        };
        let mut reader = match ChampsimReader::open(Path::new(&op.trace), layout) {
            Ok(r) => r,
            Err(e) => return self.replay_failed(t, e.to_string()),
        };
        // A CloudSuite trace's first task replays the address space its first record names.
        let mut pending = None;
        let mut pid = self.tasks[t].pid;
        if reader.layout == Layout::Cloudsuite {
            match reader.next_instr() {
                Ok(Some(i)) => {
                    pid = u32::from(i.asid.map_or(0, |a| a[0]));
                    pending = Some(i);
                }
                Ok(None) => {}
                Err(e) => return self.replay_failed(t, e.to_string()),
            }
        }
        let format = match reader.layout {
            Layout::Standard => "champsim",
            Layout::Cloudsuite => "champsim-cloudsuite",
        };
        let r = self.replays.len();
        let mut replay = Replay::new(op, vec![op.trace.clone()], pid, t);
        replay.report.format = format.into();
        replay.report.compression = reader.compression.name().into();
        replay.report.address_space = FIRST_TOUCH.into();
        self.replays.push(replay);
        let state = ChampState {
            reader,
            pending,
            ended: false,
            turn_clock: 0.0,
            execd: HashSet::new(),
            regions: HashMap::new(),
            last: None,
        };
        let proc = Source::Champsim(Rc::new(RefCell::new(state)));
        self.tasks[t].replay =
            Some(Box::new(ReplayTask { proc, relocs: Rc::default(), tid: pid, pid, r, exiting: false }));
        self.tasks[t].cursor = Cursor::Replay;
    }

    /// Replay task `t`'s instructions of a ChampSim trace for up to `budget` steps.
    pub(super) fn continue_champsim(&mut self, t: usize, budget: u64) -> u64 {
        let Some(rt) = self.tasks[t].replay.as_ref() else { return 0 };
        if rt.exiting {
            self.replay_exit_now(t);
            return 1;
        }
        let Source::Champsim(state) = &rt.proc else { return 0 };
        let (state, me, r) = (state.clone(), rt.tid, rt.r);
        let mut c = state.borrow_mut();
        if c.execd.insert(me) {
            drop(c);
            self.replay_exec(t);
            return 1;
        }
        let cloudsuite = c.reader.layout == Layout::Cloudsuite;
        let (mut used, mut records, mut loads, mut stores) = (0u64, 0u64, 0u64, 0u64);
        let mut failed = None;
        let mut turn = None;
        let mut stop = false;
        'steps: while used < budget && (used == 0 || self.tasks[t].perf.cycles <= self.time_limit) {
            used += 1;
            self.steps += 1;
            for _ in 0..RECORDS_PER_STEP {
                let i = match c.pending.take() {
                    Some(i) => i,
                    None if c.ended => break 'steps,
                    None => match c.reader.next_instr() {
                        Ok(Some(i)) => i,
                        Ok(None) => {
                            c.ended = true;
                            break 'steps;
                        }
                        Err(e) => {
                            failed = Some(e.to_string());
                            break 'steps;
                        }
                    },
                };
                let asid = if cloudsuite { u32::from(i.asid.map_or(0, |a| a[0])) } else { me };
                if asid != me {
                    c.pending = Some(i);
                    turn = Some(asid);
                    break 'steps;
                }
                records += 1;
                if self.champ_map(t, r, &mut c, me, i.ip) && matches!(self.replay_fetch(t, i.ip, 1, 1), Flow::Stop) {
                    stop = true;
                    break 'steps;
                }
                for (addrs, write) in [(&i.src, false), (&i.dst, true)] {
                    for &a in addrs.iter().filter(|&&a| a != 0) {
                        if write {
                            stores += 1;
                        } else {
                            loads += 1;
                        }
                        if self.champ_map(t, r, &mut c, me, a)
                            && matches!(self.replay_access(t, a, 1, write), Flow::Stop)
                        {
                            stop = true;
                            break 'steps;
                        }
                    }
                }
            }
        }
        let ended = c.ended && c.pending.is_none();
        if turn.is_some() || ended {
            c.turn_clock = self.task_now(t);
        }
        drop(c);
        let rep = &mut self.replays[r].report;
        rep.records += records;
        rep.instructions += records;
        rep.loads += loads;
        rep.stores += stores;
        if let Some(e) = failed {
            self.replay_failed(t, e);
        } else if let (false, Some(asid)) = (stop, turn) {
            self.champ_turn(t, r, &state, asid);
        } else if ended && !stop {
            let pid = self.tasks[t].replay.as_ref().map_or(0, |rt| rt.pid);
            self.replays[r].report.exit_status.push((pid, 0));
            self.replay_exit_group(t);
        }
        used.max(1)
    }

    /// The records go on in address space `asid`: its task (a process forked and exec'd the
    /// first time the trace names it) takes over, task `t` waits for its turn.
    fn champ_turn(&mut self, t: usize, r: usize, state: &Rc<RefCell<ChampState>>, asid: u32) {
        if !self.replays[r].tasks.contains_key(&asid) {
            let before = self.tasks.len();
            self.fork(t, Rc::new(Vec::new()), None, CloneFlags::empty());
            if self.tasks.len() > before {
                let c = self.tasks.len() - 1;
                self.replays[r].tasks.insert(asid, c);
                self.replays[r].report.processes += 1;
                self.replays[r].report.threads += 1;
                let proc = Source::Champsim(state.clone());
                let rt = ReplayTask { proc, relocs: Rc::default(), tid: asid, pid: asid, r, exiting: false };
                self.tasks[c].replay = Some(Box::new(rt));
                self.tasks[c].cursor = Cursor::Replay;
            }
        }
        self.replay_wait(t, ReplayWait::Turn);
    }

    /// A waiting ChampSim task's turn: the records name its address space, or they ended.
    pub(super) fn champ_turn_done(&self, t: usize) -> Option<f64> {
        let rt = self.tasks[t].replay.as_ref()?;
        let Source::Champsim(state) = &rt.proc else { return None };
        let c = state.borrow();
        let next = c.pending.map(|i| u32::from(i.asid.map_or(0, |a| a[0])));
        (c.ended && c.pending.is_none() || next == Some(rt.tid)).then_some(c.turn_clock)
    }

    /// The first touch of `addr` in address space `me`: its 2 MiB range mapped anonymous
    /// (read, write, execute) if it was not. False for an address outside user space (counted).
    fn champ_map(&mut self, t: usize, r: usize, c: &mut ChampState, me: u32, addr: u64) -> bool {
        let size = self.kernel.geo.hpage_pmd_size();
        let region = addr / size;
        if c.last == Some((me, region)) {
            return true;
        }
        let top = self.kernel.geo.task_size();
        if !(MMAP_MIN_ADDR..top).contains(&addr) {
            self.replays[r].report.outside_user_space += 1;
            return false;
        }
        c.last = Some((me, region));
        if !c.regions.entry(me).or_default().insert(region) {
            return true;
        }
        let start = (region * size).max(MMAP_MIN_ADDR);
        let end = (region * size).saturating_add(size).min(top);
        let prot = Prot::READ | Prot::WRITE | Prot::EXEC;
        self.replay_mmap(t, start, end - start, prot, MapFlags::PRIVATE, None, 0, true);
        self.replays[r].report.first_touch_vmas += 1;
        true
    }
}
