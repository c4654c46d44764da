//! Loop fast-forward: whole spans of loop iterations that leave the machine and the kernel as
//! they found them are added at once instead of simulated one by one (exact).

use super::*;

impl Interp {
    /// At the end of a loop iteration: if the iterations since the mark started from exactly
    /// the state they ended in (caches, TLBs, every vmstat counter, no fault, one task
    /// running), every later span of as many iterations would repeat them: add their counts
    /// at once (exact fast-forward).
    pub(super) fn iteration_boundary(&mut self, t: usize) {
        if let Some(spec) = self.sample {
            return self.sample_boundary(t, spec);
        }
        if !self.runs_alone(t) || !self.fast_forward {
            self.tasks[t].frames.last_mut().expect("frame").mark = None;
            return;
        }
        let faults = self.kernel.stat.events[crate::kernel::vmstat::VmEvent::PgFault] + self.tasks[t].page_faults;
        let steps = self.steps;
        let f = self.tasks[t].frames.last().expect("frame");
        // Short iterations are compared in spans of several (the digest costs more than a few
        // steps): a state that repeats after K iterations repeats every K iterations after.
        if f.mark.as_ref().is_some_and(|m| steps - m.steps < FAST_FORWARD_MIN_STEPS) {
            return;
        }
        let digest = self.machine.digest();
        let kernel = self.kernel_digest();
        let perf = self.tasks[t].perf.clone();
        let room = f.mark.as_ref().map_or(u64::MAX, |m| self.spans_before_wake(t, perf.cycles - m.perf.cycles));
        let f = self.tasks[t].frames.last_mut().expect("frame");
        if let Some(m) = f.mark.take() {
            if m.digest == digest && m.faults == faults && m.kernel == kernel && m.outputs == self.outputs {
                // The last K iterations left everything as they found it: skip whole spans of K.
                let k = m.remaining - f.remaining;
                // A sleeping khugepaged runs where it would have without the skip, at a
                // quantum's end.
                let spans = (f.remaining / k).min(room);
                if spans == 0 {
                    f.mark = None;
                    return;
                }
                f.remaining -= spans * k;
                // The skipped cycles reach the CPU clock with the rest of this quantum's.
                let delta = perf.minus(&m.perf).scaled(spans);
                self.tasks[t].perf.add(&delta);
                self.fast_forwarded += spans * k;
                self.fast_forward_steps += (steps - m.steps) * spans;
                return;
            }
        }
        let f = self.tasks[t].frames.last_mut().expect("frame");
        let outputs = self.outputs;
        f.mark = Some(IterMark { digest, perf, faults, kernel, steps, outputs, remaining: f.remaining });
    }

    /// Whether task `t` runs alone: no other task runnable on any CPU, none sleeping, no
    /// kernel thread awake. Only then may its loop iterations be skipped (fast-forward or
    /// sampling): the others would otherwise run on beside a task that is no longer there.
    pub(super) fn runs_alone(&self, t: usize) -> bool {
        !(self.busy_cpus.iter().any(|c| self.rq[c].iter().any(|&(_, i)| i != t))
            || self.kscrubd.running
            || (self.khugepaged.ready_at.is_some() && !self.khugepaged.sleeping)
            || !self.sleepers.is_empty())
    }

    /// How many spans of `span_cycles` task `t` may skip: none that would end at or past a
    /// sleeping khugepaged's wake-up (all of them without one).
    pub(super) fn spans_before_wake(&self, t: usize, span_cycles: f64) -> u64 {
        let Some(at) = self.khugepaged.ready_at else { return u64::MAX };
        let now = self.machine.cpus[self.tasks[t].cpu].time_base + self.tasks[t].perf.cycles;
        let room = ((at - now) / span_cycles).floor();
        if room > 1.0 {
            room as u64 - 1
        } else {
            0
        }
    }
}
