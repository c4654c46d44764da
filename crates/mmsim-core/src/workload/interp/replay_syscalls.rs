//! The replay's system calls (`replay.rs`): each recorded call that changes the address
//! space, the page cache or the process tree goes through the system-call layer
//! (`kernel/syscall.rs`) as a workload op's would; the others are no-ops, counted by name.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use mmsim_trace::{syscall_name, FileInfo, ProcessStream};

use super::replay::{Flow, ProcState, ReplayTask, ReplayWait, Source};
use super::*;
use crate::kernel::filemap::{FMode, Fadvise};
use crate::kernel::memfd::FileRef;
use crate::kernel::shmem::Fs;
use crate::kernel::uapi::{
    Advice, CloneFlags, FallocFlags, MapFlags, MclFlags, MfdFlags, MlockFlags, MremapFlags, Prot,
};
use crate::units::VirtAddr;
use crate::workload::spec::Placement;
use syscalls::Call;

/// x86-64 system call numbers the replay models.
mod nr {
    pub const READ: u32 = 0;
    pub const WRITE: u32 = 1;
    pub const OPEN: u32 = 2;
    pub const MMAP: u32 = 9;
    pub const MPROTECT: u32 = 10;
    pub const MUNMAP: u32 = 11;
    pub const BRK: u32 = 12;
    pub const PREAD64: u32 = 17;
    pub const PWRITE64: u32 = 18;
    pub const READV: u32 = 19;
    pub const WRITEV: u32 = 20;
    pub const MREMAP: u32 = 25;
    pub const MADVISE: u32 = 28;
    pub const SHMGET: u32 = 29;
    pub const SHMAT: u32 = 30;
    pub const SHMCTL: u32 = 31;
    pub const CLONE: u32 = 56;
    pub const FORK: u32 = 57;
    pub const VFORK: u32 = 58;
    pub const EXIT: u32 = 60;
    pub const WAIT4: u32 = 61;
    pub const SHMDT: u32 = 67;
    pub const FSYNC: u32 = 74;
    pub const FDATASYNC: u32 = 75;
    pub const FTRUNCATE: u32 = 77;
    pub const CREAT: u32 = 85;
    pub const MLOCK: u32 = 149;
    pub const MUNLOCK: u32 = 150;
    pub const MLOCKALL: u32 = 151;
    pub const MUNLOCKALL: u32 = 152;
    pub const FADVISE64: u32 = 221;
    pub const EXIT_GROUP: u32 = 231;
    pub const WAITID: u32 = 247;
    pub const OPENAT: u32 = 257;
    pub const FALLOCATE: u32 = 285;
    pub const PREADV: u32 = 295;
    pub const PWRITEV: u32 = 296;
    pub const MEMFD_CREATE: u32 = 319;
    pub const MLOCK2: u32 = 325;
    pub const OPENAT2: u32 = 437;
}

const CLONE_VFORK: u64 = 0x4000;
const O_TRUNC: u64 = 0o1000;
const SHM_RDONLY: u64 = 0o10000;
const SHM_EXEC: u64 = 0o100000;
const IPC_RMID: u64 = 0;

impl Interp {
    /// A call replayed as a no-op: counted under `name`, with the bytes it mapped.
    fn replay_noop(&mut self, r: usize, name: String, bytes: u64) {
        let e = self.replays[r].report.unmodelled.entry(name).or_default();
        e.count += 1;
        e.bytes_mapped += bytes;
    }

    /// One recorded system call of task `t`.
    pub(super) fn replay_syscall(
        &mut self,
        t: usize,
        r: usize,
        nr: u32,
        a: [u64; 6],
        result: i64,
        file: &FileInfo<'_>,
    ) -> Flow {
        let name = syscall_name(nr);
        *self.replays[r].report.syscalls.entry(name.clone()).or_default() += 1;
        let Some(mm) = self.tasks[t].mm else { return Flow::Stop };
        self.enter_kernel(t);
        let ok = result >= 0;
        let res = result as u64;
        let mut flow = Flow::Go;
        match nr {
            nr::MMAP if ok => {
                let flags = MapFlags::from_bits_truncate(a[3] as u32);
                let prot = Prot::from_bits_truncate(a[2] as u32);
                let f = if flags.contains(MapFlags::ANONYMOUS) { None } else { self.replay_file(r, file) };
                if !flags.contains(MapFlags::ANONYMOUS) && f.is_none() {
                    // A device or an anonymous inode (/dev/zero, an io_uring ring, ...): anonymous
                    // memory, listed.
                    let what = String::from_utf8_lossy(file.path);
                    self.replay_noop(r, format!("mmap of {what}"), a[1]);
                }
                let file = f.map(|x| x.1);
                if flags.intersects(MapFlags::FIXED | MapFlags::FIXED_NOREPLACE) {
                    let at = self.replay_addr(t, res);
                    self.replay_mmap(t, at, a[1], prot, flags, file, a[5], true);
                } else {
                    self.replay_placed(t, r, res, a[0], a[1], |s, at, fixed| {
                        s.replay_mmap(t, at, a[1], prot, flags, file, a[5], fixed)
                    });
                }
            }
            nr::MUNMAP if ok => {
                for (at, len) in self.replay_range(t, a[0], a[1]) {
                    let ret = self.kernel.do_vmi_munmap(mm, VirtAddr(at), len);
                    self.finish_call(t, ret.effects, Call::Munmap { addr: at, len });
                }
                self.replay_unrelocate(t, a[0], a[1]);
            }
            nr::MPROTECT if ok => {
                let prot = Prot::from_bits_truncate(a[2] as u32);
                for (at, len) in self.replay_range(t, a[0], a[1]) {
                    let ret = self.kernel.do_mprotect_pkey(mm, VirtAddr(at), len, prot);
                    let call = Call::Mprotect { addr: at, len, prot, ret: ret.ret };
                    self.finish_call(t, ret.effects, call);
                }
            }
            nr::MADVISE if ok => match Advice::ALL.iter().find(|x| x.value() == a[2] as i64) {
                Some(&adv) => {
                    for (at, len) in self.replay_range(t, a[0], a[1]) {
                        let ret = self.kernel.do_madvise(mm, VirtAddr(at), len, adv);
                        self.finish_call(t, ret.effects, Call::Other);
                    }
                }
                None => self.replay_noop(r, format!("madvise({})", a[2]), 0),
            },
            nr::MREMAP if ok && self.replays[r].report.place == Placement::Recorded => {
                let mut flags = MremapFlags::from_bits_truncate(a[3] as u32);
                if res != a[0] {
                    flags |= MremapFlags::MAYMOVE | MremapFlags::FIXED;
                }
                let ret = self.kernel.do_mremap(mm, VirtAddr(a[0]), a[1], a[2], flags, VirtAddr(res));
                self.finish_call(t, ret.effects, Call::Other);
            }
            nr::MREMAP if ok => {
                // Placed by the kernel: a fixed target translated, else in place if the kernel
                // can (with MREMAP_MAYMOVE it moves only when it cannot grow there).
                let flags = MremapFlags::from_bits_truncate(a[3] as u32);
                let old = self.replay_addr(t, a[0]);
                let to = if flags.contains(MremapFlags::FIXED) { self.replay_addr(t, res) } else { 0 };
                let ret = self.kernel.do_mremap(mm, VirtAddr(old), a[1], a[2], flags, VirtAddr(to));
                self.finish_call(t, ret.effects, Call::Other);
                if let Ok(at) = ret.ret {
                    if !flags.contains(MremapFlags::DONTUNMAP) {
                        self.replay_unrelocate(t, a[0], a[1]);
                    }
                    self.replay_relocate(t, r, res, a[2], at);
                }
            }
            nr::BRK if a[0] == 0 && ok && self.kernel.mm(mm).start_brk == 0 => {
                // The first query of the break: the heap starts there. Valgrind, which runs the
                // program's brk itself, maps the heap's first page ahead: that page goes, so that
                // the break grows from it as the kernel's does.
                let m = self.kernel.mm_mut(mm);
                (m.start_brk, m.brk) = (res, res);
                let ahead =
                    self.kernel.mm(mm).vma_lookup(res).filter(|v| v.start == res && v.is_anonymous()).map(|v| v.end);
                if let Some(end) = ahead {
                    let ret = self.kernel.do_vmi_munmap(mm, VirtAddr(res), end - res);
                    self.finish_call(t, ret.effects, Call::Munmap { addr: res, len: end - res });
                }
            }
            nr::BRK if a[0] != 0 && res == a[0] => {
                let ret = self.kernel.sys_brk(mm, VirtAddr(a[0]));
                self.finish_call(t, ret.effects, Call::Other);
            }
            nr::BRK => {}
            nr::MLOCK | nr::MLOCK2 if ok => {
                let flags =
                    if nr == nr::MLOCK2 { MlockFlags::from_bits_truncate(a[2] as u32) } else { MlockFlags::empty() };
                for (at, len) in self.replay_range(t, a[0], a[1]) {
                    let ret = self.kernel.do_mlock(mm, VirtAddr(at), len, flags);
                    self.finish_call(t, ret.effects, Call::Other);
                }
            }
            nr::MUNLOCK if ok => {
                for (at, len) in self.replay_range(t, a[0], a[1]) {
                    let ret = self.kernel.sys_munlock(mm, VirtAddr(at), len);
                    self.finish_call(t, ret.effects, Call::Other);
                }
            }
            nr::MLOCKALL if ok => {
                let ret = self.kernel.sys_mlockall(mm, MclFlags::from_bits_truncate(a[0] as u32));
                self.finish_call(t, ret.effects, Call::Other);
            }
            nr::MUNLOCKALL if ok => {
                let ret = self.kernel.sys_munlockall(mm);
                self.finish_call(t, ret.effects, Call::Other);
            }
            nr::SHMGET if ok => {
                let name = format!("SYSV{res:08x}");
                if self.kernel.file_lookup(&name).is_none() && self.kernel.file_create(&name, a[1], Fs::Tmpfs).is_ok() {
                    self.replays[r].report.files += 1;
                }
                self.replays[r].shm.insert(res, name);
            }
            nr::SHMAT if ok => {
                if let Some(name) = self.replays[r].shm.get(&a[0]).cloned() {
                    let obj = self.kernel.file_lookup(&name).expect("created by shmget");
                    let size = self.kernel.inode(obj).i_size;
                    let prot = if a[2] & SHM_RDONLY != 0 { Prot::READ } else { Prot::READ | Prot::WRITE };
                    let prot = if a[2] & SHM_EXEC != 0 { prot | Prot::EXEC } else { prot };
                    self.replays[r].shm_at.insert(res, size);
                    let file = Some(FileRef::Inode(obj));
                    if a[1] != 0 {
                        let at = self.replay_addr(t, res);
                        self.replay_mmap(t, at, size, prot, MapFlags::SHARED, file, 0, true);
                    } else {
                        self.replay_placed(t, r, res, 0, size, |s, at, fixed| {
                            s.replay_mmap(t, at, size, prot, MapFlags::SHARED, file, 0, fixed)
                        });
                    }
                } else {
                    self.replay_noop(r, "shmat of a segment created before the recording".into(), 0);
                }
            }
            nr::SHMDT if ok => {
                if let Some(len) = self.replays[r].shm_at.remove(&a[0]) {
                    let at = self.replay_addr(t, a[0]);
                    let ret = self.kernel.do_vmi_munmap(mm, VirtAddr(at), len);
                    self.finish_call(t, ret.effects, Call::Munmap { addr: at, len });
                    self.replay_unrelocate(t, a[0], len);
                }
            }
            nr::SHMCTL if ok && a[1] == IPC_RMID => {
                if let Some(name) = self.replays[r].shm.remove(&a[0]) {
                    self.kernel.file_unlink(&name);
                }
            }
            nr::MEMFD_CREATE if ok => {
                let path = String::from_utf8_lossy(file.path);
                let name = format!("{path}#{}", file.ino);
                if a[1] & u64::from(MfdFlags::HUGETLB.bits()) != 0 {
                    let _ = self.kernel.sys_memfd_create(&name, MfdFlags::HUGETLB);
                } else {
                    let _ = self.kernel.file_create(&name, 0, Fs::Tmpfs);
                }
                self.replays[r].report.files += 1;
            }
            nr::OPEN | nr::OPENAT | nr::CREAT | nr::OPENAT2 if ok => {
                let flags = match nr {
                    nr::OPEN => a[1],
                    nr::OPENAT => a[2],
                    _ => 0,
                };
                if let Some((_, FileRef::Inode(obj))) = self.replay_file(r, file) {
                    if (flags & O_TRUNC != 0 || nr == nr::CREAT) && self.kernel.inode(obj).i_size != file.size {
                        let ret = self.kernel.do_ftruncate(FileRef::Inode(obj), file.size);
                        self.finish_call(t, ret.effects, Call::Other);
                    }
                }
            }
            nr::FTRUNCATE if ok => {
                if let Some((_, f)) = self.replay_file(r, file) {
                    let ret = self.kernel.do_ftruncate(f, a[1]);
                    self.finish_call(t, ret.effects, Call::Other);
                }
            }
            nr::FALLOCATE if ok => {
                if let Some((_, f)) = self.replay_file(r, file) {
                    let ret = self.kernel.vfs_fallocate(f, FallocFlags::from_bits_truncate(a[1] as u32), a[2], a[3]);
                    self.finish_call(t, ret.effects, Call::Other);
                }
            }
            nr::READ | nr::WRITE | nr::PREAD64 | nr::PWRITE64 | nr::READV | nr::WRITEV | nr::PREADV | nr::PWRITEV
                if ok =>
            {
                flow = self.replay_rw(t, r, nr, a, res, file);
            }
            nr::FSYNC | nr::FDATASYNC | nr::FADVISE64 if ok => {
                if let Some((_, FileRef::Inode(obj))) = self.replay_file(r, file) {
                    if let Ok(filp) = self.kernel.file_open(obj, FMode::Read) {
                        // POSIX_FADV_WILLNEED 3, DONTNEED 4; the others only set the file's
                        // readahead mode, which a replay's per-call open does not keep.
                        let ret = match (nr, a[3]) {
                            (nr::FADVISE64, 3) => {
                                Some(self.kernel.ksys_fadvise64_64(filp, a[1], a[2], Fadvise::WillNeed))
                            }
                            (nr::FADVISE64, 4) => {
                                Some(self.kernel.ksys_fadvise64_64(filp, a[1], a[2], Fadvise::DontNeed))
                            }
                            (nr::FADVISE64, _) => None,
                            _ => Some(self.kernel.do_fsync(filp)),
                        };
                        self.kernel.fput(filp);
                        if let Some(ret) = ret {
                            self.finish_call(t, ret.effects, Call::Other);
                        }
                    }
                }
            }
            nr::CLONE | nr::FORK | nr::VFORK if ok && res > 0 => {
                let flags = match nr {
                    nr::CLONE => a[0],
                    nr::VFORK => CloneFlags::VM.bits() | CLONE_VFORK,
                    _ => 0,
                };
                flow = self.replay_clone(t, r, flags, res as u32);
            }
            // The child's side of a fork or clone (it returns 0 there).
            nr::CLONE | nr::FORK | nr::VFORK => {}
            nr::WAIT4 | nr::WAITID if ok => {
                let child = if nr == nr::WAIT4 { res as u32 } else { a[1] as u32 };
                if let Some(&c) = self.replays[r].tasks.get(&child) {
                    if !matches!(self.tasks[c].state, TaskState::Exited | TaskState::Killed) {
                        self.charge_syscall(t);
                        self.replay_wait(t, ReplayWait::Child(c));
                        return Flow::Stop;
                    }
                }
            }
            nr::EXIT => {
                self.tasks[t].replay = None;
                self.exit_task(t, TaskState::Exited);
                self.charge_syscall(t);
                return Flow::Stop;
            }
            nr::EXIT_GROUP => {
                let pid = self.replay_pid(t);
                self.replays[r].report.exit_status.push((pid, a[0] as i32 as i64));
                self.replay_exit_group(t);
                return Flow::Stop;
            }
            _ if !ok => {}
            _ => self.replay_noop(r, name, 0),
        }
        self.charge_syscall(t);
        if self.tasks[t].state != TaskState::Running {
            return Flow::Stop;
        }
        flow
    }

    /// read(2), write(2) and their p- and v- forms: the file's page cache (a regular file), and
    /// the copy to or from the buffer (not for the vector forms: their iovecs are not recorded).
    fn replay_rw(&mut self, t: usize, r: usize, nr: u32, a: [u64; 6], res: u64, file: &FileInfo<'_>) -> Flow {
        let write = matches!(nr, nr::WRITE | nr::PWRITE64 | nr::WRITEV | nr::PWRITEV);
        let pos = match nr {
            nr::PREAD64 | nr::PWRITE64 | nr::PREADV | nr::PWRITEV => a[3] as i64,
            _ => file.pos,
        };
        if res > 0 && pos >= 0 && file.is_regular() {
            if let Some((_, FileRef::Inode(obj))) = self.replay_file(r, file) {
                let mode = if write { FMode::Write } else { FMode::Read };
                if let Ok(filp) = self.kernel.file_open(obj, mode) {
                    let effects = if write {
                        self.kernel.ksys_pwrite64(filp, pos as u64, res, 0).effects
                    } else {
                        self.kernel.ksys_pread64(filp, pos as u64, res, None).effects
                    };
                    self.kernel.fput(filp);
                    self.finish_call(t, effects, Call::Other);
                }
            }
        }
        if res > 0 && matches!(nr, nr::READ | nr::WRITE | nr::PREAD64 | nr::PWRITE64) {
            // copy_to_user / copy_from_user.
            return self.replay_touch(t, a[1], res, !write);
        }
        Flow::Go
    }

    /// clone(2), fork(2), vfork(2) with recorded `flags`, whose child is recorded task `child`:
    /// a thread replays the child's frames of this process, a process its own records.
    fn replay_clone(&mut self, t: usize, r: usize, flags: u64, child: u32) -> Flow {
        let cflags = CloneFlags::from_bits_truncate(flags) & (CloneFlags::VM | CloneFlags::THREAD);
        let thread = cflags.contains(CloneFlags::THREAD);
        let before = self.tasks.len();
        self.fork(t, Rc::new(Vec::new()), None, cflags);
        if self.tasks.len() == before {
            return Flow::Go;
        }
        let c = self.tasks.len() - 1;
        self.replays[r].tasks.insert(child, c);
        let proc = if thread {
            self.replays[r].report.threads += 1;
            match &self.tasks[t].replay.as_ref().expect("replaying").proc {
                Source::Mmsim(p) => Source::Mmsim(p.clone()),
                Source::Champsim(c) => Source::Champsim(c.clone()),
            }
        } else {
            self.replays[r].report.processes += 1;
            self.replays[r].report.threads += 1;
            match ProcessStream::open(Path::new(&self.replays[r].report.trace), child) {
                Ok(stream) => Source::Mmsim(Rc::new(RefCell::new(ProcState { stream, turn_clock: 0.0 }))),
                // A child that left no records (killed before it ran) just exits.
                Err(_) => return Flow::Go,
            }
        };
        let pid = if thread { self.tasks[t].replay.as_ref().map_or(child, |x| x.pid) } else { child };
        // A child sharing the mm shares its relocations; a forked one has a copy of them.
        let parent = self.replay_relocs(t).unwrap_or_default();
        let relocs =
            if cflags.contains(CloneFlags::VM) { parent } else { Rc::new(RefCell::new(parent.borrow().clone())) };
        self.tasks[c].replay = Some(Box::new(ReplayTask { proc, relocs, tid: child, pid, r, exiting: false }));
        self.tasks[c].cursor = Cursor::Replay;
        if !thread && flags & CLONE_VFORK != 0 && cflags.contains(CloneFlags::VM) {
            self.charge_syscall(t);
            self.replay_wait(t, ReplayWait::Vfork(c));
            return Flow::Stop;
        }
        Flow::Go
    }
}
