//! What a page holds: sparse byte contents (unwritten bytes read as zero). mmsim keeps the data
//! of every page so that COW, THP splits, sharing and zeroing can be checked against a reference
//! model; this has no single Linux counterpart (it is the RAM itself).

/// The bytes of one base page: a fill byte plus sorted per-byte overrides.
#[derive(Clone, Debug, Default)]
pub struct PageContent {
    base: u8,
    over: Vec<(u16, u8)>,
}

impl PartialEq for PageContent {
    fn eq(&self, o: &Self) -> bool {
        self.base == o.base && self.over == o.over
    }
}

impl PageContent {
    /// A page whose every byte is `b` (0xaa is the kernel's PAGE_POISON, used for stale data).
    pub fn filled(b: u8) -> Self {
        PageContent { base: b, over: Vec::new() }
    }

    /// The byte at `off`.
    #[inline]
    pub fn get(&self, off: usize) -> u8 {
        if self.over.is_empty() {
            return self.base;
        }
        match self.over.binary_search_by_key(&(off as u16), |e| e.0) {
            Ok(i) => self.over[i].1,
            Err(_) => self.base,
        }
    }

    /// Host heap bytes of the overrides (their allocation and its header), for
    /// `engine.max_host_memory`.
    pub fn heap_bytes(&self) -> u64 {
        match self.over.capacity() {
            0 => 0,
            n => (n * std::mem::size_of::<(u16, u8)>()) as u64 + 16,
        }
    }

    /// True when every byte is zero.
    pub fn is_zero(&self) -> bool {
        self.base == 0 && self.over.is_empty()
    }

    /// True when every byte equals the fill byte (no overrides).
    pub fn uniform(&self) -> Option<u8> {
        self.over.is_empty().then_some(self.base)
    }

    /// Store `value` at offsets `start, start+stride, ...` below `end` (all within the page
    /// of `page_bytes`); a write of the whole page collapses it to a fill.
    pub fn write(&mut self, start: usize, end: usize, stride: usize, value: u8, page_bytes: usize) {
        debug_assert!(end <= page_bytes && page_bytes <= 1 << 16 && stride > 0);
        if start == 0 && end == page_bytes && stride == 1 {
            self.base = value;
            self.over.clear();
            return;
        }
        let mut off = start;
        while off < end {
            self.set(off, value);
            off += stride;
        }
    }

    fn set(&mut self, off: usize, value: u8) {
        let key = off as u16;
        match self.over.binary_search_by_key(&key, |e| e.0) {
            Ok(i) => {
                if value == self.base {
                    self.over.remove(i);
                } else {
                    self.over[i].1 = value;
                }
            }
            Err(i) => {
                if value != self.base {
                    self.over.insert(i, (key, value));
                }
            }
        }
    }

    /// First offset in `start..end` (stepping `stride`) where the byte differs from `want`.
    pub fn find_not(&self, start: usize, end: usize, stride: usize, want: u8) -> Option<usize> {
        if self.over.is_empty() {
            return (self.base != want && start < end).then_some(start);
        }
        let mut off = start;
        while off < end {
            if self.get(off) != want {
                return Some(off);
            }
            off += stride;
        }
        None
    }
}

/// Helpers over optional contents, where `None` means an all-zero page.
pub fn byte_at(c: Option<&PageContent>, off: usize) -> u8 {
    c.map_or(0, |c| c.get(off))
}

/// First offset in `start..end` where two pages differ (memcmp over one page).
pub fn first_difference(a: Option<&PageContent>, b: Option<&PageContent>, start: usize, end: usize) -> Option<usize> {
    match (a, b) {
        (None, None) => None,
        (Some(x), Some(y)) if x == y => None,
        _ => (start..end).find(|&o| byte_at(a, o) != byte_at(b, o)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_writes_and_reads() {
        let mut c = PageContent::default();
        assert!(c.is_zero());
        c.write(0, 4096, 512, 7, 4096);
        assert_eq!(c.get(0), 7);
        assert_eq!(c.get(1), 0);
        assert_eq!(c.get(512), 7);
        assert_eq!(c.find_not(0, 4096, 512, 7), None);
        assert_eq!(c.find_not(0, 4096, 1, 7), Some(1));
        c.write(0, 4096, 1, 3, 4096);
        assert_eq!(c.uniform(), Some(3));
        c.write(10, 11, 1, 3, 4096);
        assert_eq!(c.uniform(), Some(3), "writing the fill byte adds no override");
    }

    #[test]
    fn memcmp_pages() {
        let mut a = PageContent::default();
        assert_eq!(first_difference(None, Some(&a), 0, 4096), None);
        a.write(100, 101, 1, 1, 4096);
        assert_eq!(first_difference(None, Some(&a), 0, 4096), Some(100));
        assert_eq!(first_difference(None, Some(&a), 101, 4096), None);
    }
}
