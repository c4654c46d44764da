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

/// A replay of the trace at `path` under THP `thp` (also the ChampSim tests').
pub(super) fn replay(path: &std::path::Path, thp: &str) -> Result<Report, Error> {
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

/// Where Valgrind put cc1's 2 MiB obstack chunks: not 2 MiB-aligned.
const UNALIGNED: u64 = 0x4fc_6000;
const MIB2: u64 = 2 << 20;

fn replay_placed(path: &std::path::Path, thp: &str, place: &str) -> Report {
    let w = crate::workload::spec::parse_workload(&format!(
        r#"{{"knobs": {{"transparent_hugepage/enabled": "{thp}"}},
            "program": [{{"op": "replay", "trace": {:?}, "place": "{place}"}}]}}"#,
        path.display().to_string()
    ))
    .unwrap();
    crate::sim::run(&w, &[], false).unwrap()
}

/// pid 300 maps 2 MiB of anonymous memory without a fixed address (Valgrind chose an
/// unaligned one), writes each of its pages, and exits.
fn unaligned_chunk() -> Vec<(u32, Vec<u8>)> {
    let mut e = FrameEncoder::default();
    e.start(300);
    e.put(&Record::Proc { how: 0, parent: 1 });
    sys(&mut e, 9, [0, MIB2, 3, 0x22, u64::MAX, 0], UNALIGNED as i64);
    for i in 0..512 {
        e.put(&Record::Store { addr: UNALIGNED + i * P, size: 8 });
    }
    sys(&mut e, 231, [0, 0, 0, 0, 0, 0], 0);
    vec![(300, e.buf.clone())]
}

#[test]
fn a_chunk_the_kernel_places_is_aligned_and_gets_a_huge_page() {
    let path = write("placed", &unaligned_chunk());
    let recorded = replay_placed(&path, "always", "recorded");
    let kernel = replay_placed(&path, "always", "kernel");
    std::fs::remove_file(&path).ok();
    let thp = |r: &Report| r.vmstat.get("thp_fault_alloc").unwrap();
    // At Valgrind's address no aligned 2 MiB fits in the vma: 512 small pages. Placed as Linux
    // (>= 6.7) places a 2 MiB-multiple anonymous mmap: PMD-aligned, one huge page.
    assert_eq!((recorded.processes[0].minflt, thp(&recorded)), (512, 0), "{:?}", recorded.events);
    assert_eq!((kernel.processes[0].minflt, thp(&kernel)), (1, 1), "{:?}", kernel.events);
    assert!(kernel.events.is_empty(), "{:?}", kernel.events);
    let (rr, rk) = (&recorded.replay[0], &kernel.replay[0]);
    assert_eq!((rr.relocated, rr.relocated_bytes), (0, 0));
    assert_eq!((rk.relocated, rk.relocated_bytes), (1, MIB2));
}

/// pid 400: a 2 MiB chunk at Valgrind's address; a page of it replaced MAP_FIXED; a page of it
/// unmapped; mprotect of another; MADV_DONTNEED of another; a fork whose child writes (COW)
/// and reads the chunk; exit.
fn relocated_program() -> Vec<(u32, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut e = FrameEncoder::default();
    e.start(400);
    e.put(&Record::Proc { how: 0, parent: 1 });
    sys(&mut e, 9, [0, MIB2, 3, 0x22, u64::MAX, 0], UNALIGNED as i64);
    for i in 0..8 {
        e.put(&Record::Store { addr: UNALIGNED + i * P, size: 8 });
    }
    // MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS over page 1: inside the chunk, wherever it went.
    sys(&mut e, 9, [UNALIGNED + P, P, 3, 0x32, u64::MAX, 0], (UNALIGNED + P) as i64);
    e.put(&Record::Store { addr: UNALIGNED + P, size: 8 });
    sys(&mut e, 11, [UNALIGNED + 2 * P, P, 0, 0, 0, 0], 0);
    sys(&mut e, 10, [UNALIGNED + 3 * P, P, 1, 0, 0, 0], 0);
    e.put(&Record::Load { addr: UNALIGNED + 3 * P, size: 8 });
    // MADV_DONTNEED of page 5: the child's read of it faults.
    sys(&mut e, 28, [UNALIGNED + 5 * P, P, 4, 0, 0, 0], 0);
    sys(&mut e, 57, [0; 6], 401);
    frames.push((400, e.buf.clone()));
    e.start(401);
    e.put(&Record::Proc { how: 1, parent: 400 });
    sys(&mut e, 57, [0; 6], 0);
    e.put(&Record::Store { addr: UNALIGNED + 4 * P, size: 8 });
    e.put(&Record::Load { addr: UNALIGNED + 5 * P, size: 8 });
    sys(&mut e, 231, [0; 6], 0);
    frames.push((401, e.buf.clone()));
    e.start(400);
    sys(&mut e, 61, [401, 0, 0, 0, 0, 0], 401);
    sys(&mut e, 231, [0; 6], 0);
    frames.push((400, e.buf.clone()));
    frames
}

#[test]
fn a_relocated_chunk_takes_its_fixed_maps_unmaps_and_fork_with_it() {
    let path = write("relocated", &relocated_program());
    let recorded = replay_placed(&path, "never", "recorded");
    let kernel = replay_placed(&path, "never", "kernel");
    std::fs::remove_file(&path).ok();
    // Without huge pages the placement changes no count: 8 writes and the fixed page's; the
    // child's COW of page 4 and its read of page 5, which MADV_DONTNEED emptied.
    for r in [&recorded, &kernel] {
        assert!(r.events.is_empty(), "{:?}", r.events);
        let f: Vec<(u32, i64)> = r.processes.iter().map(|p| (p.pid, p.minflt)).collect();
        assert_eq!(f, vec![(1, 9), (2, 2)]);
    }
    // The fixed page replaced the chunk's page 1 (not a page at the recorded address), and
    // the unmap and the advice took pages 2 and 5 of the chunk.
    let exit = kernel.snapshots.iter().find(|s| s.label == "exit 400").unwrap();
    let rss = exit.processes.iter().find(|p| p.pid == 1).unwrap().vm_rss;
    assert_eq!(rss, 6 * 4, "8 pages written, 2 taken: {exit:?}");
    assert_eq!(kernel.replay[0].relocated, 1);
}

#[test]
fn relocations_translate_split_and_forget_ranges() {
    use super::relocs::Relocs;
    let mut r = Relocs::default();
    assert_eq!(r.get(0x1234), 0x1234);
    r.insert(0x10_000, 0x20_000, 0x7f_0000);
    assert_eq!((r.get(0x10_008), r.get(0x1f_fff), r.get(0x20_000)), (0x7f_0008, 0x7e_ffff + 0x1_0000, 0x20_000));
    // An unmap in the middle leaves both ends where they went.
    r.remove(0x14_000, 0x15_000);
    assert_eq!((r.get(0x13_000), r.get(0x14_000), r.get(0x15_000)), (0x7f_3000, 0x14_000, 0x7f_5000));
    assert_eq!(r.pieces(0x13_000, 0x3000), vec![(0x7f_3000, 0x1000), (0x14_000, 0x1000), (0x7f_5000, 0x1000)]);
    // A range mapped again where it was recorded: identity.
    r.insert(0x10_000, 0x20_000, 0x10_000);
    assert_eq!(r.get(0x10_008), 0x10_008);
}

/// pid 500: its image's text, 4 MiB of a file at a 2 MiB-aligned address, fetched a line per
/// page over its first 2 MiB; exit.
fn big_text() -> Vec<(u32, Vec<u8>)> {
    let mut e = FrameEncoder::default();
    e.start(500);
    e.put(&Record::Proc { how: 0, parent: 1 });
    let text = FileInfo { mode: 0o100755, size: 2 * MIB2, dev: 1, ino: 7, pos: -1, path: b"/usr/bin/big" };
    e.put(&Record::Map { start: MIB2, len: 2 * MIB2, prot: 5, kind: 1, offset: 0, file: text });
    for i in 0..512 {
        e.put(&Record::Run { pc: MIB2 + i * P, bytes: 64, instrs: 16 });
    }
    sys(&mut e, 231, [0, 0, 0, 0, 0, 0], 0);
    vec![(500, e.buf.clone())]
}

/// A cold replay of `path` under THP `always`, its text madvised MADV_HUGEPAGE or not: cc1's
/// minor and major faults and FilePmdMapped (kB) at its exit.
fn text_replay(path: &std::path::Path, hugepage_text: bool) -> (i64, i64, i64, u64) {
    let w = crate::workload::spec::parse_workload(&format!(
        r#"{{"knobs": {{"transparent_hugepage/enabled": "always"}},
            "program": [{{"op": "replay", "trace": {:?}, "cold": true, "hugepage_text": {hugepage_text}}}]}}"#,
        path.display().to_string()
    ))
    .unwrap();
    let r = crate::sim::run(&w, &[], false).unwrap();
    assert!(r.events.is_empty(), "{:?}", r.events);
    let exit = r.snapshots.iter().find(|s| s.label == "exit 500").unwrap();
    let p = &r.processes[0];
    (p.minflt, p.majflt, exit.meminfo.get("FilePmdMapped").unwrap(), r.replay[0].hugepage_text_mappings)
}

#[test]
fn hugepage_text_madvises_the_text_and_readahead_maps_it_by_the_pmd() {
    let path = write("hugetext", &big_text());
    let small = text_replay(&path, false);
    let huge = text_replay(&path, true);
    std::fs::remove_file(&path).ok();
    // MADV_HUGEPAGE: the first fault's readahead reads the aligned 2 MiB as one PMD folio and
    // maps it by the pmd (one major fault); the other 511 fetches do not fault.
    assert_eq!(huge, (0, 1, 2048, 1));
    // Without: ptes only, from the folios readahead builds; no PMD mapping.
    assert_eq!((small.2, small.3), (0, 0));
    assert!(small.0 + small.1 > 1, "{small:?}");
}
