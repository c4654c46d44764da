//! Seed 004's prototype (William Kucharski, 2018): PMD pages for read-only executable file
//! text, chosen by `transparent_hugepage/file_text=seed`. On the first fault in a PMD-aligned
//! range of a read-only executable private file mapping, a PMD page is allocated, filled from
//! the file (`kernel_read` of the whole 2 MiB, synchronously) and mapped by the pmd. The page
//! is not in the page cache: each mapping, and so each execution, reads its own. The range's
//! PAGESIZE pages are evicted from the page cache, and a later PAGESIZE fault of the same mm
//! in the range maps the page at its offset in the PMD page. If the allocation fails, the
//! fault falls through to the PAGESIZE paths.
//!
//! Differs from the prototype, which we know only from the seed's description: its gate on one
//! file name ("testr") is the knob here; its page is counted as 2018's kernels counted a
//! swap-backed file THP (ShmemPmdMapped, RssShmem, thp_file_alloc / thp_file_fallback), as
//! the seed saw it; and the prototype's copy is not coherent with later write(2)s to the file
//! (nothing in the seed says it is), so a file written while such a mapping exists reads the
//! old text through it.

use super::memory::Slot;
use super::mm::{vm, Backing, Vma};
use super::mm_types::pg;
use super::page_alloc::gfp;
use super::pgtable::Entry;
use super::vmstat::VmEvent;
use super::{vm_fault, Kernel, MmId};
use crate::units::{align_down, Pfn};

impl Kernel {
    /// The prototype's gate: a private, executable, not writable mapping of a regular file
    /// (not tmpfs), not VM_NOHUGEPAGE, whose aligned 2 MiB around `addr` lies in the vma with
    /// the file offset congruent, and wholly inside the file (the seed's 194-page tail past
    /// the last whole range was not PMD-mapped).
    pub(super) fn seed_text_eligible(&self, vma: &Vma, addr: u64) -> bool {
        let Backing::File(f) = vma.backing else { return false };
        let obj = self.filp(f).inode;
        if vma.flags & (vm::SHARED | vm::WRITE | vm::NOHUGEPAGE) != 0
            || vma.flags & vm::EXEC == 0
            || self.inode(obj).is_shmem()
            || !self.thp_vma_suitable_pmd(vma, addr)
        {
            return false;
        }
        let start = vma.linear_page_index(self.geo.hpage_pmd_align_down(addr), self.geo);
        start + self.geo.hpage_pmd_nr() <= self.inode(obj).i_size.div_ceil(self.geo.page_size())
    }

    /// The prototype's PMD fault: allocate the PMD page (THP_FILE_ALLOC; on failure
    /// THP_FILE_FALLBACK and VM_FAULT_FALLBACK), read the range through the file
    /// (`kernel_read`: the page cache and its readahead; VM_FAULT_MAJOR when it waited for the
    /// device), copy it in, evict the range's PAGESIZE pages that nothing maps, and map the
    /// page by the pmd (`do_set_pmd`).
    pub(super) fn do_seed_text_pmd(&mut self, mm: MmId, vma: &Vma, addr: u64, pmd: Slot) -> u32 {
        let (filp, obj) = self.vma_file(vma);
        let haddr = self.geo.hpage_pmd_align_down(addr);
        let start = vma.linear_page_index(haddr, self.geo);
        let (nr, order) = (self.geo.hpage_pmd_nr(), self.geo.hpage_pmd_order());
        let Some(a) = self.alloc_pages(order, gfp::HIGHUSER_MOVABLE | gfp::COMP) else {
            self.stat.count(VmEvent::ThpFileFallback);
            return vm_fault::FALLBACK;
        };
        self.stat.count(VmEvent::ThpFileAlloc);
        let head = a.pfn;
        let ps = self.geo.page_size();
        let waited_before = self.current.effects.io_wait_pages;
        self.file_read(filp, start * ps, nr * ps, None);
        let major = self.current.effects.io_wait_pages > waited_before;
        for i in 0..nr {
            // Reclaim during the read may have evicted a page read early: read it again.
            let page = match self.shmem_find_folio(obj, start + i) {
                Some(p) => Some(p),
                None => {
                    self.file_read(filp, (start + i) * ps, ps, None);
                    self.shmem_find_folio(obj, start + i)
                }
            };
            let dst = Pfn(head.0 + i as u32);
            match page {
                Some(p) => self.copy_page(dst, p),
                None => {
                    // Memory too short to hold one page of the file: give up the PMD page.
                    self.folio_put(head);
                    self.stat.count(VmEvent::ThpFileFallback);
                    return vm_fault::FALLBACK;
                }
            }
            let p = &mut self.mem.pages[dst.idx()];
            p.set(pg::TEXT_COPY);
            p.mapping = obj;
            p.index = start + i;
        }
        self.invalidate_mapping_pages(obj, start, start + nr - 1);
        let r = self.do_set_pmd(mm, vma, addr, head, pmd, false);
        self.folio_put(head);
        if r != 0 {
            return r;
        }
        self.text_copies.insert((mm, obj, start), head);
        if major {
            self.stat.count(VmEvent::PgMajFault);
            return vm_fault::MAJOR;
        }
        0
    }

    /// The prototype's answer for mixed mappings: a PAGESIZE read fault of `mm` at `addr` in a
    /// private file mapping, in a range this mm holds a text copy of, maps the page at its
    /// offset in the PMD page. None when there is no copy (the usual paths take the fault).
    pub(super) fn seed_text_map_page(&mut self, mm: MmId, vma: &Vma, addr: u64, pmd: Slot) -> Option<u32> {
        let (_, obj) = self.vma_file(vma);
        let index = vma.linear_page_index(addr, self.geo);
        let start = align_down(index, self.geo.hpage_pmd_nr());
        let head = *self.text_copies.get(&(mm, obj, start))?;
        let Some(table) = self.pte_alloc(mm, pmd) else {
            return Some(vm_fault::OOM);
        };
        let page = Pfn(head.0 + (index - start) as u32);
        self.folio_get(head);
        self.add_rmap_pte(page, mm);
        let c = self.mm_counter(head);
        self.add_rss_at(table, mm, c, 1);
        let prot = self.file_pte_prot(vma, obj);
        self.set_entry(table, self.geo.table_index(addr, 0), Entry::new(page, prot));
        Some(0)
    }

    /// A text copy is freed (its last mapping gone): it leaves the registry.
    pub(super) fn text_copy_free(&mut self, head: Pfn) {
        self.text_copies.retain(|_, h| *h != head);
        let nr = self.folio_nr_pages(head) as u32;
        for i in 0..nr {
            let p = &mut self.mem.pages[(head.0 + i) as usize];
            p.clear(pg::TEXT_COPY);
            p.mapping = super::mm_types::NIL;
        }
    }
}
