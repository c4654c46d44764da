//! ChampSim traces written by the project's writer in ChampSim's layout, replayed: exact faults
//! of first-touch memory under THP never and always, CloudSuite's ASIDs as processes, and the
//! errors of a truncated or corrupted trace.

use std::path::PathBuf;

use mmsim_trace::champsim::{ChampsimWriter, Compression, Instr, Layout};

use super::replay_tests::replay;
use crate::error::Error;

const TEXT: u64 = 0x40_1000;
const DATA: u64 = 0x60_0000;
const HEAP: u64 = 0x7f00_0000_0000;
const STACK: u64 = 0x7ffe_0000_0000;

/// 1,000 instructions in a 50-instruction loop: a load walking 8,000 bytes of data, a store
/// every third instruction walking 64,000 bytes of heap (a line each), and a stack load every
/// seventh walking down from STACK.
fn instrs(asid: Option<[u8; 2]>) -> Vec<Instr> {
    (0..1000u64)
        .map(|k| Instr {
            ip: TEXT + 4 * (k % 50),
            is_branch: k % 50 == 49,
            branch_taken: k % 50 == 49,
            dst: [if k % 3 == 0 { HEAP + 64 * k } else { 0 }, 0, 0, 0],
            src: [DATA + 8 * k, if k % 7 == 0 { STACK - 8 * k } else { 0 }, 0, 0],
            asid,
        })
        .collect()
}

fn write(name: &str, layout: Layout, c: Compression, v: &[Instr]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("mmsim-champ-{}-{name}", std::process::id()));
    let mut w = ChampsimWriter::create(&path, layout, c).unwrap();
    for i in v {
        w.put(i).unwrap();
    }
    w.finish().unwrap();
    path
}

#[test]
fn first_touch_memory_faults_a_page_at_a_time_without_thp() {
    let path = write("never.xz", Layout::Standard, Compression::Xz, &instrs(None));
    let r = replay(&path, "never").unwrap();
    std::fs::remove_file(&path).ok();
    assert!(r.events.is_empty(), "{:?}", r.events);
    // The text's page; 2 data pages read (the zero page); 16 heap pages written; 3 stack pages
    // read (one above STACK's 2 MiB boundary, two below).
    assert_eq!(r.processes[0].minflt, 1 + 2 + 16 + 3);
    let rep = &r.replay[0];
    assert_eq!((rep.format.as_str(), rep.compression.as_str()), ("champsim", "xz"));
    assert_eq!((rep.records, rep.instructions, rep.loads, rep.stores), (1000, 1000, 1000 + 143, 334));
    // 0x400000, 0x600000, the heap's and the stack's two 2 MiB ranges.
    assert_eq!(rep.first_touch_vmas, 5);
    assert!(rep.address_space.contains("first touch"), "{}", rep.address_space);
    assert_eq!(r.perf.get("instructions"), Some(1000.0));
}

#[test]
fn under_thp_always_each_range_is_one_fault() {
    let path = write("always.gz", Layout::Standard, Compression::Gzip, &instrs(None));
    let r = replay(&path, "always").unwrap();
    std::fs::remove_file(&path).ok();
    assert!(r.events.is_empty(), "{:?}", r.events);
    // Five 2 MiB ranges, one fault each: the heap's a huge page, the others read (the huge
    // zero page).
    assert_eq!(r.processes[0].minflt, 5);
    assert_eq!(r.vmstat.get("thp_fault_alloc"), Some(1));
    assert_eq!(r.replay[0].compression, "gzip");
}

#[test]
fn cloudsuite_asids_are_processes_taking_turns() {
    // Two address spaces, the same addresses, in runs of 100 instructions.
    let v: Vec<Instr> = instrs(None)
        .into_iter()
        .enumerate()
        .map(|(k, mut i)| {
            let a = if (k / 100) % 2 == 0 { 7 } else { 9 };
            i.asid = Some([a, a]);
            i
        })
        .collect();
    let path = write("two.cloudsuite.bz2", Layout::Cloudsuite, Compression::Bzip2, &v);
    let r = replay(&path, "never").unwrap();
    std::fs::remove_file(&path).ok();
    assert!(r.events.is_empty(), "{:?}", r.events);
    let rep = &r.replay[0];
    assert_eq!((rep.format.as_str(), rep.processes), ("champsim-cloudsuite", 2));
    assert_eq!(rep.instructions, 1000);
    // Each address space faults the pages its own instructions touch (ASID 7 runs k = 0..100,
    // 200..300, ...): 17 and 19 distinct pages, each first touched as it is used after.
    let faults: Vec<(u32, i64)> = r.processes.iter().map(|p| (p.pid, p.minflt)).collect();
    assert_eq!(faults, vec![(1, 17), (2, 19)]);
    let mut exits: Vec<u32> = rep.exit_status.iter().map(|x| x.0).collect();
    exits.sort();
    assert_eq!(exits, vec![7, 9]);
}

#[test]
fn a_truncated_champsim_trace_stops_the_run_with_the_record() {
    let path = write("cut.champsimtrace", Layout::Standard, Compression::Raw, &instrs(None));
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..64 * 500 + 10]).unwrap();
    let e = replay(&path, "never").unwrap_err();
    std::fs::remove_file(&path).ok();
    match e {
        Error::Trace(m) => assert!(m.contains("record 500") && m.contains("truncated"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_same_champsim_trace_replays_to_the_same_counters() {
    let path = write("det.xz", Layout::Standard, Compression::Xz, &instrs(None));
    let a = serde_json::to_string(&replay(&path, "always").unwrap()).unwrap();
    let b = serde_json::to_string(&replay(&path, "always").unwrap()).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(a, b);
}
