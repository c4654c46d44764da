//! Replays of traces written here (the recorder's layout, `FrameEncoder`): exact faults and
//! tasks for a recorded fork, thread, wait and exit; determinism; errors naming the byte.

use std::path::PathBuf;

use mmsim_trace::{FileInfo, FrameEncoder, Header, Record, TraceWriter};

use crate::error::Error;
use crate::report::Report;

const MMAP_AT: u64 = 0x7f00_0000_0000;
const TEXT_AT: u64 = 0x40_0000;
const STACK_TOP: u64 = 0x7ffe_0000_0000;
const P: u64 = 4096;

fn sys(e: &mut FrameEncoder, nr: u32, args: [u64; 6], result: i64) {
    e.put(&Record::Syscall { nr, args, result, file: FileInfo { pos: -1, ..Default::default() } });
}

/// A program of pid 100: its image (text from a file, a stack), a 2 MiB anonymous mmap whose
/// first 256 pages it writes, a fork (pid 101 writes one page, exits 5) it waits for, a thread
/// (tid 102 writes a page of its own and exits), then exit_group(3).
fn program() -> Vec<(u32, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut e = FrameEncoder::default();
    e.start(100);
    e.put(&Record::Proc { how: 0, parent: 1 });
    let text = FileInfo { mode: 0o100755, size: 64 * 1024, dev: 1, ino: 2, pos: -1, path: b"/bin/prog" };
    e.put(&Record::Map { start: TEXT_AT, len: 64 * 1024, prot: 5, kind: 1, offset: 0, file: text });
    e.put(&Record::Map {
        start: STACK_TOP - 2 * P,
        len: 2 * P,
        prot: 3,
        kind: 3,
        offset: 0,
        file: FileInfo::default(),
    });
    e.put(&Record::Run { pc: TEXT_AT, bytes: 64, instrs: 16 });
    // Below the recorded stack: expand_stack grows it.
    e.put(&Record::Store { addr: STACK_TOP - 3 * P + 8, size: 8 });
    sys(&mut e, 9, [0, 2 << 20, 3, 0x22, u64::MAX, 0], MMAP_AT as i64);
    frames.push((100, e.buf.clone()));
    e.start(100);
    for i in 0..256 {
        e.put(&Record::Store { addr: MMAP_AT + i * P, size: 8 });
    }
    frames.push((100, e.buf.clone()));
    e.start(100);
    sys(&mut e, 56, [17, 0, 0, 0, 0, 0], 101);
    frames.push((100, e.buf.clone()));
    // The child's records, in chunks of its own pid.
    e.start(101);
    e.put(&Record::Proc { how: 1, parent: 100 });
    sys(&mut e, 56, [17, 0, 0, 0, 0, 0], 0);
    e.put(&Record::Store { addr: MMAP_AT + 2 * P, size: 4 });
    sys(&mut e, 231, [5, 0, 0, 0, 0, 0], 0);
    frames.push((101, e.buf.clone()));
    e.start(100);
    sys(&mut e, 61, [101, 0, 0, 0, 0, 0], 101);
    // CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | ...
    sys(&mut e, 56, [0x3d0f00, 0, 0, 0, 0, 0], 102);
    // The thread runs inside the frame (a thread record switches), then the process again.
    e.put(&Record::Thread { tid: 102 });
    e.put(&Record::Store { addr: MMAP_AT + 400 * P, size: 8 });
    sys(&mut e, 60, [0, 0, 0, 0, 0, 0], 0);
    e.put(&Record::Thread { tid: 100 });
    e.put(&Record::Load { addr: MMAP_AT + 400 * P, size: 8 });
    sys(&mut e, 231, [3, 0, 0, 0, 0, 0], 0);
    frames.push((100, e.buf.clone()));
    frames
}

fn write(name: &str, frames: &[(u32, Vec<u8>)]) -> PathBuf {
    let h = Header {
        arch: "x86_64".into(),
        page_size: 4096,
        command: vec!["/bin/prog".into()],
        kernel_release: "test".into(),
        recorder: "test".into(),
        extra: Default::default(),
    };
    let mut w = TraceWriter::new(Vec::new(), &h, 1).unwrap();
    for (pid, payload) in frames {
        w.frame(*pid, payload).unwrap();
    }
    let path = std::env::temp_dir().join(format!("mmsim-replay-{}-{name}.trace", std::process::id()));
    std::fs::write(&path, w.finish(Default::default()).unwrap()).unwrap();
    path
}

fn replay(path: &std::path::Path, thp: &str) -> Result<Report, Error> {
    let w = crate::workload::spec::parse_workload(&format!(
        r#"{{"knobs": {{"transparent_hugepage/enabled": "{thp}"}},
            "program": [{{"op": "replay", "trace": {:?}}}]}}"#,
        path.display().to_string()
    ))
    .unwrap();
    crate::sim::run(&w, &[], false)
}

#[test]
fn a_recorded_fork_thread_wait_and_exit_replay_with_exact_faults() {
    let path = write("tree", &program());
    let r = replay(&path, "never").unwrap();
    std::fs::remove_file(&path).ok();
    let procs: Vec<(u32, u32, i64)> = r.processes.iter().map(|p| (p.pid, p.tgid, p.minflt)).collect();
    // The text's read fault, the stack's growth, 256 written pages; the child's COW of one; the
    // thread's one page (the process's later read of it does not fault).
    assert_eq!(procs, vec![(1, 1, 1 + 1 + 256), (2, 2, 1), (3, 1, 1)], "{:?}", r.events);
    assert!(r.events.is_empty(), "{:?}", r.events);
    let rep = &r.replay[0];
    assert_eq!((rep.processes, rep.threads), (2, 3));
    assert_eq!(rep.exit_status, vec![(101, 5), (100, 3)]);
    assert_eq!((rep.stores, rep.loads, rep.instructions), (256 + 3, 1, 16));
    assert_eq!(rep.syscalls.get("clone"), Some(&3));
    assert_eq!(rep.syscalls.get("wait4"), Some(&1));
    assert!(rep.unmodelled.is_empty(), "{:?}", rep.unmodelled);
    // Warm by default: the text was read into the page cache before the program ran.
    assert_eq!(rep.warmed_bytes, 64 * 1024);
    let labels: Vec<&str> = r.snapshots.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, vec!["execve 100", "exit 101", "exit 100"]);
}

#[test]
fn the_same_trace_replays_to_the_same_counters() {
    let path = write("determinism", &program());
    let a = serde_json::to_string(&replay(&path, "always").unwrap()).unwrap();
    let b = serde_json::to_string(&replay(&path, "always").unwrap()).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(a, b);
}

#[test]
fn thp_always_maps_the_written_range_with_huge_pages() {
    let path = write("thp", &program());
    let r = replay(&path, "always").unwrap();
    std::fs::remove_file(&path).ok();
    // One huge page for the aligned 2 MiB mmap: its first write fault maps all of it.
    assert_eq!(r.processes[0].minflt, 1 + 1 + 1, "{:?}", r.events);
}

#[test]
fn an_unmodelled_call_is_listed_with_its_count() {
    let mut frames = program();
    let mut e = FrameEncoder::default();
    e.start(100);
    e.put(&Record::Proc { how: 0, parent: 1 });
    sys(&mut e, 425, [64, 0, 0, 0, 0, 0], 3); // io_uring_setup
    sys(&mut e, 425, [64, 0, 0, 0, 0, 0], 4);
    let ring = FileInfo { mode: 0o600, size: 0, dev: 0, ino: 9, pos: -1, path: b"anon_inode:[io_uring]" };
    e.put(&Record::Syscall { nr: 9, args: [0, 3 * P, 3, 0x8001, 3, 0], result: MMAP_AT as i64, file: ring });
    e.put(&Record::Store { addr: MMAP_AT, size: 8 });
    sys(&mut e, 231, [0, 0, 0, 0, 0, 0], 0);
    frames.truncate(0);
    frames.push((100, e.buf.clone()));
    let path = write("unmodelled", &frames);
    let r = replay(&path, "never").unwrap();
    std::fs::remove_file(&path).ok();
    let u = &r.replay[0].unmodelled;
    assert_eq!(u["io_uring_setup"].count, 2);
    assert_eq!((u["mmap of anon_inode:[io_uring]"].count, u["mmap of anon_inode:[io_uring]"].bytes_mapped), (1, 3 * P));
    // The ring is anonymous memory: the program's store to it works.
    assert!(r.events.is_empty(), "{:?}", r.events);
}

#[test]
fn a_corrupted_trace_stops_the_run_with_the_byte() {
    let path = write("corrupt", &program());
    let mut bytes = std::fs::read(&path).unwrap();
    // The first chunk's compressed bytes (after the header): the run must not go on.
    let at = bytes.windows(4).position(|w| w == b"CHNK").unwrap() + 20;
    bytes[at] ^= 0xff;
    bytes[at + 1] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let e = replay(&path, "never").unwrap_err();
    std::fs::remove_file(&path).ok();
    match e {
        Error::Trace(m) => assert!(m.contains("byte") && m.contains(path.to_str().unwrap()), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_replay_under_check_is_refused() {
    let path = write("check", &program());
    let w = crate::workload::spec::parse_workload(&format!(
        r#"{{"program": [{{"op": "replay", "trace": {:?}}}]}}"#,
        path.display().to_string()
    ))
    .unwrap();
    let e = crate::sim::run(&w, &[], true).unwrap_err();
    std::fs::remove_file(&path).ok();
    assert!(e.to_string().contains("--check"), "{e}");
}
