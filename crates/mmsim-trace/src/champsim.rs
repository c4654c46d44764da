//! ChampSim's traces (`*.champsimtrace.xz` and the like): a stream of fixed-size records, one
//! per instruction, compressed with xz, gzip or bzip2, or raw. The compression is told from the
//! file's first bytes; the record layout is ChampSim's `input_instr` (64 bytes) or, for the
//! CloudSuite traces, `cloudsuite_instr` (96 bytes, with two address-space ids).
//!
//! `input_instr`: ip (u64), is_branch, branch_taken (u8 each), 2 destination and 4 source
//! register numbers (u8), 2 destination and 4 source memory addresses (u64; 0: none).
//! `cloudsuite_instr`: ip, is_branch, branch_taken, 4 destination and 4 source registers,
//! padding to 24, 4 destination and 4 source memory addresses, asid[2], padding to 96.
//! Little-endian, as the x86-64 machines that wrote them.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::TraceError;

/// How a ChampSim trace file is compressed (from its first bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Xz,
    Gzip,
    Bzip2,
    Raw,
}

impl Compression {
    /// The compression of a file starting with `head`.
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Compression::Xz
        } else if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(b"BZh") {
            Compression::Bzip2
        } else {
            Compression::Raw
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::Xz => "xz",
            Compression::Gzip => "gzip",
            Compression::Bzip2 => "bzip2",
            Compression::Raw => "raw",
        }
    }
}

/// The record layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `input_instr`, 64 bytes.
    Standard,
    /// `cloudsuite_instr`, 96 bytes.
    Cloudsuite,
}

impl Layout {
    pub const fn size(self) -> usize {
        match self {
            Layout::Standard => 64,
            Layout::Cloudsuite => 96,
        }
    }

    /// The layout a file's name implies: ChampSim's CloudSuite traces are named `cloudsuite`
    /// (ChampSim itself is told by its `-c` option; mmsim by the name or the op's `format`).
    pub fn from_name(path: &Path) -> Layout {
        let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
        if name.contains("cloudsuite") {
            Layout::Cloudsuite
        } else {
            Layout::Standard
        }
    }
}

/// One instruction of a ChampSim trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Instr {
    pub ip: u64,
    pub is_branch: bool,
    pub branch_taken: bool,
    /// Destination (store) and source (load) memory addresses; 0 is none.
    pub dst: [u64; 4],
    pub src: [u64; 4],
    /// CloudSuite's address-space ids (instruction, data); `None` in `input_instr`.
    pub asid: Option<[u8; 2]>,
}

impl Instr {
    /// The record's bytes in `layout` (the project's writer, for tests and conversions).
    pub fn encode(&self, layout: Layout) -> Vec<u8> {
        let mut b = vec![0u8; layout.size()];
        b[..8].copy_from_slice(&self.ip.to_le_bytes());
        b[8] = u8::from(self.is_branch);
        b[9] = u8::from(self.branch_taken);
        let (nd, mem) = match layout {
            Layout::Standard => (2, 16),
            Layout::Cloudsuite => (4, 24),
        };
        for (i, a) in self.dst[..nd].iter().enumerate() {
            b[mem + 8 * i..mem + 8 * i + 8].copy_from_slice(&a.to_le_bytes());
        }
        let srcs = mem + 8 * nd;
        for (i, a) in self.src.iter().enumerate() {
            b[srcs + 8 * i..srcs + 8 * i + 8].copy_from_slice(&a.to_le_bytes());
        }
        if layout == Layout::Cloudsuite {
            let [x, y] = self.asid.unwrap_or([u8::MAX, u8::MAX]);
            (b[88], b[89]) = (x, y);
        }
        b
    }

    /// A record of `layout` from its bytes.
    pub fn decode(b: &[u8], layout: Layout) -> Instr {
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let (nd, mem) = match layout {
            Layout::Standard => (2, 16),
            Layout::Cloudsuite => (4, 24),
        };
        let mut i = Instr { ip: u64_at(0), is_branch: b[8] != 0, branch_taken: b[9] != 0, ..Default::default() };
        for k in 0..nd {
            i.dst[k] = u64_at(mem + 8 * k);
        }
        for k in 0..4 {
            i.src[k] = u64_at(mem + 8 * nd + 8 * k);
        }
        if layout == Layout::Cloudsuite {
            i.asid = Some([b[88], b[89]]);
        }
        i
    }
}

/// Counts the compressed bytes read, so that an error can name where in the file it was.
struct Counted<R> {
    inner: R,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// Reads a ChampSim trace an instruction at a time, decompressing as it goes (memory stays
/// constant). A stream that ends inside a record, or that does not decompress, is an error
/// naming the file, the byte of the file the decompressor had reached, and the record.
pub struct ChampsimReader {
    file: String,
    pub compression: Compression,
    pub layout: Layout,
    input: Box<dyn Read>,
    consumed: std::rc::Rc<std::cell::Cell<u64>>,
    buf: Vec<u8>,
    /// Records read so far.
    pub records: u64,
}

impl ChampsimReader {
    /// Open `path`, its compression told from its first bytes and its layout from `layout`
    /// (or the name: `Layout::from_name`).
    pub fn open(path: &Path, layout: Option<Layout>) -> Result<ChampsimReader, TraceError> {
        let file = path.display().to_string();
        let err = |offset: u64, what: String| TraceError { file: file.clone(), offset, what };
        let mut f = File::open(path).map_err(|e| err(0, format!("cannot open: {e}")))?;
        let mut head = [0u8; 8];
        let n = read_full(&mut f, &mut head).map_err(|e| err(0, format!("cannot read: {e}")))?;
        if n == 0 {
            return Err(err(0, "an empty file is no ChampSim trace".into()));
        }
        if &head == crate::MAGIC {
            return Err(err(0, "an mmsim trace, not a ChampSim one".into()));
        }
        let compression = Compression::detect(&head[..n]);
        let f = File::open(path).map_err(|e| err(0, format!("cannot open: {e}")))?;
        let consumed = std::rc::Rc::new(std::cell::Cell::new(0));
        let counted = BufReader::with_capacity(1 << 16, Counted { inner: f, read: consumed.clone() });
        let input: Box<dyn Read> = match compression {
            Compression::Xz => Box::new(xz2::bufread::XzDecoder::new_multi_decoder(counted)),
            Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(counted)),
            Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(counted)),
            Compression::Raw => Box::new(counted),
        };
        let layout = layout.unwrap_or_else(|| Layout::from_name(path));
        Ok(ChampsimReader {
            file,
            compression,
            layout,
            input: Box::new(BufReader::with_capacity(1 << 16, input)),
            consumed,
            buf: vec![0; layout.size()],
            records: 0,
        })
    }

    /// The next instruction, or `None` at the end of the stream.
    pub fn next_instr(&mut self) -> Result<Option<Instr>, TraceError> {
        let n = match read_full(&mut self.input, &mut self.buf) {
            Ok(n) => n,
            Err(e) => {
                return Err(TraceError {
                    file: self.file.clone(),
                    offset: self.consumed.get(),
                    what: format!(
                        "record {}: the {} stream does not decompress: {e}",
                        self.records,
                        self.compression.name()
                    ),
                })
            }
        };
        if n == 0 {
            return Ok(None);
        }
        if n < self.buf.len() {
            return Err(TraceError {
                file: self.file.clone(),
                offset: self.consumed.get(),
                what: format!(
                    "record {}: cut short ({n} of its {} bytes): a truncated trace",
                    self.records,
                    self.buf.len()
                ),
            });
        }
        self.records += 1;
        Ok(Some(Instr::decode(&self.buf, self.layout)))
    }
}

/// Is `path` a ChampSim trace rather than an mmsim one? Yes when it is compressed (xz, gzip,
/// bzip2: told from its first bytes), when its name says so (`champsim`, `cloudsuite`: a
/// truncated raw trace is then read as one, and its error names the record), or when it is
/// raw and a whole number of 64-byte (or 96-byte) records long. Anything else, mmsim's magic
/// or not, is read as an mmsim trace, whose reader says what is wrong with it.
pub fn is_champsim(path: &Path) -> bool {
    let mut head = [0u8; 8];
    let Ok(n) = File::open(path).and_then(|mut f| read_full(&mut f, &mut head)) else { return false };
    if n == 0 || &head == crate::MAGIC {
        return false;
    }
    if Compression::detect(&head[..n]) != Compression::Raw {
        return true;
    }
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if name.contains("champsim") || name.contains("cloudsuite") {
        return true;
    }
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    size.is_multiple_of(Layout::from_name(path).size() as u64)
}

/// Is `path` an mmsim trace (`!is_champsim`)?
pub fn is_mmsim_trace(path: &Path) -> bool {
    !is_champsim(path)
}

/// A ChampSim trace's totals (`mmsim trace info`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ChampsimStats {
    pub format: &'static str,
    pub compression: &'static str,
    pub instructions: u64,
    pub branches: u64,
    pub taken: u64,
    pub loads: u64,
    pub stores: u64,
    /// 4 KiB and 2 MiB pages touched (fetches and data), over every address space.
    pub footprint_4k: u64,
    pub footprint_2m: u64,
    /// CloudSuite's address spaces (instruction ASIDs) seen.
    pub asids: u64,
}

/// Read a whole ChampSim trace for its totals.
pub fn champsim_stats(path: &Path, layout: Option<Layout>) -> Result<ChampsimStats, TraceError> {
    let mut r = ChampsimReader::open(path, layout)?;
    let mut s = ChampsimStats {
        format: match r.layout {
            Layout::Standard => "champsim",
            Layout::Cloudsuite => "champsim-cloudsuite",
        },
        compression: r.compression.name(),
        ..Default::default()
    };
    let mut pages = std::collections::HashSet::new();
    let mut huge = std::collections::HashSet::new();
    let mut asids = std::collections::HashSet::new();
    while let Some(i) = r.next_instr()? {
        s.instructions += 1;
        s.branches += u64::from(i.is_branch);
        s.taken += u64::from(i.is_branch && i.branch_taken);
        let asid = i.asid.map_or(0, |a| a[0]);
        asids.insert(asid);
        let mut touch = |a: u64| {
            pages.insert((asid, a >> 12));
            huge.insert((asid, a >> 21));
        };
        touch(i.ip);
        for &a in i.src.iter().filter(|&&a| a != 0) {
            s.loads += 1;
            touch(a);
        }
        for &a in i.dst.iter().filter(|&&a| a != 0) {
            s.stores += 1;
            touch(a);
        }
    }
    (s.footprint_4k, s.footprint_2m) = (pages.len() as u64, huge.len() as u64);
    s.asids = if r.layout == Layout::Cloudsuite { asids.len() as u64 } else { 0 };
    Ok(s)
}

/// Read until `buf` is full or the stream ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Writes a ChampSim trace in `layout`, compressed as `compression` says (the project's own
/// writer: tests, and conversions of mmsim traces).
pub struct ChampsimWriter {
    out: Box<dyn std::io::Write>,
    layout: Layout,
}

impl ChampsimWriter {
    pub fn create(path: &Path, layout: Layout, compression: Compression) -> std::io::Result<ChampsimWriter> {
        let f = std::io::BufWriter::new(File::create(path)?);
        let out: Box<dyn std::io::Write> = match compression {
            Compression::Xz => Box::new(xz2::write::XzEncoder::new(f, 6)),
            Compression::Gzip => Box::new(flate2::write::GzEncoder::new(f, flate2::Compression::default())),
            Compression::Bzip2 => Box::new(bzip2::write::BzEncoder::new(f, bzip2::Compression::default())),
            Compression::Raw => Box::new(f),
        };
        Ok(ChampsimWriter { out, layout })
    }

    pub fn put(&mut self, i: &Instr) -> std::io::Result<()> {
        self.out.write_all(&i.encode(self.layout))
    }

    /// Finish the stream (the compressor's end); dropping the writer also finishes it.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instrs() -> Vec<Instr> {
        (0..1000u64)
            .map(|k| Instr {
                ip: 0x40_1000 + 4 * (k % 50),
                is_branch: k % 50 == 49,
                branch_taken: k % 50 == 49,
                dst: [if k % 3 == 0 { 0x7f00_0000_0000 + 64 * k } else { 0 }, 0, 0, 0],
                src: [0x60_0000 + 8 * k, if k % 7 == 0 { 0x7ffe_0000_0000 - 8 * k } else { 0 }, 0, 0],
                asid: None,
            })
            .collect()
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("mmsim-champsim-{}-{name}", std::process::id()))
    }

    fn write(path: &Path, layout: Layout, c: Compression, v: &[Instr]) {
        let mut w = ChampsimWriter::create(path, layout, c).unwrap();
        for i in v {
            w.put(i).unwrap();
        }
        w.finish().unwrap();
    }

    fn read_all(path: &Path, layout: Option<Layout>) -> Result<(Compression, Vec<Instr>), TraceError> {
        let mut r = ChampsimReader::open(path, layout)?;
        let mut v = Vec::new();
        while let Some(i) = r.next_instr()? {
            v.push(i);
        }
        Ok((r.compression, v))
    }

    #[test]
    fn every_compression_reads_back_what_was_written() {
        let v = instrs();
        for c in [Compression::Xz, Compression::Gzip, Compression::Bzip2, Compression::Raw] {
            let p = tmp(&format!("rt.{}", c.name()));
            write(&p, Layout::Standard, c, &v);
            let got = read_all(&p, None);
            let size = std::fs::metadata(&p).unwrap().len();
            std::fs::remove_file(&p).ok();
            let (detected, got) = got.unwrap();
            assert_eq!(detected, c);
            assert_eq!(got, v, "{c:?}");
            if c == Compression::Raw {
                assert_eq!(size, 64 * v.len() as u64, "input_instr is 64 bytes");
            }
        }
    }

    #[test]
    fn cloudsuite_records_are_96_bytes_with_their_asids() {
        let mut v = instrs();
        for (k, i) in v.iter_mut().enumerate() {
            i.asid = Some([(k % 3) as u8, (k % 3) as u8]);
            i.dst[3] = 0x1000 * k as u64;
        }
        let p = tmp("cloudsuite.raw");
        write(&p, Layout::Cloudsuite, Compression::Raw, &v);
        let size = std::fs::metadata(&p).unwrap().len();
        let got = read_all(&p, Some(Layout::Cloudsuite)).unwrap().1;
        std::fs::remove_file(&p).ok();
        assert_eq!(size, 96 * v.len() as u64);
        assert_eq!(got, v);
        // The layout the name implies.
        assert_eq!(Layout::from_name(Path::new("/t/cloud9.cloudsuite.xz")), Layout::Cloudsuite);
        assert_eq!(Layout::from_name(Path::new("/t/600.perlbench_s-210B.champsimtrace.xz")), Layout::Standard);
    }

    #[test]
    fn a_truncated_trace_names_the_record_and_the_byte() {
        let v = instrs();
        let p = tmp("cut.raw");
        write(&p, Layout::Standard, Compression::Raw, &v);
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..64 * 10 + 30]).unwrap();
        let e = read_all(&p, None).unwrap_err();
        std::fs::remove_file(&p).ok();
        assert_eq!(e.offset, 64 * 10 + 30);
        assert!(e.what.contains("record 10") && e.what.contains("30 of its 64 bytes"), "{e}");
    }

    #[test]
    fn a_corrupted_or_cut_compressed_trace_is_an_error_not_a_short_trace() {
        let v = instrs();
        for c in [Compression::Xz, Compression::Gzip, Compression::Bzip2] {
            let p = tmp(&format!("bad.{}", c.name()));
            write(&p, Layout::Standard, c, &v);
            let bytes = std::fs::read(&p).unwrap();
            // Cut in the middle of the compressed stream.
            std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
            let cut = read_all(&p, None);
            // Bytes flipped in the middle.
            let mut bad = bytes.clone();
            let mid = bad.len() / 2;
            for b in &mut bad[mid..mid + 8] {
                *b ^= 0x5a;
            }
            std::fs::write(&p, &bad).unwrap();
            let flipped = read_all(&p, None);
            std::fs::remove_file(&p).ok();
            let e = cut.unwrap_err();
            assert!(e.to_string().contains("byte"), "{c:?}: {e}");
            assert!(flipped.is_err(), "{c:?}: a corrupted stream read as {:?} records", flipped.map(|x| x.1.len()));
        }
    }

    #[test]
    fn an_empty_file_and_an_mmsim_trace_are_refused() {
        let p = tmp("empty");
        std::fs::write(&p, b"").unwrap();
        let e = read_all(&p, None).unwrap_err();
        std::fs::write(&p, b"MMSIMTRC\x01\0\0\0").unwrap();
        let m = read_all(&p, None).unwrap_err();
        std::fs::remove_file(&p).ok();
        assert!(e.what.contains("empty"), "{e}");
        assert!(m.what.contains("mmsim trace"), "{m}");
    }
}

#[cfg(test)]
mod detect_tests {
    use super::*;

    #[test]
    fn a_file_is_champsim_by_its_compression_its_name_or_whole_records() {
        let d = std::env::temp_dir().join(format!("mmsim-detect-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let case = |name: &str, bytes: &[u8]| {
            let p = d.join(name);
            std::fs::write(&p, bytes).unwrap();
            is_champsim(&p)
        };
        assert!(!case("hello", b"hello"), "5 bytes: no whole record, no name: an mmsim trace's error");
        assert!(!case("empty", b""));
        assert!(!case("t.trace", b"MMSIMTRC\x01\0\0\0"));
        assert!(case("t.raw", &[0u8; 128]), "two whole records");
        assert!(case("t.champsimtrace", &[0u8; 130]), "named so: its reader names the cut record");
        assert!(case("t.bin", &[0x1f, 0x8b, 8, 0]), "gzip");
        assert!(case("t.bin2", b"BZh91AY&SY"), "bzip2");
        std::fs::remove_dir_all(&d).ok();
    }
}
