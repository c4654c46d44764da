//! kernel/fork.c and the exec/exit halves of the mm's life: mm_init with a process image
//! (the stack exec leaves behind), dup_mm (dup_mmap + copy_page_range), and exit_mmap.
//! Differs from Linux: a simulated process has a stack and no text, data or libraries.

use super::mm::{vm, Backing, MmCounter, MmStruct, Vma};
use super::{vm_fault, Kernel, MmId};

/// Size of the initial stack vma (setup_arg_pages expands the stack by 128 KiB, plus the
/// argument page).
pub const STACK_SIZE: u64 = 132 * 1024;
/// `start_brk` of the first process: where the ELF loader's `set_brk` leaves the break, after
/// the program's bss. Linux places it after the bss of an executable loaded at
/// ELF_ET_DYN_BASE (2/3 of TASK_SIZE, 0x5555_5555_4000 for x86-64 PIE) and randomizes it by
/// up to 32 MiB; mmsim takes the PIE base's next 2 MiB boundary, with no randomization.
/// A workload's `start_brk` puts it elsewhere.
pub const START_BRK: u64 = 0x5555_5560_0000;

/// mmap_base for a process with an 8 MiB stack rlimit and no randomisation: the gap is
/// clamped to at least 128 MiB (mmap_base() in arch/x86/mm/mmap.c).
pub fn mmap_base(geo: crate::units::Geometry) -> u64 {
    geo.task_size() - (128 << 20)
}

impl Kernel {
    /// `mm_alloc` + `pgd_alloc`: an empty mm of the current task, in its memory cgroup
    /// `memcg` (the pgd is charged there, as GFP_PGTABLE_USER charges the current task's).
    /// None if the PGD cannot be allocated.
    fn mm_alloc(&mut self, memcg: u16) -> Option<MmId> {
        let pgd = self.pgd_alloc(memcg)?;
        let mut m = MmStruct::new(pgd, mmap_base(self.geo));
        m.memcg = memcg;
        if let Some(i) = self.free_mm_ids.pop_first() {
            self.mms[i as usize] = Some(m);
            return Some(i);
        }
        self.mms.push(Some(m));
        Some((self.mms.len() - 1) as MmId)
    }

    /// A new process image as execve leaves it: a stack vma below self.geo.task_size() whose top page
    /// (arguments and environment) is written. Not counted as the workload's faults.
    pub fn exec_mm(&mut self) -> Option<MmId> {
        self.exec_mm_inner()
    }

    /// `bprm_mm_init`: the empty mm an execve builds the new image in (no stack yet, no break:
    /// a trace's replay maps the image its records describe). None when memory runs out.
    /// The task stays in its memory cgroup `memcg` (the old mm's): the new mm is charged there.
    pub fn bprm_mm_init(&mut self, memcg: u16) -> Option<MmId> {
        self.mm_alloc(memcg)
    }

    fn exec_mm_inner(&mut self) -> Option<MmId> {
        let mm = self.mm_alloc(super::memcontrol::ROOT_MEMCG)?;
        // The ELF loader's set_brk: the heap begins after the program's bss.
        let m = self.mm_mut(mm);
        (m.start_brk, m.brk) = (START_BRK, START_BRK);
        let start = self.geo.page_align_down(self.geo.task_size() - STACK_SIZE);
        let flags = vm::READ | vm::WRITE | vm::MAYREAD | vm::MAYWRITE | vm::MAYEXEC | vm::GROWSDOWN | vm::ACCOUNT;
        let vma = Vma::new_unallocated(start, self.geo.task_size(), flags, start >> self.geo.page_shift, Backing::Anon);
        self.mm_mut(mm).vmas.insert(start, vma);
        self.vm_area_alloc_new(mm, start);
        if self.handle_mm_fault(mm, self.geo.task_size() - self.geo.page_size(), true) & vm_fault::ERROR != 0 {
            self.exit_mmap(mm);
            return None;
        }
        Some(mm)
    }

    /// `dup_mm` -> `dup_mmap`: copy every vma but the VM_DONTCOPY ones (MADV_DONTFORK: the
    /// child has nothing mapped there) (a shmem mapping takes a file reference, a vma with an
    /// anon_vma gets its own child anon_vma) and its page tables. None on ENOMEM, with the
    /// partial child torn down.
    pub fn dup_mm(&mut self, parent: MmId) -> Option<MmId> {
        let child = self.mm_alloc(self.mm(parent).memcg)?;
        let vmas: Vec<Vma> = self.mm(parent).vmas.values().cloned().collect();
        {
            let pm = self.mm(parent);
            let (p, sb, b, memcg, nl) = (pm.mmap_base, pm.start_brk, pm.brk, pm.memcg, pm.nonlinear_anon);
            let c = self.mm_mut(child);
            (c.mmap_base, c.start_brk, c.brk) = (p, sb, b);
            // The child starts in its parent's cgroup (its page tables are charged there).
            c.memcg = memcg;
            c.nonlinear_anon = nl;
        }
        for v in vmas {
            if v.flags & vm::DONTCOPY != 0 {
                continue;
            }
            let mut cv = v.clone();
            // dup_mmap's vm_area_dup, charged to the forking task's memcg.
            cv.objcg = self.vm_area_alloc();
            // dup_mmap: the child's vmas are not locked (VM_LOCKED_MASK cleared); mm_init
            // left its def_flags empty (VM_INIT_DEF_MASK keeps no VM_LOCKED: mlockall's
            // MCL_FUTURE is not inherited).
            cv.flags &= !vm::LOCKED_MASK;
            if v.anon_vma.is_some() {
                // anon_vma_fork: the parent's chain cloned, plus an anon_vma of its own.
                cv.anon_vma = Some(self.new_anon_vma());
                cv.fork_child = true;
            }
            self.vma_file_get(child, v.backing);
            self.mm_mut(child).vmas.insert(cv.start, cv);
            if self.copy_page_range(child, parent, &v).is_err() {
                // dup_mmap's `out:` path flushes the parent's TLB on failure too: the ptes
                // copied so far were write-protected.
                if !self.sabotage.skip_fork_flush {
                    crate::tracepoints::raise(&mut self.tp, crate::tracepoints::ev::TLB_FLUSH, || {
                        "pages:-1 reason:local mm shootdown".into()
                    });
                    self.work.push(super::Work::FlushMm { mm: parent });
                }
                self.exit_mmap(child);
                return None;
            }
        }
        // dup_mmap's flush_tlb_mm(oldmm): the parent's now read-only ptes.
        if !self.sabotage.skip_fork_flush {
            crate::tracepoints::raise(&mut self.tp, crate::tracepoints::ev::TLB_FLUSH, || {
                "pages:-1 reason:local mm shootdown".into()
            });
            self.work.push(super::Work::FlushMm { mm: parent });
        }
        let hw = self.mm(child).rss_total();
        self.mm_mut(child).hiwater_rss = hw;
        if self.khugepaged_registered(parent) {
            // dup_mmap's khugepaged_fork: the child of a registered mm is registered.
            self.khugepaged_register(child);
        }
        Some(child)
    }

    /// `mmget`: another task (a thread, CLONE_VM) uses `mm`.
    pub fn mmget(&mut self, mm: MmId) {
        self.mm_mut(mm).users += 1;
    }

    /// `mmput`: a task stops using `mm`; the last user tears it down (`exit_mmap`). True when
    /// the mm went.
    pub fn mmput(&mut self, mm: MmId) -> bool {
        let m = self.mm_mut(mm);
        m.users -= 1;
        if m.users > 0 {
            return false;
        }
        self.exit_mmap(mm);
        true
    }

    /// `exit_mmap` + `__mmput`: unmap everything, free every page table and the PGD, drop
    /// the huge zero folio reference and the shmem files.
    pub fn exit_mmap(&mut self, mm: MmId) {
        // Seed 003: leave every shared table to its other users first.
        self.pt_unshare_range(mm, 0, self.geo.task_size());
        let vmas: Vec<Vma> = self.mm(mm).vmas.values().cloned().collect();
        for v in &vmas {
            self.zap_page_range(mm, v, v.start, v.end);
        }
        // Seed 003 under `rfc`: tables a partial munmap left attached outside any vma.
        if self.knobs.ptshare_compat == super::knobs::PtshareCompat::Rfc {
            self.pt_exit_sweep(mm);
        }
        self.free_pgtables(mm, &vmas, 0, 0);
        for v in &vmas {
            self.vma_close(mm, v, false);
            self.vm_area_free(v.objcg);
        }
        self.mm_mut(mm).vmas.clear();
        self.mm_put_huge_zero_folio(mm);
        self.khugepaged_exit(mm);
        if self.mm(mm).pgtables_bytes != 0 {
            let b = self.mm(mm).pgtables_bytes;
            self.report_bug(format!("exit_mmap: {b} bytes of page tables still accounted (mm_pgtables_bytes)"));
        }
        if self.mm(mm).rss.iter().any(|&r| r != 0) {
            let r = self.mm(mm).rss;
            self.report_bug(format!("exit_mmap: rss counters not zero at exit (file, anon, shmem) = {r:?}"));
        }
        let pgd = self.mm(mm).pgd;
        self.pte_free(None, pgd);
        self.work.push(super::Work::MmExit { mm });
        self.mms[mm as usize] = None;
        self.free_mm_ids.insert(mm);
    }

    /// rss of a counter in kB, for status reports.
    pub fn rss_kb(&self, mm: MmId, c: MmCounter) -> i64 {
        self.mm(mm).rss[c as usize] * (self.geo.page_size() as i64 / 1024)
    }
}
