//! One process's records, read on their own: the replayer's view of a trace. A stream seeks
//! to the process's chunks through the index (so each process of a forked tree reads only its
//! own) and keeps one chunk in memory; it can stop inside a frame and go on later.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use crate::{Record, Records, TraceError, TraceReader, FRAME_HDR};

/// The records of one recorded process, in order, frame by frame; a frame names its thread
/// first and may switch threads inside (a thread record).
pub struct ProcessStream {
    reader: TraceReader<BufReader<File>>,
    pid: u32,
    /// The process's chunks (file offsets), and the next one to read.
    chunks: Vec<u64>,
    next_chunk: usize,
    /// Where the chunk held in `reader.chunk` starts in the file.
    chunk_at: u64,
    /// The next frame's offset in the chunk.
    off: usize,
    /// The current frame's payload (offsets in the chunk), its thread, and its decoder.
    frame: Option<(usize, usize, u32)>,
    dec: Records<'static>,
}

impl ProcessStream {
    /// The records of process `pid` of the trace at `path`.
    pub fn open(path: &Path, pid: u32) -> Result<ProcessStream, TraceError> {
        let mut reader = TraceReader::open(path)?;
        let index = reader.read_index()?;
        let Some((_, chunks)) = index.processes.into_iter().find(|p| p.0 == pid) else {
            return Err(reader.err(0, format!("no records of process {pid} in the trace's index")));
        };
        Ok(ProcessStream {
            reader,
            pid,
            chunks,
            next_chunk: 0,
            chunk_at: 0,
            off: 0,
            frame: None,
            dec: Records::new(&[]).suspend(),
        })
    }

    /// The recorded pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The trace's file name, as errors name it.
    pub fn file(&self) -> &str {
        &self.reader.name
    }

    fn err(&self, chunk_off: usize, what: String) -> TraceError {
        TraceError {
            file: self.reader.name.clone(),
            offset: self.chunk_at,
            what: format!("chunk byte {chunk_off}: {what}"),
        }
    }

    /// The thread whose records come next, None after the process's last record. A frame
    /// whose records are used up ends at the next `run`, so this may name a thread that has
    /// nothing left; `run` then reads nothing and the caller asks again.
    pub fn tid(&mut self) -> Result<Option<u32>, TraceError> {
        if let Some((_, _, tid)) = self.frame {
            return Ok(Some(tid));
        }
        if self.off >= self.reader.chunk.len() {
            let Some(&at) = self.chunks.get(self.next_chunk) else { return Ok(None) };
            self.next_chunk += 1;
            self.reader.seek_chunk(at)?;
            let pid = self.pid;
            let got = self.reader.next_chunk()?.map(|c| c.pid);
            if got != Some(pid) {
                let what = format!("expected a chunk of process {pid} (the index's), found {got:?}");
                return Err(self.reader.err(at, what));
            }
            self.chunk_at = at + crate::CHUNK_HDR;
            self.off = 0;
        }
        let data = &self.reader.chunk;
        let off = self.off;
        if off + FRAME_HDR > data.len() {
            return Err(self.err(off, "the chunk ends inside a frame header".into()));
        }
        let len = u32::from_le_bytes(data[off..off + 4].try_into().expect("4")) as usize;
        let pid = u32::from_le_bytes(data[off + 4..off + 8].try_into().expect("4"));
        let (start, end) = (off + FRAME_HDR, off + FRAME_HDR + len);
        if end > data.len() {
            return Err(self.err(start, format!("a frame of {len} bytes runs past the chunk's end")));
        }
        if pid != self.pid {
            return Err(self.err(start, format!("a frame of pid {pid} in a chunk of pid {}", self.pid)));
        }
        let mut recs = Records::new(&data[start..end]);
        let tid = match recs.next() {
            Some(Ok(Record::Thread { tid })) => tid,
            Some(Err((o, what))) => return Err(self.err(start + o, what)),
            _ => return Err(self.err(start, "a frame that does not begin with its thread record".into())),
        };
        self.dec = recs.suspend();
        self.off = end;
        self.frame = Some((start, end, tid));
        Ok(Some(tid))
    }

    /// Pass over the current thread's records up to the next thread's (or the end): the
    /// records a thread left after its exit. Returns how many.
    pub fn skip_thread(&mut self) -> Result<u64, TraceError> {
        let Some(tid) = self.tid()? else { return Ok(0) };
        let mut n = 0;
        while self.tid()? == Some(tid) {
            n += self.run(usize::MAX, |_| true)? as u64;
        }
        Ok(n)
    }

    /// Hand the current frame's next records (at most `max`) to `f` until it returns false or
    /// the thread changes; returns how many it was given. The frame ends when its records do
    /// (the next `tid` reads the next frame). Call after `tid` returned a thread.
    pub fn run(&mut self, max: usize, mut f: impl FnMut(&Record<'_>) -> bool) -> Result<usize, TraceError> {
        let Some((start, end, _)) = self.frame else { return Ok(0) };
        let mut recs = Records::resume(&self.dec, &self.reader.chunk[start..end]);
        let mut n = 0;
        while n < max {
            match recs.next() {
                None => {
                    self.frame = None;
                    return Ok(n);
                }
                Some(Ok(Record::Thread { tid })) => {
                    // Another thread's records from here (the recorder switched threads
                    // inside the frame): the caller asks `tid` again.
                    self.frame = Some((start, end, tid));
                    break;
                }
                Some(Ok(r)) => {
                    n += 1;
                    if !f(&r) {
                        break;
                    }
                }
                Some(Err((o, what))) => return Err(self.err(start + o, what)),
            }
        }
        self.dec = recs.suspend();
        Ok(n)
    }
}
