//! The records of a frame (docs/trace-format.md): their tags, decoding and encoding. The
//! recorder (native/mmsim_record.c) writes the same layout.

/// Record tags.
pub mod tag {
    pub const THREAD: u8 = 0x01;
    pub const RUN: u8 = 0x02;
    pub const LOAD_N: u8 = 0x03;
    pub const STORE_N: u8 = 0x04;
    /// The last run and the accesses after it, n times more, each access a stride on.
    pub const REPEAT: u8 = 0x05;
    /// + log2(size), size 1..=64.
    pub const LOAD: u8 = 0x10;
    pub const STORE: u8 = 0x18;
    pub const SYSCALL: u8 = 0x20;
    pub const MAP: u8 = 0x21;
    pub const PROC: u8 = 0x22;
    pub const EXIT: u8 = 0x23;
}

/// What the recorder knew of a file: its mode, size, device, inode, the position a read or
/// write started at (-1: not asked for), and its path (empty: unknown or not a file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileInfo<'a> {
    pub mode: u32,
    pub size: u64,
    pub dev: u64,
    pub ino: u64,
    pub pos: i64,
    pub path: &'a [u8],
}

impl FileInfo<'_> {
    /// A regular file (S_IFREG).
    pub fn is_regular(&self) -> bool {
        self.mode & 0o170000 == 0o100000
    }
}

/// One record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// The records after it are of thread `tid` (the kernel's thread id).
    Thread {
        tid: u32,
    },
    /// A run of `instrs` instructions over `bytes` bytes of code from `pc`.
    Run {
        pc: u64,
        bytes: u32,
        instrs: u32,
    },
    Load {
        addr: u64,
        size: u32,
    },
    Store {
        addr: u64,
        size: u32,
    },
    /// A system call: number, arguments, result (-errno on failure), and the file of an fd
    /// it took or returned (path empty when none).
    Syscall {
        nr: u32,
        args: [u64; 6],
        result: i64,
        file: FileInfo<'a>,
    },
    /// A mapping of the address space at an image's start. `kind`: 0 anonymous, 1 file,
    /// 2 shm, 3 the stack, 4 the brk heap. `prot`: 1 read, 2 write, 4 exec.
    Map {
        start: u64,
        len: u64,
        prot: u32,
        kind: u32,
        offset: u64,
        file: FileInfo<'a>,
    },
    /// A process image starts: `how` 0 a new image (the first, or an exec'd one: its pid
    /// was seen before), 1 a forked child; `parent` its parent's pid.
    Proc {
        how: u32,
        parent: u32,
    },
    /// The process's exit status.
    Exit {
        status: i64,
    },
}

/// The decoding of one frame's payload: an iterator of records, or an error at a byte
/// offset of the payload.
#[derive(Clone)]
pub struct Records<'a> {
    data: &'a [u8],
    off: usize,
    last_pc: u64,
    last_addr: u64,
    failed: bool,
    /// The template a repeat repeats: the last run and the accesses after it (their count may
    /// pass REP_MAX: then it cannot repeat).
    t_valid: bool,
    t_run: (u64, u32, u32),
    t_k: usize,
    t_acc: [(bool, u64, u32); REP_MAX],
    /// A repeat being expanded: iterations left, the next record of the iteration (0 the
    /// run, i + 1 access i), the strides.
    rep_left: u64,
    rep_pos: usize,
    rep_stride: [i64; REP_MAX],
}

/// The most accesses after a run that a repeat carries (the recorder's REP_MAX).
pub const REP_MAX: usize = 2;

type Err = (usize, String);

impl<'a> Records<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Records {
            data,
            off: 0,
            last_pc: 0,
            last_addr: 0,
            failed: false,
            t_valid: false,
            t_run: (0, 0, 0),
            t_k: 0,
            t_acc: [(false, 0, 0); REP_MAX],
            rep_left: 0,
            rep_pos: 0,
            rep_stride: [0; REP_MAX],
        }
    }

    /// The decoder's state without its payload, to `resume` on the same payload later (a
    /// replayer that stops inside a frame).
    pub fn suspend(&self) -> Records<'static> {
        Records::with_state(self, &[])
    }

    fn with_state<'b>(s: &Records<'_>, data: &'b [u8]) -> Records<'b> {
        Records {
            data,
            off: s.off,
            last_pc: s.last_pc,
            last_addr: s.last_addr,
            failed: s.failed,
            t_valid: s.t_valid,
            t_run: s.t_run,
            t_k: s.t_k,
            t_acc: s.t_acc,
            rep_left: s.rep_left,
            rep_pos: s.rep_pos,
            rep_stride: s.rep_stride,
        }
    }

    /// Go on decoding `data` (the payload it was suspended on) from a suspended state.
    pub fn resume(saved: &Records<'static>, data: &'a [u8]) -> Records<'a> {
        Records::with_state(saved, data)
    }

    #[inline(always)]
    fn byte(&mut self) -> Result<u8, Err> {
        let b = *self.data.get(self.off).ok_or_else(|| (self.off, "the frame ends inside a record".to_string()))?;
        self.off += 1;
        Ok(b)
    }

    #[inline(always)]
    fn uv(&mut self) -> Result<u64, Err> {
        // One byte: most deltas, sizes and counts; two: most of the rest.
        if let Some(&b) = self.data.get(self.off) {
            if b < 0x80 {
                self.off += 1;
                return Ok(u64::from(b));
            }
            if let Some(&c) = self.data.get(self.off + 1) {
                if c < 0x80 {
                    self.off += 2;
                    return Ok(u64::from(b & 0x7f) | u64::from(c) << 7);
                }
            }
        }
        self.uv_slow()
    }

    #[inline(never)]
    fn uv_slow(&mut self) -> Result<u64, Err> {
        let at = self.off;
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err((at, "a number longer than 64 bits".into()));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err((at, "a number longer than 64 bits".into()))
    }

    #[inline(always)]
    fn u32v(&mut self, what: &str) -> Result<u32, Err> {
        let at = self.off;
        let v = self.uv()?;
        u32::try_from(v).map_err(|_| (at, format!("{what} {v} does not fit 32 bits")))
    }

    #[inline(always)]
    fn zz(&mut self) -> Result<i64, Err> {
        let v = self.uv()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn file(&mut self) -> Result<FileInfo<'a>, Err> {
        let mode = self.u32v("a file mode")?;
        let size = self.uv()?;
        let dev = self.uv()?;
        let ino = self.uv()?;
        let pos = self.zz()?;
        let at = self.off;
        let n = self.uv()? as usize;
        if n > 4096 || self.off + n > self.data.len() {
            return Err((at, format!("a path of {n} bytes runs past the frame's end")));
        }
        let path = &self.data[self.off..self.off + n];
        self.off += n;
        Ok(FileInfo { mode, size, dev, ino, pos, path })
    }

    #[inline(always)]
    fn mem(&mut self, size: u32, store: bool) -> Result<Record<'a>, Err> {
        let d = self.zz()?;
        let addr = self.last_addr.wrapping_add(d as u64);
        Ok(self.access(store, addr, size))
    }

    /// An access decoded: it follows the template's run.
    #[inline(always)]
    fn access(&mut self, store: bool, addr: u64, size: u32) -> Record<'a> {
        self.last_addr = addr;
        if self.t_valid {
            if self.t_k < REP_MAX {
                self.t_acc[self.t_k] = (store, addr, size);
            }
            self.t_k += 1;
        }
        if store {
            Record::Store { addr, size }
        } else {
            Record::Load { addr, size }
        }
    }

    /// The next record of the repeat being expanded.
    fn repeat_next(&mut self) -> Record<'a> {
        if self.rep_pos == 0 {
            let (pc, bytes, instrs) = self.t_run;
            self.last_pc = pc.wrapping_add(u64::from(bytes));
            if self.t_k == 0 {
                self.rep_left -= 1;
            } else {
                self.rep_pos = 1;
            }
            return Record::Run { pc, bytes, instrs };
        }
        let i = self.rep_pos - 1;
        let (store, addr, size) = self.t_acc[i];
        let addr = addr.wrapping_add(self.rep_stride[i] as u64);
        self.t_acc[i].1 = addr;
        self.last_addr = addr;
        self.rep_pos += 1;
        if self.rep_pos > self.t_k {
            self.rep_pos = 0;
            self.rep_left -= 1;
        }
        if store {
            Record::Store { addr, size }
        } else {
            Record::Load { addr, size }
        }
    }

    #[inline(never)]
    fn repeat(&mut self, at: usize) -> Result<Record<'a>, Err> {
        let n = self.uv()?;
        let k = self.uv()? as usize;
        if !self.t_valid || k != self.t_k || k > REP_MAX {
            return Err((at, format!("a repeat of a run and {k} accesses, after no such run")));
        }
        for i in 0..k {
            self.rep_stride[i] = self.zz()?;
        }
        if n == 0 {
            return Err((at, "a repeat of zero iterations".into()));
        }
        self.rep_left = n;
        self.rep_pos = 0;
        Ok(self.repeat_next())
    }

    #[inline(always)]
    fn next_record(&mut self) -> Result<Record<'a>, Err> {
        let at = self.off;
        let t = self.byte()?;
        Ok(match t {
            tag::THREAD => Record::Thread { tid: self.u32v("a thread id")? },
            tag::RUN => {
                let d = self.zz()?;
                let pc = self.last_pc.wrapping_add(d as u64);
                let bytes = self.u32v("a run's bytes")?;
                let instrs = self.u32v("a run's instructions")?;
                self.last_pc = pc.wrapping_add(u64::from(bytes));
                self.t_valid = true;
                self.t_run = (pc, bytes, instrs);
                self.t_k = 0;
                return Ok(Record::Run { pc, bytes, instrs });
            }
            tag::REPEAT => return self.repeat(at),
            tag::LOAD..=0x16 => return self.mem(1 << (t - tag::LOAD), false),
            tag::STORE..=0x1e => return self.mem(1 << (t - tag::STORE), true),
            tag::LOAD_N | tag::STORE_N => {
                let d = self.zz()?;
                let size = self.u32v("an access size")?;
                let addr = self.last_addr.wrapping_add(d as u64);
                return Ok(self.access(t == tag::STORE_N, addr, size));
            }
            tag::SYSCALL => self.syscall()?,
            tag::MAP => self.map()?,
            tag::PROC => Record::Proc { how: self.u32v("a process start")?, parent: self.u32v("a parent pid")? },
            tag::EXIT => Record::Exit { status: self.zz()? },
            _ => return Err((at, format!("unknown record tag {t:#04x}"))),
        })
    }

    #[inline(never)]
    fn syscall(&mut self) -> Result<Record<'a>, Err> {
        let nr = self.u32v("a system call number")?;
        let mut args = [0u64; 6];
        for a in &mut args {
            *a = self.uv()?;
        }
        let result = self.zz()?;
        Ok(Record::Syscall { nr, args, result, file: self.file()? })
    }

    #[inline(never)]
    fn map(&mut self) -> Result<Record<'a>, Err> {
        let start = self.uv()?;
        let len = self.uv()?;
        let prot = self.u32v("a mapping's prot")?;
        let kind = self.u32v("a mapping's kind")?;
        let offset = self.uv()?;
        Ok(Record::Map { start, len, prot, kind, offset, file: self.file()? })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Err>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rep_left > 0 {
            return Some(Ok(self.repeat_next()));
        }
        if self.failed || self.off >= self.data.len() {
            return None;
        }
        let r = self.next_record();
        match r {
            // A run, an access and a repeat keep the template; anything else ends it.
            Ok(Record::Run { .. } | Record::Load { .. } | Record::Store { .. }) => {}
            Ok(_) => self.t_valid = false,
            Err(_) => self.failed = true,
        }
        Some(r)
    }
}

/// Builds frames as the recorder does (tests, converters): records in, frame payloads out.
#[derive(Default)]
pub struct FrameEncoder {
    pub buf: Vec<u8>,
    last_pc: u64,
    last_addr: u64,
}

impl FrameEncoder {
    /// A frame of thread `tid` begins (the deltas start from zero).
    pub fn start(&mut self, tid: u32) {
        self.buf.clear();
        self.last_pc = 0;
        self.last_addr = 0;
        self.put(&Record::Thread { tid });
    }

    fn uv(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn zz(&mut self, v: i64) {
        self.uv(((v as u64) << 1) ^ ((v >> 63) as u64));
    }

    fn file(&mut self, f: &FileInfo<'_>) {
        self.uv(u64::from(f.mode));
        self.uv(f.size);
        self.uv(f.dev);
        self.uv(f.ino);
        self.zz(f.pos);
        self.uv(f.path.len() as u64);
        self.buf.extend_from_slice(f.path);
    }

    /// Append a repeat: the last run and the `strides.len()` accesses after it, `n` times
    /// more, each access `strides[i]` bytes on from its last (the caller keeps to the rule:
    /// only right after such a run and its accesses).
    pub fn repeat(&mut self, n: u64, strides: &[i64]) {
        self.buf.push(tag::REPEAT);
        self.uv(n);
        self.uv(strides.len() as u64);
        for &s in strides {
            self.zz(s);
        }
    }

    /// Set the deltas' base after a repeat (what the decoder's last pc and address are then).
    pub fn set_last(&mut self, pc: u64, addr: u64) {
        self.last_pc = pc;
        self.last_addr = addr;
    }

    /// Append one record.
    pub fn put(&mut self, r: &Record<'_>) {
        match *r {
            Record::Thread { tid } => {
                self.buf.push(tag::THREAD);
                self.uv(u64::from(tid));
            }
            Record::Run { pc, bytes, instrs } => {
                self.buf.push(tag::RUN);
                self.zz(pc.wrapping_sub(self.last_pc) as i64);
                self.uv(u64::from(bytes));
                self.uv(u64::from(instrs));
                self.last_pc = pc.wrapping_add(u64::from(bytes));
            }
            Record::Load { addr, size } | Record::Store { addr, size } => {
                let store = matches!(r, Record::Store { .. });
                let d = addr.wrapping_sub(self.last_addr) as i64;
                if size.is_power_of_two() && size <= 64 {
                    let base = if store { tag::STORE } else { tag::LOAD };
                    self.buf.push(base + size.trailing_zeros() as u8);
                    self.zz(d);
                } else {
                    self.buf.push(if store { tag::STORE_N } else { tag::LOAD_N });
                    self.zz(d);
                    self.uv(u64::from(size));
                }
                self.last_addr = addr;
            }
            Record::Syscall { nr, args, result, file } => {
                self.buf.push(tag::SYSCALL);
                self.uv(u64::from(nr));
                for a in args {
                    self.uv(a);
                }
                self.zz(result);
                self.file(&file);
            }
            Record::Map { start, len, prot, kind, offset, file } => {
                self.buf.push(tag::MAP);
                self.uv(start);
                self.uv(len);
                self.uv(u64::from(prot));
                self.uv(u64::from(kind));
                self.uv(offset);
                self.file(&file);
            }
            Record::Proc { how, parent } => {
                self.buf.push(tag::PROC);
                self.uv(u64::from(how));
                self.uv(u64::from(parent));
            }
            Record::Exit { status } => {
                self.buf.push(tag::EXIT);
                self.zz(status);
            }
        }
    }
}
