//! Files and their page cache (mm/filemap.c, mm/readahead.c's callers, mm/fadvise.c,
//! fs/drop_caches.c): named files on ext4 or tmpfs, open files (`struct file` with its
//! readahead state), `read(2)` (`filemap_read`), `write(2)` (`generic_perform_write` with
//! 6.16+ large folios), `fsync`, `posix_fadvise` and `vm/drop_caches`. The page faults on file
//! mappings are in kernel/filemap_fault.rs.
//!
//! Differs from Linux: I/O completes when it is submitted (a folio is added uptodate; the
//! reader that waits for it is charged the device's time by the machine), no writeback
//! thread (dirty folios stay dirty until `fsync` or `fadvise(DONTNEED)`), no LRU (reclaim
//! and `drop_caches` evict clean unmapped folios in file and index order), no page cache
//! for directories or metadata (`Buffers` stays 0).

use super::mm_types::{pg, FrameData};
use super::mmap::Errno;
use super::page_alloc::gfp;
use super::readahead::{self, Bdi, FileRaState, RaMapping};
use super::shmem::{AddressSpace, Fs};
use super::vmstat::{VmEvent, VmItem};
use super::Kernel;
use crate::units::Pfn;

/// `PAGEVEC_SIZE` / folio_batch: the folios `filemap_get_read_batch` returns at most.
const FOLIO_BATCH: usize = 31;

/// An open file (`struct file`): its inode, its readahead state and whether
/// `POSIX_FADV_RANDOM` set FMODE_RANDOM. Every vma of a file mapping holds one (vma splits
/// and fork share it, as `get_file` does).
#[derive(Clone, Debug)]
pub struct File {
    pub inode: u32,
    pub ra: FileRaState,
    pub refs: u32,
    pub random: bool,
    /// How it was opened: its share of the inode's `i_writecount`.
    pub mode: FMode,
}

/// The open mode of a file as `i_writecount` sees it (include/linux/fs.h): a writer counts
/// +1 (`get_write_access`), an executable being run -1 (`exe_file_deny_write_access`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FMode {
    /// O_RDONLY.
    Read,
    /// O_WRONLY or O_RDWR (FMODE_WRITE).
    Write,
    /// The file of an `exec`: read, and writers are refused with ETXTBSY while it is open.
    Exec,
}

/// `posix_fadvise` advice the model implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fadvise {
    DontNeed,
    WillNeed,
}

/// The page cache of one inode as mm/readahead.c sees it, on a kernel that allocates its
/// folios (`ra_alloc_folio`, `page_cache_ra_unbounded`'s allocation) and reads them from the
/// device. Counts the pages it read.
struct CacheRa<'a> {
    k: &'a mut Kernel,
    obj: u32,
    read: u64,
}

impl RaMapping for CacheRa<'_> {
    fn i_size(&self) -> u64 {
        self.k.inode(self.obj).i_size
    }
    fn folio_orders(&self) -> (u32, u32) {
        (0, self.k.mapping_max_folio_order(self.obj))
    }
    fn page_shift(&self) -> u32 {
        self.k.geo.page_shift
    }
    fn cached(&self, index: u64) -> bool {
        self.k.shmem_find_folio(self.obj, index).is_some()
    }
    fn add_folio(&mut self, index: u64, order: u32, mark: bool) -> bool {
        let nr = 1u64 << order;
        if (index..index + nr).any(|i| self.cached(i)) {
            // ra_alloc_folio: allocated and charged, then -EEXIST.
            self.k.page_cache_alloc_eexist(order, gfp::HIGHUSER_MOVABLE | gfp::NORETRY);
            return false;
        }
        // readahead_gfp_mask: __GFP_NORETRY | __GFP_NOWARN, no OOM kill on failure.
        let Some(head) = self.k.page_cache_alloc_read(self.obj, index, order, gfp::HIGHUSER_MOVABLE | gfp::NORETRY)
        else {
            return false;
        };
        if mark {
            self.k.mem.pages[head.idx()].set(pg::READAHEAD);
        }
        self.k.count_read_io(nr);
        self.read += nr;
        true
    }
}

impl Kernel {
    /// The inode `obj`.
    pub fn inode(&self, obj: u32) -> &AddressSpace {
        self.shmem[obj as usize].as_ref().expect("inode")
    }

    fn inode_mut(&mut self, obj: u32) -> &mut AddressSpace {
        self.shmem[obj as usize].as_mut().expect("inode")
    }

    /// `mapping_max_folio_order`: ext4 sets 0..MAX_PAGECACHE_ORDER (min(11, PMD order)) when
    /// THP is built in (`ext4_set_inode_mapping_order`, Linux >= 6.16); tmpfs with huge=never
    /// and shmem allocate order 0.
    pub fn mapping_max_folio_order(&self, obj: u32) -> u32 {
        match self.inode(obj).fs {
            Fs::Ext4 if self.has_transparent_hugepage() => self.geo.hpage_pmd_order().min(11),
            _ => 0,
        }
    }

    /// The block device's readahead limits (`read_ahead_kb`, `max_sectors_kb`).
    pub fn bdi(&self) -> Bdi {
        let kb = self.geo.page_size() / 1024;
        Bdi { ra_pages: self.knobs.read_ahead_kb / kb, io_pages: (self.knobs.max_sectors_kb / kb).max(1) }
    }

    /// The inode a path names.
    pub fn file_lookup(&self, name: &str) -> Option<u32> {
        self.dentries.get(name).copied()
    }

    /// `open(O_CREAT | O_TRUNC)` after `unlink` of any old file of that name: a file of
    /// `size` bytes that reads as zeroes, on the device and not cached (ext4), or empty and
    /// sparse (tmpfs). Mappings of an old file of the name keep its inode.
    pub fn file_create(&mut self, name: &str, size: u64, fs: Fs) -> Result<u32, Errno> {
        if fs == Fs::Shmem || size > self.geo.task_size() {
            return Err(Errno::EINVAL);
        }
        // A hugetlb memfd of the name goes too (one namespace, kernel/memfd.rs).
        self.unlink_any(name);
        let obj = self.inode_insert(AddressSpace::new(fs, size, self.geo.page_size()));
        self.dentries.insert(name.to_string(), obj);
        Ok(obj)
    }

    /// `unlink`: the name goes; the inode lives while files or mappings hold it.
    pub fn file_unlink(&mut self, name: &str) {
        if let Some(old) = self.dentries.remove(name) {
            self.iput(old);
        }
    }

    /// `do_filp_open`: a new open file of the inode (`file_ra_state_init`: the device's
    /// ra_pages, nothing read). A writer of a file being executed, or an exec of a file open
    /// for write, gets ETXTBSY (`get_write_access`, `exe_file_deny_write_access`).
    pub fn file_open(&mut self, obj: u32, mode: FMode) -> Result<u32, Errno> {
        let wc = &mut self.inode_mut(obj).i_writecount;
        match mode {
            FMode::Read => {}
            FMode::Write if *wc < 0 => return Err(Errno::ETXTBSY),
            FMode::Write => *wc += 1,
            FMode::Exec if *wc > 0 => return Err(Errno::ETXTBSY),
            FMode::Exec => *wc -= 1,
        }
        self.inode_mut(obj).refs += 1;
        let f = File { inode: obj, ra: FileRaState::new(self.bdi().ra_pages), refs: 1, random: false, mode };
        if let Some(i) = self.filps.iter().position(|s| s.is_none()) {
            self.filps[i] = Some(f);
            return Ok(i as u32);
        }
        self.filps.push(Some(f));
        Ok((self.filps.len() - 1) as u32)
    }

    /// `inode_is_open_for_write`: some open file of the inode may write it.
    pub fn inode_is_open_for_write(&self, obj: u32) -> bool {
        self.inode(obj).i_writecount > 0
    }

    /// `get_file`.
    pub fn get_file(&mut self, filp: u32) {
        self.filps[filp as usize].as_mut().expect("file").refs += 1;
    }

    /// `fput`: the last reference closes the file and drops its inode.
    pub fn fput(&mut self, filp: u32) {
        let f = self.filps[filp as usize].as_mut().expect("file");
        f.refs -= 1;
        if f.refs == 0 {
            let (obj, mode) = (f.inode, f.mode);
            self.filps[filp as usize] = None;
            // put_write_access / exe_file_allow_write_access.
            match mode {
                FMode::Read => {}
                FMode::Write => self.inode_mut(obj).i_writecount -= 1,
                FMode::Exec => self.inode_mut(obj).i_writecount += 1,
            }
            self.iput(obj);
        }
    }

    /// The open file `filp`.
    pub fn filp(&self, filp: u32) -> &File {
        self.filps[filp as usize].as_ref().expect("file")
    }

    /// Grow the page cache's index range to cover `i_size` bytes.
    fn i_size_write(&mut self, obj: u32, size: u64) {
        let ps = self.geo.page_size();
        let o = self.inode_mut(obj);
        if size > o.i_size {
            o.i_size = size;
            o.pages.extend_to(size.div_ceil(ps));
        }
    }

    /// Allocate a folio of `order` for index `index` (aligned), fill it with the device's
    /// data (`->read_folio` / `->readahead`; the caller counts the I/O) and add it to the page
    /// cache. None when the allocation fails.
    pub(super) fn page_cache_alloc_read(&mut self, obj: u32, index: u64, order: u32, flags: u32) -> Option<Pfn> {
        let comp = if order > 0 { gfp::COMP } else { 0 };
        let a = self.alloc_pages(order, flags | comp)?;
        let nr = 1u64 << order;
        for i in 0..nr {
            let d = match self.inode(obj).disk.get(&(index + i)) {
                Some(c) => FrameData::Data(c.clone()),
                None => FrameData::Zero,
            };
            self.mem.set_data((a.pfn.0 as u64 + i) as usize, d);
        }
        if !self.filemap_add_folio(obj, index, a.pfn, order, flags) {
            self.folio_put(a.pfn);
            return None;
        }
        Some(a.pfn)
    }

    /// A page-cache folio of `order` allocated for a range something cached overlaps:
    /// `filemap_add_folio` charges it, `__filemap_add_folio` finds the cached folio (-EEXIST),
    /// and it is uncharged (cgroup v1: a pgpgin and a pgpgout event) and freed. The allocation
    /// and the charge happen (and may reclaim) as in Linux, which allocates before it looks.
    pub(super) fn page_cache_alloc_eexist(&mut self, order: u32, flags: u32) {
        let comp = if order > 0 { gfp::COMP } else { 0 };
        let Some(a) = self.alloc_pages(order, flags | comp) else { return };
        let memcg = self.cur_memcg();
        if self.mem_cgroup_charge(a.pfn, memcg, flags).is_ok() {
            self.mem_cgroup_uncharge(a.pfn);
        }
        self.folio_put(a.pfn);
    }

    /// Run a readahead function on `filp`'s page cache and state; the pages it read.
    fn with_ra(&mut self, filp: u32, f: impl FnOnce(&mut CacheRa, &mut FileRaState, Bdi)) -> u64 {
        let obj = self.filp(filp).inode;
        let mut ra = self.filp(filp).ra.clone();
        let bdi = self.bdi();
        let mut m = CacheRa { k: self, obj, read: 0 };
        f(&mut m, &mut ra, bdi);
        let read = m.read;
        self.filps[filp as usize].as_mut().expect("file").ra = ra;
        read
    }

    /// `page_cache_sync_ra` on an open file.
    pub(super) fn page_cache_sync_ra(&mut self, filp: u32, index: u64, req: u64) -> u64 {
        let random = self.filp(filp).random;
        self.with_ra(filp, |m, ra, bdi| readahead::page_cache_sync_ra(m, ra, bdi, index, req, random))
    }

    /// `page_cache_async_ra` from the marked folio headed at `head` (the mark is cleared).
    pub(super) fn page_cache_async_ra(&mut self, filp: u32, index: u64, head: Pfn, req: u64) -> u64 {
        self.mem.pages[head.idx()].clear(pg::READAHEAD);
        let nr = self.folio_nr_pages(head);
        self.with_ra(filp, |m, ra, bdi| readahead::page_cache_async_ra(m, ra, bdi, index, nr, req))
    }

    /// `page_cache_ra_order` of a window the caller set in `filp`'s state (mmap readahead).
    pub(super) fn page_cache_ra_order(&mut self, filp: u32, index: u64) -> u64 {
        self.with_ra(filp, |m, ra, _| readahead::page_cache_ra_order(m, ra, index))
    }

    /// `force_page_cache_ra` (WILLNEED).
    pub(super) fn force_page_cache_ra(&mut self, filp: u32, index: u64, nr: u64) -> u64 {
        self.with_ra(filp, |m, ra, bdi| readahead::force_page_cache_ra(m, ra, bdi, index, nr))
    }

    /// The folio headed at `head`'s first index and pages.
    fn folio_span(&self, head: Pfn) -> (u64, u64) {
        (self.mem.pages[head.idx()].index, self.folio_nr_pages(head))
    }

    /// `filemap_get_read_batch`: the cached folios from `index` to `last` (inclusive), at most
    /// a folio batch, stopping at a hole and after a folio marked PG_readahead, each with a
    /// reference the caller puts.
    fn filemap_get_read_batch(&mut self, obj: u32, index: u64, last: u64, batch: &mut Vec<Pfn>) {
        batch.clear();
        let mut i = index;
        while i <= last && batch.len() < FOLIO_BATCH {
            let Some(p) = self.shmem_find_folio(obj, i) else { break };
            let head = self.head_of(p);
            batch.push(head);
            if self.mem.pages[head.idx()].test(pg::READAHEAD) {
                break;
            }
            let (start, nr) = self.folio_span(head);
            i = start + nr;
        }
        // folio_try_get: the batch holds each folio while the read copies it (reclaim in
        // the readahead it starts must not free it from under the copy).
        for &h in batch.iter() {
            self.folio_get(h);
        }
    }

    /// `filemap_get_pages`: the batch for a read of `count` bytes at `pos`, after sync
    /// readahead if the first page is missing (or an order-0 `filemap_create_folio` if even
    /// that read nothing), and async readahead from a marked last folio. Empty when memory
    /// ran out. Returns the pages read synchronously (the reader waits for them).
    fn filemap_get_pages(&mut self, filp: u32, pos: u64, count: u64, batch: &mut Vec<Pfn>) -> u64 {
        let obj = self.filp(filp).inode;
        let shift = self.geo.page_shift;
        let (index, last_index) = (pos >> shift, (pos + count).div_ceil(self.geo.page_size()));
        let mut waited = 0;
        self.filemap_get_read_batch(obj, index, last_index - 1, batch);
        if batch.is_empty() {
            waited += self.page_cache_sync_ra(filp, index, last_index - index);
            self.filemap_get_read_batch(obj, index, last_index - 1, batch);
        }
        if batch.is_empty() {
            match self.page_cache_alloc_read(obj, index, 0, gfp::HIGHUSER_MOVABLE) {
                Some(h) => {
                    self.count_read_io(1);
                    waited += 1;
                    self.folio_get(h);
                    batch.push(h);
                }
                None => return waited,
            }
        }
        let last = *batch.last().expect("a folio");
        if self.mem.pages[last.idx()].test(pg::READAHEAD) {
            let fi = self.folio_span(last).0;
            self.page_cache_async_ra(filp, fi, last, last_index - fi);
        }
        waited
    }

    /// `read(2)` of `count` bytes at `pos` (`filemap_read`; tmpfs: `shmem_file_read_iter`,
    /// which reads holes as zeroes without allocating). Returns the bytes read and the first
    /// byte read that is not `expect` (its file offset and value). The pages the reader
    /// waited for are in `io_wait_pages`.
    pub fn file_read(&mut self, filp: u32, pos: u64, count: u64, expect: Option<u8>) -> (u64, Option<(u64, u8)>) {
        let obj = self.filp(filp).inode;
        let i_size = self.inode(obj).i_size;
        if pos >= i_size || count == 0 {
            return (0, None);
        }
        let end = (pos + count).min(i_size);
        let ps = self.geo.page_size();
        let mut bad = None;
        let mut p = pos;
        if self.inode(obj).is_shmem() {
            while p < end {
                let next = ((p / ps) + 1) * ps;
                let stop = next.min(end);
                // shmem_get_folio(SGP_READ) swaps a page in swap back in; "Mark the folio
                // accessed if we read the beginning."
                if let Some(page) = self.shmem_get_folio_read(obj, p / ps) {
                    let head = self.head_of(page);
                    if p == self.folio_span(head).0 * ps {
                        self.folio_mark_accessed(head);
                    }
                }
                if let Some(v) = expect {
                    let page = self.shmem_find_folio(obj, p / ps);
                    if bad.is_none() {
                        bad = self
                            .first_byte_not(page, self.geo.offset_in_page(p) as usize, (stop - p) as usize, v)
                            .map(|(i, b)| (self.geo.page_align_down(p) + i as u64, b));
                    }
                }
                p = stop;
            }
            return (end - pos, bad);
        }
        let mut batch = Vec::new();
        // The end of what was read last (`ra->prev_pos`; None: -1, nothing yet).
        let mut last_pos = self.filp(filp).ra.prev_pos;
        while p < end {
            let waited = self.filemap_get_pages(filp, p, end - p, &mut batch);
            self.current.effects.io_wait_pages += waited;
            if batch.is_empty() {
                break;
            }
            for (i, &head) in batch.iter().enumerate() {
                let (fi, nr) = self.folio_span(head);
                // A read that goes on in the folio the last one ended in marks it accessed
                // only the first time (`pos_same_folio`); every other folio of the batch is.
                if i > 0 {
                    if end < fi * ps {
                        break;
                    }
                    self.folio_mark_accessed(head);
                } else if !last_pos.is_some_and(|l| l > 0 && (l - 1) / (nr * ps) == p / (nr * ps)) {
                    self.folio_mark_accessed(head);
                }
                let fend = ((fi + nr) * ps).min(end);
                while p < fend {
                    let stop = ((p / ps) + 1) * ps;
                    let stop = stop.min(fend);
                    if let Some(v) = expect {
                        let page = Pfn(head.0 + (p / ps - fi) as u32);
                        if bad.is_none() {
                            bad = self
                                .first_byte_not(Some(page), self.geo.offset_in_page(p) as usize, (stop - p) as usize, v)
                                .map(|(i, b)| (self.geo.page_align_down(p) + i as u64, b));
                        }
                    }
                    p = stop;
                }
                last_pos = Some(p);
                if p >= end {
                    break;
                }
            }
            for &h in &batch {
                self.folio_put(h);
            }
        }
        self.filps[filp as usize].as_mut().expect("file").ra.prev_pos = last_pos.or(Some(p));
        (p - pos, bad)
    }

    /// The first of `len` bytes from `off` of a page (None: a hole, all zeroes) that is not
    /// `v`: its offset in the page and value.
    fn first_byte_not(&self, page: Option<Pfn>, off: usize, len: usize, v: u8) -> Option<(usize, u8)> {
        let Some(c) = page.and_then(|p| self.page_content(p)) else {
            return (v != 0).then_some((off, 0));
        };
        match c.uniform() {
            Some(b) => (b != v).then_some((off, b)),
            None => (off..off + len).map(|i| (i, c.get(i))).find(|&(_, b)| b != v),
        }
    }

    /// `write(2)` of `count` bytes of `value` at `pos` (`generic_perform_write`): ext4 takes a
    /// folio per step sized to the write (`fgf_set_order`, steps of at most the largest folio,
    /// aligned); tmpfs allocates order-0 pages (`shmem_write_begin`). The folios become dirty
    /// and the file grows. Returns the bytes written (short when memory ran out).
    pub fn file_write(&mut self, filp: u32, pos: u64, count: u64, value: u8) -> u64 {
        let obj = self.filp(filp).inode;
        let ps = self.geo.page_size();
        let shift = self.geo.page_shift;
        let chunk = ps << self.mapping_max_folio_order(obj);
        let shmem = self.inode(obj).is_shmem();
        let mut p = pos;
        let end = pos.saturating_add(count);
        while p < end {
            let bytes = (chunk - (p & (chunk - 1))).min(end - p);
            let index = p >> shift;
            let page = if shmem {
                self.page_cache_extend(obj, index + 1);
                self.shmem_get_folio_write(obj, index)
            } else {
                // fgf_set_order: ilog2(len) - PAGE_SHIFT for writes larger than a page.
                let order = if bytes > ps { bytes.ilog2() - shift } else { 0 };
                self.write_begin_get_folio(obj, index, order, p, bytes)
            };
            let Some(page) = page else { break };
            let head = self.head_of(page);
            if !shmem {
                // ext4_da_write_begin -> __block_write_begin -> create_empty_buffers.
                self.folio_create_buffers(head);
            }
            let (fi, nr) = self.folio_span(head);
            let stop = end.min((fi + nr) * ps);
            self.i_size_write(obj, stop);
            while p < stop {
                let pstop = (((p >> shift) + 1) << shift).min(stop);
                let sub = Pfn(head.0 + ((p >> shift) - fi) as u32);
                let off = self.geo.offset_in_page(p) as usize;
                self.write_page_content(sub, off, (pstop - p) as usize + off, 1, value);
                p = pstop;
            }
            self.folio_mark_dirty(head);
        }
        p - pos
    }

    /// `__filemap_get_folio(FGP_CREAT | fgf_set_order)` for a write of `bytes` at `pos`: the
    /// cached folio at `index`, or a new one of the largest order up to `order` that the index's
    /// alignment allows and whose range nothing cached overlaps (lower orders on failure; a
    /// folio whose range something cached overlaps is allocated, charged and freed first).
    /// `block_write_begin` reads from the device the new folio's pages that lie inside the
    /// file and that the write does not cover whole (the writer waits for them).
    fn write_begin_get_folio(&mut self, obj: u32, index: u64, order: u32, pos: u64, bytes: u64) -> Option<Pfn> {
        if let Some(p) = self.shmem_find_folio(obj, index) {
            return Some(p);
        }
        let mut o = order.min(self.mapping_max_folio_order(obj));
        if index & ((1u64 << o) - 1) != 0 {
            o = index.trailing_zeros();
        }
        let ps = self.geo.page_size();
        loop {
            let nr = 1u64 << o;
            self.page_cache_extend(obj, index + nr);
            let free = (index..index + nr).all(|i| self.shmem_find_folio(obj, i).is_none());
            let flags = gfp::HIGHUSER_MOVABLE | gfp::WRITE | if o > 0 { gfp::NORETRY } else { 0 };
            if free {
                if let Some(h) = self.page_cache_alloc_read(obj, index, o, flags) {
                    let old_size = self.inode(obj).i_size;
                    let read = (index..index + nr)
                        .filter(|&i| i * ps < old_size && !(pos <= i * ps && pos + bytes >= (i + 1) * ps))
                        .count() as u64;
                    self.count_read_io(read);
                    self.current.effects.io_wait_pages += read;
                    return Some(h);
                }
            } else {
                // __filemap_get_folio allocates before it looks.
                self.page_cache_alloc_eexist(o, flags);
            }
            if o == 0 {
                return None;
            }
            o -= 1;
        }
    }

    /// Room in the page cache's index for pages below `n` (a folio may reach past i_size).
    fn page_cache_extend(&mut self, obj: u32, n: u64) {
        let o = self.inode_mut(obj);
        o.pages.extend_to(n);
    }

    /// `nr` pages read from the device: pgpgin (KiB) and the device's work.
    pub(super) fn count_read_io(&mut self, nr: u64) {
        self.stat.count_n(VmEvent::PgpgIn, (nr * self.geo.page_size() / 1024) as i64);
        self.io_read_pages += nr;
    }

    /// `folio_mark_dirty`: an ext4 folio counts in NR_FILE_DIRTY; a shmem folio is only
    /// flagged (`noop_dirty_folio`: reclaim then writes it to swap, where a clean one is
    /// dropped).
    pub(super) fn folio_mark_dirty(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if p.test(pg::DIRTY) {
            return;
        }
        if p.test(pg::SHMEM) {
            self.mem.pages[head.idx()].set(pg::DIRTY);
            return;
        }
        self.mem.pages[head.idx()].set(pg::DIRTY);
        let nr = self.folio_nr_pages(head) as i64;
        self.mod_lruvec_item(head, VmItem::NrDirty, nr);
    }

    /// Write back the dirty folios of `obj` in [start, end) (indices): the device gets their
    /// data (pgpgout), they are clean.
    pub(super) fn filemap_write_range(&mut self, obj: u32, start: u64, end: u64, written: &mut Vec<Pfn>) -> u64 {
        let mut pages = 0;
        let mut i = start;
        let end = end.min(self.shmem_size(obj));
        while i < end {
            let Some(p) = self.shmem_find_folio(obj, i) else {
                i += 1;
                continue;
            };
            let head = self.head_of(p);
            let (fi, nr) = self.folio_span(head);
            if self.mem.pages[head.idx()].test(pg::DIRTY) {
                for k in 0..nr {
                    let c = self.page_content(Pfn(head.0 + k as u32)).filter(|c| !c.is_zero()).cloned();
                    let o = self.inode_mut(obj);
                    match c {
                        Some(c) => o.disk.insert(fi + k, c),
                        None => o.disk.remove(&(fi + k)),
                    };
                }
                self.mem.pages[head.idx()].clear(pg::DIRTY);
                // folio_clear_dirty_for_io: a mapped folio is write-protected first.
                self.folio_mkclean(obj, head, fi, nr);
                self.mod_lruvec_item(head, VmItem::NrDirty, -(nr as i64));
                self.stat.count_n(VmEvent::PgpgOut, (nr * self.geo.page_size() / 1024) as i64);
                written.push(head);
                pages += nr;
            }
            i = fi + nr;
        }
        pages
    }

    /// `fsync`: write back every dirty folio of the file and wait for it.
    pub fn file_fsync(&mut self, filp: u32) {
        let obj = self.filp(filp).inode;
        if self.inode(obj).is_shmem() {
            return;
        }
        let n = self.filemap_write_range(obj, 0, u64::MAX, &mut Vec::new());
        self.current.effects.io_wait_pages += n;
    }

    /// `mapping_try_invalidate` over indices [start, end]: evict the clean, unmapped folios
    /// that lie wholly inside (dirty, mapped and shmem folios stay).
    pub(super) fn invalidate_mapping_pages(&mut self, obj: u32, start: u64, end: u64) -> u64 {
        if self.inode(obj).is_shmem() {
            return 0;
        }
        let mut evicted = 0;
        let mut i = start;
        let last = end.min(self.shmem_size(obj).saturating_sub(1));
        while i <= last && self.shmem_size(obj) > 0 {
            let Some(p) = self.shmem_find_folio(obj, i) else {
                i += 1;
                continue;
            };
            let head = self.head_of(p);
            let (fi, nr) = self.folio_span(head);
            let h = self.mem.pages[head.idx()];
            let mapped =
                h.entire_mapcount > 0 || (0..nr as u32).any(|k| self.mem.pages[(head.0 + k) as usize].mapcount > 0);
            let busy = h.test(pg::DIRTY) || h.test(pg::WRITEBACK) || mapped || h.refcount != nr as i32;
            if fi >= start && fi + nr - 1 <= end && !busy {
                self.filemap_remove_folio(obj, head);
                evicted += nr;
            }
            if fi + nr <= i {
                // A slot holding a page of another index: a bug, reported, not a hang.
                self.report_bug(format!("page cache of inode {obj}, index {i}: frame {:#x} is of index {fi}", p.0));
                i += 1;
                continue;
            }
            i = fi + nr;
        }
        evicted
    }

    /// `posix_fadvise(fd, offset, len, advice)` (`generic_fadvise`; a tmpfs file's noop bdi
    /// ignores it). DONTNEED starts writeback of the range's dirty folios (WB_SYNC_NONE: they
    /// are still under writeback, so not evicted now) and evicts the clean unmapped folios
    /// wholly inside; WILLNEED reads the range ahead (`force_page_cache_readahead`).
    pub fn file_fadvise(&mut self, filp: u32, offset: u64, len: u64, advice: Fadvise) {
        let obj = self.filp(filp).inode;
        if self.inode(obj).is_shmem() {
            return;
        }
        let shift = self.geo.page_shift;
        let ps = self.geo.page_size();
        let endbyte = if len == 0 { u64::MAX >> 1 } else { offset.saturating_add(len) - 1 };
        match advice {
            Fadvise::DontNeed => {
                // __filemap_fdatawrite_range(WB_SYNC_NONE): the folios written are under
                // writeback while the invalidation runs, which skips them.
                let mut written = Vec::new();
                self.filemap_write_range(obj, offset >> shift, (endbyte >> shift).saturating_add(1), &mut written);
                for &h in &written {
                    self.mem.pages[h.idx()].set(pg::WRITEBACK);
                }
                let start = offset.div_ceil(ps);
                let mut end = endbyte >> shift;
                let mut skip = false;
                if self.geo.offset_in_page(endbyte) != ps - 1 {
                    skip = end == 0;
                    end = end.saturating_sub(1);
                }
                if !skip && end >= start {
                    self.invalidate_mapping_pages(obj, start, end);
                }
                for &h in &written {
                    self.mem.pages[h.idx()].clear(pg::WRITEBACK);
                }
            }
            Fadvise::WillNeed => {
                let start = offset >> shift;
                let nr = (endbyte >> shift).min(self.shmem_size(obj)).saturating_sub(start) + 1;
                self.force_page_cache_ra(filp, start, nr);
            }
        }
    }

    /// `vm/drop_caches` 1 or 3 (`drop_pagecache_sb` -> `invalidate_mapping_pages` of every
    /// inode): the clean unmapped page cache goes. Returns the pages freed.
    pub fn drop_caches(&mut self) -> u64 {
        let mut freed = 0;
        for obj in 0..self.shmem.len() as u32 {
            if self.shmem[obj as usize].is_some() {
                freed += self.invalidate_mapping_pages(obj, 0, u64::MAX);
            }
        }
        freed
    }

    /// Reclaim for an allocation that failed (shrink_lruvec's file LRU, without an LRU):
    /// evict clean unmapped ext4 folios, in file and index order, 2 MiB of indices at a time,
    /// until `want` pages were freed.
    pub fn shrink_page_cache(&mut self, want: u64) -> u64 {
        let step = (2u64 << 20) >> self.geo.page_shift;
        let mut freed = 0;
        for obj in 0..self.shmem.len() as u32 {
            if self.shmem[obj as usize].as_ref().is_none_or(|o| o.is_shmem()) {
                continue;
            }
            let mut i = 0;
            while freed < want && i < self.shmem_size(obj) {
                freed += self.invalidate_mapping_pages(obj, i, i + step - 1);
                i += step;
            }
            if freed >= want {
                break;
            }
        }
        freed
    }
}
