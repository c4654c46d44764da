//! The system-call layer: the entry points a task calls into the memory manager by, named
//! after Linux's (`vm_mmap_pgoff`, `do_vmi_munmap`, `do_mprotect_pkey`, `do_madvise`,
//! `do_mremap`, `do_mlock`, `sys_mlockall`, `ksys_pread64`, `sys_memfd_create`, `vfs_fallocate`, ...), with typed arguments (`uapi.rs`'s flag
//! sets, `VirtAddr`) and a typed outcome: the call's return value or errno, and what the
//! caller must know (`Effects`: the faults GUP took, the ranges it broke COW on, the pages
//! it waited for). The workload interpreter and the trace replayer both call this layer.
//!
//! While it serves a call the memory manager adds to `Kernel::current`, the part of the
//! calling task's `task_struct` it writes to (Linux's `mm_account_fault` adds GUP's faults to
//! `current->min_flt`/`maj_flt`); each entry point hands that over in its outcome and
//! leaves it empty, so nothing outside the kernel reads a result from a field.

use super::fault::{Access, FaultOutcome};
use super::filemap::Fadvise;
use super::memfd::FileRef;
use super::mm::vm;
use super::mmap::{Errno, MmapArgs};
use super::uapi::{Advice, CloneFlags, FallocFlags, MapFlags, MclFlags, MfdFlags, MlockFlags, MremapFlags, Prot};
use super::{Kernel, MmId};
use crate::units::VirtAddr;

/// What a system call did besides its return value, for the task that made it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Minor faults `__get_user_pages` took (a populate): the task's min_flt.
    pub min_flt: u64,
    /// Major faults GUP took (it waited for the block device): the task's maj_flt.
    pub maj_flt: u64,
    /// Ranges of private writable file mappings GUP faulted in for write (FOLL_WRITE broke
    /// COW: from then on they hold private copies, which later writes to the file miss).
    pub cow_ranges: Vec<(u64, u64)>,
    /// Pages of I/O the call waited for (a major fault's read, a read(2) of uncached data,
    /// fsync).
    pub io_wait_pages: u64,
    /// The pieces a "move only" mremap moved, vma by vma (old address, length, new address):
    /// all of them, or those before the error that stopped it.
    pub remapped: Vec<(u64, u64, u64)>,
    /// Nanoseconds the call waited for the swap device (a swap-in's read, writeback a
    /// cgroup v1 reclaim waited for, reclaim's throttling).
    pub io_wait_ns: u64,
    /// Nanoseconds memory.high's throttle makes the task sleep before it returns to user
    /// space.
    pub throttle_ns: u64,
}

impl Effects {
    /// GUP took faults: the task's min_flt and maj_flt grow by them.
    pub fn gup_faults(&self) -> u64 {
        self.min_flt + self.maj_flt
    }
}

/// A system call's outcome: its return value or errno, and its effects.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysRet<T> {
    pub ret: Result<T, Errno>,
    pub effects: Effects,
}

/// The part of the calling task's `task_struct` the memory manager writes to while it serves
/// a call or a fault; drained into the entry point's outcome (see the module comment).
#[derive(Clone, Debug, Default)]
pub struct Current {
    pub(super) effects: Effects,
    /// The handler that resolved the last fault (`do_anonymous_page`, `do_wp_page`, ...).
    pub(super) fault_path: &'static str,
}

/// A user page fault's outcome (`do_user_addr_fault`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub outcome: FaultOutcome,
    /// The handler that resolved it: its cycles are charged to it, as perf report shows a
    /// handler's self time.
    pub handler: &'static str,
    /// Pages of I/O the fault waited for.
    pub io_wait_pages: u64,
    /// Nanoseconds the fault waited for the swap device, and memory.high's throttle.
    pub io_wait_ns: u64,
    pub throttle_ns: u64,
    /// On VM_FAULT_OOM: the mm the OOM killer chose, which the caller must kill.
    pub oom_victim: Option<MmId>,
}

/// The arguments of mmap(2), typed, and mmsim's two extensions.
#[derive(Clone, Copy, Debug, Default)]
pub struct MmapReq {
    pub addr: VirtAddr,
    pub len: u64,
    pub prot: Prot,
    pub flags: MapFlags,
    /// The open file mapped (`Kernel::filps`) and the offset in pages it maps from.
    pub file: Option<u32>,
    pub pgoff: u64,
    /// mmsim's `align`: the start's alignment, as user space gets it (map `len + align`,
    /// keep the aligned part). 0: none.
    pub align: u64,
    /// mmsim's `dontexpand`: VM_DONTEXPAND on the vma (Linux sets it only from a driver).
    pub dontexpand: bool,
    /// mmsim's `nomerge`: a vma that never merges (validate's stand-ins of file mappings).
    pub nomerge: bool,
    /// A mapping of a hugetlbfs file (memfd_create with MFD_HUGETLB; `Hstate::files`) from
    /// `pgoff`, in place of `file`.
    pub hugetlbfs: Option<u32>,
}

impl Kernel {
    /// Hand the effects gathered in `current` to an entry point's outcome.
    fn sysret<T>(&mut self, ret: Result<T, Errno>) -> SysRet<T> {
        SysRet { ret, effects: std::mem::take(&mut self.current.effects) }
    }

    /// `vm_mmap_pgoff` -> `do_mmap`.
    pub fn vm_mmap_pgoff(&mut self, mm: MmId, req: MmapReq) -> SysRet<u64> {
        let args = MmapArgs {
            addr: req.addr.0,
            len: req.len,
            prot: req.prot.vm_flags(),
            shared: req.flags.contains(MapFlags::SHARED),
            fixed: req.flags.contains(MapFlags::FIXED),
            align: req.align,
            dontexpand: req.dontexpand,
            nomerge: req.nomerge,
            growsdown: req.flags.contains(MapFlags::GROWSDOWN),
            hugetlb: req.flags.contains(MapFlags::HUGETLB) || req.hugetlbfs.is_some(),
            file: req.file,
            pgoff: req.pgoff,
            hugetlbfs: req.hugetlbfs,
        };
        let r = self.do_mmap(mm, args);
        self.sysret(r)
    }

    /// munmap(2): `do_vmi_munmap`.
    pub fn do_vmi_munmap(&mut self, mm: MmId, start: VirtAddr, len: u64) -> SysRet<()> {
        let r = self.do_munmap(mm, start.0, len);
        self.sysret(r)
    }

    /// mprotect(2): `do_mprotect_pkey` (no protection keys).
    pub fn do_mprotect_pkey(&mut self, mm: MmId, start: VirtAddr, len: u64, prot: Prot) -> SysRet<()> {
        let r = self.do_mprotect(mm, start.0, len, prot.vm_flags());
        self.sysret(r)
    }

    /// madvise(2): `do_madvise`.
    pub fn do_madvise(&mut self, mm: MmId, start: VirtAddr, len: u64, advice: Advice) -> SysRet<()> {
        let r = self.madvise_do_behavior(mm, start.0, len, advice);
        self.sysret(r)
    }

    /// mremap(2): `do_mremap` with its `MREMAP_*` flags (MREMAP_MAYMOVE, MREMAP_FIXED to
    /// `new_addr`, MREMAP_DONTUNMAP with `new_addr` a hint unless MREMAP_FIXED).
    pub fn do_mremap(
        &mut self,
        mm: MmId,
        addr: VirtAddr,
        old_len: u64,
        new_len: u64,
        flags: MremapFlags,
        new_addr: VirtAddr,
    ) -> SysRet<u64> {
        let r = self.mremap_vrm(mm, addr.0, old_len, new_len, flags, new_addr.0);
        self.sysret(r)
    }

    /// mlock(2) (`flags` empty) and mlock2(2): `do_mlock`, VM_LOCKED on the range's vmas,
    /// with MLOCK_ONFAULT also VM_LOCKONFAULT (no populate: pages are mlocked as they are
    /// faulted in). A flag other than MLOCK_ONFAULT: EINVAL.
    pub fn do_mlock(&mut self, mm: MmId, start: VirtAddr, len: u64, flags: MlockFlags) -> SysRet<()> {
        if !MlockFlags::all().contains(flags) {
            return self.sysret(Err(Errno::EINVAL));
        }
        let vm_flags = vm::LOCKED | if flags.contains(MlockFlags::ONFAULT) { vm::LOCKONFAULT } else { 0 };
        let r = self.mlock_apply_populate(mm, start.0, len, vm_flags);
        self.sysret(r)
    }

    /// munlock(2): VM_LOCKED and VM_LOCKONFAULT off the range's vmas.
    pub fn sys_munlock(&mut self, mm: MmId, start: VirtAddr, len: u64) -> SysRet<()> {
        let r = self.mlock_apply_populate(mm, start.0, len, 0);
        self.sysret(r)
    }

    /// write(2) of `value` to the memory cgroup `memcg`'s interface file `file`
    /// (`memory.max`, `memory.reclaim`, ...; kernel/memcontrol.rs `memcg_write`).
    pub fn sys_cgroup_write(&mut self, memcg: u16, file: &str, value: &str) -> SysRet<()> {
        let r = self.memcg_write(memcg, file, value).map_err(|e| match e {
            "EAGAIN" => Errno::EAGAIN,
            "EBUSY" => Errno::EBUSY,
            _ => Errno::EINVAL,
        });
        self.sysret(r)
    }

    /// A write of "0" to a cgroup's cgroup.procs (`cgroup_procs_write`): the writing
    /// process moves there; its charges stay where they are (`mm_move_memcg`). On v2, EBUSY
    /// for a cgroup with children (the no-internal-process rule, as the memory controller is
    /// on in their subtree_control).
    pub fn sys_cgroup_procs_write(&mut self, mm: MmId, memcg: u16) -> SysRet<()> {
        let r = if !self.memcg_v1() && !self.memcg.groups[memcg as usize].children.is_empty() {
            Err(Errno::EBUSY)
        } else {
            self.mm_move_memcg(mm, memcg);
            Ok(())
        };
        self.sysret(r)
    }

    /// brk(2): the break after the call (the old one when it could not move).
    pub fn sys_brk(&mut self, mm: MmId, addr: VirtAddr) -> SysRet<u64> {
        let b = self.sys_brk_inner(mm, addr.0);
        self.sysret(Ok(b))
    }

    /// mlockall(2): EINVAL for no flags, only MCL_ONFAULT, or a flag Linux does not have;
    /// else `apply_mlockall_flags` (no RLIMIT_MEMLOCK: the caller has CAP_IPC_LOCK).
    pub fn sys_mlockall(&mut self, mm: MmId, flags: MclFlags) -> SysRet<()> {
        if flags.is_empty() || !MclFlags::all().contains(flags) || flags == MclFlags::ONFAULT {
            return self.sysret(Err(Errno::EINVAL));
        }
        self.apply_mlockall_flags(mm, flags);
        self.sysret(Ok(()))
    }

    /// munlockall(2): `apply_mlockall_flags(0)`, every vma and mm->def_flags unlocked.
    pub fn sys_munlockall(&mut self, mm: MmId) -> SysRet<()> {
        self.apply_mlockall_flags(mm, MclFlags::empty());
        self.sysret(Ok(()))
    }

    /// The address space side of fork(2) and clone(2) (`kernel_clone` -> `copy_process` ->
    /// `copy_mm`): with CLONE_VM the child shares `mm` (`mmget`), else it gets a copy
    /// (`dup_mm`; ENOMEM when memory runs out). The caller allocates the pid, and puts the
    /// mm back (`do_exit`) if that fails, as `bad_fork_cleanup_mm` does.
    pub fn kernel_clone(&mut self, mm: MmId, flags: CloneFlags) -> SysRet<MmId> {
        let r = if flags.contains(CloneFlags::VM) {
            self.mmget(mm);
            Ok(mm)
        } else {
            self.dup_mm(mm).ok_or(Errno::ENOMEM)
        };
        self.sysret(r)
    }

    /// The address space side of exit(2) (`do_exit` -> `exit_mm` -> `mmput`): the task stops
    /// using `mm`, and the last user tears it down (`exit_mmap`). True when the mm went.
    pub fn do_exit(&mut self, mm: MmId) -> SysRet<bool> {
        let gone = self.mmput(mm);
        self.sysret(Ok(gone))
    }

    /// pwrite64(2) of `count` bytes of `value` at `pos` of an open file: bytes written.
    pub fn ksys_pwrite64(&mut self, filp: u32, pos: u64, count: u64, value: u8) -> SysRet<u64> {
        let n = self.file_write(filp, pos, count, value);
        self.sysret(Ok(n))
    }

    /// pread64(2): the bytes read and, with `expect`, the first byte that differs from it.
    pub fn ksys_pread64(
        &mut self,
        filp: u32,
        pos: u64,
        count: u64,
        expect: Option<u8>,
    ) -> SysRet<(u64, Option<(u64, u8)>)> {
        let r = self.file_read(filp, pos, count, expect);
        self.sysret(Ok(r))
    }

    /// posix_fadvise(2): `ksys_fadvise64_64`.
    pub fn ksys_fadvise64_64(&mut self, filp: u32, offset: u64, len: u64, advice: Fadvise) -> SysRet<()> {
        self.file_fadvise(filp, offset, len, advice);
        self.sysret(Ok(()))
    }

    /// memfd_create(2): a new empty tmpfs file, or hugetlbfs with MFD_HUGETLB, named `name`
    /// (kernel/memfd.rs). EINVAL for a flag Linux does not have.
    pub fn sys_memfd_create(&mut self, name: &str, flags: MfdFlags) -> SysRet<FileRef> {
        let r = self.memfd_create_inner(name, flags);
        self.sysret(r)
    }

    /// ftruncate(2): `do_ftruncate` (a hugetlbfs size not a multiple of the huge page size is
    /// EINVAL).
    pub fn do_ftruncate(&mut self, file: FileRef, size: u64) -> SysRet<()> {
        let r = self.do_ftruncate_inner(file, size);
        self.sysret(r)
    }

    /// fallocate(2): `vfs_fallocate` -> `shmem_fallocate` / `hugetlbfs_fallocate` (ext4:
    /// EOPNOTSUPP, not modelled).
    pub fn vfs_fallocate(&mut self, file: FileRef, mode: FallocFlags, offset: u64, len: u64) -> SysRet<()> {
        let r = self.vfs_fallocate_inner(file, mode, offset, len);
        self.sysret(r)
    }

    /// fsync(2): `do_fsync`.
    pub fn do_fsync(&mut self, filp: u32) -> SysRet<()> {
        self.file_fsync(filp);
        self.sysret(Ok(()))
    }

    /// A user page fault at `addr` (the arch's `do_user_addr_fault`): its outcome, the
    /// handler that resolved it and what it waited for; on VM_FAULT_OOM, the OOM killer's
    /// victim for the caller to kill.
    pub fn handle_user_fault(&mut self, mm: MmId, addr: u64, access: Access) -> Fault {
        let outcome = self.do_user_addr_fault(mm, addr, access);
        let effects = std::mem::take(&mut self.current.effects);
        debug_assert!(effects.gup_faults() == 0 && effects.cow_ranges.is_empty(), "a fault takes no GUP faults");
        Fault {
            outcome,
            handler: self.current.fault_path,
            io_wait_pages: effects.io_wait_pages,
            io_wait_ns: effects.io_wait_ns,
            throttle_ns: effects.throttle_ns,
            oom_victim: if outcome == FaultOutcome::Oom { self.oom_victim.take() } else { None },
        }
    }

    /// What a kernel thread's step left in the current context's effects (its own waits,
    /// which are no task's) is dropped.
    pub fn discard_kthread_effects(&mut self) {
        self.current.effects = Default::default();
    }

    /// Pages of I/O waited for outside a system call or fault (khugepaged's reads), handed
    /// to the kernel thread that waited.
    pub fn take_kthread_io_wait(&mut self) -> u64 {
        std::mem::take(&mut self.current.effects.io_wait_pages)
    }
}
