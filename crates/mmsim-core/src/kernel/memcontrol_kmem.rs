//! Kernel memory charged to memory cgroups (mm/memcontrol.c's kmem side): page-table pages
//! (`__memcg_kmem_charge_page`) and each task's kernel stack (kernel/fork.c's
//! `memcg_charge_kernel_stack`), through `obj_cgroup_charge_pages`: the charge, MEMCG_KMEM and
//! v1's kmem counter. Slab objects are not charged (docs/model/reclaim.md).

use super::memcontrol::*;
use super::page_alloc::gfp;
use super::vmstat::VmItem;
use super::Kernel;
use crate::units::Pfn;

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
        self.mod_memcg_extra(memcg, EXTRA_KMEM, nr as i64);
        if self.memcg_v1() && memcg != ROOT_MEMCG {
            self.page_counter_charge(memcg, Counter::Kmem, nr);
        }
        Ok(())
    }

    /// `obj_cgroup_uncharge_pages`: the charge goes back through the stock (the root's has
    /// no counter to go back to).
    fn obj_cgroup_uncharge_pages(&mut self, memcg: u16, nr: u64) {
        self.mod_memcg_extra(memcg, EXTRA_KMEM, -(nr as i64));
        if memcg == ROOT_MEMCG {
            return;
        }
        if self.memcg_v1() {
            self.page_counter_uncharge(memcg, Counter::Kmem, nr);
        }
        self.refill_stock(memcg, nr);
    }

    /// `__memcg_kmem_uncharge_page`: the page's charge goes back through the stock.
    pub fn memcg_kmem_uncharge_page(&mut self, page: Pfn) {
        let memcg = self.mem.pages[page.idx()].memcg;
        self.mem.pages[page.idx()].memcg = NO_MEMCG;
        if memcg != NO_MEMCG {
            self.obj_cgroup_uncharge_pages(memcg, 1);
        }
    }
}
