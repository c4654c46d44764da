//! The run's events (`engine.events`, `tracepoints.rs`): those the interpreter raises itself
//! (a user page fault, a fork, a context switch), and those the kernel raised, stamped with
//! the task (or kernel thread) they happened in, its CPU and the time.

use super::*;
use crate::tracepoints::{ev, TraceEvent, EVENTS};

/// The most events a run keeps (the rest are counted in `engine.events_dropped`).
pub const MAX_TRACE_EVENTS: usize = 2_000_000;

/// What runs on a CPU, as its `sched:sched_switch` events tell it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Occupant {
    Idle,
    Task(usize),
    Kthread(&'static str),
}

impl Interp {
    /// Task `t`'s name, as perf shows a task's comm: its replayed program's (the recorded
    /// command's basename), else the workload's name.
    pub(super) fn tp_comm(&self, t: usize) -> String {
        if let Some(rt) = self.tasks[t].replay.as_ref() {
            if let Some(c) = self.replays[rt.r].report.command.first() {
                return c.rsplit('/').next().unwrap_or(c).chars().take(15).collect();
            }
        }
        self.comm.chars().take(15).collect()
    }

    /// What an event of task `t` now carries: its name, pid, CPU and the CPU's clock (cycles).
    fn tp_stamp(&self, t: usize) -> (String, u32, usize, f64) {
        let cpu = self.tasks[t].cpu;
        let now = self.machine.clock[cpu] + self.tasks[t].perf.cycles - self.quantum_base;
        (self.tp_comm(t), self.tasks[t].pid, cpu, now)
    }

    pub(super) fn tp_push(&mut self, comm: String, pid: u32, cpu: usize, cycles: f64, id: u8, fields: String) {
        if self.trace_events.len() >= MAX_TRACE_EVENTS {
            self.trace_events_dropped += 1;
            return;
        }
        let time = cycles / (self.machine.p.cpu.freq_ghz * 1e9);
        let event = EVENTS[id as usize].0;
        self.trace_events.push(TraceEvent { comm, pid, cpu: cpu as u32, time, event, fields });
    }

    /// The events the kernel raised for task `t` (a fault's or a system call's), stamped now.
    pub(super) fn tp_drain(&mut self, t: usize) {
        let Some(tp) = self.kernel.tp.as_mut() else { return };
        if tp.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut tp.pending);
        let (comm, pid, cpu, now) = self.tp_stamp(t);
        for (id, fields) in pending {
            self.tp_push(comm.clone(), pid, cpu, now, id, fields);
        }
    }

    /// The events the kernel raised in kernel thread `comm` (khugepaged, kscrubd) on `cpu` at
    /// `cycles`, or (`comm` "swapper") outside any task.
    pub(super) fn tp_drain_kthread(&mut self, comm: &str, cpu: usize, cycles: f64) {
        let Some(tp) = self.kernel.tp.as_mut() else { return };
        let pending = std::mem::take(&mut tp.pending);
        for (id, fields) in pending {
            self.tp_push(comm.into(), 0, cpu, cycles, id, fields);
        }
    }

    /// Event `id` of task `t` now (after what the kernel raised before it).
    #[inline]
    pub(super) fn tp_emit(&mut self, t: usize, id: u8, fields: impl FnOnce(&Self) -> String) {
        if !self.kernel.tp.as_ref().is_some_and(|tp| tp.on(id)) {
            return;
        }
        self.tp_drain(t);
        let f = fields(self);
        let (comm, pid, cpu, now) = self.tp_stamp(t);
        self.tp_push(comm, pid, cpu, now, id, f);
    }

    /// `exceptions:page_fault_user`: x86's error code (bit 1 a write, bit 2 user mode, bit 4
    /// an instruction fetch; mmsim leaves bit 0, the protection fault of a present page,
    /// clear) and no ip (a workload's ops have none).
    pub(super) fn tp_page_fault(&mut self, t: usize, addr: u64, access: Access) {
        self.tp_emit(t, ev::PAGE_FAULT_USER, |_| {
            let code = 0x4
                | match access {
                    Access::Write => 0x2,
                    Access::Exec => 0x10,
                    Access::Read => 0,
                };
            format!("address={addr:#x} ip=0x0 error_code={code:#x}")
        });
    }

    /// `sched:sched_switch` on `cpu` at `cycles` if what runs there changes to `next` (perf
    /// records it in the context of the task switched out).
    pub(super) fn tp_run(&mut self, cpu: usize, next: Occupant, cycles: f64) {
        if !self.kernel.tp.as_ref().is_some_and(|tp| tp.on(ev::SCHED_SWITCH)) {
            return;
        }
        if self.tp_on_cpu.len() <= cpu {
            self.tp_on_cpu.resize(cpu + 1, Occupant::Idle);
        }
        let prev = std::mem::replace(&mut self.tp_on_cpu[cpu], next);
        if prev == next {
            return;
        }
        let (pc, pp) = self.tp_who(cpu, prev);
        let (nc, np) = self.tp_who(cpu, next);
        let ps = match prev {
            Occupant::Task(p) => match self.tasks[p].state {
                TaskState::Running => "R",
                TaskState::Sleeping | TaskState::Waiting => "S",
                TaskState::Exited | TaskState::Killed => "X",
            },
            Occupant::Kthread(_) => "S",
            Occupant::Idle => "R",
        };
        let fields = format!(
            "prev_comm={pc} prev_pid={pp} prev_prio=120 prev_state={ps} ==> next_comm={nc} next_pid={np} next_prio=120"
        );
        self.tp_push(pc, pp, cpu, cycles, ev::SCHED_SWITCH, fields);
    }

    fn tp_who(&self, cpu: usize, o: Occupant) -> (String, u32) {
        match o {
            Occupant::Idle => (format!("swapper/{cpu}"), 0),
            Occupant::Task(t) => (self.tp_comm(t), self.tasks[t].pid),
            Occupant::Kthread(name) => (name.to_string(), 0),
        }
    }

    /// What the kernel raised outside any task, at the end of the run (`cycles`).
    pub fn tp_drain_end(&mut self, cycles: f64) {
        self.tp_drain_kthread("swapper", 0, cycles);
    }
}
