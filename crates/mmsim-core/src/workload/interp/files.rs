//! The file ops of a program (`create`, `memfd_create`, `fallocate`, `pwrite`, `pread`,
//! `fadvise`, `fsync`): each opens the file, makes its system calls and closes it, as a
//! program's open/read/close does (a memfd stays open: its name holds it). The
//! time a call waits for the block device is charged to the task (`io_schedule`).

use super::{Interp, TaskState};
use crate::kernel::filemap::{FMode, Fadvise};
use crate::kernel::shmem::Fs;
use crate::kernel::uapi::MfdFlags;
use crate::workload::spec::*;
use crate::workload::spec_files::DEFAULT_CHUNK;

impl Interp {
    /// Run one file op for task `t`.
    pub(super) fn exec_file_op(&mut self, t: usize, op: &Op) {
        let pid = self.tasks[t].pid;
        let file = match op {
            Op::Create(CreateOp { file, size, fs }) => {
                let fs = if fs == "tmpfs" { Fs::Tmpfs } else { Fs::Ext4 };
                match self.kernel.file_create(file, size.0, fs) {
                    Ok(_) => {
                        if let Some(o) = self.oracle.as_mut() {
                            o.create_file(file);
                        }
                    }
                    Err(e) => self.event(pid, "syscall", format!("create {file}: {}", e.name())),
                }
                self.charge_syscall(t);
                self.after_syscall();
                return;
            }
            Op::MemfdCreate(MemfdCreateOp { file, size, hugetlb }) => {
                self.memfd_create(t, file, size.0, *hugetlb);
                return;
            }
            Op::Fallocate(f) => {
                self.fallocate(t, f);
                return;
            }
            Op::Pwrite(PwriteOp { file, .. })
            | Op::Pread(PreadOp { file, .. })
            | Op::Fadvise(FadviseOp { file, .. })
            | Op::Fsync(FsyncOp { file }) => file,
            _ => unreachable!("a file op"),
        };
        let Some(obj) = self.kernel.file_lookup(file) else {
            self.event(pid, "syscall", format!("open {file}: ENOENT"));
            self.exit_task(t, TaskState::Exited);
            return;
        };
        let mode = if matches!(op, Op::Pwrite(_)) { FMode::Write } else { FMode::Read };
        let filp = match self.kernel.file_open(obj, mode) {
            Ok(f) => f,
            Err(e) => {
                // ETXTBSY: a write open of a file being executed.
                let call = if mode == FMode::Write { "pwrite" } else { "open" };
                self.event(pid, "syscall", format!("{call} {file}: {}", e.name()));
                self.charge_syscall(t);
                self.after_syscall();
                return;
            }
        };
        let size = self.kernel.inode(obj).i_size;
        match op {
            Op::Pwrite(PwriteOp { offset, length, chunk, value, .. }) => {
                let len = length.map_or(size.saturating_sub(offset.0), |l| l.0);
                let chunk = chunk.map_or(DEFAULT_CHUNK, |c| c.0);
                let value = value.unwrap_or(DEFAULT_VALUE);
                let mut pos = offset.0;
                while pos < offset.0 + len {
                    let n = chunk.min(offset.0 + len - pos);
                    let r = self.kernel.ksys_pwrite64(filp, pos, n, value);
                    self.io_wait_pages += r.effects.io_wait_pages;
                    let done = r.ret.expect("pwrite64 returns bytes written");
                    if let Some(o) = self.oracle.as_mut() {
                        o.file_write(file, pos, done, value);
                    }
                    self.charge_syscall(t);
                    self.charge_io(t);
                    if done < n {
                        self.event(pid, "syscall", format!("pwrite {file}: ENOMEM"));
                        break;
                    }
                    pos += n;
                }
            }
            Op::Pread(PreadOp { offset, length, chunk, expect, .. }) => {
                let len = length.map_or(size.saturating_sub(offset.0), |l| l.0);
                let chunk = chunk.map_or(DEFAULT_CHUNK, |c| c.0);
                let mut pos = offset.0;
                let mut bad = None;
                while pos < offset.0 + len {
                    let n = chunk.min(offset.0 + len - pos);
                    let r = self.kernel.ksys_pread64(filp, pos, n, *expect);
                    self.io_wait_pages += r.effects.io_wait_pages;
                    let (got, first_bad) = r.ret.expect("pread64 returns bytes read");
                    self.check_file_read(pid, file, pos, got);
                    self.charge_syscall(t);
                    self.charge_io(t);
                    bad = bad.or(first_bad);
                    if got < n {
                        break;
                    }
                    pos += n;
                }
                if let Some((at, found)) = bad {
                    let v = expect.unwrap_or(0);
                    self.check.expect_failures += 1;
                    self.event(pid, "expect", format!("pread {file} at {at:#x}: expected {v}, found {found}"));
                }
            }
            Op::Fadvise(FadviseOp { offset, length, advice, .. }) => {
                let a = if advice == "dontneed" { Fadvise::DontNeed } else { Fadvise::WillNeed };
                let r = self.kernel.ksys_fadvise64_64(filp, offset.0, length.map_or(0, |l| l.0), a);
                self.io_wait_pages += r.effects.io_wait_pages;
                self.charge_syscall(t);
                self.charge_io(t);
            }
            Op::Fsync(_) => {
                let r = self.kernel.do_fsync(filp);
                self.io_wait_pages += r.effects.io_wait_pages;
                self.charge_syscall(t);
                self.charge_io(t);
            }
            _ => unreachable!("a file op"),
        }
        self.kernel.fput(filp);
        self.after_syscall();
    }

    /// A `memfd_create` op: memfd_create(2) and ftruncate(2) to `size`; a failure of either
    /// is an event ("memfd_create F: EINVAL", "ftruncate F: EINVAL").
    fn memfd_create(&mut self, t: usize, file: &str, size: u64, hugetlb: bool) {
        let pid = self.tasks[t].pid;
        let flags = MfdFlags::CLOEXEC | if hugetlb { MfdFlags::HUGETLB } else { MfdFlags::empty() };
        let r = self.kernel.sys_memfd_create(file, flags);
        self.charge_syscall(t);
        match r.ret {
            Ok(f) => {
                if let Some(o) = self.oracle.as_mut() {
                    o.create_file(file);
                }
                let r = self.kernel.do_ftruncate(f, size);
                self.charge_syscall(t);
                if let Err(e) = r.ret {
                    self.event(pid, "syscall", format!("ftruncate {file}: {}", e.name()));
                }
            }
            Err(e) => self.event(pid, "syscall", format!("memfd_create {file}: {}", e.name())),
        }
        self.after_syscall();
    }

    /// A `fallocate` op: open(2) O_RDWR (a memfd's descriptor is open already), fallocate(2),
    /// close(2). A failure is an event ("fallocate F: ENOSPC").
    fn fallocate(&mut self, t: usize, op: &FallocateOp) {
        let pid = self.tasks[t].pid;
        let FallocateOp { file, offset, length, mode } = op;
        let Some(f) = self.kernel.file_ref(file) else {
            self.event(pid, "syscall", format!("open {file}: ENOENT"));
            self.exit_task(t, TaskState::Exited);
            return;
        };
        let filp = match self.kernel.file_open_ref(f) {
            Ok(filp) => filp,
            Err(e) => {
                self.event(pid, "syscall", format!("fallocate {file}: {}", e.name()));
                self.charge_syscall(t);
                self.after_syscall();
                return;
            }
        };
        let mode = FallocMode::flags(mode);
        let r = self.kernel.vfs_fallocate(f, mode, offset.0, length.0);
        self.charge_syscall(t);
        match r.ret {
            Ok(()) if mode.contains(crate::kernel::uapi::FallocFlags::PUNCH_HOLE) => {
                if let Some(o) = self.oracle.as_mut() {
                    o.file_punch(file, offset.0, length.0);
                }
            }
            Ok(()) => {}
            Err(e) => self.event(pid, "syscall", format!("fallocate {file}: {}", e.name())),
        }
        if let Some(filp) = filp {
            self.kernel.fput(filp);
        }
        self.after_syscall();
    }

    /// With `--check`: the bytes a read(2) returned are the reference model's.
    fn check_file_read(&mut self, pid: u32, file: &str, pos: u64, len: u64) {
        let Some(o) = self.oracle.as_ref() else { return };
        let ps = self.kernel.geo.page_size();
        let Some(obj) = self.kernel.file_lookup(file) else { return };
        let mut p = pos;
        let mut bad = None;
        while p < pos + len {
            let index = p / ps;
            let stop = ((index + 1) * ps).min(pos + len);
            let want = o.file_page(file, index);
            let have = self.kernel.shmem_find_folio(obj, index).and_then(|f| self.kernel.page_content(f));
            let disk = self.kernel.inode(obj).disk.get(&index);
            // A hole of a tmpfs file, or an ext4 page the read left uncached, reads as the
            // device has it; a tmpfs page the read's own allocations sent back to swap after
            // it was copied, as its slot has it.
            let have = if self.kernel.shmem_find_folio(obj, index).is_some() {
                have
            } else if self.kernel.shmem_swap_entry(obj, index).is_some() {
                self.kernel.shmem_swapped_content(obj, index)
            } else {
                disk
            };
            for i in self.kernel.geo.offset_in_page(p) as usize..self.kernel.geo.offset_in_page(stop - 1) as usize + 1 {
                let (w, h) = (want.map_or(0, |c| c.get(i)), have.map_or(0, |c| c.get(i)));
                if w != h {
                    bad = Some((index * ps + i as u64, w, h));
                    break;
                }
            }
            if bad.is_some() {
                break;
            }
            p = stop;
        }
        self.check.reads_checked += 1;
        if let Some((at, w, h)) = bad {
            self.mismatch(pid, format!("pread {file} at byte {at}: read {h}, reference model says {w}"));
        }
    }

    /// Time task `t` spent in the kernel waiting: for the swap device (`io_schedule`, `ns`
    /// of it) and in memory.high's throttle (`throttle` ns), as its cycles. Then, on its way
    /// back to user space, memory.high's throttle of what the call charged over the limit.
    #[inline]
    pub(super) fn charge_wait_ns(&mut self, t: usize, ns: u64, throttle: u64) {
        if ns == 0 && throttle == 0 && self.kernel.memcg.over_high == 0 {
            // No wait and no throttle (the common case, inline): only queued work.
            self.charge_work(t);
            return;
        }
        self.charge_wait_ns_slow(t, ns, throttle);
    }

    #[inline(never)]
    fn charge_wait_ns_slow(&mut self, t: usize, ns: u64, throttle: u64) {
        let cpu = self.tasks[t].cpu;
        let freq = self.machine.p.cpu.freq_ghz;
        if ns > 0 {
            let cost = self.machine.exec_cycles(cpu, ns as f64 * freq);
            self.tasks[t].perf.charge("io_schedule", cost);
            self.tp_emit(t, crate::tracepoints::ev::IO_WAIT, |_| format!("pages=0 ns={ns}"));
        }
        let throttle = throttle + self.kernel.mem_cgroup_handle_over_high();
        if throttle > 0 {
            let cost = self.machine.exec_cycles(cpu, throttle as f64 * freq);
            self.tasks[t].perf.charge("mem_cgroup_handle_over_high", cost);
        }
        // The reclaim the throttle did may have queued work.
        self.charge_work(t);
    }

    /// The block device time task `t` waited for since the last charge (`io_schedule`): the
    /// device's latency plus the transfer of the pages it read (profile `block`).
    pub(super) fn charge_io(&mut self, t: usize) {
        let pages = std::mem::take(&mut self.io_wait_pages);
        if pages == 0 {
            return;
        }
        let b = &self.machine.p.block;
        let bytes = (pages * self.kernel.geo.page_size()) as f64;
        let ns = b.read_latency_ns + bytes / b.read_bandwidth;
        let cycles = ns * self.machine.p.cpu.freq_ghz;
        let cpu = self.tasks[t].cpu;
        let cost = self.machine.exec_cycles(cpu, cycles);
        self.tasks[t].perf.charge("io_schedule", cost);
        self.tp_emit(t, crate::tracepoints::ev::IO_WAIT, |_| format!("pages={pages} ns={ns:.0}"));
    }
}
