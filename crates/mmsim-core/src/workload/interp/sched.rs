//! The scheduler: per-CPU run queues of runnable tasks, each CPU running its current task
//! until its slice (`sched/base_slice_ns`, ended at a `kernel/hz` tick) is used up and then the
//! one that ran least recently (`pick_next_task`), sleepers woken when their time comes, and
//! the load average. `round` advances the CPU that is furthest behind, so CPUs stay in step.

use super::events::Occupant;
use super::*;

/// The interpreter's kernel threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kthread {
    Kscrubd,
    Khugepaged,
    Kswapd,
}

impl Interp {
    /// `enqueue_task` / `dequeue_task` (kernel/sched/core.c) in one: task `i` is in its CPU's
    /// runqueue, under its current `last_run`, exactly while it is runnable.
    pub(super) fn rq_update(&mut self, i: usize) {
        if self.sched_entity(i).queued != self.tasks[i].runnable() {
            self.balance_gen += 1;
        }
        self.rq_requeue(i);
    }

    /// Task `i`'s scheduling state (a task just created gets a fresh one: tasks are only
    /// ever appended).
    pub(super) fn sched_entity(&mut self, i: usize) -> &mut SchedEntity {
        if self.sched.len() <= i {
            self.sched.resize(i + 1, SchedEntity::default());
        }
        &mut self.sched[i]
    }

    /// `rq_update` for the task `round` just ran: it goes back to its runqueue (or leaves it)
    /// without news for idle balancing (`round` tells that itself).
    fn rq_requeue(&mut self, i: usize) {
        self.sched_entity(i);
        let (cpu, key, runnable) = (self.tasks[i].cpu, (self.sched[i].last_run, i), self.tasks[i].runnable());
        self.sched_changed.insert(cpu);
        if runnable {
            let q = &mut self.rq[cpu];
            if q.insert(key) {
                self.nr_running += 1;
                if q.len() == 1 {
                    self.busy_cpus.insert(cpu);
                }
            }
        } else {
            self.rq_dequeue(cpu, i);
        }
        self.sched[i].queued = runnable;
    }

    /// Task `i` leaves CPU `cpu`'s runqueue, if it is there (under its current key).
    fn rq_dequeue(&mut self, cpu: usize, i: usize) {
        if self.rq[cpu].remove(&(self.sched[i].last_run, i)) {
            self.nr_running -= 1;
            if self.rq[cpu].is_empty() {
                self.busy_cpus.remove(cpu);
            }
        }
    }

    /// Run one quantum of the runnable task whose CPU is furthest behind in time (ties: the
    /// task that ran least recently); false when nothing can run any more.
    pub fn round(&mut self) -> bool {
        // Wake parents whose children have all exited, no earlier than the last exit; each
        // child is reaped as it finishes (a wait() per child).
        // Only a task that finished (or a new waiter) can wake one: otherwise nothing to look at.
        if self.finish_gen != self.waiters_seen {
            self.waiters_seen = self.finish_gen;
            let mut waiters = std::mem::take(&mut self.waiters);
            waiters.retain(|&t| self.wait_children(t));
            self.waiters = waiters;
        }
        let waiting = !self.waiters.is_empty();
        if self.balance_gen != self.balance_seen {
            self.balance_seen = self.balance_gen;
            if self.kernel.knobs.sched_idle_balance && !self.serial {
                self.idle_balance();
            }
        }
        let mut best: Option<(f64, u64, usize)> = None;
        // The two earliest busy CPUs' clocks (and CPUs): the chosen CPU runs until it passes
        // the earliest of the others.
        let mut earliest = [(f64::INFINITY, usize::MAX); 2];
        let only = if self.serial {
            match self.serial_current() {
                Some(i) => Some(i),
                None => return false,
            }
        } else {
            None
        };
        // The earliest CPU's candidate (ties: the one that ran least recently, then the lower
        // pid): its current task while its slice lasts, else the task that ran least recently.
        if let Some(o) = only {
            let task = &self.tasks[o];
            if task.runnable() {
                best = Some((self.machine.clock[task.cpu], self.sched[o].last_run, o));
            }
        } else {
            // Each busy CPU's candidate, computed again only where something of that CPU changed.
            self.machine.clock.take_changed(&mut self.sched_changed);
            let changed = std::mem::take(&mut self.sched_changed);
            for c in changed.iter() {
                if !self.rq[c].is_empty() {
                    self.next_task[c] = self.pick_next_task(c);
                }
            }
            self.sched_changed = changed;
            self.sched_changed.clear();
            let (clocks, next) = (self.machine.clock.as_slice(), &self.next_task[..]);
            // for_each, not a for loop: the set's `fold` walks each word's bits in one loop.
            self.busy_cpus.iter().for_each(|c| {
                let (last_run, i) = next[c];
                debug_assert_eq!((last_run, i), self.pick_next_task(c));
                let clock = clocks[c];
                let key = (clock, last_run, i);
                if best.is_none_or(|b| key.0 < b.0 || (key.0 == b.0 && (key.1, key.2) < (b.1, b.2))) {
                    best = Some(key);
                }
                if clock < earliest[0].0 {
                    earliest = [(clock, c), earliest[0]];
                } else if clock < earliest[1].0 {
                    earliest[1] = (clock, c);
                }
            });
        }
        // A sleeper whose time has come (nothing else would run before it) wakes first.
        // The kernel threads that could run, and when (none on the serial schedule).
        let kthreads = if self.serial { [None, None, None] } else { self.kthread_candidates() };
        let ks = kthreads.into_iter().flatten().reduce(|a, b| if (b.0, b.1) < (a.0, a.1) { b } else { a });
        let next = [best.map(|b| b.0), ks.map(|k| k.0)].into_iter().flatten().fold(f64::INFINITY, f64::min);
        let sleeper = match only {
            Some(o) => (self.tasks[o].state == TaskState::Sleeping).then_some(o),
            None => {
                // `sleepers` is in wake-up order (ties: the order they fell asleep).
                self.sleepers.first().copied()
            }
        };
        if let Some(s) = sleeper.filter(|&s| self.tasks[s].wake_at <= next) {
            self.wake_sleeper(s);
            return true;
        }
        if let Some((kt, klr, which, _)) = ks {
            if best.is_none_or(|b| kt < b.0 || (kt == b.0 && klr < b.1)) {
                self.machine.horizon = self.machine.horizon.max(kt);
                match which {
                    Kthread::Kscrubd => self.run_kscrubd(kt),
                    Kthread::Khugepaged => self.run_khugepaged(kt),
                    Kthread::Kswapd => self.run_kswapd(kt),
                }
                self.advance_loadavg();
                return true;
            }
        }
        let Some((horizon, _, t)) = best else {
            if waiting && ks.is_none() && self.sleepers.is_empty() {
                // Every task left waits for another: nothing can wake them.
                self.deadlock();
                return false;
            }
            return waiting;
        };
        // Every CPU that can run is at or past the chosen one's clock: uses of shared lines
        // that end before it can no longer be overtaken.
        self.machine.horizon = self.machine.horizon.max(horizon);
        self.run_seq += 1;
        let cpu = self.tasks[t].cpu;
        self.rq_dequeue(cpu, t);
        let left = self.sched[t].slice_left;
        self.sched[t] = SchedEntity { last_run: self.run_seq, queued: false, slice_left: 0.0, ready_at: 0.0 };
        self.sched_changed.insert(cpu);
        // A new slice for a task switched in, or for one whose slice ended with nothing else
        // to run (the tick renews it); what is left of a slice split at fork, if any.
        if !self.serial && (self.curr[cpu] != Some(t) || self.machine.clock[cpu] >= self.slice_end[cpu]) {
            // The task it replaces may now be pulled by an idle CPU.
            self.balance_gen += 1;
            self.curr[cpu] = Some(t);
            let clock = self.machine.clock[cpu];
            self.slice_end[cpu] =
                if left > 0.0 { self.nth_tick_after(clock, left) } else { self.slice_end_from(clock) };
        }
        // A context switch: the outgoing task's outstanding translations complete on its time.
        match self.machine.cpus[cpu].walk_task {
            Some(o) if o != t => {
                let stall = self.machine.drain_translations(cpu, &mut self.tasks[o].perf);
                self.machine.clock[cpu] += stall;
            }
            _ => {}
        }
        self.machine.cpus[cpu].walk_task = Some(t);
        // SMT: while a sibling thread of this CPU's core has a task to run, the two share it.
        if self.machine.p.cpu.smt > 1 {
            let busy = self.machine.smt_siblings(cpu).any(|s| !self.rq[s].is_empty());
            self.machine.set_siblings_busy(cpu, busy);
        }
        // The switch's cost is the incoming task's time, on its CPU's clock too.
        let before = self.tasks[t].perf.cycles;
        if let Some(mm) = self.tasks[t].mm {
            self.machine.switch_mm(cpu, mm, &mut self.tasks[t].perf);
        }
        self.quantum_base = before;
        self.machine.cpus[cpu].time_base = self.machine.clock[cpu] - before;
        // Keep CPUs in step: run until this CPU passes the next-earliest other busy CPU.
        let mine = self.machine.clock[cpu];
        // The earliest other busy CPU, from the clocks read when the task was picked (no other
        // CPU's clock has moved since). On the serial schedule none was read: one task runs at
        // a time, so nothing bounds it.
        let mut other = if earliest[0].1 == cpu { earliest[1].0 } else { earliest[0].0 };
        for (kt, _, _, kcpu) in kthreads.into_iter().flatten() {
            if kcpu != cpu {
                other = other.min(kt);
            }
        }
        self.time_limit = before + (other - mine).max(0.0) + SLICE_SLACK;
        // With others waiting on this CPU, the task yields it when its slice ends.
        if !self.serial && !self.rq[cpu].is_empty() {
            self.time_limit = self.time_limit.min(before + (self.slice_end[cpu] - mine).max(0.0));
        }
        if self.kernel.tp.is_some() {
            self.tp_run(cpu, Occupant::Task(t), self.machine.clock[cpu]);
        }
        self.run_task(t, QUANTUM);
        let spent = self.tasks[t].perf.cycles - before;
        self.machine.clock[cpu] += spent;
        self.machine.cpus[cpu].busy += spent;
        // A task that blocked or exited leaves its CPU idle unless another waits for it (then
        // the next round's switch is from this task to that one, as Linux switches).
        if self.kernel.tp.is_some() && self.tasks[t].state != TaskState::Running && self.rq[cpu].is_empty() {
            self.tp_run(cpu, Occupant::Idle, self.machine.clock[cpu]);
        }
        if matches!(self.tasks[t].state, TaskState::Exited | TaskState::Killed) {
            self.tasks[t].exit_clock = self.machine.clock[cpu];
        }
        if self.tasks[t].state == TaskState::Sleeping {
            let now = self.machine.clock[cpu];
            if self.tasks[t].wake_absolute {
                self.tasks[t].wake_at = self.tasks[t].wake_at.max(now);
            } else {
                self.tasks[t].wake_at += now;
            }
            // Keep `sleepers` in wake-up order, a later sleeper after the earlier ones of the
            // same time: the first is the one to wake (the first minimum of the order they
            // fell asleep in), without a scan of them all every round.
            let w = self.tasks[t].wake_at;
            let at = self.sleepers.partition_point(|&x| self.tasks[x].wake_at.total_cmp(&w).is_le());
            self.sleepers.insert(at, t);
        }
        // Still runnable: ready again from the end of its quantum. Else its CPU may go idle.
        if self.tasks[t].runnable() {
            self.sched[t].ready_at = self.machine.clock[cpu];
        } else {
            self.balance_gen += 1;
        }
        self.rq_requeue(t);
        self.wakeup_kscrubd(self.machine.clock[cpu]);
        self.wakeup_khugepaged(self.machine.clock[cpu]);
        self.wakeup_kswapd(self.machine.clock[cpu]);
        self.advance_loadavg();
        self.check_host_memory();
        true
    }

    /// Every task left waits and none can wake: a replay whose records cannot go on (its
    /// error), else a bug of the model.
    fn deadlock(&mut self) {
        let pids: Vec<u32> = self.waiters.iter().map(|&w| self.tasks[w].pid).collect();
        let msg = format!("every task left waits and none can wake them (pids {pids:?})");
        if self.waiters.iter().any(|&w| self.tasks[w].replay.is_some()) {
            self.replay_error.get_or_insert(format!("replay: {msg}"));
        } else {
            self.invariant_violation.get_or_insert(msg);
        }
    }

    /// When an awake kernel thread of `cpu` that may run from `ready_at` runs, and its key:
    /// not once every workload task has ended; at its CPU's clock if that has passed
    /// `ready_at`, at `ready_at` if the CPU has nothing else to run meanwhile, else not yet.
    pub(super) fn kthread_ready(&self, cpu: usize, ready_at: f64, last_run: u64) -> Option<(f64, u64)> {
        if self.tasks.iter().all(|t| matches!(t.state, TaskState::Exited | TaskState::Killed)) {
            return None;
        }
        let clock = self.machine.clock[cpu];
        if clock >= ready_at {
            Some((clock, last_run))
        } else if self.rq[cpu].is_empty() {
            Some((ready_at, last_run))
        } else {
            None
        }
    }

    /// A kernel thread starts a step on `cpu` at `at` (or its clock, if later): the task it
    /// preempts completes its outstanding translations first.
    pub(super) fn kthread_switch_in(&mut self, cpu: usize, at: f64) {
        let start = self.machine.clock[cpu].max(at);
        self.machine.clock[cpu] = start;
        if let Some(o) = self.machine.cpus[cpu].walk_task.take() {
            let stall = self.machine.drain_translations(cpu, &mut self.tasks[o].perf);
            self.machine.clock[cpu] += stall;
        }
        self.kernel.cur_cpu = cpu;
        self.kernel.in_kthread = true;
    }

    /// Each kernel thread that could run (kscrubd, khugepaged): its time, scheduling key,
    /// which, and its CPU. The earliest runs first, kscrubd on a tie.
    fn kthread_candidates(&self) -> [Option<(f64, u64, Kthread, usize)>; 3] {
        [
            self.kscrubd_candidate().map(|(t, lr)| (t, lr, Kthread::Kscrubd, self.kscrubd.cpu)),
            self.khugepaged_candidate().map(|(t, lr)| (t, lr, Kthread::Khugepaged, self.khugepaged.cpu)),
            self.kswapd_candidate().map(|(t, lr)| (t, lr, Kthread::Kswapd, self.kswapd.cpu)),
        ]
    }

    /// `pick_next_task` (kernel/sched/core.c) for `cpu`, as its (last_run, task) key: the
    /// current task while its slice lasts and it is runnable, else the runnable task that ran
    /// least recently (round robin: every slice goes to the task that waited longest, as
    /// EEVDF picks among equal-weight tasks; no vruntime is kept).
    pub(super) fn pick_next_task(&self, cpu: usize) -> (u64, usize) {
        if let Some(c) = self.curr[cpu] {
            // A runnable task is in its CPU's runqueue under its current key (`rq_update`; `c`
            // runs on `cpu`, a task's CPU being fixed at fork), and `queued` says whether it is:
            // neither the task nor the runqueue need be read.
            let SchedEntity { last_run, queued, .. } = self.sched[c];
            let key = (last_run, c);
            debug_assert_eq!(self.tasks[c].runnable(), queued);
            debug_assert_eq!(queued, self.rq[cpu].contains(&key));
            if queued && self.machine.clock[cpu] < self.slice_end[cpu] {
                return key;
            }
        }
        *self.rq[cpu].first().expect("busy cpus have tasks")
    }

    /// The CPU clock at which a slice that begins at `clock` ends: the first tick (a multiple
    /// of 1/HZ) at or after `sched/base_slice_ns` of running.
    pub(super) fn slice_end_from(&self, clock: f64) -> f64 {
        let freq = self.machine.p.cpu.freq_ghz * 1e9;
        let slice = self.kernel.knobs.sched_slice_ns(self.machine.cpus.len()) as f64 * 1e-9 * freq;
        self.tick_after(clock + slice)
    }

    /// Cycles between scheduler ticks (1/HZ).
    pub(super) fn tick(&self) -> f64 {
        self.machine.p.cpu.freq_ghz * 1e9 / f64::from(self.kernel.knobs.hz)
    }

    /// The first tick at or after `t`.
    fn tick_after(&self, t: f64) -> f64 {
        let tick = self.tick();
        (t / tick).ceil() * tick
    }

    /// The end of a slice of `left` cycles (whole ticks) begun at `clock`: the tick that
    /// many ticks after `clock` (the O(1) scheduler counts a timeslice down one tick at a
    /// time).
    fn nth_tick_after(&self, clock: f64, left: f64) -> f64 {
        let tick = self.tick();
        ((clock / tick).floor() + (left / tick).round()) * tick
    }

    /// `sched_fork` and `wake_up_new_task` of Linux 2.6's O(1) scheduler
    /// (`sched/child_runs_first`): the parent `t`, forking `child` at `now` (its CPU's time),
    /// gives the child half the ticks left of its timeslice, rounded up, and keeps the rest
    /// (none left: its slice ends now, `scheduler_tick`); a child on the parent's CPU, not
    /// sharing its mm, runs first: the parent's quantum ends now and the child, never run,
    /// is picked next, the parent keeping its ticks for its next turn.
    pub(super) fn sched_fork(&mut self, t: usize, child: usize, now: f64, shares_vm: bool) {
        let cpu = self.tasks[t].cpu;
        let tick = self.tick();
        let ticks = ((self.slice_end[cpu] - now) / tick).ceil().max(0.0);
        let child_ticks = ((ticks + 1.0) / 2.0).floor();
        let parent_ticks = ticks - child_ticks;
        self.sched[child].slice_left = child_ticks * tick;
        self.slice_end[cpu] = if parent_ticks > 0.0 { self.nth_tick_after(now, parent_ticks * tick) } else { now };
        if parent_ticks == 0.0 {
            self.time_limit = f64::NEG_INFINITY;
        } else if !self.rq[cpu].is_empty() {
            // Others wait on this CPU: the parent yields when its shorter slice ends.
            self.time_limit = self.time_limit.min(self.tasks[t].perf.cycles + (self.slice_end[cpu] - now));
        }
        if self.tasks[child].cpu == cpu && !shares_vm {
            self.sched[t].slice_left = parent_ticks * tick;
            self.slice_end[cpu] = now;
            self.time_limit = f64::NEG_INFINITY;
        }
    }

    /// Update the load average up to the scheduler's horizon (the earliest running CPU's time)
    /// from the tasks runnable now, kscrubd included while it is awake.
    pub(super) fn advance_loadavg(&mut self) {
        // The next update's time in cycles, a hair early: a horizon below it is below the
        // update's time in seconds however the division below rounds (nothing to do, and no
        // division every round).
        let freq = self.machine.p.cpu.freq_ghz * 1e9;
        let due = (self.loadavg.updates + 1) as f64 * super::kscrubd::LOAD_FREQ_SECS * freq;
        if self.machine.horizon < due * (1.0 - 1e-9) {
            return;
        }
        let secs = self.machine.horizon / (self.machine.p.cpu.freq_ghz * 1e9);
        let khugepaged = self.khugepaged.ready_at.is_some() && !self.khugepaged.sleeping;
        debug_assert_eq!(self.nr_running, self.rq.iter().map(|q| q.len() as u64).sum::<u64>());
        let active =
            self.nr_running + self.kscrubd.running as u64 + khugepaged as u64 + self.kswapd.ready_at.is_some() as u64;
        self.loadavg.advance(secs, active);
    }

    /// A sleeping task's time has come: it runs again, its CPU no earlier than then.
    pub(super) fn wake_sleeper(&mut self, s: usize) {
        self.sleepers.retain(|&x| x != s);
        if self.tasks[s].state != TaskState::Sleeping {
            return;
        }
        let (cpu, at) = (self.tasks[s].cpu, self.tasks[s].wake_at);
        let c = &mut self.machine.clock[cpu];
        *c = c.max(at);
        self.tasks[s].state = TaskState::Running;
        self.sched_entity(s).ready_at = at;
        self.rq_update(s);
        if self.kernel.knobs.sched_wakeup_preemption && !self.serial && self.curr[cpu] != Some(s) {
            // check_preempt_curr: the running task's slice ends at the wake-up.
            let now = self.machine.clock[cpu];
            if self.slice_end[cpu] > now {
                self.slice_end[cpu] = now;
            }
        }
    }

    /// `newidle_balance` and the idle CPU's periodic balance (kernel/sched/fair.c; 2.6.15's
    /// `idle_balance` and `rebalance_tick`): each CPU with no runnable task pulls one task
    /// waiting on the busiest CPU that has one to give (the most runnable tasks, at least
    /// two), the one that ran least recently: at once if the CPU went idle after the task was
    /// ready (newly idle), else at the CPU's first tick after (an idle CPU balances every
    /// tick). A task its CPU would run before then, the running one and a pinned one stay.
    /// Differs from Linux: a CPU's load is its count of runnable tasks (no weights, no
    /// domain hierarchy, no cache-hot test), and busy CPUs do not balance among themselves.
    fn idle_balance(&mut self) {
        let n = self.machine.cpus.len();
        let busy = self.busy_cpus.count();
        if self.nr_running as usize <= busy || busy == n {
            // No CPU has a task waiting, or none is idle.
            return;
        }
        // The CPUs with a task waiting, busiest first (then the lowest-numbered); again after
        // each pull, which changes two queues' lengths.
        let waiting = |s: &Self| {
            let mut from: Vec<(usize, usize)> =
                (0..n).filter(|&b| s.rq[b].len() >= 2).map(|b| (s.rq[b].len(), b)).collect();
            from.sort_by_key(|&(len, b)| (std::cmp::Reverse(len), b));
            from
        };
        let mut from = waiting(self);
        for c in 0..n {
            if !self.rq[c].is_empty() {
                continue;
            }
            if from.is_empty() {
                return;
            }
            if let Some((k, at)) = from.iter().find_map(|&(_, b)| self.can_pull(b, c)) {
                self.migrate_task(k, c, at);
                from = waiting(self);
            }
        }
    }

    /// The task idle CPU `c` would take from CPU `b`'s runqueue, and when: the least recently
    /// run task that may move (`can_migrate_task`: not `b`'s current task, not pinned, with
    /// no kernel work left over from its exit) and that `b` would not switch to first.
    fn can_pull(&self, b: usize, c: usize) -> Option<(usize, f64)> {
        let clock = self.machine.clock[c];
        // When `b` next switches tasks: at its current task's slice end while that one runs.
        let switch = match self.curr[b] {
            Some(cur) if self.sched[cur].queued => self.slice_end[b].max(self.machine.clock[b]),
            _ => self.machine.clock[b],
        };
        let mut first = true;
        for &(_, k) in self.rq[b].iter() {
            let task = &self.tasks[k];
            if Some(k) == self.curr[b] || task.pinned || task.state != TaskState::Running || !task.pending.is_empty() {
                continue;
            }
            let ready = self.sched[k].ready_at;
            let at = if clock >= ready { clock } else { self.tick_after(ready) };
            let at = at.max(self.machine.horizon);
            // The first waiting task runs on `b` at its next switch: pulled only if earlier.
            if !first || at < switch {
                return Some((k, at));
            }
            first = false;
        }
        None
    }

    /// `set_task_cpu` and the runqueue moves around it (`detach_task` / `attach_task`): task
    /// `k`, runnable and not running, goes to CPU `to`, which runs no earlier than `at`.
    fn migrate_task(&mut self, k: usize, to: usize, at: f64) {
        let from = self.tasks[k].cpu;
        self.rq_dequeue(from, k);
        self.sched[k].queued = false;
        self.sched_changed.insert(from);
        self.tasks[k].cpu = to;
        self.tasks[k].perf.cpu_migrations += 1;
        let c = &mut self.machine.clock[to];
        *c = c.max(at);
        self.rq_requeue(k);
        // Raised by the CPU that pulls it, when it does.
        let id = crate::tracepoints::ev::SCHED_MIGRATE_TASK;
        if self.kernel.tp.as_ref().is_some_and(|tp| tp.on(id)) {
            let (comm, pid) = (self.tp_comm(k), self.tasks[k].pid);
            let fields = format!("comm={comm} pid={pid} prio=120 orig_cpu={from} dest_cpu={to}");
            self.tp_push(comm, pid, to, self.machine.clock[to], id, fields);
        }
    }
}
