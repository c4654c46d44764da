//! The memory ops of a program as system calls: each op is one method that works out its
//! arguments, calls the kernel's system-call layer (`kernel/syscall.rs`) and hands the outcome
//! to `finish_call`, the one place the task's accounting and the reference model follow a
//! call. The trace replayer calls the same layer.

use std::rc::Rc;

use super::{Interp, SerialBatch, TaskState};
use crate::kernel::filemap::FMode;
use crate::kernel::memcontrol::{NO_MEMCG, ROOT_MEMCG};
use crate::kernel::mmap::Errno;
use crate::kernel::syscall::{Effects, MmapReq};
use crate::kernel::uapi::{Advice, CloneFlags, MapFlag, MapFlags, MclFlag, MlockFlags, MremapFlags, Prot};
use crate::units::VirtAddr;
use crate::workload::spec::*;

/// A system call made, as the reference model needs it: the range it acted on and what it
/// came to.
pub(super) enum Call<'a> {
    /// mmap(2) placed a mapping of `len` bytes (pages, or huge pages for MAP_HUGETLB) at `addr`.
    Mmap { addr: u64, len: u64, prot: Prot, shared: bool, file: Option<(&'a str, u64)> },
    /// munmap(2) unmapped [addr, addr + len).
    Munmap { addr: u64, len: u64 },
    /// mprotect(2) over [addr, addr + len) came to `ret`.
    Mprotect { addr: u64, len: u64, prot: Prot, ret: Result<(), Errno> },
    /// MADV_DONTNEED zapped [addr, addr + len).
    DontNeed { addr: u64, len: u64 },
    /// MADV_DONTFORK (`on`) or MADV_DOFORK changed the vmas of [addr, addr + len).
    DontFork { addr: u64, len: u64, on: bool },
    /// MADV_REMOVE punched out the file pages [addr, addr + len) maps.
    Remove { addr: u64, len: u64 },
    /// mremap(2) of [old, old + old_len) to `new_len` bytes with `flags` (`to`: MREMAP_FIXED's
    /// target), at `ret`, or its error.
    Mremap { old: u64, old_len: u64, new_len: u64, flags: MremapFlags, ret: Result<u64, Errno>, to: u64 },
    /// A call the reference model has nothing to follow.
    Other,
}

impl Interp {
    /// The faults `__get_user_pages` took in a system call (a populate): min_flt and the
    /// handler's time, no exception and no perf event; the ranges it broke COW on; the time
    /// the task waited for the pages it read (`charge_io`). Then the reference model follows
    /// `call` and the COW breaks, and the invariants are checked (`after_syscall`).
    pub(super) fn finish_call(&mut self, t: usize, effects: Effects, call: Call) {
        let Effects { min_flt, maj_flt, cow_ranges, io_wait_pages, remapped, io_wait_ns, throttle_ns } = effects;
        if io_wait_pages > 0 {
            self.io_wait_pages += io_wait_pages;
            self.charge_io(t);
        }
        self.charge_wait_ns(t, io_wait_ns, throttle_ns);
        let faults = min_flt + maj_flt;
        if faults > 0 {
            self.tasks[t].minflt += min_flt as i64;
            self.tasks[t].majflt += maj_flt as i64;
            let cpu = self.tasks[t].cpu;
            let c = self.machine.exec_cycles(cpu, self.machine.p.cost.fault_handler * faults as f64);
            self.tasks[t].perf.charge("__get_user_pages", c);
        }
        // What reclaim discarded during the call happened before the call's own change of the
        // address space, but for pages an mremap had already moved to their new place. Then
        // the call, then the COW GUP broke inside what it left (an mmap's or a grown mremap's
        // populate under VM_LOCKED is of the new mapping).
        let moved = match call {
            Call::Mremap { old, new_len, ret: Ok(new), .. } if new != old => {
                self.tasks[t].mm.map(|m| (m, new, new_len))
            }
            _ => None,
        };
        let later = self.apply_lazyfree_discards(moved);
        self.oracle_follow(t, call, &remapped);
        let tgid = self.tasks[t].tgid;
        if let Some(o) = self.oracle.as_mut() {
            for (s, e) in cow_ranges {
                o.break_cow(tgid, s, e);
            }
        }
        self.kernel.lazyfree.discards.extend(later);
        self.apply_lazyfree_discards(None);
        self.reap_oom_victims();
        self.after_syscall();
    }

    /// The reference model follows reclaim's discards of lazyfree (MADV_FREE) pages: each
    /// mm's range reads as zero in its process. Discards of an mm no task uses (an mm being
    /// forked) stay for a later call, unless it is the last one of a failed fork; those in
    /// `defer` (an mm and a range: where an mremap moved pages to) are returned instead.
    pub(super) fn apply_lazyfree_discards(
        &mut self,
        defer: Option<(crate::kernel::MmId, u64, u64)>,
    ) -> Vec<crate::kernel::lazyfree::Discard> {
        if self.kernel.lazyfree.discards.is_empty() {
            return Vec::new();
        }
        let mut later = Vec::new();
        for d in self.kernel.take_lazyfree_discards() {
            if defer.is_some_and(|(m, a, l)| d.mm == m && d.addr >= a && d.addr < a.saturating_add(l)) {
                later.push(d);
                continue;
            }
            let owner = self.tasks.iter().find(|x| x.mm == Some(d.mm)).map(|x| x.tgid);
            match (owner, self.oracle.as_mut()) {
                (Some(tgid), Some(o)) => o.discard(tgid, d.addr, d.len),
                (None, _) if self.forking == Some(d.mm) => later.push(d),
                _ => {}
            }
        }
        if defer.is_none() {
            // The fork's child mm has no task yet: its discards wait for it.
            self.kernel.lazyfree.discards.extend(later);
            return Vec::new();
        }
        later
    }

    /// The reference model follows a system call (`remapped`: the pieces a "move only" mremap
    /// moved, vma by vma).
    fn oracle_follow(&mut self, t: usize, call: Call, remapped: &[(u64, u64, u64)]) {
        let g = self.kernel.geo;
        let tgid = self.tasks[t].tgid;
        let Some(o) = self.oracle.as_mut() else { return };
        let page_len = |len: u64| g.page_align(len).unwrap_or(len);
        match call {
            Call::Mmap { addr, len, prot, shared, file: Some((f, off)) } => {
                o.mmap_file(tgid, addr, len, prot.vm_flags(), shared, f, off)
            }
            Call::Mmap { addr, len, prot, shared, file: None } => o.mmap(tgid, addr, len, prot.vm_flags(), shared),
            Call::Munmap { addr, len } => o.munmap(tgid, addr, page_len(len)),
            // The mapped part up to a hole is changed even when the call fails with ENOMEM;
            // EINVAL changed nothing.
            Call::Mprotect { addr, len, prot, ret } => {
                if ret != Err(Errno::EINVAL) {
                    o.mprotect(tgid, addr, page_len(len), prot.vm_flags());
                }
            }
            Call::DontNeed { addr, len } => o.dontneed(tgid, addr, len),
            Call::DontFork { addr, len, on } => o.dontfork(tgid, addr, len, on),
            Call::Remove { addr, len } => o.remove(tgid, addr, len),
            // A move of several vmas (or of one, then the same as below): each piece moved,
            // holes kept, also those before an error.
            Call::Mremap { flags, .. } if !remapped.is_empty() => {
                let dontunmap = flags.contains(MremapFlags::DONTUNMAP);
                for &(old, len, new) in remapped {
                    o.mremap(tgid, old, len, new, len, dontunmap);
                }
            }
            Call::Mremap { old, old_len, new_len, flags, ret: Ok(new), .. } => {
                let dontunmap = flags.contains(MremapFlags::DONTUNMAP);
                o.mremap(tgid, old, page_len(old_len), new, g.page_align(new_len).expect("fits"), dontunmap)
            }
            // A fixed remap that failed to move its entries (ENOMEM) has already unmapped its
            // target and, when shrinking, the source's tail, as Linux's mremap_to does before
            // move_vma; earlier errors change nothing.
            Call::Mremap { old, old_len, new_len, flags, ret: Err(Errno::ENOMEM), to }
                if flags.contains(MremapFlags::FIXED) =>
            {
                let (old_len, new_len) = (page_len(old_len), g.page_align(new_len).expect("fits"));
                o.munmap(tgid, to, new_len);
                if new_len < old_len {
                    o.munmap(tgid, old + new_len, old_len - new_len);
                }
            }
            Call::Mremap { .. } | Call::Other => {}
        }
    }

    /// A failed system call: an event naming the call and its errno.
    fn syscall_failed(&mut self, t: usize, what: std::fmt::Arguments, e: Errno) {
        let pid = self.tasks[t].pid;
        self.event(pid, "syscall", format!("{what}: {}", e.name()));
    }

    /// An `mmap` op (or an exec's text mapping, `exec`): open(2) of its file, mmap(2), close(2).
    /// A failed mmap ends the task (the program could not go on without its memory).
    pub(super) fn sys_mmap(&mut self, t: usize, op: &MmapOp, exec: bool) {
        let pid = self.tasks[t].pid;
        let mm = self.tasks[t].mm.expect("running task has an mm");
        let MmapOp { name, size, align, prot, flags, addr, fixed, file, file_offset } = op;
        let shared = flags.contains(&MapFlag::Shared);
        // The runner opens a file O_RDWR for a shared mapping (an mprotect may make it
        // writable), O_RDONLY for a private one; the ELF loader denies writers.
        let mode = match (exec, shared) {
            (true, _) => FMode::Exec,
            (false, true) => FMode::Write,
            (false, false) => FMode::Read,
        };
        // A hugetlb memfd's descriptor is open already (its name holds it).
        let hugetlbfs = file.as_deref().and_then(|f| self.kernel.hugetlbfs_lookup(f));
        // open(2) for the mapping; the vma holds the file, close(2) follows.
        let filp = match file.as_deref().map(|f| self.kernel.file_lookup(f)) {
            None => None,
            Some(None) if hugetlbfs.is_some() => None,
            Some(Some(obj)) => match self.kernel.file_open(obj, mode) {
                Ok(f) => Some(f),
                Err(e) => {
                    self.syscall_failed(t, format_args!("mmap {name} ({} bytes)", size.0), e);
                    self.exit_task(t, TaskState::Exited);
                    return;
                }
            },
            Some(None) => {
                let f = file.as_deref().unwrap_or_default();
                self.event(pid, "syscall", format!("mmap {name} ({} bytes): ENOENT (no file {f:?})", size.0));
                self.exit_task(t, TaskState::Exited);
                return;
            }
        };
        let mut map = if shared { MapFlags::SHARED } else { MapFlags::PRIVATE };
        for (f, m) in [(MapFlag::Anonymous, MapFlags::ANONYMOUS), (MapFlag::Hugetlb, MapFlags::HUGETLB)] {
            if flags.contains(&f) {
                map |= m;
            }
        }
        if *fixed {
            map |= MapFlags::FIXED;
        }
        let hugetlb = map.contains(MapFlags::HUGETLB) || hugetlbfs.is_some();
        let req = MmapReq {
            addr: VirtAddr(addr.map_or(0, |a| a.0)),
            len: size.0,
            prot: *prot,
            flags: map,
            file: filp,
            pgoff: file_offset.map_or(0, |o| o.0 >> self.kernel.geo.page_shift),
            align: align.map_or(0, |a| a.0),
            dontexpand: flags.contains(&MapFlag::DontExpand),
            nomerge: flags.contains(&MapFlag::NoMerge),
            hugetlbfs,
        };
        let r = self.kernel.vm_mmap_pgoff(mm, req);
        if let Some(f) = filp {
            self.kernel.fput(f);
        }
        let g = self.kernel.geo;
        let call = match r.ret {
            Ok(a) => {
                // A MAP_HUGETLB region is its huge-page-rounded length, as the kernel maps it
                // (and the native runner names it).
                let len = if hugetlb { size.0.next_multiple_of(g.hpage_pmd_size()) } else { size.0 };
                self.tasks[t].regions.insert(name.clone(), (a, len));
                let len = if hugetlb { len } else { g.page_align(size.0).expect("fits") };
                let file = file.as_deref().map(|f| (f, file_offset.map_or(0, |x| x.0)));
                Call::Mmap { addr: a, len, prot: *prot, shared, file }
            }
            Err(e) => {
                self.syscall_failed(t, format_args!("mmap {name} ({} bytes)", size.0), e);
                self.exit_task(t, TaskState::Exited);
                Call::Other
            }
        };
        self.finish_call(t, r.effects, call);
    }

    /// A `munmap` op (nothing for an empty range).
    pub(super) fn sys_munmap(&mut self, t: usize, op: &MunmapOp) {
        let mm = self.tasks[t].mm.expect("running task has an mm");
        let (a, len) = self.range(t, &op.region, op.offset.0, op.length.map(|l| l.0));
        if len == 0 {
            self.after_syscall();
            return;
        }
        let r = self.kernel.do_vmi_munmap(mm, VirtAddr(a), len);
        let call = match r.ret {
            Ok(()) => Call::Munmap { addr: a, len },
            Err(e) => {
                self.syscall_failed(t, format_args!("munmap {}", op.region), e);
                Call::Other
            }
        };
        self.finish_call(t, r.effects, call);
    }

    /// An `mlock` op (`lock`: with MLOCK_ONFAULT or not) or a `munlock` op (`lock` None).
    pub(super) fn sys_mlock(&mut self, t: usize, op: &MunmapOp, lock: Option<bool>) {
        let mm = self.tasks[t].mm.expect("running task has an mm");
        let (a, len) = self.range(t, &op.region, op.offset.0, op.length.map(|l| l.0));
        let r = match lock {
            Some(onfault) => {
                let flags = if onfault { MlockFlags::ONFAULT } else { MlockFlags::empty() };
                self.kernel.do_mlock(mm, VirtAddr(a), len, flags)
            }
            None => self.kernel.sys_munlock(mm, VirtAddr(a), len),
        };
        if let Err(e) = r.ret {
            let name = if lock.is_some() { "mlock" } else { "munlock" };
            self.syscall_failed(t, format_args!("{name} {}", op.region), e);
        }
        self.finish_call(t, r.effects, Call::Other);
    }

    /// An `mlockall` op, or a `munlockall` op (None).
    pub(super) fn sys_mlockall(&mut self, t: usize, op: Option<&MlockallOp>) {
        let mm = self.tasks[t].mm.expect("running task has an mm");
        let r = match op {
            Some(m) => self.kernel.sys_mlockall(mm, MclFlag::flags(&m.flags)),
            None => self.kernel.sys_munlockall(mm),
        };
        if let Err(e) = r.ret {
            let name = if op.is_some() { "mlockall" } else { "munlockall" };
            self.syscall_failed(t, format_args!("{name}"), e);
        }
        self.finish_call(t, r.effects, Call::Other);
    }

    /// An `mremap` op. With `name`, that name denotes the range at its new place (the range
    /// at its old place when the call fails) and the region is left as it was; without, a
    /// whole-region mremap makes the region name the mapping at its new place and a partial
    /// one resizes the region only when it resized its last bytes in place.
    pub(super) fn sys_mremap(&mut self, t: usize, op: &MremapOp) {
        let mm = self.tasks[t].mm.expect("running task has an mm");
        let (start, size) = self.region(t, &op.region);
        let (a, len) = self.range(t, &op.region, op.offset.0, op.length.map(|l| l.0));
        let to = op.addr.map_or(0, |x| x.0);
        let flags = op.flags();
        let r = self.kernel.do_mremap(mm, VirtAddr(a), len, op.size.0, flags, VirtAddr(to));
        let regions = &mut self.tasks[t].regions;
        match (r.ret, &op.name) {
            (Ok(na), Some(name)) => {
                regions.insert(name.clone(), (na, op.size.0));
            }
            (Ok(na), None) if op.offset.0 == 0 && len == size => {
                regions.insert(op.region.clone(), (na, op.size.0));
            }
            (Ok(na), None) => {
                if na == a && a + len == start + size {
                    regions.insert(op.region.clone(), (start, op.offset.0 + op.size.0));
                }
            }
            (Err(e), name) => {
                if let Some(name) = name {
                    regions.entry(name.clone()).or_insert((a, len));
                }
                self.syscall_failed(t, format_args!("mremap {}", op.region), e)
            }
        }
        let call = Call::Mremap { old: a, old_len: len, new_len: op.size.0, flags, ret: r.ret, to };
        self.finish_call(t, r.effects, call);
    }

    /// An `mprotect` op.
    pub(super) fn sys_mprotect(&mut self, t: usize, op: &MprotectOp) {
        let mm = self.tasks[t].mm.expect("running task has an mm");
        let (a, len) = self.range(t, &op.region, op.offset.0, op.length.map(|l| l.0));
        let r = self.kernel.do_mprotect_pkey(mm, VirtAddr(a), len, op.prot);
        if let Err(e) = r.ret {
            self.syscall_failed(t, format_args!("mprotect {}", op.region), e);
        }
        self.finish_call(t, r.effects, Call::Mprotect { addr: a, len, prot: op.prot, ret: r.ret });
    }

    /// A `madvise` op.
    pub(super) fn sys_madvise(&mut self, t: usize, op: &MadviseOp) {
        let mm = self.tasks[t].mm.expect("running task has an mm");
        let (a, len) = self.range(t, &op.region, op.offset.0, op.length.map(|l| l.0));
        // The part of the range the call changes before any error stops it (for the advice
        // the reference model follows).
        let end = match op.advice {
            Advice::DontNeed => self.kernel.madvise_dontneed_extent(mm, a, len),
            Advice::Remove | Advice::DontFork | Advice::DoFork => self.kernel.madvise_stop(mm, a, len, op.advice),
            _ => a,
        };
        let r = self.kernel.do_madvise(mm, VirtAddr(a), len, op.advice);
        if let Err(e) = r.ret {
            self.syscall_failed(t, format_args!("madvise {} {}", op.region, op.advice.word()), e);
        }
        let len = end.saturating_sub(a);
        let call = match op.advice {
            Advice::DontNeed => Call::DontNeed { addr: a, len },
            Advice::DontFork | Advice::DoFork => Call::DontFork { addr: a, len, on: op.advice == Advice::DontFork },
            Advice::Remove => Call::Remove { addr: a, len },
            _ => Call::Other,
        };
        self.finish_call(t, r.effects, call);
    }

    /// A `cgroup_write` or `memory_reclaim` op: write(2) of `value` to a memory cgroup's
    /// interface file (`cgroup`: by name, else the task's own cgroup).
    pub(super) fn sys_cgroup_write(&mut self, t: usize, cgroup: Option<&str>, file: &str, value: &str) {
        let mm = self.tasks[t].mm.expect("running task has an mm");
        let memcg = match cgroup {
            Some(c) => self.kernel.memcg.lookup(c).expect("validated: the cgroup is declared"),
            None => self.kernel.mm_memcg(mm),
        };
        let r = if file == "cgroup.procs" {
            self.kernel.sys_cgroup_procs_write(mm, memcg)
        } else {
            self.kernel.sys_cgroup_write(memcg, file, value)
        };
        if let Err(e) = r.ret {
            let name = cgroup.unwrap_or("(own cgroup)");
            self.syscall_failed(t, format_args!("write {name}/{file} {value:?}"), e);
        }
        self.finish_call(t, r.effects, Call::Other);
    }

    /// A `fork` or `thread` op: `count` clone(2)s (`kernel_clone`), each child running
    /// `program` (a thread shares the address space, CLONE_VM | CLONE_THREAD).
    pub(super) fn sys_clone(&mut self, t: usize, op: &ForkOp, thread: bool) {
        let ForkOp { count, program, cpu, cgroup } = op;
        let prog = Rc::new(program.clone());
        let first = self.tasks.len() as u32 + 1;
        let mut memcg =
            cgroup.as_ref().map(|c| self.kernel.memcg.lookup(c).expect("validated: the cgroup is declared"));
        // engine.fork_cgroup=root: fork(2) from the root cgroup, the child then in its
        // parent's cgroup (or the op's), as validate's runner forks.
        let parent_mm = self.tasks[t].mm.expect("running task has an mm");
        let own = self.kernel.mm_memcg(parent_mm);
        let from_root = self.fork_from_root && !thread && own != NO_MEMCG;
        if from_root {
            memcg = memcg.or(Some(own));
        }
        for i in 0..*count {
            let flags = if thread { CloneFlags::VM | CloneFlags::THREAD } else { CloneFlags::empty() };
            let before = self.tasks.len();
            if from_root {
                self.kernel.mm_move_memcg(parent_mm, ROOT_MEMCG);
            }
            // Serial: the runner makes each task of the op once the one before has ended;
            // mmsim makes them all now, and charges each later one's kernel stack as it starts.
            self.defer_stack = self.serial && i > 0;
            self.fork(t, prog.clone(), cpu.map(|c| (c + i) as usize), flags);
            self.defer_stack = false;
            if from_root {
                if let Some(pm) = self.tasks[t].mm {
                    self.kernel.mm_move_memcg(pm, own);
                }
            }
            // echo CHILD > cgroup.procs before the child runs.
            if let (Some(id), true) = (memcg, self.tasks.len() > before) {
                if let Some(cm) = self.tasks[before].mm {
                    self.kernel.mm_move_memcg(cm, id);
                }
            }
            if self.tasks[t].state != TaskState::Running || self.check_host_memory() {
                break;
            }
        }
        let last = self.tasks.len() as u32;
        if self.serial && last >= first {
            self.serial_stack.push(SerialBatch { creator: t, first, next: first, last });
        }
        self.after_syscall();
    }

    /// A `sleep` op: nanosleep(2); the task blocks, and `round` adds its CPU's time at the end
    /// of the quantum (the time it went to sleep) and wakes it then plus `ms`, or at
    /// `until_ms` (TIMER_ABSTIME) if that is later.
    pub(super) fn sys_nanosleep(&mut self, t: usize, op: &SleepOp) {
        let freq = self.machine.p.cpu.freq_ghz * 1e9;
        self.tasks[t].wake_absolute = op.until_ms.is_some();
        let cycles = op.ms.or(op.until_ms).unwrap_or(0.0) * 1e-3 * freq;
        let cpu = self.tasks[t].cpu;
        self.machine.drain_translations(cpu, &mut self.tasks[t].perf);
        let cost = self.machine.exec_cycles(cpu, self.machine.p.cost.syscall);
        self.tasks[t].perf.charge("entry_SYSCALL_64", cost);
        self.tasks[t].wake_at = cycles;
        self.tasks[t].state = TaskState::Sleeping;
    }

    /// A `brk` op: the C library's sbrk(`delta`), which calls brk(2) with the break moved by
    /// `delta` and fails with ENOMEM when the kernel left it where it was. The region names
    /// the heap from where the break was at the first `brk` op naming it to the break now.
    pub(super) fn sys_brk(&mut self, t: usize, op: &BrkOp) {
        let mm = self.tasks[t].mm.expect("running task has an mm");
        let old = self.kernel.mm(mm).brk;
        // The region begins where the break was at the first `brk` op that named it.
        let start = self.tasks[t].regions.get(&op.name).map_or(old, |r| r.0);
        let Some(want) = old.checked_add_signed(op.delta.0) else {
            self.syscall_failed(t, format_args!("brk {}", op.name), Errno::ENOMEM);
            self.after_syscall();
            return;
        };
        let r = self.kernel.sys_brk(mm, VirtAddr(want));
        let now = r.ret.expect("brk returns the break");
        self.tasks[t].regions.insert(op.name.clone(), (start, now.saturating_sub(start)));
        let g = self.kernel.geo;
        let (old_end, new_end) = (g.page_align(old).expect("fits"), g.page_align(now).expect("fits"));
        let call = if new_end > old_end {
            Call::Mmap {
                addr: old_end,
                len: new_end - old_end,
                prot: Prot::READ | Prot::WRITE,
                shared: false,
                file: None,
            }
        } else if new_end < old_end {
            Call::Munmap { addr: new_end, len: old_end - new_end }
        } else {
            Call::Other
        };
        if now != want {
            self.syscall_failed(t, format_args!("brk {}", op.name), Errno::ENOMEM);
        }
        self.finish_call(t, r.effects, call);
    }
}
