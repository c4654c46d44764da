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
        let others = self.busy_cpus.iter().any(|&c| self.rq[c].iter().any(|&(_, i)| i != t))
            || self.kscrubd.running
            || (self.khugepaged.ready_at.is_some() && !self.khugepaged.sleeping)
            || !self.sleepers.is_empty();
        if others || !self.fast_forward {
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
        // A sleeping khugepaged's wake-up, and the task's time now.
        let wake =
            self.khugepaged.ready_at.map(|at| (at, self.machine.cpus[self.tasks[t].cpu].time_base + perf.cycles));
        let f = self.tasks[t].frames.last_mut().expect("frame");
        if let Some(m) = f.mark.take() {
            if m.digest == digest && m.faults == faults && m.kernel == kernel && m.outputs == self.outputs {
                // The last K iterations left everything as they found it: skip whole spans of K.
                let k = m.remaining - f.remaining;
                let mut spans = f.remaining / k;
                // A sleeping khugepaged: skip no span that would end at or past its wake-up
                // (it then runs where it would have without the skip, at a quantum's end).
                if let Some((at, now)) = wake {
                    let room = ((at - now) / (perf.cycles - m.perf.cycles)).floor();
                    spans = spans.min(if room > 1.0 { room as u64 - 1 } else { 0 });
                }
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
}
