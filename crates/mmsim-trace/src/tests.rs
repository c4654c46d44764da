//! Round trips of every record type, and corrupted traces.

use super::*;

fn header() -> Header {
    Header {
        arch: "x86_64".into(),
        page_size: 4096,
        command: vec!["prog".into(), "arg".into()],
        kernel_release: "6.18.0".into(),
        recorder: "test".into(),
        extra: Default::default(),
    }
}

const FILE: FileInfo<'static> =
    FileInfo { mode: 0o100644, size: 12345, dev: 2049, ino: 77, pos: 4096, path: b"/tmp/data" };

/// One record of each type, with sizes power of two and not, and negative deltas.
fn sample() -> Vec<Record<'static>> {
    vec![
        Record::Proc { how: 0, parent: 1 },
        Record::Map { start: 0x400000, len: 0x2000, prot: 5, kind: 1, offset: 0, file: FILE },
        Record::Map {
            start: 0x7ffd0000,
            len: 0x21000,
            prot: 3,
            kind: 3,
            offset: 0,
            file: FileInfo { pos: -1, ..Default::default() },
        },
        Record::Run { pc: 0x401000, bytes: 17, instrs: 5 },
        Record::Run { pc: 0x400f00, bytes: 3, instrs: 1 },
        Record::Load { addr: 0x7ffd0010, size: 8 },
        Record::Store { addr: 0x7ffd0008, size: 1 },
        Record::Load { addr: 0x1000, size: 10 },
        Record::Store { addr: u64::MAX - 7, size: 64 },
        Record::Store { addr: 0x5000, size: 512 },
        Record::Syscall { nr: 9, args: [0, 8192, 3, 2, 3, 0], result: 0x7f0000000000, file: FILE },
        Record::Syscall {
            nr: 11,
            args: [1, 2, 3, 4, 5, u64::MAX],
            result: -22,
            file: FileInfo { pos: -1, ..Default::default() },
        },
        Record::Thread { tid: 4242 },
        Record::Exit { status: -9 },
    ]
}

fn write_trace(frames: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), &header(), 3).unwrap();
    for (pid, payload) in frames {
        w.frame(*pid, payload).unwrap();
    }
    let mut summary = serde_json::Map::new();
    summary.insert("exit_status".into(), 0.into());
    w.finish(summary).unwrap()
}

fn read_all(bytes: &[u8]) -> Result<Vec<(u32, String)>, TraceError> {
    let mut r = TraceReader::new(bytes, "t.trace")?;
    let mut out = Vec::new();
    r.for_each(|pid, rec| out.push((pid, format!("{rec:?}"))))?;
    Ok(out)
}

#[test]
fn every_record_type_round_trips() {
    let mut e = FrameEncoder::default();
    e.start(100);
    for r in sample() {
        e.put(&r);
    }
    let bytes = write_trace(&[(100, e.buf.clone())]);
    let got = read_all(&bytes).unwrap();
    let mut want = vec![(100, format!("{:?}", Record::Thread { tid: 100 }))];
    want.extend(sample().iter().map(|r| (100, format!("{r:?}"))));
    assert_eq!(got, want);
    let mut r = TraceReader::new(&bytes[..], "t").unwrap();
    assert_eq!(r.header, header());
    while r.next_chunk().unwrap().is_some() {}
    assert_eq!(r.summary.as_ref().unwrap()["frames"], 1);
}

#[test]
fn frames_of_several_processes_keep_their_order_and_deltas_restart() {
    let mut frames = Vec::new();
    for (pid, base) in [(1u32, 0x1000u64), (2, 0x9000), (1, 0x2000)] {
        let mut e = FrameEncoder::default();
        e.start(pid);
        e.put(&Record::Load { addr: base, size: 4 });
        frames.push((pid, e.buf.clone()));
    }
    let got = read_all(&write_trace(&frames)).unwrap();
    let loads: Vec<_> = got.iter().filter(|(_, s)| s.starts_with("Load")).collect();
    // Chunks are per process, in the order the pids first came: pid 1's two frames, then 2's.
    assert_eq!(loads.len(), 3);
    assert_eq!(loads[1], &(1, "Load { addr: 8192, size: 4 }".to_string()));
    assert_eq!(loads[2], &(2, "Load { addr: 36864, size: 4 }".to_string()));
}

/// The index at the end lists each process's chunks; a reader seeks to them to read one
/// process alone, as a replay does.
#[test]
fn the_index_reads_each_process_alone() {
    let mut frames = Vec::new();
    for i in 0..3000u64 {
        for pid in [11u32, 22] {
            let mut e = FrameEncoder::default();
            e.start(pid);
            for k in 0..400 {
                e.put(&Record::Store { addr: (u64::from(pid) << 32) | ((i * 400 + k) * 8), size: 8 });
            }
            frames.push((pid, e.buf.clone()));
        }
    }
    let bytes = write_trace(&frames);
    let mut r = TraceReader::new(std::io::Cursor::new(&bytes[..]), "t").unwrap();
    let idx = r.read_index().unwrap();
    assert_eq!(idx.processes.iter().map(|p| p.0).collect::<Vec<_>>(), vec![11, 22]);
    assert!(idx.processes[0].1.len() > 1, "several chunks each");
    for (pid, chunks) in &idx.processes {
        let mut n = 0u64;
        let mut next = u64::from(*pid) << 32;
        for &c in chunks {
            r.seek_chunk(c).unwrap();
            let chunk = r.next_chunk().unwrap().unwrap();
            assert_eq!(chunk.pid, *pid);
            for f in chunk.frames() {
                for rec in f.unwrap().records() {
                    if let Record::Store { addr, .. } = rec.unwrap() {
                        assert_eq!(addr, next, "in order");
                        next += 8;
                        n += 1;
                    }
                }
            }
        }
        assert_eq!(n, 3000 * 400);
    }
}

/// `feed` takes the recorder's stream cut anywhere, and chunks are cut at frame boundaries.
#[test]
fn a_stream_fed_in_pieces_makes_the_same_trace() {
    let mut stream = Vec::new();
    let mut e = FrameEncoder::default();
    for i in 0..2000u64 {
        e.start(7);
        for k in 0..300 {
            e.put(&Record::Load { addr: i * 4096 + k * 8, size: 8 });
        }
        stream.extend_from_slice(&(e.buf.len() as u32).to_le_bytes());
        stream.extend_from_slice(&7u32.to_le_bytes());
        stream.extend_from_slice(&e.buf);
    }
    let mut w = TraceWriter::new(Vec::new(), &header(), 1).unwrap();
    for piece in stream.chunks(977) {
        w.feed(piece).unwrap();
    }
    let bytes = w.finish(Default::default()).unwrap();
    let s = {
        let mut r = TraceReader::new(&bytes[..], "t").unwrap();
        let mut s = Stats::default();
        let mut chunks = 0;
        while let Some(c) = r.next_chunk().unwrap() {
            chunks += 1;
            for f in c.frames() {
                let f = f.unwrap();
                for rec in f.records() {
                    s.add(f.pid, &rec.unwrap());
                }
            }
        }
        assert!(chunks > 1, "more than a chunk's worth: {chunks}");
        s
    };
    assert_eq!(s.loads, 600_000);
    assert_eq!(s.footprint_4k, 2000);
    assert_eq!(s.footprint_2m, 4);
}

/// A corrupted or truncated trace gives an error naming the file and an offset, never a
/// panic and never a partial trace read as whole: 20 random offsets, each truncated, each
/// with a byte flipped.
#[test]
fn corrupted_traces_give_clear_errors() {
    let mut e = FrameEncoder::default();
    e.start(1);
    for r in sample() {
        e.put(&r);
    }
    let good = write_trace(&[(1, e.buf.clone()), (1, e.buf.clone())]);
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20 {
        let at = (next() % good.len() as u64) as usize;
        let cut = read_all(&good[..at]).expect_err("a truncated trace is an error");
        assert!(cut.to_string().starts_with("t.trace: byte "), "{cut}");
        let mut bad = good.clone();
        bad[at] ^= 1 << (next() % 8);
        // A flipped bit may land in a JSON string or a path and still read; anything else
        // must be an error with an offset, and nothing may panic.
        if let Err(err) = read_all(&bad) {
            assert!(err.to_string().starts_with("t.trace: byte "), "{err}");
        }
    }
    let e = read_all(b"not a trace at all").unwrap_err();
    assert_eq!(e.to_string(), "t.trace: byte 0: expected the magic \"MMSIMTRC\": not an mmsim trace");
    let mut v2 = good.clone();
    v2[8] = 2;
    assert_eq!(read_all(&v2).unwrap_err().to_string(), "t.trace: byte 8: version 2: this mmsim reads version 1");
}

#[test]
fn another_architecture_or_page_size_is_refused() {
    for (arch, ps, want) in [("aarch64", 4096, "architecture \"aarch64\""), ("x86_64", 16384, "page size 16384")] {
        let h = Header { arch: arch.into(), page_size: ps, ..header() };
        let bytes = TraceWriter::new(Vec::new(), &h, 1).unwrap().finish(Default::default()).unwrap();
        let e = read_all(&bytes).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

proptest::proptest! {
    /// Any sequence of loads, stores and runs survives encoding and decoding.
    #[test]
    fn accesses_round_trip(ops in proptest::collection::vec((0u8..3, proptest::num::u64::ANY, 1u32..600), 0..300)) {
        let recs: Vec<Record<'static>> = ops.iter().map(|&(k, a, s)| match k {
            0 => Record::Load { addr: a, size: s },
            1 => Record::Store { addr: a, size: s },
            _ => Record::Run { pc: a, bytes: s, instrs: s / 3 + 1 },
        }).collect();
        let mut e = FrameEncoder::default();
        e.start(9);
        for r in &recs { e.put(r); }
        let got: Vec<Record<'_>> = Records::new(&e.buf).map(|r| r.unwrap()).collect();
        proptest::prop_assert_eq!(&got[1..], &recs[..]);
    }
}

/// A repeat expands to its iterations: the run again and each access a stride on (rep movsb:
/// a load and a store), and the deltas after it count from its last access.
#[test]
fn a_repeat_expands_to_its_iterations() {
    let run = Record::Run { pc: 0x401000, bytes: 2, instrs: 1 };
    let mut e = FrameEncoder::default();
    e.start(1);
    e.put(&run);
    e.put(&Record::Load { addr: 0x1000, size: 1 });
    e.put(&Record::Store { addr: 0x9000, size: 1 });
    e.repeat(3, &[1, -1]);
    e.set_last(0x401002, 0x9000 - 3);
    e.put(&Record::Load { addr: 0x20, size: 8 });
    let got: Vec<Record<'_>> = Records::new(&e.buf).map(|r| r.unwrap()).collect();
    let mut want = vec![Record::Thread { tid: 1 }];
    for i in 0..4u64 {
        want.push(run);
        want.push(Record::Load { addr: 0x1000 + i, size: 1 });
        want.push(Record::Store { addr: 0x9000 - i, size: 1 });
    }
    want.push(Record::Load { addr: 0x20, size: 8 });
    assert_eq!(got, want);
    // A repeat with no run before it, or of another number of accesses, is an error.
    let mut bad = FrameEncoder::default();
    bad.start(1);
    bad.repeat(2, &[]);
    let e = Records::new(&bad.buf).find_map(|r| r.err()).unwrap();
    assert!(e.1.contains("a repeat of a run and 0 accesses, after no such run"), "{e:?}");
    let mut bad = FrameEncoder::default();
    bad.start(1);
    bad.put(&run);
    bad.put(&Record::Store { addr: 8, size: 8 });
    bad.repeat(2, &[8, 8]);
    assert!(Records::new(&bad.buf).any(|r| r.is_err()));
}

/// A process's stream: its records alone, in order across chunks, each with its thread (a
/// thread record inside a frame switches), stopping where its caller says and going on there.
#[test]
fn a_process_stream_reads_one_process_with_its_threads() {
    let mut frames = Vec::new();
    for i in 0..2000u64 {
        for pid in [11u32, 22] {
            let mut e = FrameEncoder::default();
            e.start(pid);
            for k in 0..300 {
                e.put(&Record::Store { addr: (u64::from(pid) << 32) | ((i * 300 + k) * 8), size: 8 });
            }
            if pid == 11 && i % 2 == 1 {
                e.put(&Record::Thread { tid: 12 });
                e.put(&Record::Load { addr: i, size: 4 });
                e.put(&Record::Thread { tid: 11 });
            }
            frames.push((pid, e.buf.clone()));
        }
    }
    let path = std::env::temp_dir().join(format!("mmsim-stream-{}.trace", std::process::id()));
    std::fs::write(&path, write_trace(&frames)).unwrap();
    let mut s = ProcessStream::open(&path, 11).unwrap();
    let (mut stores, mut loads, mut next) = (0u64, 0u64, 11u64 << 32);
    while let Some(tid) = s.tid().unwrap() {
        // Three records at a time: the stream stops inside frames and goes on.
        let mut k = 0;
        s.run(usize::MAX, |r| {
            match *r {
                Record::Store { addr, .. } => {
                    assert_eq!((tid, addr), (11, next));
                    next += 8;
                    stores += 1;
                }
                Record::Load { addr, .. } => {
                    assert_eq!((tid, addr % 2), (12, 1));
                    loads += 1;
                }
                _ => panic!("{r:?}"),
            }
            k += 1;
            k < 3
        })
        .unwrap();
    }
    assert_eq!((stores, loads), (2000 * 300, 1000));
    // Another process's records are not this one's; an unknown pid is an error naming it.
    let mut other = ProcessStream::open(&path, 22).unwrap();
    assert_eq!(other.tid().unwrap(), Some(22));
    assert_eq!(other.skip_thread().unwrap(), 2000 * 300);
    assert_eq!(other.tid().unwrap(), None);
    let e = ProcessStream::open(&path, 33).err().unwrap().to_string();
    std::fs::remove_file(&path).ok();
    assert!(e.contains("no records of process 33"), "{e}");
}
