//! Bindings of mmsim-trace: the writer `mmsim record` feeds, `mmsim trace info` / `dump`, and
//! the Python reader (`mmsim.trace.records`).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use mmsim_trace::{FileInfo, Record, TraceError, TraceReader};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::MmsimError;

fn trace_err(e: TraceError) -> PyErr {
    MmsimError::new_err(e.to_string())
}

fn json_map(text: &str, what: &str) -> PyResult<serde_json::Map<String, serde_json::Value>> {
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        _ => Err(MmsimError::new_err(format!("{what}: expected a JSON object"))),
    }
}

/// A trace being written: `feed` it the recorder's frame stream, then `finish` it.
#[pyclass]
pub struct TraceWriter {
    inner: Option<mmsim_trace::TraceWriter<BufWriter<File>>>,
    path: String,
}

#[pymethods]
impl TraceWriter {
    #[new]
    #[pyo3(signature = (path, header_json, level = 3))]
    fn new(path: &str, header_json: &str, level: i32) -> PyResult<Self> {
        let header: mmsim_trace::Header =
            serde_json::from_str(header_json).map_err(|e| MmsimError::new_err(format!("trace header: {e}")))?;
        let f = File::create(path).map_err(|e| MmsimError::new_err(format!("{path}: cannot create: {e}")))?;
        let w = mmsim_trace::TraceWriter::new(BufWriter::with_capacity(1 << 20, f), &header, level)
            .map_err(|e| MmsimError::new_err(format!("{path}: {e}")))?;
        Ok(TraceWriter { inner: Some(w), path: path.to_string() })
    }

    /// Take bytes of the frame stream (cut anywhere).
    fn feed(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let path = self.path.clone();
        let w = self.inner.as_mut().ok_or_else(|| MmsimError::new_err(format!("{path}: the trace is finished")))?;
        py.allow_threads(|| w.feed(data)).map_err(|e| MmsimError::new_err(format!("{path}: {e}")))
    }

    /// Write the end record (`summary_json`, a JSON object); returns the summary as written
    /// with the file's size added (`trace_bytes`), as JSON.
    fn finish(&mut self, summary_json: &str) -> PyResult<String> {
        let path = self.path.clone();
        let w = self.inner.take().ok_or_else(|| MmsimError::new_err(format!("{path}: the trace is finished")))?;
        let summary = json_map(summary_json, "trace summary")?;
        let (mut out, mut summary) =
            w.finish_with_summary(summary).map_err(|e| MmsimError::new_err(format!("{path}: {e}")))?;
        out.flush().map_err(|e| MmsimError::new_err(format!("{path}: {e}")))?;
        let size = out.get_ref().metadata().map(|m| m.len()).unwrap_or(0);
        summary.remove("processes");
        summary.insert("trace_bytes".into(), size.into());
        Ok(serde_json::Value::Object(summary).to_string())
    }
}

/// What `mmsim trace info` prints, as JSON.
#[pyfunction]
pub fn trace_stats(py: Python<'_>, path: &str) -> PyResult<String> {
    if !mmsim_trace::champsim::is_mmsim_trace(Path::new(path)) {
        let s = py.allow_threads(|| mmsim_trace::champsim::champsim_stats(Path::new(path), None)).map_err(trace_err)?;
        return serde_json::to_string(&s).map_err(|e| MmsimError::new_err(e.to_string()));
    }
    let s = py.allow_threads(|| mmsim_trace::stats(Path::new(path))).map_err(trace_err)?;
    let v = serde_json::json!({
        "instructions": s.instructions,
        "runs": s.runs,
        "loads": s.loads,
        "stores": s.stores,
        "tasks": s.tasks,
        "processes": s.processes,
        "syscalls": s.syscalls,
        "footprint_4k": s.footprint_4k,
        "footprint_2m": s.footprint_2m,
        "header": s.header,
        "summary": s.summary,
    });
    Ok(v.to_string())
}

fn path_text(p: &[u8]) -> String {
    String::from_utf8_lossy(p).into_owned()
}

fn file_text(f: &FileInfo<'_>) -> String {
    if f.path.is_empty() && f.mode == 0 {
        return String::new();
    }
    let mut s = format!(" file={:?} mode={:o} size={}", path_text(f.path), f.mode, f.size);
    if f.pos >= 0 {
        s += &format!(" pos={}", f.pos);
    }
    s
}

/// One record as a line of `mmsim trace dump`.
fn dump_line(pid: u32, r: &Record<'_>) -> String {
    match *r {
        Record::Thread { tid } => format!("{pid} thread {tid}"),
        Record::Run { pc, bytes, instrs } => format!("{pid} run {pc:#x} {bytes}B {instrs}i"),
        Record::Load { addr, size } => format!("{pid} load {addr:#x} {size}"),
        Record::Store { addr, size } => format!("{pid} store {addr:#x} {size}"),
        Record::Syscall { nr, args, result, ref file } => {
            let a: Vec<String> = args.iter().map(|a| format!("{a:#x}")).collect();
            let r = if result < 0 && result > -4096 { format!("-{}", -result) } else { format!("{result:#x}") };
            format!("{pid} syscall {}({}) = {r}{}", mmsim_trace::syscall_name(nr), a.join(", "), file_text(file))
        }
        Record::Map { start, len, prot, kind, offset, ref file } => {
            let p: String =
                [(1, 'r'), (2, 'w'), (4, 'x')].iter().map(|&(b, c)| if prot & b != 0 { c } else { '-' }).collect();
            let k = ["anon", "file", "shm", "stack", "heap"].get(kind as usize).copied().unwrap_or("?");
            format!("{pid} map {start:#x}-{:#x} {p} {k} off={offset:#x}{}", start + len, file_text(file))
        }
        Record::Proc { how, parent } => {
            format!("{pid} proc {} parent={parent}", if how == 1 { "fork" } else { "image" })
        }
        Record::Exit { status } => format!("{pid} exit {status}"),
    }
}

/// Print the records of a trace as text (`mmsim trace dump`), at most `limit`; returns how
/// many were printed. A closed stdout (`| head`) ends it quietly.
#[pyfunction]
#[pyo3(signature = (path, limit = None))]
pub fn trace_dump(py: Python<'_>, path: &str, limit: Option<u64>) -> PyResult<u64> {
    if !mmsim_trace::champsim::is_mmsim_trace(Path::new(path)) {
        return py.allow_threads(|| champsim_dump(path, limit)).map_err(trace_err);
    }
    py.allow_threads(|| {
        let mut r = TraceReader::open(Path::new(path))?;
        let out = std::io::stdout();
        let mut out = BufWriter::new(out.lock());
        let mut n = 0u64;
        let max = limit.unwrap_or(u64::MAX);
        let mut closed = false;
        // Each frame names its thread first; print a thread only when it changes.
        let mut tids = std::collections::HashMap::new();
        r.try_for_each(|pid, rec| {
            if let Record::Thread { tid } = *rec {
                if tids.insert(pid, tid) == Some(tid) {
                    return true;
                }
            }
            if n >= max {
                return false;
            }
            if writeln!(out, "{}", dump_line(pid, rec)).is_err() {
                closed = true;
                return false;
            }
            n += 1;
            true
        })?;
        if !closed {
            let _ = out.flush();
        }
        Ok(n)
    })
    .map_err(trace_err)
}

/// `mmsim trace dump` of a ChampSim trace: an instruction a line (its ASID first in a
/// CloudSuite trace), with its branch and its memory operands.
fn champsim_dump(path: &str, limit: Option<u64>) -> Result<u64, TraceError> {
    let mut r = mmsim_trace::champsim::ChampsimReader::open(Path::new(path), None)?;
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    let max = limit.unwrap_or(u64::MAX);
    let mut n = 0u64;
    while n < max {
        let Some(i) = r.next_instr()? else { break };
        let mut line = match i.asid {
            Some([a, d]) => format!("asid {a}/{d} instr {:#x}", i.ip),
            None => format!("instr {:#x}", i.ip),
        };
        if i.is_branch {
            line += if i.branch_taken { " branch taken" } else { " branch not-taken" };
        }
        for &a in i.src.iter().filter(|&&a| a != 0) {
            line += &format!(" load {a:#x}");
        }
        for &a in i.dst.iter().filter(|&&a| a != 0) {
            line += &format!(" store {a:#x}");
        }
        if writeln!(out, "{line}").is_err() {
            return Ok(n);
        }
        n += 1;
    }
    let _ = out.flush();
    Ok(n)
}

/// A record with owned data, queued between chunks: pid, kind, fields, path.
struct Owned(u32, &'static str, Vec<(&'static str, i128)>, Option<String>);

fn owned(pid: u32, r: &Record<'_>) -> Owned {
    let (kind, fields, path): (&'static str, Vec<(&'static str, i128)>, Option<String>) = match *r {
        Record::Thread { tid } => ("thread", vec![("tid", tid.into())], None),
        Record::Run { pc, bytes, instrs } => {
            ("run", vec![("pc", pc.into()), ("bytes", bytes.into()), ("instrs", instrs.into())], None)
        }
        Record::Load { addr, size } => ("load", vec![("addr", addr.into()), ("size", size.into())], None),
        Record::Store { addr, size } => ("store", vec![("addr", addr.into()), ("size", size.into())], None),
        Record::Syscall { nr, args, result, ref file } => {
            let mut v = vec![("nr", nr.into()), ("result", result.into())];
            for (i, a) in args.iter().enumerate() {
                v.push((["a0", "a1", "a2", "a3", "a4", "a5"][i], (*a).into()));
            }
            v.push(("pos", file.pos.into()));
            v.push(("size", file.size.into()));
            ("syscall", v, (!file.path.is_empty()).then(|| path_text(file.path)))
        }
        Record::Map { start, len, prot, kind, offset, ref file } => (
            "map",
            vec![
                ("start", start.into()),
                ("len", len.into()),
                ("prot", prot.into()),
                ("kind", kind.into()),
                ("offset", offset.into()),
            ],
            (!file.path.is_empty()).then(|| path_text(file.path)),
        ),
        Record::Proc { how, parent } => ("proc", vec![("how", how.into()), ("parent", parent.into())], None),
        Record::Exit { status } => ("exit", vec![("status", status.into())], None),
    };
    Owned(pid, kind, fields, path)
}

/// An iterator of a trace's records as (pid, kind, fields) tuples, a chunk decoded at a time.
#[pyclass]
pub struct TraceRecords {
    reader: TraceReader<BufReader<File>>,
    queue: VecDeque<Owned>,
}

#[pymethods]
impl TraceRecords {
    #[new]
    fn new(path: &str) -> PyResult<Self> {
        let reader = TraceReader::open(Path::new(path)).map_err(trace_err)?;
        Ok(TraceRecords { reader, queue: VecDeque::new() })
    }

    /// The header, as JSON.
    fn header(&self) -> String {
        serde_json::to_string(&self.reader.header).unwrap_or_default()
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<(u32, &'static str, PyObject)>> {
        while self.queue.is_empty() {
            let Some(chunk) = self.reader.next_chunk().map_err(trace_err)? else { return Ok(None) };
            for fr in chunk.frames() {
                let fr = fr.map_err(trace_err)?;
                for rec in fr.records() {
                    let rec = rec.map_err(|(off, what)| trace_err(fr.error(off, what)))?;
                    self.queue.push_back(owned(fr.pid, &rec));
                }
            }
        }
        let Some(Owned(pid, kind, fields, path)) = self.queue.pop_front() else { return Ok(None) };
        let d = PyDict::new(py);
        for (k, v) in fields {
            d.set_item(k, v)?;
        }
        if let Some(p) = path {
            d.set_item("path", p)?;
        }
        Ok(Some((pid, kind, d.into_any().unbind())))
    }
}
