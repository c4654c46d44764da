//! The workload format's declaration: every op and every field the parser (`spec.rs`) accepts,
//! with its type, default and a one-line meaning. `mmsim schema` prints it and the docs'
//! Workload format page is generated from it; a test checks it against the parser both ways
//! (every declared field parses, every field the parser knows is declared), so it cannot drift.

use serde::Serialize;

/// One field of an op or object. `default` is [`REQUIRED`], `""` (absent: the op does
/// without), or the value taken when the field is left out.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FieldDecl {
    pub name: &'static str,
    /// `size` (bytes: an integer or a string with a K/M/G/T suffix), `signed size`, `int`,
    /// `bool`, `string`, `region` (a region's name), `file` (a file's name), `ops` (a list of
    /// ops), `loc` ({region, offset}), `prot` (`none` or `r`, `w`, `x` in order), `knobs`, or a
    /// vocabulary of the schema (`advice`, `map_flags`, `pattern`, `falloc_mode`) or `a|b|c`.
    #[serde(rename = "type")]
    pub ty: &'static str,
    pub default: &'static str,
    pub help: &'static str,
}

/// An op: its name (the `op` field), what it does in a line, and its fields.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OpDecl {
    pub op: &'static str,
    pub summary: &'static str,
    pub fields: &'static [FieldDecl],
}

/// A field without which the op (or object) is refused.
pub const REQUIRED: &str = "(required)";

const fn f(name: &'static str, ty: &'static str, default: &'static str, help: &'static str) -> FieldDecl {
    FieldDecl { name, ty, default, help }
}

/// The workload's top level.
pub const TOP: &[FieldDecl] = &[
    f("name", "string", "the file's name without its suffix", "shown in the report"),
    f("machine", "machine", "{}", "the simulated machine (below)"),
    f("knobs", "knobs", "{}", "knob name -> value (string, number or boolean), applied before the run (Knobs page)"),
    f("cpu", "int", "0, unpinned", "the CPU the first process runs on, pinned there (its children inherit the pin)"),
    f("start_brk", "size", "0x555555600000", "where the first process's heap (its program break) starts"),
    f("cgroups", "cgroups", "{}", "memory cgroups made before the run: path (box, box/a) -> its files (below)"),
    f("cgroup", "cgroup", "the root cgroup", "the memory cgroup the first process runs in"),
    f("program", "ops", REQUIRED, "the ops the first process runs; it ends with an implicit exit"),
];

/// `machine`.
pub const MACHINE: &[FieldDecl] = &[
    f("profile", "string", "default", "a hardware profile (Profiles page)"),
    f("memory", "size", "16G", "the machine's memory, at least 16M"),
    f("cpus", "int", "1", "CPUs, 1..4096"),
    f("swap", "swap devices", "[]", "swap devices enabled at boot, in order (below)"),
];

/// A cgroup of `cgroups`: cgroup v2's memory files, as written when it is made.
pub const CGROUP: &[FieldDecl] = &[
    f("memory.max", "limit", "max", "hard limit: over it the cgroup reclaims, then OOM-kills in itself"),
    f("memory.high", "limit", "max", "throttle limit: over it a task reclaims and sleeps before going on"),
    f("memory.low", "limit", "0", "best-effort protection from reclaim"),
    f("memory.min", "limit", "0", "hard protection from reclaim"),
    f("memory.swap.max", "limit", "max", "hard limit of its swap usage"),
    f("memory.swap.high", "limit", "max", "swap usage over which its tasks are throttled"),
    f("memory.oom.group", "bool", "false", "an OOM kill in the cgroup kills all of its tasks"),
];

/// A swap device of `machine.swap`.
pub const SWAP: &[FieldDecl] = &[
    f("size", "size", REQUIRED, "the swap area's size, 40K..512G (its first page is the header)"),
    f("kind", "file|partition", "file", "a swap file on the machine's ext4 file system, or a partition"),
    f("priority", "int", "-2, -3, ... in order", "swapon -p: higher is used first; equal ones in turn"),
];

/// A `compare` op's `a` and `b`.
pub const LOC: &[FieldDecl] =
    &[f("region", "region", REQUIRED, "the region"), f("offset", "size", "0", "the byte offset in it")];

const REGION: FieldDecl = f("region", "region", REQUIRED, "the region (named by mmap, exec or brk)");
const OFFSET: FieldDecl = f("offset", "size", "0", "where the range starts in the region");
const LENGTH: FieldDecl = f("length", "size", "to the region's end", "the range's length");
const PATTERN: FieldDecl = f("pattern", "pattern", "sequential", "the order of the accesses");
const COUNT: FieldDecl = f("count", "int", "", "with pattern random: how many accesses");
const SEED: FieldDecl = f("seed", "int", "0", "with pattern random: splitmix64's seed");
const BLOCK: FieldDecl = f("block", "size", "", "at each step, this many bytes, one every block_stride");
const BLOCK_STRIDE: FieldDecl = f("block_stride", "size", "64", "the step within a block");
const FILE: FieldDecl = f("file", "file", REQUIRED, "the file's name ([A-Za-z0-9_.-], one namespace)");
const FILE_OFFSET: FieldDecl = f("offset", "size", "0", "the byte offset in the file");
const FILE_LENGTH: FieldDecl = f("length", "size", "to the file's end", "bytes");
const PROGRAM: FieldDecl = f("program", "ops", "[]", "the ops each new task runs (then it exits)");
const CPU: FieldDecl = f("cpu", "int", "round robin", "the CPU of the first new task");

/// Every op, in the order the docs list them.
pub const OP_DECLS: &[OpDecl] = &[
    OpDecl {
        op: "mmap",
        summary: "mmap(2): map an anonymous region, or a file made by create or memfd_create",
        fields: &[
            f("name", "string", REQUIRED, "the region's name, by which later ops refer to it"),
            f("size", "size", REQUIRED, "its length"),
            f(
                "align",
                "size",
                "",
                "a power of two >= 4096, placed as user space aligns (map size + align, keep the aligned part)",
            ),
            f("prot", "prot", "rw", "PROT_* bits"),
            f(
                "flags",
                "map_flags",
                "[private, anonymous] ([private] with file)",
                "exactly one of private, shared; anonymous unless file",
            ),
            f("addr", "size", "", "a hint, or the address with fixed"),
            f("fixed", "bool", "false", "MAP_FIXED at addr"),
            f("file", "file", "", "map this file instead of anonymous memory"),
            f("file_offset", "size", "0", "the file offset mapped (a multiple of 4096)"),
        ],
    },
    OpDecl {
        op: "munmap",
        summary: "munmap(2) of a range (the whole region by default)",
        fields: &[REGION, OFFSET, LENGTH],
    },
    OpDecl {
        op: "mremap",
        summary: "mremap(2) of a range to size bytes: shrink, grow in place, or move",
        fields: &[
            REGION,
            f("size", "size", REQUIRED, "the new length"),
            OFFSET,
            LENGTH,
            f("addr", "size", "", "with fixed: MREMAP_FIXED's new address"),
            f("fixed", "bool", "false", "MREMAP_FIXED"),
            f("maymove", "bool", "true", "MREMAP_MAYMOVE"),
            f("dontunmap", "bool", "false", "MREMAP_DONTUNMAP"),
            f("name", "string", "", "a name for the range at its new place"),
        ],
    },
    OpDecl {
        op: "mprotect",
        summary: "mprotect(2): change the protection of a range",
        fields: &[REGION, OFFSET, LENGTH, f("prot", "prot", REQUIRED, "the new PROT_* bits")],
    },
    OpDecl {
        op: "madvise",
        summary: "madvise(2) of a range",
        fields: &[REGION, OFFSET, LENGTH, f("advice", "advice", REQUIRED, "the MADV_* advice")],
    },
    OpDecl {
        op: "mlock",
        summary: "mlock(2) (or mlock2 with MLOCK_ONFAULT) of a range",
        fields: &[REGION, OFFSET, LENGTH, f("onfault", "bool", "false", "MLOCK_ONFAULT: lock pages as they fault")],
    },
    OpDecl { op: "munlock", summary: "munlock(2) of a range", fields: &[REGION, OFFSET, LENGTH] },
    OpDecl {
        op: "mlockall",
        summary: "mlockall(2)",
        fields: &[f("flags", "current|future|onfault (a list)", REQUIRED, "MCL_CURRENT, MCL_FUTURE, MCL_ONFAULT")],
    },
    OpDecl { op: "munlockall", summary: "munlockall(2)", fields: &[] },
    OpDecl {
        op: "read",
        summary: "read one byte every stride bytes of a range (or a block of them)",
        fields: &[
            REGION,
            OFFSET,
            LENGTH,
            f("stride", "size", "4096", "the step between reads"),
            BLOCK,
            BLOCK_STRIDE,
            PATTERN,
            COUNT,
            SEED,
            f("expect", "int", "", "every byte read must equal this, or the run fails"),
        ],
    },
    OpDecl {
        op: "write",
        summary: "write the byte value every stride bytes of a range (or a block of them)",
        fields: &[
            REGION,
            OFFSET,
            LENGTH,
            f("stride", "size", "4096", "the step between writes"),
            BLOCK,
            BLOCK_STRIDE,
            PATTERN,
            COUNT,
            SEED,
            f("value", "int", "1", "the byte written"),
        ],
    },
    OpDecl {
        op: "compare",
        summary: "memcmp of two ranges (or one byte every stride, a then b)",
        fields: &[
            f("a", "loc", REQUIRED, "the first range's start"),
            f("b", "loc", REQUIRED, "the second range's start"),
            f("length", "size", REQUIRED, "bytes compared"),
            f("expect", "bool", "", "true: they must be equal, false: they must differ, or the run fails"),
            f("stride", "size", "", "compare one byte every stride bytes instead of every byte"),
        ],
    },
    OpDecl {
        op: "loop",
        summary: "run body count times",
        fields: &[f("count", "int", REQUIRED, "iterations"), f("body", "ops", REQUIRED, "the ops repeated")],
    },
    OpDecl {
        op: "fork",
        summary: "fork count children that run program concurrently with the parent",
        fields: &[
            f("count", "int", "1", "children"),
            CPU,
            PROGRAM,
            f("cgroup", "cgroup", "the parent's", "the memory cgroup the children are moved to"),
        ],
    },
    OpDecl {
        op: "thread",
        summary: "clone count threads (CLONE_VM) that run program in this address space",
        fields: &[f("count", "int", "1", "threads"), CPU, PROGRAM],
    },
    OpDecl { op: "wait", summary: "wait until every child and thread this task created has exited", fields: &[] },
    OpDecl {
        op: "sleep",
        summary: "block for simulated time (one of ms and until_ms)",
        fields: &[
            f("ms", "int", "", "nanosleep for this many milliseconds"),
            f("until_ms", "int", "", "clock_nanosleep(TIMER_ABSTIME) until this many ms since the run began"),
        ],
    },
    OpDecl { op: "exit", summary: "end this process", fields: &[] },
    OpDecl {
        op: "snapshot",
        summary: "record the machine's counters and every process's status now",
        fields: &[f("label", "string", REQUIRED, "the snapshot's name in the report")],
    },
    OpDecl {
        op: "set",
        summary: "change a knob mid-run, as writing to sysfs would",
        fields: &[
            f("knob", "string", REQUIRED, "the knob (Knobs page)"),
            f("value", "knob value", REQUIRED, "its new value"),
        ],
    },
    OpDecl {
        op: "atomic",
        summary: "atomic increments of an 8-byte word (a spinlock with hold)",
        fields: &[
            REGION,
            OFFSET,
            f("count", "int", "1", "increments"),
            f("hold", "int", "0", "cycles each holds the line, as a spinlock's critical section"),
        ],
    },
    OpDecl {
        op: "fetch",
        summary: "run code: an instruction fetch every stride bytes through the iTLB and L1i",
        fields: &[REGION, OFFSET, LENGTH, f("stride", "size", "64", "bytes of code per fetch"), PATTERN, COUNT, SEED],
    },
    OpDecl {
        op: "create",
        summary: "open(F, O_CREAT | O_TRUNC): an ext4 file that reads as zeroes, or a sparse tmpfs one",
        fields: &[FILE, f("size", "size", REQUIRED, "its size"), f("fs", "ext4|tmpfs", "ext4", "the file system")],
    },
    OpDecl {
        op: "pwrite",
        summary: "write() calls of chunk bytes of value at successive offsets",
        fields: &[
            FILE,
            FILE_OFFSET,
            FILE_LENGTH,
            f("chunk", "size", "4096", "bytes a call"),
            f("value", "int", "1", "the byte written"),
        ],
    },
    OpDecl {
        op: "pread",
        summary: "read() calls of chunk bytes, with Linux's readahead",
        fields: &[
            FILE,
            FILE_OFFSET,
            FILE_LENGTH,
            f("chunk", "size", "4096", "bytes a call"),
            f("expect", "int", "", "every byte read must equal this"),
        ],
    },
    OpDecl {
        op: "fadvise",
        summary: "posix_fadvise: dontneed or willneed",
        fields: &[
            FILE,
            FILE_OFFSET,
            f("length", "size", "0 (to the end)", "bytes"),
            f("advice", "dontneed|willneed", REQUIRED, "POSIX_FADV_*"),
        ],
    },
    OpDecl { op: "fsync", summary: "write back every dirty folio of the file and wait", fields: &[FILE] },
    OpDecl {
        op: "exec",
        summary: "map a file's text as the ELF loader maps an R E segment",
        fields: &[
            FILE,
            f("name", "string", REQUIRED, "the region fetch runs code from"),
            f("text_size", "size", REQUIRED, "the segment's length"),
            f("align", "size", "", "the segment's alignment"),
            f("addr", "size", "", "a fixed address, as an ET_EXEC binary's p_vaddr"),
        ],
    },
    OpDecl {
        op: "brk",
        summary: "sbrk: move the program break by delta through brk(2)",
        fields: &[
            f("name", "string", REQUIRED, "the region from the first break to the break now"),
            f("delta", "signed size", REQUIRED, "bytes; negative shrinks"),
        ],
    },
    OpDecl {
        op: "memfd_create",
        summary: "memfd_create(F, MFD_CLOEXEC) and ftruncate to size",
        fields: &[FILE, f("size", "size", REQUIRED, "its size"), f("hugetlb", "bool", "false", "MFD_HUGETLB")],
    },
    OpDecl {
        op: "fallocate",
        summary: "fallocate(2) of a range of a tmpfs or hugetlbfs file",
        fields: &[
            FILE,
            FILE_OFFSET,
            f("length", "size", REQUIRED, "bytes"),
            f("mode", "falloc_mode", "[]", "FALLOC_FL_* flags"),
        ],
    },
    OpDecl {
        op: "replay",
        summary: "exec and replay a program mmsim record captured (or a ChampSim trace)",
        fields: &[
            f("trace", "file path", REQUIRED, "the trace file"),
            f("cold", "bool", "false", "the program's files start uncached"),
            f("place", "kernel|recorded", "kernel", "where the mappings the program let the kernel place go"),
            f("hugepage_text", "bool", "false", "madvise each private executable file mapping MADV_HUGEPAGE"),
            f("format", "auto|mmsim|champsim|cloudsuite", "auto", "the trace's format"),
        ],
    },
    OpDecl {
        op: "memory_reclaim",
        summary: "proactive reclaim: write bytes to a cgroup's memory.reclaim",
        fields: &[
            f("cgroup", "cgroup", "the process's", "the cgroup reclaimed from"),
            f("bytes", "size", REQUIRED, "how much to reclaim"),
            f("swappiness", "int", "vm/swappiness", "memory.reclaim's swappiness=N, 0..200"),
        ],
    },
    OpDecl {
        op: "cgroup_write",
        summary: "write one of a cgroup's memory files mid-run (memory.max, memory.high, ..., memory.reclaim)",
        fields: &[
            f("cgroup", "cgroup", REQUIRED, "the cgroup"),
            f(
                "file",
                "string",
                REQUIRED,
                "memory.max|high|low|min|swap.max|swap.high|oom.group|reclaim|peak, or cgroup.procs",
            ),
            f(
                "value",
                "knob value",
                REQUIRED,
                "what is written (memory.peak: anything, resets it; cgroup.procs: 0, this process)",
            ),
        ],
    },
];

/// The declaration as JSON: the top level, `machine`, a cgroup, a swap device, `loc` and every op.
pub fn declaration() -> serde_json::Value {
    serde_json::json!({"top": TOP, "machine": MACHINE, "cgroup": CGROUP, "swap": SWAP, "loc": LOC, "op_fields": OP_DECLS})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::spec::{parse_workload, OPS};

    /// The fields the parser knows for an object, read from its error for an unknown field
    /// ("unknown field `zzz`, expected one of `a`, `b`" / "expected `a` or `b`" / "there are
    /// no fields").
    fn parser_fields(workload: &str) -> Vec<String> {
        let e = parse_workload(workload).expect_err("zzz is not a field").to_string();
        let tail = e.split("unknown field `zzz`").nth(1).unwrap_or_else(|| panic!("unexpected error: {e}"));
        tail.split('`').skip(1).step_by(2).map(str::to_string).collect()
    }

    fn names(fields: &[FieldDecl]) -> Vec<String> {
        let mut v: Vec<String> = fields.iter().map(|f| f.name.to_string()).collect();
        v.sort();
        v
    }

    fn sorted(mut v: Vec<String>) -> Vec<String> {
        v.sort();
        v
    }

    #[test]
    fn every_op_the_parser_knows_is_declared_and_no_other() {
        let mut declared: Vec<&str> = OP_DECLS.iter().map(|o| o.op).collect();
        let mut parsed: Vec<&str> = OPS.to_vec();
        declared.sort();
        parsed.sort();
        assert_eq!(declared, parsed);
    }

    #[test]
    fn every_op_declares_exactly_the_fields_the_parser_accepts() {
        for o in OP_DECLS {
            let got = parser_fields(&format!(r#"{{"program": [{{"op": "{}", "zzz": 1}}]}}"#, o.op));
            assert_eq!(sorted(got), names(o.fields), "op {}", o.op);
        }
        assert_eq!(sorted(parser_fields(r#"{"program": [], "zzz": 1}"#)), names(TOP));
        assert_eq!(sorted(parser_fields(r#"{"program": [], "machine": {"zzz": 1}}"#)), names(MACHINE));
        let loc = r#"{"program": [{"op": "compare", "a": {"zzz": 1}, "b": {"region": "p"}, "length": 1}]}"#;
        assert_eq!(sorted(parser_fields(loc)), names(LOC));
        let cg = r#"{"program": [], "cgroups": {"box": {"zzz": 1}}}"#;
        assert_eq!(sorted(parser_fields(cg)), names(CGROUP));
        let swap = r#"{"program": [], "machine": {"swap": [{"size": "1G", "zzz": 1}]}}"#;
        assert_eq!(sorted(parser_fields(swap)), names(SWAP));
    }

    #[test]
    fn an_op_without_its_required_fields_is_refused_naming_one() {
        for o in OP_DECLS {
            let required: Vec<&str> = o.fields.iter().filter(|f| f.default == REQUIRED).map(|f| f.name).collect();
            let got = parse_workload(&format!(r#"{{"program": [{{"op": "{}"}}]}}"#, o.op));
            match (required.is_empty(), got) {
                (true, Ok(_)) => {}
                // sleep needs one of its two fields; neither is required alone.
                (true, Err(e)) => assert_eq!(o.op, "sleep", "op {} declares no required field, but: {e}", o.op),
                (false, Ok(_)) => panic!("op {} parsed without {required:?}", o.op),
                (false, Err(e)) => {
                    let e = e.to_string();
                    let missing = e.split("missing field `").nth(1).and_then(|t| t.split('`').next());
                    assert!(missing.is_some_and(|m| required.contains(&m)), "op {}: {e} (declared {required:?})", o.op);
                }
            }
        }
    }
}
