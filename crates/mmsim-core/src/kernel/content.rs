//! What a page holds: sparse byte contents (unwritten bytes read as zero). mmsim keeps the data
//! of every page so that COW, THP splits, sharing and zeroing can be checked against a reference
//! model; this has no single Linux counterpart (it is the RAM itself).

/// Overrides a page keeps in its own slot before it takes a heap allocation: a sparse write
/// (one byte a page, as most page-touching loops do) then costs no pointer to follow.
const FEW: usize = 3;

/// The bytes of one base page: a fill byte plus sorted per-byte overrides. 16 bytes: up to
/// `FEW` overrides inline, more behind one allocation (`FrameData::Data` holds it unboxed).
#[derive(Clone, Debug)]
pub struct PageContent(Repr);

#[derive(Clone, Debug)]
enum Repr {
    Few { base: u8, n: u8, over: [(u16, u8); FEW] },
    Many(Box<Many>),
}

#[derive(Clone, Debug)]
struct Many {
    base: u8,
    over: Vec<(u16, u8)>,
}

const _: () = assert!(std::mem::size_of::<PageContent>() == 16);

impl Default for PageContent {
    fn default() -> Self {
        PageContent::filled(0)
    }
}

/// Equal bytes, whichever form holds them (the overrides are canonical: sorted, none equal
/// to the fill byte).
impl PartialEq for PageContent {
    fn eq(&self, o: &Self) -> bool {
        self.base() == o.base() && self.over() == o.over()
    }
}

impl PageContent {
    /// A page whose every byte is `b` (0xaa is the kernel's PAGE_POISON, used for stale data).
    pub fn filled(b: u8) -> Self {
        PageContent(Repr::Few { base: b, n: 0, over: [(0, 0); FEW] })
    }

    #[inline]
    fn base(&self) -> u8 {
        match &self.0 {
            Repr::Few { base, .. } => *base,
            Repr::Many(m) => m.base,
        }
    }

    #[inline]
    fn over(&self) -> &[(u16, u8)] {
        match &self.0 {
            Repr::Few { n, over, .. } => &over[..*n as usize],
            Repr::Many(m) => &m.over,
        }
    }

    /// The byte at `off`.
    #[inline]
    pub fn get(&self, off: usize) -> u8 {
        let over = self.over();
        if over.is_empty() {
            return self.base();
        }
        match over.binary_search_by_key(&(off as u16), |e| e.0) {
            Ok(i) => over[i].1,
            Err(_) => self.base(),
        }
    }

    /// Host heap bytes of the overrides beyond the slot (their allocation and its header),
    /// for `engine.max_host_memory`.
    pub fn heap_bytes(&self) -> u64 {
        match &self.0 {
            Repr::Few { .. } => 0,
            Repr::Many(m) => {
                let vec = match m.over.capacity() {
                    0 => 0,
                    n => (n * std::mem::size_of::<(u16, u8)>()) as u64 + 16,
                };
                std::mem::size_of::<Many>() as u64 + 16 + vec
            }
        }
    }

    /// True when every byte is zero.
    pub fn is_zero(&self) -> bool {
        self.base() == 0 && self.over().is_empty()
    }

    /// True when every byte equals the fill byte (no overrides).
    pub fn uniform(&self) -> Option<u8> {
        self.over().is_empty().then_some(self.base())
    }

    /// Store `value` at offsets `start, start+stride, ...` below `end` (all within the page
    /// of `page_bytes`); a write of the whole page collapses it to a fill.
    pub fn write(&mut self, start: usize, end: usize, stride: usize, value: u8, page_bytes: usize) {
        debug_assert!(end <= page_bytes && page_bytes <= 1 << 16 && stride > 0);
        if start == 0 && end == page_bytes && stride == 1 {
            *self = PageContent::filled(value);
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
        match &mut self.0 {
            Repr::Few { base, n, over } => {
                let len = *n as usize;
                match over[..len].binary_search_by_key(&key, |e| e.0) {
                    Ok(i) if value == *base => {
                        over.copy_within(i + 1..len, i);
                        *n -= 1;
                    }
                    Ok(i) => over[i].1 = value,
                    Err(_) if value == *base => {}
                    Err(i) if len < FEW => {
                        over.copy_within(i..len, i + 1);
                        over[i] = (key, value);
                        *n += 1;
                    }
                    Err(i) => {
                        let mut v = Vec::with_capacity(2 * FEW + 2);
                        v.extend_from_slice(&over[..i]);
                        v.push((key, value));
                        v.extend_from_slice(&over[i..]);
                        self.0 = Repr::Many(Box::new(Many { base: *base, over: v }));
                    }
                }
            }
            Repr::Many(m) => match m.over.binary_search_by_key(&key, |e| e.0) {
                Ok(i) => {
                    if value == m.base {
                        m.over.remove(i);
                    } else {
                        m.over[i].1 = value;
                    }
                }
                Err(i) => {
                    if value != m.base {
                        m.over.insert(i, (key, value));
                    }
                }
            },
        }
    }

    /// First offset in `start..end` (stepping `stride`) where the byte differs from `want`.
    pub fn find_not(&self, start: usize, end: usize, stride: usize, want: u8) -> Option<usize> {
        if self.over().is_empty() {
            return (self.base() != want && start < end).then_some(start);
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

    proptest::proptest! {
        /// Any sequence of strided and whole-page writes leaves the bytes a plain page would
        /// hold, in whichever form (inline or allocated); equal bytes compare equal.
        #[test]
        fn contents_hold_what_a_plain_page_holds(
            writes in proptest::collection::vec((0usize..64, 1usize..70, 1usize..40, 0u8..4), 0..24),
        ) {
            const P: usize = 64;
            let (mut c, mut plain) = (PageContent::default(), [0u8; P]);
            for &(start, len, stride, value) in &writes {
                let (start, stride) = if len == 69 { (0, 1) } else { (start, stride) };
                let end = if len == 69 { P } else { (start + len).min(P) };
                c.write(start, end, stride, value, P);
                for off in (start..end).step_by(stride) {
                    plain[off] = value;
                }
            }
            for (off, &b) in plain.iter().enumerate() {
                proptest::prop_assert_eq!(c.get(off), b);
            }
            let fill = plain[0];
            proptest::prop_assert_eq!(c.is_zero(), plain.iter().all(|&b| b == 0));
            proptest::prop_assert_eq!(c.find_not(0, P, 1, fill), plain.iter().position(|&b| b != fill));
            // The same bytes written one at a time over the same fill compare equal.
            let mut d = PageContent::filled(c.base());
            for (off, &b) in plain.iter().enumerate() {
                d.write(off, off + 1, 1, b, P);
            }
            proptest::prop_assert!(c == d);
        }
    }

    #[test]
    fn a_fourth_byte_moves_the_overrides_to_the_heap_and_a_fill_brings_them_back() {
        let mut c = PageContent::default();
        c.write(0, 4096, 1024, 5, 4096);
        assert!(c.heap_bytes() > 0);
        assert_eq!((c.get(0), c.get(1024), c.get(3072), c.get(3073)), (5, 5, 5, 0));
        c.write(0, 4096, 2048, 0, 4096);
        assert_eq!((c.get(0), c.get(1024), c.get(2048)), (0, 5, 0));
        c.write(0, 4096, 1, 9, 4096);
        assert_eq!((c.uniform(), c.heap_bytes()), (Some(9), 0));
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
