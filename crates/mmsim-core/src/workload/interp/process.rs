//! Processes and threads of the interpreter: fork and clone, exit, reaping by `wait`, fatal
//! signals, and which task the serial schedule runs next.

use std::rc::Rc;

use super::*;
use crate::kernel::memcontrol::NO_MEMCG;
use crate::kernel::uapi::CloneFlags;

impl Interp {
    /// Record the task that created `mm` (`mm->owner`, mm_init_owner).
    pub(super) fn set_mm_owner(&mut self, mm: MmId, t: usize) {
        let m = mm as usize;
        if self.mm_owner.len() <= m {
            self.mm_owner.resize(m + 1, usize::MAX);
        }
        self.mm_owner[m] = t;
    }

    /// `release_task` (kernel/exit.c): the task is reaped and its pid freed (`free_pid`).
    pub(super) fn release_task(&mut self, t: usize) {
        if !self.tasks[t].reaped {
            self.tasks[t].reaped = true;
            self.pid_allocated -= 1;
        }
    }

    /// `wait` of task `t`: reap its children that have finished (exited, their kernel work
    /// done), in order, as a `wait()` per child would; once all have, wake it no earlier than
    /// the last one's exit. False once it no longer waits.
    pub(super) fn wait_children(&mut self, t: usize) -> bool {
        if self.tasks[t].state != TaskState::Waiting {
            return false;
        }
        if self.tasks[t].replay_wait.is_some() {
            let Some(wake) = self.replay_wait_done(t) else { return true };
            self.tasks[t].replay_wait = None;
            let c = &mut self.machine.clock[self.tasks[t].cpu];
            *c = c.max(wake);
            self.tasks[t].state = TaskState::Running;
            self.sched_entity(t).ready_at = wake;
            self.rq_update(t);
            return false;
        }
        while let Some(&c) = self.tasks[t].children.get(self.tasks[t].waited) {
            let k = &self.tasks[(c - 1) as usize];
            if !(matches!(k.state, TaskState::Exited | TaskState::Killed) && k.pending.is_empty()) {
                return true;
            }
            let clock = k.exit_clock;
            self.release_task((c - 1) as usize);
            let task = &mut self.tasks[t];
            task.wait_clock = task.wait_clock.max(clock);
            task.waited += 1;
        }
        let (cpu, wake) = (self.tasks[t].cpu, self.tasks[t].wait_clock);
        let c = &mut self.machine.clock[cpu];
        *c = c.max(wake);
        self.tasks[t].state = TaskState::Running;
        self.sched_entity(t).ready_at = wake;
        self.rq_update(t);
        false
    }

    /// Serial schedule: the one task that may run now (an index), or None when every task
    /// has finished. A task is finished when it has exited and done its pending work; a
    /// batch's creator resumes once its whole batch has, no earlier than their last exit.
    pub(super) fn serial_current(&mut self) -> Option<usize> {
        let finished = |x: &Task| matches!(x.state, TaskState::Exited | TaskState::Killed) && x.pending.is_empty();
        while let Some(b) = self.serial_stack.last_mut() {
            while b.next <= b.last && finished(&self.tasks[(b.next - 1) as usize]) {
                b.next += 1;
            }
            if b.next <= b.last {
                let t = (b.next - 1) as usize;
                if let Some(memcg) = self.tasks[t].stack_pending.take() {
                    // Its kernel stack, charged as the runner's fork would now. Differs from
                    // Linux: a charge that fails leaves the task without one, where the
                    // runner's clone would fail.
                    self.kernel.cur_cpu = self.tasks[t].cpu;
                    self.tasks[t].stack_memcg = self.kernel.alloc_thread_stack(memcg).unwrap_or(NO_MEMCG);
                }
                return Some(t);
            }
            let b = self.serial_stack.pop().expect("top");
            let done = (b.first..=b.last).map(|p| self.tasks[(p - 1) as usize].exit_clock).fold(0.0, f64::max);
            let cpu = self.tasks[b.creator].cpu;
            let c = &mut self.machine.clock[cpu];
            *c = c.max(done);
        }
        (!finished(&self.tasks[0])).then_some(0)
    }

    /// fork (a new process with a copy of the address space: `dup_mm`), or a clone with
    /// `flags`: CLONE_VM shares the address space (`mmget`), CLONE_THREAD makes a thread of
    /// the caller's group. The child runs `program`.
    pub(super) fn fork(&mut self, t: usize, program: Rc<Vec<Op>>, cpu: Option<usize>, flags: CloneFlags) {
        let parent_pid = self.tasks[t].pid;
        let mm = self.tasks[t].mm.expect("mm");
        let pid = self.tasks.len() as u32 + 1;
        let thread = flags.contains(CloneFlags::THREAD);
        let copy = !flags.contains(CloneFlags::VM);
        // dup_task_struct's kernel stack, charged to the creating task's memcg (copy_process
        // fails with -ENOMEM when that charge does).
        let creator_memcg = self.kernel.mm_memcg(mm);
        let deferred = self.defer_stack;
        let stack = if deferred { Ok(NO_MEMCG) } else { self.kernel.alloc_thread_stack(creator_memcg) };
        let Ok(stack_memcg) = stack else {
            self.event(parent_pid, "fork-failed", "fork: ENOMEM (the kernel stack's charge)".into());
            return;
        };
        let Ok(child_mm) = self.kernel.kernel_clone(mm, flags).ret else {
            self.kernel.exit_task_stack_account(stack_memcg);
            self.apply_lazyfree_discards(None);
            self.event(parent_pid, "fork-failed", "fork: ENOMEM".into());
            return;
        };
        if copy {
            // What reclaim discarded while the mm was copied: the parent's pages now (before
            // the reference model copies it), the child's once it has the copy.
            self.forking = Some(child_mm);
            self.apply_lazyfree_discards(None);
        }
        let tgid = if thread { self.tasks[t].tgid } else { pid };
        // alloc_pid, which copy_process calls after copy_mm: idr_alloc_cyclic finds no free
        // pid below pid_max (-ENOSPC, returned as -EAGAIN), and bad_fork_cleanup_mm puts the
        // mm it copied or took. Differs from Linux: once its cursor has passed RESERVED_PIDS,
        // Linux allocates from 300..pid_max-1 only, so up to 299 low pids held by long-lived
        // tasks count against it; mmsim counts only how many are in use.
        let pid_max = self.kernel.knobs.pid_max;
        if self.pid_allocated + 1 >= pid_max {
            self.forking = None;
            let _ = self.kernel.do_exit(child_mm);
            self.kernel.exit_task_stack_account(stack_memcg);
            self.apply_lazyfree_discards(None);
            let call = if copy { "fork" } else { "clone" };
            let used = self.pid_allocated;
            self.event(
                parent_pid,
                "fork-failed",
                format!("{call}: EAGAIN (kernel/pid_max {pid_max}: {used} pids in use)"),
            );
            return;
        }
        self.pid_allocated += 1;
        let ncpus = self.machine.cpus.len();
        let pc = self.tasks[t].cpu;
        // A CPU given pins the task there; else a pinned creator's task inherits its one CPU
        // (sched_fork copies the affinity mask).
        let pinned = cpu.is_some() || self.tasks[t].pinned;
        let cpu = match cpu {
            Some(c) => c % ncpus,
            None if self.tasks[t].pinned => pc,
            None if self.kernel.knobs.sched_balance_fork && !self.serial => self.find_idlest_cpu(pc),
            None => (pid as usize - 1) % ncpus,
        };
        // The child starts no earlier than the moment of the fork.
        let now = self.machine.clock[pc] + self.tasks[t].perf.cycles - self.quantum_base;
        if cpu != pc {
            let c = &mut self.machine.clock[cpu];
            *c = c.max(now);
        }
        let regions = self.tasks[t].regions.clone();
        self.tasks.push(Task::new(pid, tgid, parent_pid, child_mm, program, regions, cpu));
        self.tasks[t].children.push(pid);
        let child = self.tasks.len() - 1;
        self.tasks[child].pinned = pinned;
        self.tasks[child].stack_memcg = stack_memcg;
        self.tasks[child].stack_pending = deferred.then_some(creator_memcg);
        self.sched_entity(child).ready_at = now;
        self.rq_update(child);
        if self.kernel.knobs.sched_child_runs_first && !self.serial {
            self.sched_fork(t, child, now, !copy);
        }
        if self.kernel.tp.is_some() {
            self.tp_emit(t, crate::tracepoints::ev::SCHED_PROCESS_FORK, |s| {
                let (c, cc) = (s.tp_comm(t), s.tp_comm(child));
                format!("comm={c} pid={parent_pid} child_comm={cc} child_pid={pid}")
            });
        }
        self.task_bytes += task_host_bytes(&self.tasks[child]);
        if copy {
            self.set_mm_owner(child_mm, child);
            self.mm_bytes += mm_host_bytes(Some(self.kernel.mm(child_mm))) + self.machine.mm_host_bytes(1);
            if let Some(o) = self.oracle.as_mut() {
                o.fork(self.tasks[t].tgid, pid);
            }
            self.forking = None;
            self.apply_lazyfree_discards(None);
        }
    }

    /// `find_idlest_cpu` (kernel/sched, SD_BALANCE_FORK) for a task forked on `this_cpu`, over
    /// one domain of every CPU: the CPU with the fewest runnable tasks (the forking task
    /// counted on its own), `this_cpu` on a tie, else the lowest-numbered. Differs from Linux:
    /// no domain hierarchy (no group imbalance threshold between nodes), and a CPU's load is
    /// its count of runnable tasks, not their weighted average.
    fn find_idlest_cpu(&self, this_cpu: usize) -> usize {
        let (mut min, mut idlest) = (usize::MAX, this_cpu);
        for c in 0..self.machine.cpus.len() {
            let load = self.rq[c].len() + usize::from(c == this_cpu);
            if load < min || (load == min && c == this_cpu) {
                (min, idlest) = (load, c);
            }
        }
        idlest
    }

    /// The task ends (exit or a fatal signal): record its last status and tear down its mm.
    pub fn exit_task(&mut self, t: usize, how: TaskState) {
        let Some(mm) = self.tasks[t].mm else { return };
        let mut st = crate::sim::process_status(&self.kernel, &self.tasks[t], &self.machine.p.cpu);
        st.state = how.name().into();
        self.tasks[t].last_status = Some(Box::new(st));
        // A task killed in its sleep (its thread group got a fatal signal) sleeps no more.
        if self.tasks[t].state == TaskState::Sleeping {
            self.sleepers.retain(|&x| x != t);
        }
        self.tasks[t].state = how;
        self.finish_gen += 1;
        self.tasks[t].cursor = Cursor::Idle;
        self.tasks[t].frames.clear();
        self.tasks[t].replay = None;
        self.tasks[t].replay_wait = None;
        self.tasks[t].mm = None;
        let stack = std::mem::replace(&mut self.tasks[t].stack_memcg, NO_MEMCG);
        // (A serial task killed before it started has no stack yet.)
        if self.tasks[t].stack_pending.take().is_none() {
            self.kernel.exit_task_stack_account(stack);
        }
        // The last task using the mm tears it down (mmput).
        if self.kernel.do_exit(mm).ret == Ok(true) {
            if let Some(o) = self.oracle.as_mut() {
                o.exit(self.tasks[t].tgid);
            }
        }
        self.task_bytes += self.tasks[t].last_status.as_deref().map_or(0, status_host_bytes);
        // exit_notify: a thread other than the group leader reaps itself; a child whose parent
        // has exited was reparented to init, which reaps it at once, and so are this task's
        // children that are zombies now (the rest will be when they exit). Differs from Linux:
        // a thread's children go to init too, not to another thread of its group.
        let (pid, tgid, ppid) = (self.tasks[t].pid, self.tasks[t].tgid, self.tasks[t].ppid);
        let orphan =
            ppid == 0 || matches!(self.tasks[(ppid - 1) as usize].state, TaskState::Exited | TaskState::Killed);
        if tgid != pid || orphan {
            self.release_task(t);
        }
        for i in 0..self.tasks[t].children.len() {
            let c = (self.tasks[t].children[i] - 1) as usize;
            if matches!(self.tasks[c].state, TaskState::Exited | TaskState::Killed) {
                self.release_task(c);
            }
        }
        self.rq_update(t);
        self.after_syscall();
    }

    /// A fatal signal kills the whole thread group of task `t` (the task itself last).
    pub(super) fn kill_group(&mut self, t: usize) {
        let tgid = self.tasks[t].tgid;
        // A process with no other thread (its mm has one user) has nothing else to kill.
        let alone = self.tasks[t].mm.is_some_and(|m| self.kernel.mm(m).users == 1);
        if !alone {
            for v in 0..self.tasks.len() {
                if v != t && self.tasks[v].tgid == tgid && self.tasks[v].mm.is_some() {
                    self.exit_task(v, TaskState::Killed);
                }
            }
        }
        self.exit_task(t, TaskState::Killed);
    }

    /// Kill the process owning `mm` (the OOM killer's choice), every thread of it.
    /// A victim the OOM killer chose inside a system call or outside a failed fault (a memcg
    /// OOM whose caller went on, memory.max's write, a memory.oom.group) dies now.
    pub(super) fn reap_oom_victims(&mut self) {
        if let Some(v) = self.kernel.take_oom_victim() {
            self.kill_mm(v);
        }
        for m in std::mem::take(&mut self.kernel.oom_group_victims) {
            self.kill_mm(m);
        }
    }

    /// The kernel is entered by task `t` (a fault or a system call): its CPU, its mm and the
    /// time (the task's clock), which runs the I/O completions due.
    pub(super) fn enter_kernel(&mut self, t: usize) {
        let cpu = self.tasks[t].cpu;
        self.kernel.cur_cpu = cpu;
        self.kernel.cur_mm = self.tasks[t].mm;
        self.kernel.in_kthread = false;
        let cycles = self.machine.cpus[cpu].time_base + self.tasks[t].perf.cycles;
        let ns = (cycles / self.machine.p.cpu.freq_ghz).max(0.0) as u64;
        self.kernel.advance_time(ns);
    }

    pub(super) fn kill_mm(&mut self, mm: MmId) {
        // The mm's owner is its first user while it lives; else the first thread left.
        let owner =
            self.mm_owner.get(mm as usize).copied().filter(|&o| self.tasks.get(o).is_some_and(|x| x.mm == Some(mm)));
        if let Some(v) = owner.or_else(|| self.tasks.iter().position(|x| x.mm == Some(mm))) {
            let pid = self.tasks[v].tgid;
            self.event(pid, "oom-kill", format!("Out of memory: Killed process {pid}"));
            self.kill_group(v);
        }
    }
}
