//! The records of a frame (docs/trace-format.md): their tags, decoding and encoding. The
//! recorder (native/mmsim_record.c) writes the same layout.

/// Record tags.
pub mod tag {
    pub const THREAD: u8 = 0x01;
    pub const RUN: u8 = 0x02;
    pub const LOAD_N: u8 = 0x03;
    pub const STORE_N: u8 = 0x04;
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
pub struct Records<'a> {
    data: &'a [u8],
    off: usize,
    last_pc: u64,
    last_addr: u64,
    failed: bool,
}

type Err = (usize, String);

impl<'a> Records<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Records { data, off: 0, last_pc: 0, last_addr: 0, failed: false }
    }

    #[inline(always)]
    fn byte(&mut self) -> Result<u8, Err> {
        let b = *self.data.get(self.off).ok_or_else(|| (self.off, "the frame ends inside a record".to_string()))?;
        self.off += 1;
        Ok(b)
    }

    #[inline(always)]
    fn uv(&mut self) -> Result<u64, Err> {
        // One byte: most deltas, sizes and counts.
        if let Some(&b) = self.data.get(self.off) {
            if b < 0x80 {
                self.off += 1;
                return Ok(u64::from(b));
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
        self.last_addr = addr;
        Ok(if store { Record::Store { addr, size } } else { Record::Load { addr, size } })
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
                Record::Run { pc, bytes, instrs }
            }
            tag::LOAD..=0x16 => self.mem(1 << (t - tag::LOAD), false)?,
            tag::STORE..=0x1e => self.mem(1 << (t - tag::STORE), true)?,
            tag::LOAD_N | tag::STORE_N => {
                let d = self.zz()?;
                let size = self.u32v("an access size")?;
                let addr = self.last_addr.wrapping_add(d as u64);
                self.last_addr = addr;
                if t == tag::LOAD_N {
                    Record::Load { addr, size }
                } else {
                    Record::Store { addr, size }
                }
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
        if self.failed || self.off >= self.data.len() {
            return None;
        }
        let r = self.next_record();
        self.failed = r.is_err();
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
