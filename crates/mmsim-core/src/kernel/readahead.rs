//! mm/readahead.c (Linux 6.18): the readahead state of an open file (`file_ra_state`), the
//! window sizes (`get_init_ra_size`, `get_next_ra_size`), the synchronous readahead of a cache
//! miss (`page_cache_sync_ra`), the asynchronous readahead started at a folio marked
//! PG_readahead (`page_cache_async_ra`), and the folio orders they create
//! (`page_cache_ra_order`: +2 per async window, capped by the window, the mapping's largest
//! order and the index's alignment). The page cache is reached through [`RaMapping`], so the
//! rules are written once for every `address_space` (docs/research/ has the rules and the
//! measurements on Linux 6.18.44 they are tested against). Differs from Linux: I/O is not
//! here (a folio is added uptodate; its cost is the caller's), and no allocation fails.

use crate::units::{align_down, is_aligned};

/// The page cache of one file as readahead sees it (an `address_space`): which indices hold
/// a folio, adding one, and the folio orders the mapping allows.
pub trait RaMapping {
    /// `i_size` in bytes.
    fn i_size(&self) -> u64;
    /// `mapping_min_folio_order` / `mapping_max_folio_order` (ext4 since 6.16: 0 and 9;
    /// tmpfs without huge=: 0 and 0).
    fn folio_orders(&self) -> (u32, u32);
    /// Whether a folio covers page `index`.
    fn cached(&self, index: u64) -> bool;
    /// Add a folio of `order` at `index` (aligned to it) and set PG_readahead on it if
    /// `mark`; false, adding nothing, if any page of its range is cached (-EEXIST).
    fn add_folio(&mut self, index: u64, order: u32, mark: bool) -> bool;
    /// PAGE_SHIFT.
    fn page_shift(&self) -> u32 {
        12
    }
}

/// `struct file_ra_state`: one open file's readahead window (`start`, `size` pages, the last
/// `async_size` of which start the next window when reached), its readahead limit
/// (`ra_pages`, the device's `read_ahead_kb` at open), the order of the last window's folios,
/// the mmap miss count and the position after the last read(2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRaState {
    pub start: u64,
    pub size: u64,
    pub async_size: u64,
    pub ra_pages: u64,
    pub order: u32,
    pub mmap_miss: u32,
    /// Byte after the last read(2); None is Linux's -1 (nothing read yet).
    pub prev_pos: Option<u64>,
}

impl FileRaState {
    /// `file_ra_state_init`: the device's `ra_pages`, nothing read yet.
    pub fn new(ra_pages: u64) -> FileRaState {
        FileRaState { start: 0, size: 0, async_size: 0, ra_pages, order: 0, mmap_miss: 0, prev_pos: None }
    }
}

/// The block device's readahead limits (`backing_dev_info`): `ra_pages` (`read_ahead_kb` / 4)
/// and `io_pages` (`max_sectors_kb` / 4), which a large request may read up to.
#[derive(Clone, Copy, Debug)]
pub struct Bdi {
    pub ra_pages: u64,
    pub io_pages: u64,
}

/// `get_init_ra_size`: the first window for a request of `size` pages: four times the
/// request (rounded up to a power of two) if small, twice if medium, else `max`.
pub fn get_init_ra_size(size: u64, max: u64) -> u64 {
    let n = size.max(1).next_power_of_two();
    if n <= max / 32 {
        n * 4
    } else if n <= max / 4 {
        n * 2
    } else {
        max
    }
}

/// `get_next_ra_size`: the window after one of `cur` pages: four times if small, twice if
/// medium, else `max` (which can shrink a window larger than `max`).
pub fn get_next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

/// `ractl_max_pages`: the window limit for a request of `req` pages: `ra_pages`, or up to
/// the device's `io_pages` for a larger request.
fn ractl_max_pages(ra: &FileRaState, bdi: Bdi, req: u64) -> u64 {
    let max = ra.ra_pages;
    if req > max && bdi.io_pages > max {
        req.min(bdi.io_pages)
    } else {
        max
    }
}

/// The last page index of the file, or None for an empty file.
fn eof_index(m: &impl RaMapping) -> Option<u64> {
    let size = m.i_size();
    (size > 0).then(|| (size - 1) >> m.page_shift())
}

/// `page_cache_ra_unbounded`: `nr` pages from `index` in folios of the mapping's minimum
/// order, skipping those cached; PG_readahead on the page `lookahead` before the end (none
/// for 0).
pub fn page_cache_ra_unbounded(m: &mut impl RaMapping, index: u64, nr: u64, lookahead: u64) {
    let (min_order, _) = m.folio_orders();
    let min_nr = 1u64 << min_order;
    let first = align_down(index, min_nr);
    let mark = (lookahead > 0 && lookahead <= nr).then(|| (index + nr - lookahead).next_multiple_of(min_nr) - first);
    let mut i = 0;
    while i < nr {
        if !m.cached(first + i) {
            m.add_folio(first + i, min_order, mark == Some(i));
        }
        i += min_nr;
    }
}

/// `do_page_cache_ra`: `page_cache_ra_unbounded` clipped to the end of the file.
pub fn do_page_cache_ra(m: &mut impl RaMapping, index: u64, nr: u64, lookahead: u64) {
    let Some(eof) = eof_index(m) else { return };
    if index > eof {
        return;
    }
    page_cache_ra_unbounded(m, index, nr.min(eof - index + 1), lookahead);
}

/// `force_page_cache_ra`: read `nr` pages from `index` whatever the window (fadvise
/// WILLNEED, a random reader), in chunks of 2 MiB, minimum-order folios, no mark; the
/// readahead state is left alone.
pub fn force_page_cache_ra(m: &mut impl RaMapping, ra: &FileRaState, bdi: Bdi, index: u64, nr: u64) {
    let mut nr = nr.min(bdi.io_pages.max(ra.ra_pages));
    let mut index = index;
    // 2 MiB at a time.
    let most = (2u64 << 20) >> m.page_shift();
    while nr > 0 {
        let chunk = nr.min(most);
        do_page_cache_ra(m, index, chunk, 0);
        index += chunk;
        nr -= chunk;
    }
}

/// `page_cache_ra_order`: fill the window [`ra.start`, `ra.start + ra.size`) from `index`
/// with folios of `ra.order` (clamped to the mapping's orders and to log2 of the window,
/// and stored back), each as large as its index's alignment and the window's end (or the
/// file's) allow; PG_readahead on the folio holding the window's async mark. Where a folio
/// cannot be added (a page of its range is cached), the rest of the window is read in
/// minimum-order folios (`do_page_cache_ra`).
pub fn page_cache_ra_order(m: &mut impl RaMapping, ra: &mut FileRaState, index: u64) {
    let Some(eof) = eof_index(m) else { return };
    if ra.size == 0 {
        // An empty window (a zero ra_pages reached through a caller's arithmetic): nothing.
        return;
    }
    let start = index;
    let limit = eof.min(start + ra.size - 1);
    let mark = start + ra.size - ra.async_size;
    let (min_order, max_order) = m.folio_orders();
    let mut index = align_down(start, 1 << min_order);
    if max_order > 0 {
        let new = ra.order.min(max_order).min(ra.size.max(1).ilog2()).max(min_order);
        ra.order = new;
        let mut failed = false;
        while index <= limit {
            let mut o = new;
            if !is_aligned(index, 1 << o) {
                o = index.trailing_zeros();
            }
            while o > min_order && index + (1u64 << o) - 1 > limit {
                o -= 1;
            }
            let marked = index == align_down(mark, 1 << o);
            if !m.add_folio(index, o, marked) {
                failed = true;
                break;
            }
            index += 1u64 << o;
        }
        if !failed {
            return;
        }
    } else {
        ra.order = 0;
    }
    if ra.size > index - start {
        do_page_cache_ra(m, index, ra.size - (index - start), ra.async_size);
    }
}

/// `page_cache_prev_miss`: the nearest index at or below `index` (looking at most `max`
/// back) with no folio; None when every one is cached down to page 0 (Linux's ULONG_MAX).
fn page_cache_prev_miss(m: &impl RaMapping, index: u64, max: u64) -> Option<u64> {
    let mut i = index;
    for _ in 0..max {
        if !m.cached(i) {
            return Some(i);
        }
        if i == 0 {
            return None;
        }
        i -= 1;
    }
    Some(i)
}

/// `page_cache_next_miss`: the first index at or above `index` (looking at most `max` on)
/// with no folio, else `index + max`.
fn page_cache_next_miss(m: &impl RaMapping, index: u64, max: u64) -> u64 {
    (index..index + max).find(|&i| !m.cached(i)).unwrap_or(index + max)
}

/// `page_cache_sync_ra`: a read of `req` pages from `index` found page `index` uncached.
/// A random reader (FMODE_RANDOM) or a file with readahead off reads just the request; the
/// start of the file, a sequential read (the page after the last one read) or an oversized
/// one starts a new window of `get_init_ra_size`; a read with `req` or fewer cached pages
/// before it reads the request alone; one with more (an interleaved stream) sizes the window
/// from them. The window is read at order 0 (the ramp starts again).
pub fn page_cache_sync_ra(m: &mut impl RaMapping, ra: &mut FileRaState, bdi: Bdi, index: u64, req: u64, random: bool) {
    let (mut req, mut forced) = (req, random);
    if ra.ra_pages == 0 {
        req = 1;
        forced = true;
    }
    if forced {
        force_page_cache_ra(m, ra, bdi, index, req);
        return;
    }
    let max = ractl_max_pages(ra, bdi, req);
    let sequential = ra.prev_pos.is_some_and(|p| index.wrapping_sub(p >> m.page_shift()) <= 1);
    if index == 0 || req > max || sequential {
        ra.start = index;
        ra.size = get_init_ra_size(req, max);
        ra.async_size = if ra.size > req { ra.size - req } else { ra.size / 2 };
    } else {
        let miss = if index == 0 { Some(0) } else { page_cache_prev_miss(m, index - 1, max) };
        let mut contig = match miss {
            Some(miss) => index - miss - 1,
            None => index,
        };
        if contig <= req {
            do_page_cache_ra(m, index, req, 0);
            return;
        }
        if miss.is_none() {
            contig *= 2;
        }
        ra.start = index;
        ra.size = (contig + req).min(max);
        ra.async_size = 1;
    }
    ra.order = 0;
    let start = ra.start;
    page_cache_ra_order(m, ra, start);
}

/// `page_cache_async_ra`: a read (or fault) at `index` reached the folio at `folio_index` of
/// `folio_nr` pages, marked PG_readahead (the caller clears the mark): the next window. In
/// sequence (the folio holds the window's async mark) it follows the window, `get_next_ra_size`
/// larger; else (the state is another stream's) it starts at the first uncached page after
/// `index`. Its folios are two orders larger, and its end is cut back to their alignment.
pub fn page_cache_async_ra(
    m: &mut impl RaMapping,
    ra: &mut FileRaState,
    bdi: Bdi,
    index: u64,
    folio_nr: u64,
    req: u64,
) {
    if ra.ra_pages == 0 {
        return;
    }
    let max = ractl_max_pages(ra, bdi, req);
    let expected = align_down(ra.start + ra.size - ra.async_size, folio_nr.max(1));
    if index == expected {
        ra.start += ra.size;
        ra.size = ra.size.max(get_next_ra_size(ra.size, max));
    } else {
        let start = page_cache_next_miss(m, index + 1, max);
        if start == 0 || start - index > max {
            return;
        }
        ra.start = start;
        ra.size = get_next_ra_size(start - index + req, max);
    }
    ra.order += 2;
    // ffs(max) - 1: the largest power of two dividing max.
    let align = 1u64 << ra.order.min(max.max(1).trailing_zeros());
    let end = ra.start + ra.size;
    let aligned = align_down(end, align);
    if aligned > ra.start {
        ra.size -= end - aligned;
    }
    ra.async_size = ra.size;
    let start = ra.start;
    page_cache_ra_order(m, ra, start);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A file's page cache: folio index -> (order, PG_readahead).
    struct Cache {
        size: u64,
        orders: (u32, u32),
        folios: BTreeMap<u64, (u32, bool)>,
    }

    impl Cache {
        fn new(size: u64, orders: (u32, u32)) -> Cache {
            Cache { size, orders, folios: BTreeMap::new() }
        }
        fn folio(&self, index: u64) -> Option<(u64, u32, bool)> {
            let (&i, &(o, mark)) = self.folios.range(..=index).next_back()?;
            (index < i + (1 << o)).then_some((i, o, mark))
        }
        /// The folios as the measurements write them: `index:pages[xcount]` runs.
        fn layout(&self) -> String {
            let mut runs: Vec<(u64, u64, u64)> = Vec::new();
            for (&i, &(o, _)) in &self.folios {
                match runs.last_mut() {
                    Some((start, pages, n)) if *pages == 1 << o && *start + *pages * *n == i => *n += 1,
                    _ => runs.push((i, 1 << o, 1)),
                }
            }
            let run = |&(i, p, n): &(u64, u64, u64)| if n > 1 { format!("{i}:{p}x{n}") } else { format!("{i}:{p}") };
            runs.iter().map(run).collect::<Vec<_>>().join(" ")
        }
    }

    impl RaMapping for Cache {
        fn i_size(&self) -> u64 {
            self.size
        }
        fn folio_orders(&self) -> (u32, u32) {
            self.orders
        }
        fn cached(&self, index: u64) -> bool {
            self.folio(index).is_some()
        }
        fn add_folio(&mut self, index: u64, order: u32, mark: bool) -> bool {
            if (index..index + (1 << order)).any(|i| self.cached(i)) {
                return false;
            }
            self.folios.insert(index, (order, mark));
            true
        }
    }

    /// `filemap_read` of the whole file in `chunk`-byte read(2) calls, as
    /// `filemap_get_pages` drives readahead: a batch of cached folios from the position (at
    /// most 31, ending after a marked one); sync readahead when the first is missing; async
    /// readahead from the batch's last folio when it is marked.
    fn read_file(c: &mut Cache, bdi: Bdi, chunk: u64) -> FileRaState {
        let mut ra = FileRaState::new(bdi.ra_pages);
        let mut pos = 0;
        while pos < c.size {
            let end = (pos + chunk).min(c.size);
            while pos < end {
                let (index, last_index) = (pos >> 12, end.div_ceil(4096));
                if !c.cached(index) {
                    page_cache_sync_ra(c, &mut ra, bdi, index, last_index - index, false);
                }
                let mut batch = Vec::new();
                let mut i = index;
                while i < last_index && batch.len() < 31 {
                    let Some((fi, o, mark)) = c.folio(i) else { break };
                    batch.push((fi, o, mark));
                    i = fi + (1 << o);
                    if mark {
                        break;
                    }
                }
                let &(fi, o, mark) = batch.last().expect("the sync readahead cached the page");
                if mark {
                    c.folios.insert(fi, (o, false));
                    page_cache_async_ra(c, &mut ra, bdi, fi, 1 << o, last_index - fi);
                }
                pos = ((fi + (1 << o)) << 12).min(end);
            }
            ra.prev_pos = Some(pos);
        }
        ra
    }

    const FILE: u64 = 64 << 20;
    /// This machine's vda: read_ahead_kb 8192, max_sectors_kb 4096.
    const VDA: Bdi = Bdi { ra_pages: 2048, io_pages: 1024 };
    const DEFAULT: Bdi = Bdi { ra_pages: 32, io_pages: 1024 };

    #[test]
    fn window_sizes_are_linux_s() {
        // get_init_ra_size with the default 32 pages: 1-2 -> 4, 3-4 -> 8, 5-8 -> 16, more -> 32.
        let init: Vec<u64> = [1, 2, 3, 4, 5, 8, 9, 64].iter().map(|&r| get_init_ra_size(r, 32)).collect();
        assert_eq!(init, [4, 4, 8, 8, 16, 16, 32, 32]);
        let next: Vec<u64> = [1, 2, 4, 8, 16, 32, 64].iter().map(|&c| get_next_ra_size(c, 32)).collect();
        assert_eq!(next, [4, 4, 8, 16, 32, 32, 32]);
    }

    /// The folio layouts Linux 6.18.44 built on this machine for a cold 64 MiB ext4 file
    /// read with read(2) (docs/research/page-cache-kernel-measurements.md, section 8).
    #[test]
    fn pread_builds_the_folios_the_kernel_built() {
        for (bdi, chunk, layout) in [
            (VDA, 4096, "0:1x4 4:4x5 24:8 32:16x4 96:32 128:64x4 384:128 512:256x2 1024:512x30"),
            (VDA, 1 << 20, "0:1x512 512:4x256 1536:16x128 3584:64x32 5632:256x8 7680:512x17"),
            (DEFAULT, 4096, "0:1x4 4:4x3 16:8x2 32:16x2 64:32x510"),
            (DEFAULT, 1 << 20, "0:1x256 256:4x64 512:16x16 768:64x4 1024:256x60"),
        ] {
            let mut c = Cache::new(FILE, (0, 9));
            read_file(&mut c, bdi, chunk);
            assert_eq!(c.layout(), layout, "read_ahead_kb {}, {chunk}-byte reads", bdi.ra_pages * 4);
        }
    }

    #[test]
    fn the_first_windows_of_a_4k_reader_follow_the_source_trace() {
        // mm/readahead.c by hand (docs/research/page-cache-linux-6.18-rules.md, 1.8).
        let mut c = Cache::new(FILE, (0, 9));
        let mut ra = FileRaState::new(32);
        page_cache_sync_ra(&mut c, &mut ra, DEFAULT, 0, 1, false);
        assert_eq!((ra.start, ra.size, ra.async_size, ra.order), (0, 4, 3, 0));
        assert_eq!(c.folio(1), Some((1, 0, true)));
        page_cache_async_ra(&mut c, &mut ra, DEFAULT, 1, 1, 1);
        assert_eq!((ra.start, ra.size, ra.async_size, ra.order), (4, 8, 8, 2));
        page_cache_async_ra(&mut c, &mut ra, DEFAULT, 4, 4, 1);
        assert_eq!((ra.start, ra.size), (12, 4), "16 cut back to the 16-page alignment");
    }

    #[test]
    fn a_mapping_without_large_folios_reads_order_0() {
        let mut c = Cache::new(FILE, (0, 0));
        read_file(&mut c, DEFAULT, 4096);
        assert_eq!(c.layout(), "0:1x16384");
    }

    #[test]
    fn a_random_reader_reads_the_request_alone() {
        let mut c = Cache::new(FILE, (0, 9));
        let mut ra = FileRaState::new(32);
        page_cache_sync_ra(&mut c, &mut ra, DEFAULT, 100, 1, true);
        assert_eq!(c.layout(), "100:1");
        // A read far from the last one, with nothing cached before it: the request alone.
        ra.prev_pos = Some(4096);
        page_cache_sync_ra(&mut c, &mut ra, DEFAULT, 5000, 2, false);
        assert_eq!(c.layout(), "100:1 5000:1x2");
        assert_eq!(ra.size, 0, "the state is left alone");
    }

    #[test]
    fn windows_stop_at_the_end_of_the_file() {
        let mut c = Cache::new(10 * 4096 + 1, (0, 9));
        read_file(&mut c, DEFAULT, 4096);
        let pages: u64 = c.folios.values().map(|&(o, _)| 1 << o).sum();
        assert_eq!(pages, 11);
    }
}
