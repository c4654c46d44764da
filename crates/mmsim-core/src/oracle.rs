//! The reference model: what each process must read, from POSIX semantics alone. A process's
//! memory is a list of mappings; private pages are per-process copies (fork copies the map),
//! shared pages live in shared objects. It knows nothing of page tables, zero pages, THP or
//! COW, so any difference from the simulator is a bug in the simulator's optimisations.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use crate::kernel::content::PageContent;
use crate::kernel::fault::Access;
use crate::kernel::mm::vm;
use crate::units::Geometry;

/// A reference mapping.
#[derive(Clone, Debug)]
struct RefVma {
    end: u64,
    /// PROT_* as vm::READ/WRITE/EXEC bits (x86: any of them allows reads).
    prot: u32,
    /// Shared object and page offset of `start` in it, or None for private.
    shared: Option<(u32, u64)>,
    /// A private file mapping: the file's object and the page offset of `start` in it, which
    /// a page not yet written reads (POSIX: unspecified; Linux: the page cache, until COW).
    file: Option<(u32, u64)>,
    /// MADV_DONTFORK: a fork child does not get the mapping.
    dontcopy: bool,
}

/// One process's memory as POSIX defines it.
#[derive(Clone, Debug, Default)]
pub struct RefSpace {
    vmas: BTreeMap<u64, RefVma>,
    private: HashMap<u64, Rc<PageContent>>,
}

/// The reference model of every process.
#[derive(Default)]
pub struct Oracle {
    /// Page geometry: the unit of private copies and shared-object offsets.
    geo: Geometry,
    spaces: HashMap<u32, RefSpace>,
    objects: HashMap<u32, HashMap<u64, PageContent>>,
    next_obj: u32,
    /// Named files: name -> object (its pages, as read(2) and shared mappings see them).
    files: HashMap<String, u32>,
}

/// Where a page's bytes live in the reference model.
enum Home {
    Private(u64),
    Shared(u32, u64),
}

impl Oracle {
    /// An empty model of processes with pages of `geo`.
    pub fn new(geo: Geometry) -> Oracle {
        Oracle { geo, ..Default::default() }
    }

    pub fn new_process(&mut self, pid: u32) {
        self.spaces.insert(pid, RefSpace::default());
    }

    /// fork: the child gets a copy of the private pages and the same shared objects, but
    /// for the mappings MADV_DONTFORK left out (nothing is mapped there in the child).
    pub fn fork(&mut self, parent: u32, child: u32) {
        let mut s = self.spaces[&parent].clone();
        let out: Vec<(u64, u64)> = s.vmas.iter().filter(|(_, v)| v.dontcopy).map(|(&a, v)| (a, v.end)).collect();
        for (a, e) in out {
            s.vmas.remove(&a);
            s.private.retain(|&p, _| p < a || p >= e);
        }
        self.spaces.insert(child, s);
    }

    pub fn exit(&mut self, pid: u32) {
        self.spaces.remove(&pid);
    }

    /// A new mapping at [addr, addr+len) (placed by the simulator; MAP_FIXED replaces).
    pub fn mmap(&mut self, pid: u32, addr: u64, len: u64, prot: u32, shared: bool) {
        self.munmap(pid, addr, len);
        let shared = shared.then(|| {
            self.next_obj += 1;
            self.objects.insert(self.next_obj, HashMap::new());
            (self.next_obj, 0)
        });
        let sp = self.spaces.get_mut(&pid).expect("process");
        sp.vmas.insert(addr, RefVma { end: addr + len, prot, shared, file: None, dontcopy: false });
    }

    /// A file of that name, all zeroes (create: O_TRUNC of a new file).
    pub fn create_file(&mut self, name: &str) {
        self.next_obj += 1;
        self.objects.insert(self.next_obj, HashMap::new());
        self.files.insert(name.to_string(), self.next_obj);
    }

    /// write(2) of `value` over [off, off + len) of a file.
    pub fn file_write(&mut self, name: &str, off: u64, len: u64, value: u8) {
        let ps = self.geo.page_size();
        let Some(&o) = self.files.get(name) else { return };
        let obj = self.objects.get_mut(&o).expect("object");
        let mut p = off;
        while p < off + len {
            let stop = ((p / ps + 1) * ps).min(off + len);
            let off = self.geo.offset_in_page(p) as usize;
            let (a, b) = (off, (stop - p) as usize + off);
            obj.entry(p / ps).or_default().write(a, b, 1, value, ps as usize);
            p = stop;
        }
    }

    /// fallocate(PUNCH_HOLE) of [off, off + len) of a file: those bytes read as zero again.
    pub fn file_punch(&mut self, name: &str, off: u64, len: u64) {
        let ps = self.geo.page_size();
        let Some(&o) = self.files.get(name) else { return };
        let obj = self.objects.get_mut(&o).expect("object");
        let end = off.saturating_add(len);
        let pages: Vec<u64> = obj.keys().copied().filter(|&i| i * ps < end && (i + 1) * ps > off).collect();
        for i in pages {
            let (a, b) = (off.max(i * ps) - i * ps, end.min((i + 1) * ps) - i * ps);
            if a == 0 && b == ps {
                obj.remove(&i);
            } else if let Some(c) = obj.get_mut(&i) {
                c.write(a as usize, b as usize, 1, 0, ps as usize);
            }
        }
    }

    /// The expected contents of page `index` of a file (None = all zero).
    pub fn file_page(&self, name: &str, index: u64) -> Option<&PageContent> {
        self.objects.get(self.files.get(name)?)?.get(&index)
    }

    /// mmap of a file from byte `offset`: shared mappings are the file's pages; private
    /// ones read them until written.
    #[allow(clippy::too_many_arguments)]
    pub fn mmap_file(&mut self, pid: u32, addr: u64, len: u64, prot: u32, shared: bool, name: &str, offset: u64) {
        self.munmap(pid, addr, len);
        let o = self.files.get(name).copied().unwrap_or(0);
        let at = (o, offset / self.geo.page_size());
        let (shared, file) = if shared { (Some(at), None) } else { (None, Some(at)) };
        let sp = self.spaces.get_mut(&pid).expect("process");
        sp.vmas.insert(addr, RefVma { end: addr + len, prot, shared, file, dontcopy: false });
    }

    fn split(sp: &mut RefSpace, at: u64, page_size: u64) {
        let Some((&s, v)) = sp.vmas.range(..at).next_back() else {
            return;
        };
        if v.end <= at {
            return;
        }
        let mut hi = v.clone();
        if let Some((o, off)) = hi.shared {
            hi.shared = Some((o, off + (at - s) / page_size));
        }
        if let Some((o, off)) = hi.file {
            hi.file = Some((o, off + (at - s) / page_size));
        }
        sp.vmas.get_mut(&s).expect("vma").end = at;
        sp.vmas.insert(at, hi);
    }

    pub fn munmap(&mut self, pid: u32, addr: u64, len: u64) {
        let end = addr + len;
        let ps = self.geo.page_size();
        let sp = self.spaces.get_mut(&pid).expect("process");
        Self::split(sp, addr, ps);
        Self::split(sp, end, ps);
        let keys: Vec<u64> = sp.vmas.range(addr..end).map(|(&k, _)| k).collect();
        for k in keys {
            sp.vmas.remove(&k);
        }
        sp.private.retain(|&p, _| p < addr || p >= end);
    }

    /// mremap as a program sees it, given where the kernel put the range: in place, the
    /// range shrinks or grows (a shared one over further offsets of its object); moved, the
    /// first min(old_len, new_len) bytes keep their contents at `new`, the rest is new (fresh
    /// zeroes, or the object's further offsets), and the old range is unmapped, or with
    /// `dontunmap` (MREMAP_DONTUNMAP) stays mapped as it was, its private pages gone (it
    /// reads zeroes, or the file or the shared object).
    pub fn mremap(&mut self, pid: u32, old: u64, old_len: u64, new: u64, new_len: u64, dontunmap: bool) {
        let ps = self.geo.page_size();
        if new == old && new_len <= old_len {
            self.munmap(pid, old + new_len, old_len - new_len);
            return;
        }
        let sp = self.spaces.get_mut(&pid).expect("process");
        Self::split(sp, old, ps);
        let Some(v) = sp.vmas.get(&old).cloned() else { return };
        if new == old {
            // Grown in place (the kernel found the range after it free): the last piece of
            // the range (it may be split here where the kernel's vma is not) grows.
            let last = sp.vmas.range(..old + old_len).next_back().map(|(&k, _)| k).expect("vma");
            sp.vmas.get_mut(&last).expect("vma").end = old + new_len;
            return;
        }
        let keep = old_len.min(new_len);
        let moved: Vec<(u64, Rc<PageContent>)> = sp
            .private
            .iter()
            .filter(|(&p, _)| p >= old && p < old + keep)
            .map(|(&p, c)| (new + (p - old), c.clone()))
            .collect();
        if dontunmap {
            sp.private.retain(|&p, _| p < old || p >= old + old_len);
        } else {
            self.munmap(pid, old, old_len);
        }
        self.munmap(pid, new, new_len);
        let sp = self.spaces.get_mut(&pid).expect("process");
        sp.vmas.insert(new, RefVma { end: new + new_len, ..v });
        sp.private.extend(moved);
    }

    /// mprotect as Linux does it: the mapped part from `addr` up to the first hole changes
    /// (the call then fails with ENOMEM), nothing beyond the hole.
    pub fn mprotect(&mut self, pid: u32, addr: u64, len: u64, prot: u32) {
        let ps = self.geo.page_size();
        let sp = self.spaces.get_mut(&pid).expect("process");
        let mut end = addr;
        while end < addr + len {
            match sp.vmas.range(..=end).next_back() {
                Some((_, v)) if v.end > end => end = v.end.min(addr + len),
                _ => break,
            }
        }
        if end == addr {
            return;
        }
        Self::split(sp, addr, ps);
        Self::split(sp, end, ps);
        for (_, v) in sp.vmas.range_mut(addr..end) {
            v.prot = prot;
        }
    }

    /// MADV_DONTFORK (`on`) or MADV_DOFORK over [addr, addr + len): every mapping in the
    /// range, holes skipped (madvise goes on past them).
    pub fn dontfork(&mut self, pid: u32, addr: u64, len: u64, on: bool) {
        let ps = self.geo.page_size();
        let sp = self.spaces.get_mut(&pid).expect("process");
        Self::split(sp, addr, ps);
        Self::split(sp, addr + len, ps);
        for (_, v) in sp.vmas.range_mut(addr..addr + len) {
            v.dontcopy = on;
        }
    }

    /// MADV_REMOVE over [addr, addr + len): the shared objects' pages the range maps read as
    /// zero again (a hole in the file), in every mapping of them.
    pub fn remove(&mut self, pid: u32, addr: u64, len: u64) {
        let ps = self.geo.page_size();
        let sp = &self.spaces[&pid];
        let mut holes = Vec::new();
        for (&s, v) in sp.vmas.range(..addr + len) {
            let (from, to) = (s.max(addr), v.end.min(addr + len));
            if let (Some((o, off)), true) = (v.shared, from < to) {
                let first = off + (from - s) / ps;
                holes.push((o, first, first + (to - from) / ps));
            }
        }
        for (o, a, b) in holes {
            if let Some(obj) = self.objects.get_mut(&o) {
                obj.retain(|&i, _| i < a || i >= b);
            }
        }
    }

    /// Reclaim discarded the lazyfree (MADV_FREE) pages of [addr, addr + len): they read as
    /// zero now.
    pub fn discard(&mut self, pid: u32, addr: u64, len: u64) {
        if self.spaces.contains_key(&pid) {
            self.dontneed(pid, addr, len);
        }
    }

    /// MADV_DONTNEED: private anonymous pages read as zero again; shared ones keep their data.
    pub fn dontneed(&mut self, pid: u32, addr: u64, len: u64) {
        let end = addr + len;
        let sp = self.spaces.get_mut(&pid).expect("process");
        sp.private.retain(|&p, _| p < addr || p >= end);
    }

    /// GUP with FOLL_WRITE (mlock's or MADV_POPULATE_WRITE's populate of a private writable
    /// mapping) over [addr, end): each private file page not yet copied becomes a private
    /// copy of the file's page as it is now, so later writes to the file no longer show
    /// through (POSIX leaves this unspecified; Linux breaks COW there).
    pub fn break_cow(&mut self, pid: u32, addr: u64, end: u64) {
        let ps = self.geo.page_size();
        let mut p = addr;
        while p < end {
            let copy = match self.home(pid, p) {
                Some((Home::Private(_), v)) if v.file.is_some() && v.prot & vm::WRITE != 0 => {
                    let sp = &self.spaces[&pid];
                    (!sp.private.contains_key(&p)).then(|| self.page(pid, p).cloned().unwrap_or_default())
                }
                _ => None,
            };
            if let Some(c) = copy {
                self.spaces.get_mut(&pid).expect("process").private.insert(p, Rc::new(c));
            }
            p += ps;
        }
    }

    fn home(&self, pid: u32, page: u64) -> Option<(Home, &RefVma)> {
        let sp = self.spaces.get(&pid)?;
        let (&s, v) = sp.vmas.range(..=page).next_back()?;
        if v.end <= page {
            return None;
        }
        Some(match v.shared {
            Some((o, off)) => (Home::Shared(o, off + (page - s) / self.geo.page_size()), v),
            None => (Home::Private(page), v),
        })
    }

    /// Whether an access of the page at `page` is allowed (false if unmapped): a write needs
    /// PROT_WRITE, a fetch PROT_EXEC (NX hardware), a read any protection but none.
    pub fn access_ok(&self, pid: u32, page: u64, access: Access) -> bool {
        self.home(pid, page).is_some_and(|(_, v)| match access {
            Access::Write => v.prot & vm::WRITE != 0,
            Access::Exec => v.prot & vm::EXEC != 0,
            Access::Read => v.prot & (vm::READ | vm::WRITE | vm::EXEC) != 0,
        })
    }

    /// The expected contents of the page at `page` (None = all zero).
    pub fn page(&self, pid: u32, page: u64) -> Option<&PageContent> {
        let (h, v) = self.home(pid, page)?;
        match h {
            Home::Private(p) => match (self.spaces[&pid].private.get(&p), v.file) {
                (Some(c), _) => Some(c.as_ref()),
                (None, Some((o, off))) => self.objects.get(&o)?.get(&(off + self.vma_index(pid, page))),
                (None, None) => None,
            },
            Home::Shared(o, i) => self.objects.get(&o)?.get(&i),
        }
    }

    /// The page index of `page` in its vma.
    fn vma_index(&self, pid: u32, page: u64) -> u64 {
        let sp = &self.spaces[&pid];
        let (&s, _) = sp.vmas.range(..=page).next_back().expect("mapped");
        (page - s) / self.geo.page_size()
    }

    /// Store `value` at `start, start+stride, ... < end` within the page at `page`.
    pub fn write(&mut self, pid: u32, page: u64, start: usize, end: usize, stride: usize, value: u8) {
        let page_bytes = self.geo.page_size() as usize;
        match self.home(pid, page).map(|h| h.0) {
            Some(Home::Private(p)) => {
                // A private file page's first write copies the file's page (COW).
                let from_file =
                    if self.spaces[&pid].private.contains_key(&p) { None } else { self.page(pid, page).cloned() };
                let sp = self.spaces.get_mut(&pid).expect("process");
                let c = sp.private.entry(p).or_insert_with(|| Rc::new(from_file.unwrap_or_default()));
                Rc::make_mut(c).write(start, end, stride, value, page_bytes);
            }
            Some(Home::Shared(o, i)) => {
                self.objects
                    .get_mut(&o)
                    .expect("object")
                    .entry(i)
                    .or_default()
                    .write(start, end, stride, value, page_bytes);
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_isolates_private_and_shares_shared() {
        let mut o = Oracle::default();
        o.new_process(1);
        o.mmap(1, 0x10000, 0x2000, vm::READ | vm::WRITE, false);
        o.mmap(1, 0x20000, 0x2000, vm::READ | vm::WRITE, true);
        o.write(1, 0x10000, 0, 1, 1, 5);
        o.fork(1, 2);
        o.write(2, 0x10000, 0, 1, 1, 6);
        o.write(2, 0x20000, 0, 1, 1, 7);
        assert_eq!(o.page(1, 0x10000).unwrap().get(0), 5);
        assert_eq!(o.page(2, 0x10000).unwrap().get(0), 6);
        assert_eq!(o.page(1, 0x20000).unwrap().get(0), 7);
        o.munmap(1, 0x10000, 0x1000);
        assert!(!o.access_ok(1, 0x10000, Access::Read));
        assert!(o.access_ok(1, 0x11000, Access::Read));
    }
}

#[cfg(test)]
mod mprotect_tests {
    use super::*;

    #[test]
    fn mprotect_stops_at_the_first_hole() {
        let mut o = Oracle::default();
        o.new_process(1);
        o.mmap(1, 0x10000, 0x1000, vm::READ | vm::WRITE, false);
        o.mmap(1, 0x20000, 0x1000, vm::READ | vm::WRITE, false);
        o.mprotect(1, 0x10000, 0x20000, vm::READ);
        assert!(!o.access_ok(1, 0x10000, Access::Write));
        assert!(o.access_ok(1, 0x20000, Access::Write), "beyond the hole: unchanged, as Linux does");
    }
}
