//! Kernel memory charged to memory cgroups (mm/memcontrol.c's kmem side, Linux 6.18):
//! page-table pages (`__memcg_kmem_charge_page`), each task's kernel stack (kernel/fork.c's
//! `memcg_charge_kernel_stack`) and slab objects (`__memcg_slab_post_alloc_hook`,
//! `__memcg_slab_free_hook`), all through `obj_cgroup_charge_pages`: the charge, MEMCG_KMEM and
//! v1's kmem counter. Objects are charged by the byte through each CPU's object stock
//! (`obj_stock_pcp`), which also holds back their NR_SLAB_*_B updates until a page's worth.
//!
//! Differs from Linux: a memcg's objcg is the memcg itself (cgroups are never removed, so no
//! objcg is ever reparented); one node, so the stock's cached_pgdat never changes.

use super::memcontrol::*;
use super::mm::VMA_UNALLOCATED;
use super::page_alloc::gfp;
use super::slab::KmemCache;
use super::vmstat::VmItem;
use super::Kernel;
use crate::units::Pfn;

/// `struct obj_stock_pcp`: a CPU's bytes charged ahead to one objcg, and the slab statistics
/// not yet pushed to it.
#[derive(Clone, Copy, Debug)]
pub struct ObjStock {
    /// `cached_objcg` (NO_MEMCG: none).
    pub cached: u16,
    pub nr_bytes: u64,
    pub nr_slab_reclaimable_b: i64,
    pub nr_slab_unreclaimable_b: i64,
}

impl Default for ObjStock {
    fn default() -> Self {
        ObjStock { cached: NO_MEMCG, nr_bytes: 0, nr_slab_reclaimable_b: 0, nr_slab_unreclaimable_b: 0 }
    }
}

impl Kernel {
    /// `__memcg_kmem_charge_page` of a page-table page (`__GFP_ACCOUNT`): charged like user
    /// memory, counted as kernel memory (and v1's kmem counter). Err when the charge fails.
    #[allow(clippy::result_unit_err)] // -ENOMEM
    pub fn memcg_kmem_charge_page(&mut self, page: Pfn, memcg: u16, gfp_flags: u32) -> Result<(), ()> {
        self.obj_cgroup_charge_pages(memcg, gfp_flags, 1)?;
        self.mem.pages[page.idx()].memcg = memcg;
        Ok(())
    }

    /// `alloc_thread_stack_node`'s `memcg_charge_kernel_stack` and `account_kernel_stack`: a
    /// new task's kernel stack (THREAD_SIZE, 16 KiB on x86-64), each of its pages charged as
    /// kernel memory to `memcg` (the creating task's; nothing for the root, which has no
    /// obj_cgroup) and counted in NR_KERNEL_STACK_KB. Returns the memcg charged, for
    /// `exit_task_stack_account`; Err (-ENOMEM, the clone fails) when a charge fails, the
    /// pages charged so far given back. Differs from Linux: the stack's pages are charged,
    /// not taken from the buddy allocator (mmsim has no kernel virtual memory), and no
    /// per-CPU cache of freed stacks is kept (the charge is the same either way).
    #[allow(clippy::result_unit_err)] // -ENOMEM
    pub fn alloc_thread_stack(&mut self, memcg: u16) -> Result<u16, ()> {
        let memcg = if memcg == ROOT_MEMCG { NO_MEMCG } else { memcg };
        if memcg != NO_MEMCG {
            for i in 0..THREAD_SIZE_PAGES {
                if self.obj_cgroup_charge_pages(memcg, gfp::KERNEL, 1).is_err() {
                    for _ in 0..i {
                        self.obj_cgroup_uncharge_pages(memcg, 1);
                    }
                    return Err(());
                }
            }
        }
        self.account_kernel_stack(memcg, 1);
        Ok(memcg)
    }

    /// `exit_task_stack_account` (do_exit): the stack leaves NR_KERNEL_STACK_KB, then each
    /// page's charge goes back to the memcg it was charged to (through the stock).
    pub fn exit_task_stack_account(&mut self, memcg: u16) {
        self.account_kernel_stack(memcg, -1);
        if memcg != NO_MEMCG {
            for _ in 0..THREAD_SIZE_PAGES {
                self.obj_cgroup_uncharge_pages(memcg, 1);
            }
        }
    }

    /// `account_kernel_stack`: each of the stack's pages adds (or takes) its kB to the node's
    /// NR_KERNEL_STACK_KB and its memcg's (one statistics update a page).
    fn account_kernel_stack(&mut self, memcg: u16, account: i64) {
        let kb = (self.geo.page_size() / 1024) as i64 * account;
        for _ in 0..THREAD_SIZE_PAGES {
            self.stat.mod_item(VmItem::NrKernelStack, kb);
            if memcg != NO_MEMCG {
                self.mod_memcg_item(memcg, VmItem::NrKernelStack, kb);
            }
        }
    }

    /// `obj_cgroup_charge_pages`: `nr` pages of kernel memory charged to `memcg`
    /// (`try_charge_memcg`, then MEMCG_KMEM and v1's kmem counter).
    fn obj_cgroup_charge_pages(&mut self, memcg: u16, gfp_flags: u32, nr: u64) -> Result<(), ()> {
        self.try_charge_memcg(memcg, gfp_flags, nr)?;
        self.memcg_account_kmem(memcg, nr as i64);
        Ok(())
    }

    /// `obj_cgroup_uncharge_pages`: the charge goes back through the stock (the root's has
    /// no counter to go back to).
    fn obj_cgroup_uncharge_pages(&mut self, memcg: u16, nr: u64) {
        self.memcg_account_kmem(memcg, -(nr as i64));
        if memcg != ROOT_MEMCG {
            self.refill_stock(memcg, nr);
        }
    }

    /// `mod_memcg_state(MEMCG_KMEM)` and `memcg1_account_kmem`: `nr` pages more (or fewer) of
    /// kernel memory, and on cgroup v1 on the kmem counter (which the root has not).
    fn memcg_account_kmem(&mut self, memcg: u16, nr: i64) {
        self.mod_memcg_extra(memcg, EXTRA_KMEM, nr);
        if self.memcg_v1() && memcg != ROOT_MEMCG {
            if nr > 0 {
                self.page_counter_charge(memcg, Counter::Kmem, nr as u64);
            } else {
                self.page_counter_uncharge(memcg, Counter::Kmem, nr.unsigned_abs());
            }
        }
    }

    /// `__memcg_kmem_uncharge_page`: the page's charge goes back through the stock.
    pub fn memcg_kmem_uncharge_page(&mut self, page: Pfn) {
        let memcg = self.mem.pages[page.idx()].memcg;
        self.mem.pages[page.idx()].memcg = NO_MEMCG;
        if memcg != NO_MEMCG {
            self.obj_cgroup_uncharge_pages(memcg, 1);
        }
    }

    // ---- slab objects --------------------------------------------------------------------

    /// `current_obj_cgroup`: the objcg the current task charges objects to, `memcg`'s or its
    /// nearest non-root ancestor's; none (NO_MEMCG) for the root.
    fn current_obj_cgroup(&self, memcg: u16) -> u16 {
        if memcg == NO_MEMCG || memcg == ROOT_MEMCG {
            NO_MEMCG
        } else {
            memcg
        }
    }

    /// `__memcg_slab_post_alloc_hook`: an object of `cache` allocated by a task of `memcg`
    /// (SLAB_ACCOUNT or __GFP_ACCOUNT) is charged `obj_full_size` bytes (the object and its
    /// obj_ext pointer) and counted in the cache's NR_SLAB_*_B. Returns the objcg charged, for
    /// the free (NO_MEMCG: none, the root's tasks); Err (-ENOMEM, the allocation fails and
    /// the object is freed) when the charge fails.
    #[allow(clippy::result_unit_err)] // -ENOMEM
    pub fn memcg_slab_post_alloc_hook(&mut self, cache: KmemCache, memcg: u16, gfp_flags: u32) -> Result<u16, ()> {
        let objcg = self.current_obj_cgroup(memcg);
        if self.tp.is_some() {
            self.trace_kmem(crate::tracepoints::ev::KMEM_CACHE_ALLOC, cache, true, objcg);
        }
        if objcg == NO_MEMCG {
            return Ok(NO_MEMCG);
        }
        let size = self.slab_sizes.obj_full_size(cache);
        self.obj_cgroup_charge_account(objcg, gfp_flags, size, Some(cache.vmstat_idx()))?;
        Ok(objcg)
    }

    /// `kmem:kmem_cache_alloc` or `kmem:kmem_cache_free` of an object of `cache`.
    #[cold]
    #[inline(never)]
    pub(super) fn trace_kmem(&mut self, id: u8, cache: KmemCache, accounted: bool, objcg: u16) {
        let memcg = if objcg == NO_MEMCG { "none".to_string() } else { objcg.to_string() };
        let size = self.slab_sizes.obj_full_size(cache) - 8;
        self.trace(id, || {
            if id == crate::tracepoints::ev::KMEM_CACHE_ALLOC {
                format!("name={} bytes_alloc={size} accounted={accounted} memcg_id={memcg}", cache.name())
            } else {
                format!("name={} memcg_id={memcg}", cache.name())
            }
        });
    }

    /// `__memcg_slab_free_hook`: a freed object's bytes go back to this CPU's object stock
    /// (whole pages beyond one uncharged) and leave its NR_SLAB_*_B.
    pub fn memcg_slab_free_hook(&mut self, cache: KmemCache, objcg: u16) {
        if self.tp.is_some() {
            self.trace_kmem(crate::tracepoints::ev::KMEM_CACHE_FREE, cache, true, objcg);
        }
        if objcg == NO_MEMCG {
            return;
        }
        let size = self.slab_sizes.obj_full_size(cache);
        self.refill_obj_stock(objcg, size, true, -(size as i64), Some(cache.vmstat_idx()));
    }

    /// `obj_cgroup_charge_account`: `size` bytes from this CPU's object stock, or whole pages
    /// charged (`obj_cgroup_charge_pages`) and the rest of the last page left in the stock
    /// (without uncharging what the stock then holds past a page).
    fn obj_cgroup_charge_account(
        &mut self,
        objcg: u16,
        gfp_flags: u32,
        size: u64,
        idx: Option<usize>,
    ) -> Result<(), ()> {
        if self.consume_obj_stock(objcg, size, idx) {
            return Ok(());
        }
        let ps = self.geo.page_size();
        let nr_bytes = size % ps;
        let nr_pages = size / ps + u64::from(nr_bytes != 0);
        self.obj_cgroup_charge_pages(objcg, gfp_flags, nr_pages)?;
        if nr_bytes != 0 || idx.is_some() {
            let rest = if nr_bytes != 0 { ps - nr_bytes } else { 0 };
            self.refill_obj_stock(objcg, rest, false, size as i64, idx);
        }
        Ok(())
    }

    fn obj_stock_cpu(&mut self) -> usize {
        let cpu = self.cur_cpu;
        if self.memcg.obj_stock.len() <= cpu {
            self.memcg.obj_stock.resize(cpu + 1, ObjStock::default());
        }
        cpu
    }

    /// `consume_obj_stock`: `nr_bytes` from this CPU's stock if it caches `objcg` and holds
    /// that many (then the statistics are accounted in the stock too).
    fn consume_obj_stock(&mut self, objcg: u16, nr_bytes: u64, idx: Option<usize>) -> bool {
        let cpu = self.obj_stock_cpu();
        let st = &mut self.memcg.obj_stock[cpu];
        if st.cached != objcg || st.nr_bytes < nr_bytes {
            return false;
        }
        st.nr_bytes -= nr_bytes;
        if let Some(idx) = idx {
            self.account_obj_stock(objcg, cpu, nr_bytes as i64, idx);
        }
        true
    }

    /// `__account_obj_stock`: a slab update kept in the stock until it passes a page either
    /// way (the first update of an item after a push always stays).
    fn account_obj_stock(&mut self, objcg: u16, cpu: usize, nr: i64, idx: usize) {
        let st = &mut self.memcg.obj_stock[cpu];
        let bytes = if idx == EXTRA_SLAB_RECLAIMABLE_B {
            &mut st.nr_slab_reclaimable_b
        } else {
            &mut st.nr_slab_unreclaimable_b
        };
        let push = if *bytes == 0 {
            *bytes = nr;
            0
        } else {
            *bytes += nr;
            if bytes.unsigned_abs() > self.geo.page_size() {
                std::mem::take(bytes)
            } else {
                0
            }
        };
        if push != 0 {
            self.mod_memcg_extra(objcg, idx, push);
        }
    }

    /// `refill_obj_stock`: `nr_bytes` back into this CPU's stock, which first changes to
    /// `objcg` (draining the one it cached, and taking `objcg`'s leftover bytes) if it must;
    /// with `allow_uncharge` (or after such a change) whole pages past one are uncharged.
    /// `nr_acct` bytes of slab statistics `idx` go into the stock.
    fn refill_obj_stock(
        &mut self,
        objcg: u16,
        nr_bytes: u64,
        mut allow_uncharge: bool,
        nr_acct: i64,
        idx: Option<usize>,
    ) {
        let cpu = self.obj_stock_cpu();
        if self.memcg.obj_stock[cpu].cached != objcg {
            self.drain_obj_stock(cpu);
            let left = std::mem::take(&mut self.memcg.groups[objcg as usize].nr_charged_bytes);
            let st = &mut self.memcg.obj_stock[cpu];
            st.nr_bytes = left;
            st.cached = objcg;
            allow_uncharge = true;
        }
        self.memcg.obj_stock[cpu].nr_bytes += nr_bytes;
        if let Some(idx) = idx {
            self.account_obj_stock(objcg, cpu, nr_acct, idx);
        }
        let ps = self.geo.page_size();
        let st = &mut self.memcg.obj_stock[cpu];
        if allow_uncharge && st.nr_bytes > ps {
            let nr_pages = st.nr_bytes / ps;
            st.nr_bytes %= ps;
            self.obj_cgroup_uncharge_pages(objcg, nr_pages);
        }
    }

    /// `drain_obj_stock`: the stock's whole pages are uncharged (straight from the counters,
    /// not through the charge stock), the bytes left go to the objcg's `nr_charged_bytes`,
    /// and its held statistics are pushed.
    fn drain_obj_stock(&mut self, cpu: usize) {
        let st = std::mem::take(&mut self.memcg.obj_stock[cpu]);
        let old = st.cached;
        if old == NO_MEMCG {
            return;
        }
        if st.nr_bytes != 0 {
            let ps = self.geo.page_size();
            let nr_pages = st.nr_bytes / ps;
            if nr_pages != 0 {
                self.memcg_account_kmem(old, -(nr_pages as i64));
                self.memcg_uncharge(old, nr_pages);
            }
            self.memcg.groups[old as usize].nr_charged_bytes += st.nr_bytes % ps;
        }
        if st.nr_slab_reclaimable_b != 0 {
            self.mod_memcg_extra(old, EXTRA_SLAB_RECLAIMABLE_B, st.nr_slab_reclaimable_b);
        }
        if st.nr_slab_unreclaimable_b != 0 {
            self.mod_memcg_extra(old, EXTRA_SLAB_UNRECLAIMABLE_B, st.nr_slab_unreclaimable_b);
        }
    }

    /// drain_all_stock's object half for one CPU (`obj_stock_flush_required`): drained when
    /// it caches an objcg of `root`'s subtree.
    pub(super) fn drain_obj_stock_of(&mut self, cpu: usize, root: u16) {
        let m = self.memcg.obj_stock.get(cpu).map_or(NO_MEMCG, |s| s.cached);
        if m != NO_MEMCG && self.memcg_is_descendant(m, root) {
            self.drain_obj_stock(cpu);
        }
    }

    /// Bytes charged to `memcg` (its own objcg) that no object holds: in the object stocks
    /// and its `nr_charged_bytes` (the invariant checks).
    pub fn memcg_obj_stock_bytes(&self, memcg: u16) -> u64 {
        let stocks: u64 = self.memcg.obj_stock.iter().filter(|s| s.cached == memcg).map(|s| s.nr_bytes).sum();
        stocks + self.memcg.groups[memcg as usize].nr_charged_bytes
    }

    // ---- vm_area_struct (mm/vma_init.c) --------------------------------------------------

    /// `vm_area_alloc` / `vm_area_dup`: a vm_area_struct charged to the current task's memcg
    /// (none for a kernel thread or the root's tasks). Differs from Linux: a charge that fails
    /// leaves it uncharged (Linux fails the mmap or split with -ENOMEM).
    pub(super) fn vm_area_alloc(&mut self) -> u16 {
        let memcg = if self.in_kthread { NO_MEMCG } else { self.cur_memcg() };
        self.memcg_slab_post_alloc_hook(KmemCache::VmAreaStruct, memcg, gfp::KERNEL).unwrap_or(NO_MEMCG)
    }

    /// The vma at `start` that mmap, brk or mremap placed: allocated if no merge made it
    /// unnecessary.
    pub(super) fn vm_area_alloc_new(&mut self, mm: super::MmId, start: u64) {
        if self.mm(mm).vmas.get(&start).is_some_and(|v| v.objcg == VMA_UNALLOCATED) {
            let objcg = self.vm_area_alloc();
            self.mm_mut(mm).vmas.get_mut(&start).expect("vma").objcg = objcg;
        }
    }

    /// `vm_area_free` of a vma's struct (nothing for one never allocated).
    pub(super) fn vm_area_free(&mut self, objcg: u16) {
        if objcg != VMA_UNALLOCATED {
            self.memcg_slab_free_hook(KmemCache::VmAreaStruct, objcg);
        }
    }

    /// Two vmas merged into `v`, whose `objcg` is the one of the vma whose struct goes: the
    /// survivor's struct (`survivor`) stays unless it was never allocated (a new vma merging
    /// into an old one: the old one's stays). Returns the objcg of the struct to free.
    pub(super) fn vma_merge_objcg(v: &mut super::mm::Vma, survivor: u16) -> u16 {
        if survivor == VMA_UNALLOCATED {
            return VMA_UNALLOCATED;
        }
        std::mem::replace(&mut v.objcg, survivor)
    }

    // ---- buffer heads (fs/buffer.c) ------------------------------------------------------

    /// `create_empty_buffers` for an ext4 folio being written: a buffer head per 4 KiB block
    /// (`folio_alloc_buffers`: GFP_NOFS | __GFP_ACCOUNT | __GFP_NOFAIL with the folio's memcg
    /// active, so charged to it whoever writes), unless it has them.
    pub(super) fn folio_create_buffers(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if p.test(super::mm_types::pg::PRIVATE) || p.test(super::mm_types::pg::SHMEM) {
            return;
        }
        self.mem.pages[head.idx()].set(super::mm_types::pg::PRIVATE);
        for _ in 0..self.folio_blocks(head) {
            let _ = self.memcg_slab_post_alloc_hook(KmemCache::BufferHead, p.memcg, gfp::NOFAIL);
        }
    }

    /// `try_to_free_buffers` (`filemap_release_folio`): a folio leaving the page cache or being
    /// split gives its buffer heads back.
    pub(super) fn folio_free_buffers(&mut self, head: Pfn) {
        let p = self.mem.pages[head.idx()];
        if !p.test(super::mm_types::pg::PRIVATE) {
            return;
        }
        self.mem.pages[head.idx()].clear(super::mm_types::pg::PRIVATE);
        let objcg = self.current_obj_cgroup(p.memcg);
        for _ in 0..self.folio_blocks(head) {
            self.memcg_slab_free_hook(KmemCache::BufferHead, objcg);
        }
    }

    /// Blocks of ext4's 4 KiB block size in a folio.
    pub(super) fn folio_blocks(&self, head: Pfn) -> u64 {
        (self.folio_nr_pages(head) * self.geo.page_size()).div_ceil(4096)
    }
}
