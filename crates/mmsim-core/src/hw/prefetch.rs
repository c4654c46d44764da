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
}
