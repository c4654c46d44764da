//! mmsim's trace format: what `mmsim record` captured of a real program (docs/trace-format.md).
//!
//! A trace is a header (magic, version, a JSON object describing the recording), then chunks
//! of zstd-compressed frames, then an end record (a JSON summary: exit status, duration). A
//! frame holds the records of one process, in order, and decodes on its own: it names its
//! thread first and its address deltas start from zero. The reader keeps one chunk in memory
//! at a time, so memory stays constant however long the trace.
//!
//! Errors name the byte offset in the file and what was expected there; a trace cut short
//! (no end record) is an error, never a partial trace presented as whole.

pub mod champsim;
mod record;
mod stats;
mod stream;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

pub use record::{FileInfo, FrameEncoder, Record, Records};
pub use stats::{syscall_name, Stats};
pub use stream::ProcessStream;

/// The first eight bytes of every trace.
pub const MAGIC: &[u8; 8] = b"MMSIMTRC";
/// The format version this crate writes and reads.
pub const VERSION: u32 = 1;
/// A chunk's tag.
const CHUNK: &[u8; 4] = b"CHNK";
/// The end record's tag.
const END: &[u8; 4] = b"END\0";
/// A frame's header: payload length and pid, little-endian u32s.
pub const FRAME_HDR: usize = 8;
/// The most a frame may hold (the recorder writes frames of at most PIPE_BUF bytes).
pub const FRAME_MAX: usize = 4096;
/// A process's chunk is cut once it holds this many bytes of frames.
const CHUNK_RAW: usize = 1 << 20;
/// At most this many bytes of frames wait, over all processes.
const BUFFERED_MAX: usize = 64 << 20;
/// A chunk's header: tag, pid, raw length, compressed length.
const CHUNK_HDR: u64 = 16;
/// The file's last 16 bytes: the end record's offset (u64), then this.
const TRAILER: &[u8; 8] = b"MMSIMIDX";
/// The largest chunk or JSON block a reader accepts (a corrupted length must not allocate
/// gigabytes).
const LIMIT: u32 = 64 << 20;

/// A trace that cannot be read: the file, the byte offset and what was expected there.
#[derive(Debug, thiserror::Error)]
#[error("{file}: byte {offset}: {what}")]
pub struct TraceError {
    pub file: String,
    pub offset: u64,
    pub what: String,
}

/// The header's description of the recording (JSON in the file; unknown keys are kept).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Header {
    /// `x86_64`: the only architecture mmsim replays.
    pub arch: String,
    pub page_size: u64,
    /// The command line recorded.
    pub command: Vec<String>,
    /// `uname -r` of the machine it was recorded on.
    pub kernel_release: String,
    /// The recorder and its version, e.g. `mmsimrec 1 (valgrind-3.19.0)`.
    pub recorder: String,
    /// Anything else the recorder said (cwd, host, start time).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// Writes a trace: the header, then frames as they come, gathered per process into chunks,
/// then the end record and the index of each process's chunks.
pub struct TraceWriter<W: Write> {
    out: W,
    /// Each process's frames not yet in a chunk, by pid, and the order pids first came in.
    bufs: BTreeMap<u32, Vec<u8>>,
    order: Vec<u32>,
    buffered: usize,
    /// Each process's chunks: their offsets in the file.
    index: BTreeMap<u32, Vec<u64>>,
    /// Bytes of a frame that arrived in part (`feed` takes any slicing of the stream).
    partial: Vec<u8>,
    pub frames: u64,
    pub raw_bytes: u64,
    pub written: u64,
    level: i32,
}

impl<W: Write> TraceWriter<W> {
    /// Start a trace with `header` (zstd `level`: 3 is zstd's default).
    pub fn new(mut out: W, header: &Header, level: i32) -> std::io::Result<Self> {
        let json = serde_json::to_vec(header).map_err(std::io::Error::other)?;
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&(json.len() as u32).to_le_bytes())?;
        out.write_all(&json)?;
        let written = 16 + json.len() as u64;
        Ok(TraceWriter {
            out,
            bufs: BTreeMap::new(),
            order: Vec::new(),
            buffered: 0,
            index: BTreeMap::new(),
            partial: Vec::new(),
            frames: 0,
            raw_bytes: 0,
            written,
            level,
        })
    }

    /// Take bytes of the recorder's frame stream, cut anywhere. A frame longer than
    /// FRAME_MAX is an error (the stream is not the recorder's).
    pub fn feed(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            if self.partial.len() < FRAME_HDR {
                let n = (FRAME_HDR - self.partial.len()).min(data.len());
                self.partial.extend_from_slice(&data[..n]);
                data = &data[n..];
                if self.partial.len() < FRAME_HDR {
                    break;
                }
            }
            let len = u32::from_le_bytes(self.partial[..4].try_into().expect("4 bytes")) as usize;
            if len > FRAME_MAX - FRAME_HDR {
                return Err(std::io::Error::other(format!(
                    "the recorder sent a frame of {len} bytes (at most {})",
                    FRAME_MAX - FRAME_HDR
                )));
            }
            let want = FRAME_HDR + len - self.partial.len();
            let n = want.min(data.len());
            self.partial.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.partial.len() == FRAME_HDR + len {
                let pid = u32::from_le_bytes(self.partial[4..8].try_into().expect("4 bytes"));
                let buf = self.bufs.entry(pid).or_insert_with(|| {
                    self.order.push(pid);
                    Vec::new()
                });
                buf.extend_from_slice(&self.partial);
                self.buffered += self.partial.len();
                let full = buf.len() >= CHUNK_RAW;
                self.partial.clear();
                self.frames += 1;
                if full {
                    self.flush_chunk(pid)?;
                } else if self.buffered > BUFFERED_MAX {
                    // Many processes, each with a little: the largest goes out.
                    let big = self.bufs.iter().max_by_key(|(_, b)| b.len()).map(|(&p, _)| p).expect("a buffer");
                    self.flush_chunk(big)?;
                }
            }
        }
        Ok(())
    }

    /// Append one whole frame of `pid` (its payload).
    pub fn frame(&mut self, pid: u32, payload: &[u8]) -> std::io::Result<()> {
        let mut hdr = [0u8; FRAME_HDR];
        hdr[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        hdr[4..].copy_from_slice(&pid.to_le_bytes());
        self.feed(&hdr)?;
        self.feed(payload)
    }

    /// Write process `pid`'s buffered frames as a chunk.
    fn flush_chunk(&mut self, pid: u32) -> std::io::Result<()> {
        let Some(raw) = self.bufs.get_mut(&pid) else { return Ok(()) };
        if raw.is_empty() {
            return Ok(());
        }
        let z = zstd::bulk::compress(raw, self.level)?;
        self.index.entry(pid).or_default().push(self.written);
        self.out.write_all(CHUNK)?;
        self.out.write_all(&pid.to_le_bytes())?;
        self.out.write_all(&(raw.len() as u32).to_le_bytes())?;
        self.out.write_all(&(z.len() as u32).to_le_bytes())?;
        self.out.write_all(&z)?;
        self.raw_bytes += raw.len() as u64;
        self.buffered -= raw.len();
        self.written += CHUNK_HDR + z.len() as u64;
        raw.clear();
        Ok(())
    }

    /// End the trace with its summary (JSON object: exit status, duration, ...), to which
    /// the index is added (`processes`: each pid with its chunks' offsets, in the order the
    /// pids first came). A frame left in part (the recorder was killed mid-write) is dropped
    /// and counted in the summary.
    pub fn finish(self, summary: serde_json::Map<String, serde_json::Value>) -> std::io::Result<W> {
        self.finish_with_summary(summary).map(|(w, _)| w)
    }

    /// As `finish`, also returning the summary as written.
    pub fn finish_with_summary(
        mut self,
        mut summary: serde_json::Map<String, serde_json::Value>,
    ) -> std::io::Result<(W, serde_json::Map<String, serde_json::Value>)> {
        for pid in self.order.clone() {
            self.flush_chunk(pid)?;
        }
        if !self.partial.is_empty() {
            summary.insert("partial_frame_bytes".into(), self.partial.len().into());
        }
        summary.insert("frames".into(), self.frames.into());
        summary.insert("raw_bytes".into(), self.raw_bytes.into());
        let procs: Vec<serde_json::Value> = self
            .order
            .iter()
            .map(|p| serde_json::json!({"pid": p, "chunks": self.index.get(p).cloned().unwrap_or_default()}))
            .collect();
        summary.insert("processes".into(), procs.into());
        let json = serde_json::to_vec(&summary).map_err(std::io::Error::other)?;
        let end_at = self.written;
        self.out.write_all(END)?;
        self.out.write_all(&(json.len() as u32).to_le_bytes())?;
        self.out.write_all(&json)?;
        self.out.write_all(&end_at.to_le_bytes())?;
        self.out.write_all(TRAILER)?;
        self.out.flush()?;
        Ok((self.out, summary))
    }
}

/// Reads a trace chunk by chunk.
pub struct TraceReader<R: Read> {
    inp: R,
    name: String,
    pub header: Header,
    /// The byte offset of the next read.
    pos: u64,
    chunk: Vec<u8>,
    comp: Vec<u8>,
    /// The summary, once the end record was read.
    pub summary: Option<serde_json::Map<String, serde_json::Value>>,
}

impl TraceReader<BufReader<File>> {
    /// Open a trace file and read its header.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let name = path.display().to_string();
        let f = File::open(path).map_err(|e| TraceError {
            file: name.clone(),
            offset: 0,
            what: format!("cannot open: {e}"),
        })?;
        TraceReader::new(BufReader::with_capacity(1 << 16, f), &name)
    }
}

impl<R: Read> TraceReader<R> {
    /// Read the header from `inp` (`name` names it in errors).
    pub fn new(mut inp: R, name: &str) -> Result<Self, TraceError> {
        let err = |offset: u64, what: String| TraceError { file: name.to_string(), offset, what };
        let mut head = [0u8; 16];
        read_exact(&mut inp, &mut head).map_err(|got| {
            if got >= 8 && &head[..8] == MAGIC {
                err(got as u64, "the file ends inside the header".into())
            } else {
                err(0, format!("expected the magic \"MMSIMTRC\": not an mmsim trace (the file has {got} bytes)"))
            }
        })?;
        if &head[..8] != MAGIC {
            return Err(err(0, "expected the magic \"MMSIMTRC\": not an mmsim trace".into()));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().expect("4"));
        if version != VERSION {
            return Err(err(8, format!("version {version}: this mmsim reads version {VERSION}")));
        }
        let len = u32::from_le_bytes(head[12..16].try_into().expect("4"));
        if len > LIMIT {
            return Err(err(12, format!("a header of {len} bytes: expected at most {LIMIT}")));
        }
        let mut json = vec![0u8; len as usize];
        read_exact(&mut inp, &mut json)
            .map_err(|got| err(16 + got as u64, format!("the file ends inside the {len}-byte header")))?;
        let header: Header =
            serde_json::from_slice(&json).map_err(|e| err(16, format!("the header is not the expected JSON: {e}")))?;
        if header.arch != "x86_64" {
            return Err(err(16, format!("a trace of architecture {:?}: mmsim replays x86_64", header.arch)));
        }
        if header.page_size != 4096 {
            return Err(err(16, format!("a trace of page size {}: mmsim replays 4096", header.page_size)));
        }
        Ok(TraceReader {
            inp,
            name: name.to_string(),
            header,
            pos: 16 + len as u64,
            chunk: Vec::new(),
            comp: Vec::new(),
            summary: None,
        })
    }

    fn err(&self, offset: u64, what: String) -> TraceError {
        TraceError { file: self.name.clone(), offset, what }
    }

    /// The next chunk's frames, or None after the end record.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, TraceError> {
        if self.summary.is_some() {
            return Ok(None);
        }
        let at = self.pos;
        let mut tag = [0u8; 8];
        read_exact(&mut self.inp, &mut tag).map_err(|got| {
            self.err(
                at + got as u64,
                "the trace ends without its end record (truncated): expected a chunk or the end".into(),
            )
        })?;
        let a = u32::from_le_bytes(tag[4..8].try_into().expect("4"));
        if &tag[..4] == END {
            self.summary = Some(self.end_record(at, a)?);
            let mut rest = [0u8; 1];
            if self.inp.read(&mut rest).map_err(|e| self.err(self.pos, e.to_string()))? > 0 {
                return Err(self.err(self.pos, "bytes after the index: expected the end of the file".into()));
            }
            return Ok(None);
        }
        if &tag[..4] != CHUNK {
            return Err(
                self.err(at, format!("expected a chunk (\"CHNK\") or the end (\"END\"), found {:02x?}", &tag[..4]))
            );
        }
        let pid = a;
        let mut lens = [0u8; 8];
        read_exact(&mut self.inp, &mut lens)
            .map_err(|got| self.err(at + 8 + got as u64, "the file ends inside a chunk header".into()))?;
        let raw = u32::from_le_bytes(lens[..4].try_into().expect("4"));
        let clen = u32::from_le_bytes(lens[4..].try_into().expect("4"));
        if raw > LIMIT || clen > LIMIT {
            return Err(
                self.err(at + 8, format!("a chunk of {raw} bytes ({clen} compressed): expected at most {LIMIT}"))
            );
        }
        self.comp.resize(clen as usize, 0);
        read_exact(&mut self.inp, &mut self.comp).map_err(|got| {
            self.err(at + 16 + got as u64, format!("the file ends inside a chunk of {clen} compressed bytes"))
        })?;
        self.chunk.clear();
        self.chunk.reserve(raw as usize);
        let n = zstd::bulk::Decompressor::new()
            .and_then(|mut d| d.decompress_to_buffer(&self.comp, &mut self.chunk))
            .map_err(|e| self.err(at + 16, format!("the chunk does not decompress: {e}")))?;
        if n != raw as usize {
            return Err(self.err(at + 16, format!("the chunk decompresses to {n} bytes, its header says {raw}")));
        }
        self.pos = at + CHUNK_HDR + clen as u64;
        Ok(Some(Chunk { data: &self.chunk, at: at + CHUNK_HDR, file: &self.name, pid }))
    }

    /// The end record at `at` (its tag read; `len`: its JSON's length) and the trailer after
    /// it, which must point back at it.
    fn end_record(&mut self, at: u64, len: u32) -> Result<serde_json::Map<String, serde_json::Value>, TraceError> {
        if len > LIMIT {
            return Err(self.err(at + 4, format!("an end record of {len} bytes: expected at most {LIMIT}")));
        }
        let mut json = vec![0u8; len as usize];
        read_exact(&mut self.inp, &mut json)
            .map_err(|got| self.err(at + 8 + got as u64, "the file ends inside the end record".into()))?;
        let v: serde_json::Value =
            serde_json::from_slice(&json).map_err(|e| self.err(at + 8, format!("the end record is not JSON: {e}")))?;
        let serde_json::Value::Object(m) = v else {
            return Err(self.err(at + 8, "the end record is not a JSON object".into()));
        };
        let t = at + 8 + len as u64;
        let mut trailer = [0u8; 16];
        read_exact(&mut self.inp, &mut trailer)
            .map_err(|got| self.err(t + got as u64, "the file ends inside its 16-byte trailer".into()))?;
        if &trailer[8..] != TRAILER || u64::from_le_bytes(trailer[..8].try_into().expect("8")) != at {
            return Err(self.err(t, format!("expected the trailer (offset {at}, \"MMSIMIDX\")")));
        }
        self.pos = t + 16;
        Ok(m)
    }

    /// Every record of the trace, in order, to `f(pid, record)`; the summary at the end.
    pub fn for_each(&mut self, mut f: impl FnMut(u32, &Record<'_>)) -> Result<(), TraceError> {
        self.try_for_each(|pid, r| {
            f(pid, r);
            true
        })
        .map(|_| ())
    }

    /// As `for_each` until `f` returns false; returns whether it read to the end.
    pub fn try_for_each(&mut self, mut f: impl FnMut(u32, &Record<'_>) -> bool) -> Result<bool, TraceError> {
        while let Some(chunk) = self.next_chunk()? {
            for fr in chunk.frames() {
                let fr = fr?;
                for r in fr.records() {
                    if !f(fr.pid, &r.map_err(|(off, what)| fr.error(off, what))?) {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }
}

/// Each process's chunks, from the end of a trace.
#[derive(Clone, Debug, Default)]
pub struct Index {
    /// Each pid, in the order it first came, with its chunks' offsets in order.
    pub processes: Vec<(u32, Vec<u64>)>,
    pub summary: serde_json::Map<String, serde_json::Value>,
}

impl<R: Read + Seek> TraceReader<R> {
    /// The summary and each process's chunks, read from the trailer and the end record
    /// without reading the chunks; the reader stays where it was.
    pub fn read_index(&mut self) -> Result<Index, TraceError> {
        let back = self.pos;
        let size = self.inp.seek(SeekFrom::End(0)).map_err(|e| self.err(0, format!("cannot seek: {e}")))?;
        let t = size.checked_sub(16).filter(|&t| t >= self.pos).ok_or_else(|| {
            self.err(size, "the trace ends without its end record (truncated): expected the trailer".into())
        })?;
        let mut trailer = [0u8; 16];
        self.inp.seek(SeekFrom::Start(t)).map_err(|e| self.err(t, format!("cannot seek: {e}")))?;
        read_exact(&mut self.inp, &mut trailer).map_err(|_| self.err(t, "cannot read the trailer".into()))?;
        if &trailer[8..] != TRAILER {
            return Err(self.err(t, "the trace ends without its trailer (truncated): expected \"MMSIMIDX\"".into()));
        }
        let at = u64::from_le_bytes(trailer[..8].try_into().expect("8"));
        if at < self.pos || at >= t {
            return Err(self.err(t, format!("the trailer points at byte {at}, outside the trace")));
        }
        self.inp.seek(SeekFrom::Start(at)).map_err(|e| self.err(at, format!("cannot seek: {e}")))?;
        let mut tag = [0u8; 8];
        read_exact(&mut self.inp, &mut tag).map_err(|_| self.err(at, "cannot read the end record".into()))?;
        if &tag[..4] != END {
            return Err(self.err(at, "expected the end record (\"END\"), where the trailer points".into()));
        }
        let summary = self.end_record(at, u32::from_le_bytes(tag[4..].try_into().expect("4")))?;
        self.pos = back;
        self.inp.seek(SeekFrom::Start(back)).map_err(|e| self.err(back, format!("cannot seek: {e}")))?;
        let bad = |what: &str| self.err(at + 8, format!("the end record's index: {what}"));
        let mut processes = Vec::new();
        for p in summary.get("processes").and_then(|v| v.as_array()).ok_or_else(|| bad("no `processes` list"))? {
            let pid = p.get("pid").and_then(|v| v.as_u64()).and_then(|v| u32::try_from(v).ok());
            let chunks = p.get("chunks").and_then(|v| v.as_array());
            let (Some(pid), Some(chunks)) = (pid, chunks) else { return Err(bad("a process without pid or chunks")) };
            let offs: Option<Vec<u64>> =
                chunks.iter().map(|c| c.as_u64().filter(|&c| c >= self.pos && c < at)).collect();
            processes.push((pid, offs.ok_or_else(|| bad("a chunk offset outside the trace"))?));
        }
        Ok(Index { processes, summary })
    }

    /// Read the chunk at `offset` (one of the index's) with the next `next_chunk`.
    pub fn seek_chunk(&mut self, offset: u64) -> Result<(), TraceError> {
        self.inp.seek(SeekFrom::Start(offset)).map_err(|e| self.err(offset, format!("cannot seek: {e}")))?;
        self.pos = offset;
        self.summary = None;
        Ok(())
    }
}

/// Fill `buf`; on a short read, the bytes read.
fn read_exact(r: &mut impl Read, buf: &mut [u8]) -> Result<(), usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => return Err(got),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(got),
        }
    }
    Ok(())
}

/// One decompressed chunk: frames of process `pid`.
pub struct Chunk<'a> {
    pub pid: u32,
    data: &'a [u8],
    /// Where its compressed bytes start in the file (errors inside it name this offset).
    at: u64,
    file: &'a str,
}

impl<'a> Chunk<'a> {
    pub fn frames(&self) -> impl Iterator<Item = Result<Frame<'a>, TraceError>> + 'a {
        let (data, at, file, cpid) = (self.data, self.at, self.file, self.pid);
        let mut off = 0usize;
        std::iter::from_fn(move || {
            if off >= data.len() {
                return None;
            }
            let err = |what: String| TraceError { file: file.to_string(), offset: at, what };
            if off + FRAME_HDR > data.len() {
                off = data.len();
                return Some(Err(err(format!("the chunk ends inside a frame header (chunk byte {off})"))));
            }
            let len = u32::from_le_bytes(data[off..off + 4].try_into().expect("4")) as usize;
            let pid = u32::from_le_bytes(data[off + 4..off + 8].try_into().expect("4"));
            let start = off + FRAME_HDR;
            if start + len > data.len() {
                off = data.len();
                return Some(Err(err(format!(
                    "a frame of {len} bytes runs past the chunk's end (chunk byte {start})"
                ))));
            }
            off = start + len;
            if pid != cpid {
                off = data.len();
                return Some(Err(err(format!("a frame of pid {pid} in a chunk of pid {cpid} (chunk byte {start})"))));
            }
            Some(Ok(Frame { pid, payload: &data[start..start + len], chunk_at: at, chunk_off: start, file }))
        })
    }
}

/// One frame: the records of one process.
pub struct Frame<'a> {
    pub pid: u32,
    pub payload: &'a [u8],
    chunk_at: u64,
    chunk_off: usize,
    file: &'a str,
}

impl<'a> Frame<'a> {
    pub fn records(&self) -> Records<'a> {
        Records::new(self.payload)
    }

    /// An error at byte `off` of the payload.
    pub fn error(&self, off: usize, what: String) -> TraceError {
        TraceError {
            file: self.file.to_string(),
            offset: self.chunk_at,
            what: format!("chunk byte {}: {what}", self.chunk_off + off),
        }
    }
}

/// Read a whole trace's statistics (`mmsim trace info`).
pub fn stats(path: &Path) -> Result<Stats, TraceError> {
    let mut r = TraceReader::open(path)?;
    let mut s = Stats::default();
    r.for_each(|pid, rec| s.add(pid, rec))?;
    s.header = r.header.clone();
    s.summary = r.summary.clone().unwrap_or_default();
    Ok(s)
}

#[cfg(test)]
mod tests;
