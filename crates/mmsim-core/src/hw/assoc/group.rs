//! Tags compared with a key LANES ways at a time. A match mask of 64-bit tags has two bits per
//! way (bits 2i and 2i + 1 for way i of the group), so the first matching way is
//! `trailing_zeros / 2`; one of 32-bit tags (a compact array's) has one bit per way. SSE2
//! (every x86-64) where available, the same results in plain Rust elsewhere.

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::super::LANES;
    use core::arch::x86_64::*;

    /// Ways of the group whose tag is `key`.
    #[inline(always)]
    pub fn match_tags(tags: &[u64; LANES], key: u64) -> u32 {
        // SAFETY: SSE2 is part of x86-64; the loads read the group's 64 bytes.
        unsafe {
            let k = _mm_set1_epi64x(key as i64);
            let p = tags.as_ptr() as *const __m128i;
            // Equal 32-bit halves, packed to one byte per half: a tag matches where both of its
            // bytes are set.
            let e0 = _mm_cmpeq_epi32(_mm_loadu_si128(p), k);
            let e1 = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(1)), k);
            let e2 = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(2)), k);
            let e3 = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(3)), k);
            let m = _mm_movemask_epi8(_mm_packs_epi16(_mm_packs_epi32(e0, e1), _mm_packs_epi32(e2, e3))) as u32;
            m & (m >> 1) & 0x5555
        }
    }

    /// Ways of the group whose tag is `key`, one bit per way (bit i: way i), with AVX2's
    /// 64-bit compares: for callers compiled with AVX2 (`has_avx2`).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub fn match_ways_avx2(tags: &[u64; LANES], key: u64) -> u32 {
        let k = _mm256_set1_epi64x(key as i64);
        let p = tags.as_ptr() as *const __m256i;
        // SAFETY: the two loads read the group's 64 bytes.
        let (a, b) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
        let a = _mm256_castsi256_pd(_mm256_cmpeq_epi64(a, k));
        let b = _mm256_castsi256_pd(_mm256_cmpeq_epi64(b, k));
        (_mm256_movemask_pd(a) | (_mm256_movemask_pd(b) << 4)) as u32
    }

    /// Ways of a group of LANES 32-bit tags whose tag is `tag`, one bit per way.
    #[inline(always)]
    pub fn match_tags32(tags: &[u32; LANES], tag: u32) -> u32 {
        // SAFETY: SSE2 is part of x86-64; the loads read the group's 32 bytes.
        unsafe {
            let k = _mm_set1_epi32(tag as i32);
            let p = tags.as_ptr() as *const __m128i;
            let e0 = _mm_cmpeq_epi32(_mm_loadu_si128(p), k);
            let e1 = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(1)), k);
            // One byte per way (the low eight of the sixteen).
            let b = _mm_packs_epi16(_mm_packs_epi32(e0, e1), _mm_setzero_si128());
            _mm_movemask_epi8(b) as u32
        }
    }

    /// `match_tags32` with AVX2's 32-bit compares: for callers compiled with AVX2
    /// (`has_avx2`).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub fn match_ways32_avx2(tags: &[u32; LANES], tag: u32) -> u32 {
        // SAFETY: the load reads the group's 32 bytes.
        let a = unsafe { _mm256_loadu_si256(tags.as_ptr() as *const __m256i) };
        let e = _mm256_cmpeq_epi32(a, _mm256_set1_epi32(tag as i32));
        _mm256_movemask_ps(_mm256_castsi256_ps(e)) as u32
    }

    /// Whether this CPU has AVX2 (`match_ways_avx2`).
    pub fn has_avx2() -> bool {
        std::arch::is_x86_feature_detected!("avx2")
    }

    /// Bit i set where `bytes[i] == b`.
    #[inline(always)]
    pub fn match_bytes(bytes: &[u8; 16], b: u8) -> u32 {
        // SAFETY: SSE2; the load reads the 16 bytes.
        unsafe {
            let x = _mm_loadu_si128(bytes.as_ptr() as *const __m128i);
            _mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(b as i8))) as u32
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use super::super::LANES;

    /// No AVX2 off x86-64 (`match_ways_avx2` is never called).
    pub fn has_avx2() -> bool {
        false
    }

    pub fn match_ways_avx2(tags: &[u64; LANES], key: u64) -> u32 {
        tags.iter().enumerate().fold(0, |m, (i, &t)| m | (((t == key) as u32) << i))
    }

    #[inline(always)]
    pub fn match_tags(tags: &[u64; LANES], key: u64) -> u32 {
        tags.iter().enumerate().fold(0, |m, (i, &t)| m | (((t == key) as u32) << (2 * i)))
    }

    #[inline(always)]
    pub fn match_tags32(tags: &[u32; LANES], tag: u32) -> u32 {
        tags.iter().enumerate().fold(0, |m, (i, &t)| m | (((t == tag) as u32) << i))
    }

    pub fn match_ways32_avx2(tags: &[u32; LANES], tag: u32) -> u32 {
        match_tags32(tags, tag)
    }

    #[inline(always)]
    pub fn match_bytes(bytes: &[u8; 16], b: u8) -> u32 {
        bytes.iter().enumerate().fold(0, |m, (i, &x)| m | (((x == b) as u32) << i))
    }
}

pub use imp::{has_avx2, match_bytes, match_tags, match_tags32, match_ways32_avx2, match_ways_avx2};
