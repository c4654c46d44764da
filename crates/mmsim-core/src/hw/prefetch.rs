//! The L2 stream prefetcher's trackers (Intel's "streamer", AMD's L2 stream prefetcher): each
//! follows one ascending stream of L1 misses by the last line it saw.

/// `cache.prefetch_streams` trackers, most recently used first: a miss that continues a
/// stream (the line after one a tracker last saw) moves that tracker to the front, any other
/// miss takes the least recently used one. So the trackers' state depends only on the recent
/// misses, and a repeating access pattern leaves them as it found them.
#[derive(Clone, Debug)]
pub struct StreamTrackers {
    /// The last line of each tracker's stream (u64::MAX before its first).
    last: Vec<u64>,
}

impl StreamTrackers {
    pub fn new(trackers: usize) -> StreamTrackers {
        StreamTrackers { last: vec![u64::MAX; trackers] }
    }

    /// An L1 miss of `line`: whether it continues a stream. The tracker that followed the
    /// stream (or, for a new one, the least recently used tracker) now holds `line`.
    #[inline(always)]
    pub fn observe(&mut self, line: u64) -> bool {
        let prev = line.wrapping_sub(1);
        let t = &mut self.last[..];
        let Some(first) = t.first_mut() else { return false };
        // A sequential stream continues the most recent tracker's: nothing moves.
        if *first == prev {
            *first = line;
            return true;
        }
        let n = t.len();
        let (hit, moved) = match t[1..].iter().position(|&s| s == prev) {
            Some(i) => (true, i + 1),
            None => (false, n - 1),
        };
        t.copy_within(0..moved, 1);
        t[0] = line;
        hit
    }

    /// `observe` of the `n` (at least one) consecutive lines from `line`, one after another:
    /// whether the first continued a stream, and whether all the others did (each continues
    /// the stream its predecessor's `observe` left in the most recent tracker, so they all do
    /// when there are trackers, and none moves a tracker but the first).
    #[inline(always)]
    pub fn observe_run(&mut self, line: u64, n: u64) -> (bool, bool) {
        debug_assert!(n >= 1);
        let hit = self.observe(line);
        match self.last.first_mut() {
            Some(first) => {
                *first = line + (n - 1);
                (hit, true)
            }
            None => (hit, n == 1),
        }
    }

    /// Each tracker's last line, most recently used first (the state a digest covers).
    pub fn lines(&self) -> &[u64] {
        &self.last
    }
}

#[cfg(test)]
mod tests {
    use super::StreamTrackers;

    /// The trackers as they were kept before (rotations of a vector), for comparison.
    fn reference(streams: &mut [u64], line: u64) -> bool {
        match streams.iter().position(|&s| s.wrapping_add(1) == line) {
            Some(i) => {
                streams[..=i].rotate_right(1);
                streams[0] = line;
                true
            }
            None => {
                if let Some(last) = streams.len().checked_sub(1) {
                    streams[..=last].rotate_right(1);
                    streams[0] = line;
                }
                false
            }
        }
    }

    #[test]
    fn trackers_follow_streams_most_recent_first() {
        for n in [0usize, 1, 2, 8, 32] {
            let mut t = StreamTrackers::new(n);
            let mut r = vec![u64::MAX; n];
            let mut x = 7u64;
            for step in 0..5000u64 {
                // Interleaved ascending streams, repeats, random lines and line 0.
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let line = match x >> 61 {
                    0 | 1 => step / 3,
                    2 => 1000 + step / 2,
                    3 => 0,
                    4 => step,
                    _ => (x >> 20) % 64,
                };
                assert_eq!(t.observe(line), reference(&mut r, line), "{n} trackers, step {step}");
                assert_eq!(t.lines(), &r[..]);
            }
        }
    }

    #[test]
    fn a_run_of_lines_is_observed_as_one_line_after_another() {
        for trackers in [0usize, 1, 3, 16] {
            let (mut t, mut r) = (StreamTrackers::new(trackers), vec![u64::MAX; trackers]);
            let mut x = 11u64;
            for step in 0..3000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                // Runs that start anywhere, continue a stream, or start at line 0.
                let line = match x >> 62 {
                    0 => 0,
                    1 => r.first().map_or(0, |&l| l.wrapping_add(1)),
                    _ => (x >> 20) % 512,
                };
                let n = 1 + (x >> 8) % 70;
                let first = reference(&mut r, line);
                // Every one observed (no short circuit), all continuing.
                let rest = (1..n).map(|i| reference(&mut r, line + i)).filter(|&hit| !hit).count() == 0;
                let want = (first, rest);
                assert_eq!(t.observe_run(line, n), want, "{trackers} trackers, step {step}");
                assert_eq!(t.lines(), &r[..]);
            }
        }
    }
}
