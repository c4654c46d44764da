//! SMARTS-style sampling of loop iterations (`mmsim run --sample UNITS[:WARMUP]`, engine
//! option `engine.sample`), after Wunderlich et al., "SMARTS: accelerating microarchitecture
//! simulation via rigorous statistical sampling" (ISCA 2003).
//!
//! After every change of the kernel's state a loop runs WARMUP iterations in full (they warm
//! the TLBs, caches and prefetchers, and are measured in no unit), then measures UNITS units
//! in detail, each one iteration or, for short bodies, the fewest iterations that make
//! `SAMPLE_MIN_UNIT_STEPS` steps. The loop's remaining iterations (up to a sleeping kernel
//! thread's wake-up) are then added as the units' mean, and each counter gets a 95%
//! confidence interval from Student's t over the units. Unlike SMARTS, the iterations between
//! units are not functionally warmed: they are skipped, and the hardware state they would
//! have left is the last unit's (the units are the loop's last iterations before the skip).
//! Page faults, system calls and every kernel counter stay exact: a unit in which any of them
//! changes (or which takes a snapshot or reports an event) is discarded and the warm-up starts
//! again, so only iterations that leave the kernel as they found it are ever extrapolated. As
//! with exact fast-forward, a loop is sampled only while its task runs alone: skipping one of
//! two concurrent tasks would leave the other running without it, which no unit measured.

use super::*;

/// Steps a unit spans at least (shorter loop bodies are measured in spans of iterations).
const SAMPLE_MIN_UNIT_STEPS: u64 = 2048;

/// `engine.sample`: units measured per extrapolation and warm-up iterations before them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleSpec {
    pub units: u32,
    pub warmup: u32,
}

/// Why a `UNITS[:WARMUP]` sampling spec was refused, with the part as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SampleError {
    #[error("UNITS {0:?} is not a number")]
    Units(String),
    #[error("WARMUP {0:?} is not a number")]
    Warmup(String),
    #[error("UNITS is {0}: at least 2 units are needed for a confidence interval")]
    TooFewUnits(u32),
}

impl SampleSpec {
    /// `UNITS[:WARMUP]`, UNITS at least 2 (a variance needs two), WARMUP 1 if left out.
    pub fn parse(s: &str) -> Result<SampleSpec, SampleError> {
        let (u, w) = s.split_once(':').unwrap_or((s, "1"));
        let units: u32 = u.trim().parse().map_err(|_| SampleError::Units(u.into()))?;
        let warmup: u32 = w.trim().parse().map_err(|_| SampleError::Warmup(w.into()))?;
        if units < 2 {
            return Err(SampleError::TooFewUnits(units));
        }
        Ok(SampleSpec { units, warmup })
    }
}

/// What sampling did in a run, and the squared 95% half-widths of the counters it
/// extrapolated (summed over the extrapolations: their errors are independent).
#[derive(Clone, Debug, Default)]
pub struct SamplingStats {
    pub units_measured: u64,
    pub extrapolations: u64,
    pub extrapolated_iterations: u64,
    pub extrapolated_steps: u64,
    pub ci_sq: Vec<(&'static str, f64)>,
}

/// A loop frame's sampling state.
pub(super) struct SampleState {
    /// Kernel-neutral iterations still to run before units are measured.
    warm_left: u32,
    /// The measured units: their counts, iterations and steps.
    units: Vec<(PerfCounters, u64, u64)>,
    /// The state when the current unit (or warm-up iteration) began.
    start: Option<UnitStart>,
}

struct UnitStart {
    perf: PerfCounters,
    faults: i64,
    kernel: u64,
    outputs: u64,
    steps: u64,
    remaining: u64,
}

/// Student's t for a two-sided 95% interval with `df` degrees of freedom.
pub fn student_t95(df: u64) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df as usize - 1],
        // Within 0.002 of the exact quantile beyond 30 degrees of freedom.
        _ => 1.96 + 2.4 / df as f64,
    }
}

impl Interp {
    /// At the end of a loop iteration under `engine.sample`: warm up, measure, or extrapolate
    /// (see the module's comment).
    pub(super) fn sample_boundary(&mut self, t: usize, spec: SampleSpec) {
        let now = UnitStart {
            perf: self.tasks[t].perf.clone(),
            faults: self.kernel.stat.events[crate::kernel::vmstat::VmEvent::PgFault] + self.tasks[t].page_faults,
            kernel: self.kernel_digest(),
            outputs: self.outputs,
            steps: self.steps,
            remaining: self.tasks[t].frames.last().expect("frame").remaining,
        };
        // Another task running, a sleeping one or a running kernel thread: the units measured
        // them beside this task, which a skip of this task alone would change (the others
        // would run on without it, sharing the LLC and memory with nobody).
        let alone = self.runs_alone(t);
        let f = self.tasks[t].frames.last_mut().expect("frame");
        let st = f
            .sample
            .get_or_insert_with(|| Box::new(SampleState { warm_left: spec.warmup, units: Vec::new(), start: None }));
        let Some(s) = st.start.take() else {
            st.start = Some(now);
            return;
        };
        if now.steps - s.steps < SAMPLE_MIN_UNIT_STEPS && now.remaining > 0 {
            st.start = Some(s);
            return;
        }
        let neutral = s.faults == now.faults && s.kernel == now.kernel && s.outputs == now.outputs && alone;
        if !neutral {
            st.warm_left = spec.warmup;
            st.units.clear();
        } else if st.warm_left > 0 {
            st.warm_left -= 1;
        } else {
            st.units.push((now.perf.minus(&s.perf), s.remaining - now.remaining, now.steps - s.steps));
        }
        if st.units.len() < spec.units as usize {
            st.start = Some(now);
            return;
        }
        let units = std::mem::take(&mut st.units);
        st.start = Some(now);
        let remaining = f.remaining;
        let iters: u64 = units.iter().map(|u| u.1).sum();
        let steps: u64 = units.iter().map(|u| u.2).sum();
        let mut total = PerfCounters::default();
        for u in &units {
            total.add(&u.0);
        }
        // A sleeping khugepaged: extrapolate no iteration that would end at or past its
        // wake-up (it then runs where it would have, and the units start again after it).
        let n = remaining.min(self.spans_before_wake(t, total.cycles / iters as f64));
        if n == 0 {
            return;
        }
        self.tasks[t].frames.last_mut().expect("frame").remaining -= n;
        self.tasks[t].perf.add(&total.extrapolated(iters, n));
        self.sampling.units_measured += units.len() as u64;
        self.sampling.extrapolations += 1;
        self.sampling.extrapolated_iterations += n;
        self.sampling.extrapolated_steps += (steps as f64 * n as f64 / iters as f64).round() as u64;
        // The half-width of n iterations at the units' per-iteration rates.
        let k = units.len() as f64;
        let tq = student_t95(units.len() as u64 - 1);
        let rates: Vec<_> = units.iter().map(|u| u.0.fields().map(|(_, v)| v / u.1 as f64)).collect();
        for (i, (name, _)) in total.fields().into_iter().enumerate() {
            let mean = rates.iter().map(|r| r[i]).sum::<f64>() / k;
            let var = rates.iter().map(|r| (r[i] - mean).powi(2)).sum::<f64>() / (k - 1.0);
            let half = tq * n as f64 * (var / k).sqrt();
            match self.sampling.ci_sq.iter_mut().find(|e| e.0 == name) {
                Some(e) => e.1 += half * half,
                None => self.sampling.ci_sq.push((name, half * half)),
            }
        }
    }

    /// A digest of every vmstat counter (an iteration that changes one changed the kernel).
    pub(super) fn kernel_digest(&self) -> u64 {
        self.kernel
            .stat
            .entries()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, (_, v)| (h ^ *v as u64).wrapping_mul(0x100_0000_01b3))
    }
}
