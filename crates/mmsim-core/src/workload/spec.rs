//! The workload format (a public contract: extend it, never break it). Parsed with serde,
//! unknown fields refused, and every error reported with the path of the field
//! (`program[2].stride: ...`).

use std::collections::BTreeMap;

use serde::de::{self, Deserializer};
use serde::Deserialize;

use super::nesting::check_nesting;
pub use super::nesting::{MAX_JSON_DEPTH, MAX_NESTING};
pub use super::spec_files::{
    check_file_name, file_key, hugetlb_file_key, CreateOp, FadviseOp, FallocateOp, FsyncOp, MemfdCreateOp, PreadOp,
    PwriteOp,
};
pub use super::spec_memcg::{CgroupSpec, CgroupWriteOp, Limit, MemoryReclaimOp, SwapKind, SwapSpec};
use crate::error::Error;
pub use crate::kernel::uapi::{Advice, FallocMode, MapFlag, MclFlag, MremapFlags, Pattern, Prot};
pub use crate::units::{SignedSize, Size};

/// A knob value: sysfs takes text; numbers and booleans are accepted too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnobValue(pub String);

impl<'de> Deserialize<'de> for KnobValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<KnobValue, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        match v {
            serde_json::Value::String(s) => Ok(KnobValue(s)),
            serde_json::Value::Number(n) => Ok(KnobValue(n.to_string())),
            serde_json::Value::Bool(b) => Ok(KnobValue(if b { "1" } else { "0" }.into())),
            _ => Err(de::Error::custom("expected a string or a number")),
        }
    }
}

fn default_name() -> String {
    "workload".into()
}
fn default_profile() -> String {
    "default".into()
}
fn default_memory() -> Size {
    Size(16 << 30)
}
fn default_cpus() -> u32 {
    1
}
fn default_prot() -> Prot {
    Prot::READ | Prot::WRITE
}
fn default_flags() -> Vec<MapFlag> {
    vec![MapFlag::Private, MapFlag::Anonymous]
}
fn default_one() -> u64 {
    1
}

/// The simulated machine.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    #[serde(default = "default_profile")]
    pub profile: String,
    #[serde(default = "default_memory")]
    pub memory: Size,
    #[serde(default = "default_cpus")]
    pub cpus: u32,
    /// Swap devices, enabled at boot in this order (none by default).
    #[serde(default)]
    pub swap: Vec<SwapSpec>,
}

impl Default for MachineSpec {
    fn default() -> Self {
        MachineSpec { profile: default_profile(), memory: default_memory(), cpus: default_cpus(), swap: Vec::new() }
    }
}

/// A workload: a machine, knob settings and the first process's program.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default)]
    pub machine: MachineSpec,
    #[serde(default)]
    pub knobs: BTreeMap<String, KnobValue>,
    /// CPU of the first process (default 0).
    #[serde(default)]
    pub cpu: Option<u64>,
    /// The first process's `start_brk`, where its heap begins (mmsim's own; default
    /// `kernel::fork::START_BRK`): page-aligned, below the mmap area.
    #[serde(default)]
    pub start_brk: Option<Size>,
    /// Memory cgroups (cgroup v2 paths below the root: `box`, `box/a`), made before the run.
    #[serde(default)]
    pub cgroups: BTreeMap<String, CgroupSpec>,
    /// The cgroup of the first process (default: the root cgroup).
    #[serde(default)]
    pub cgroup: Option<String>,
    pub program: Vec<Op>,
}

/// A location for `compare`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Loc {
    pub region: String,
    #[serde(default)]
    pub offset: Size,
}

/// One operation of a program (tagged by its `op` field).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Mmap(MmapOp),
    Munmap(MunmapOp),
    Mremap(MremapOp),
    Mlock(MlockOp),
    Munlock(MunmapOp),
    Mlockall(MlockallOp),
    Munlockall(MunlockallOp),
    Mprotect(MprotectOp),
    Madvise(MadviseOp),
    Read(ReadOp),
    Write(WriteOp),
    Compare(CompareOp),
    Loop(LoopOp),
    Fork(ForkOp),
    Wait(WaitOp),
    Exit(ExitOp),
    Snapshot(SnapshotOp),
    Set(SetOp),
    Atomic(AtomicOp),
    Fetch(FetchOp),
    Thread(ForkOp),
    Sleep(SleepOp),
    Create(CreateOp),
    Pwrite(PwriteOp),
    Pread(PreadOp),
    Fadvise(FadviseOp),
    Fsync(FsyncOp),
    Exec(ExecOp),
    Brk(BrkOp),
    MemfdCreate(MemfdCreateOp),
    Fallocate(FallocateOp),
    Replay(ReplayOp),
    MemoryReclaim(MemoryReclaimOp),
    CgroupWrite(CgroupWriteOp),
}

/// The `replay` op: the task execs the program recorded in `trace` (`mmsim record`) and
/// replays it, its forked children as processes and its threads as threads; the op after it
/// runs once the recorded process has exited. `cold`: the program's files start uncached
/// (default: each file is read into the page cache when the replay first meets it).
/// `place`: where the mappings the program let the kernel place go (`Placement`).
/// `hugepage_text`: each private executable file mapping is madvised MADV_HUGEPAGE as it is
/// mapped (mmsim's: as if the program or its loader asked for huge text; Linux's readahead
/// then builds PMD folios for it).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReplayOp {
    pub trace: String,
    #[serde(default)]
    pub cold: bool,
    #[serde(default)]
    pub place: Placement,
    #[serde(default)]
    pub hugepage_text: bool,
    #[serde(default)]
    pub format: TraceFormat,
}

/// What kind of trace a `replay` op reads.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Told from the file: mmsim's magic, else a ChampSim trace (its layout from its name:
    /// `cloudsuite` in it is CloudSuite's).
    #[default]
    Auto,
    /// `mmsim record`'s format.
    Mmsim,
    /// ChampSim's `input_instr` records (64 bytes), xz, gzip, bzip2 or raw.
    Champsim,
    /// ChampSim's `cloudsuite_instr` records (96 bytes, with address-space ids).
    Cloudsuite,
}

/// Where a replay puts a mapping the recorded program did not fix (mmap, shmat and mremap
/// without a fixed address). The recorder ran the program under Valgrind, which chose those
/// addresses itself, without the THP alignment Linux (>= 6.7) gives a 2 MiB-multiple
/// anonymous mmap or an ext4 file's mapping. Fixed mappings and the image's (the ELF
/// segments, the loader, the stack, the heap) land at their recorded addresses either way.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Where the simulated kernel's `get_unmapped_area` puts it, as Linux would have without
    /// Valgrind; the program's later addresses in it are translated (`replay::Relocs`).
    #[default]
    Kernel,
    /// At the address the recorded call returned (MAP_FIXED there): Valgrind's layout.
    Recorded,
}

/// The `brk` op: sbrk(`delta`), the C library's move of the break by `delta` bytes (negative
/// shrinks) through brk(2). The region `name` is the heap from where the break was at the
/// first `brk` op naming it (`start_brk` in a process that had no heap) to the break now.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BrkOp {
    pub name: String,
    pub delta: SignedSize,
}

/// The `exec` op: map a file's text as the ELF loader maps a PT_LOAD segment of `R E`
/// (`load_elf_binary` -> `elf_map`): private, read-only and executable, from file offset 0,
/// at the segment's alignment (`p_align`; ET_DYN's load_bias is rounded to it), or at a fixed
/// `addr` (ET_EXEC's p_vaddr, MAP_FIXED_NOREPLACE).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExecOp {
    pub file: String,
    pub name: String,
    pub text_size: Size,
    #[serde(default)]
    pub align: Option<Size>,
    #[serde(default)]
    pub addr: Option<Size>,
}

impl ExecOp {
    /// The mmap the loader makes.
    pub fn to_mmap(&self) -> MmapOp {
        MmapOp {
            name: self.name.clone(),
            size: self.text_size,
            align: self.align,
            prot: Prot::READ | Prot::EXEC,
            flags: vec![MapFlag::Private],
            addr: self.addr,
            fixed: self.addr.is_some(),
            file: Some(self.file.clone()),
            file_offset: Some(Size(0)),
        }
    }
}

/// The `mmap` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MmapOp {
    pub name: String,
    pub size: Size,
    #[serde(default)]
    pub align: Option<Size>,
    #[serde(default = "default_prot")]
    pub prot: Prot,
    #[serde(default = "default_flags")]
    pub flags: Vec<MapFlag>,
    #[serde(default)]
    pub addr: Option<Size>,
    #[serde(default)]
    pub fixed: bool,
    /// A file mapping: the file (made by `create`) and the byte offset in it (a multiple of
    /// the page size) the mapping starts at.
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub file_offset: Option<Size>,
}

/// The `munmap` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MunmapOp {
    pub region: String,
    #[serde(default)]
    pub offset: Size,
    #[serde(default)]
    pub length: Option<Size>,
}

/// The `mlock` op: mlock(2) of the range, or with `onfault` mlock2(2) with MLOCK_ONFAULT
/// (the range is locked, not populated: pages are mlocked as they are faulted in).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MlockOp {
    pub region: String,
    #[serde(default)]
    pub offset: Size,
    #[serde(default)]
    pub length: Option<Size>,
    #[serde(default)]
    pub onfault: bool,
}

impl MlockOp {
    /// Its range, as a `munmap` op's.
    pub fn range(&self) -> MunmapOp {
        MunmapOp { region: self.region.clone(), offset: self.offset, length: self.length }
    }
}

/// The `mlockall` op: mlockall(2) with the `MCL_*` its `flags` name (`current`, `future`,
/// `onfault`; at least one). Only `onfault` fails with EINVAL, as on Linux.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MlockallOp {
    pub flags: Vec<MclFlag>,
}

/// The `munlockall` op: munlockall(2).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MunlockallOp {}

/// The `mremap` op: mremap(2) of the region's range [`offset`, `offset` + `length`) (the
/// whole region by default) to `size` bytes: MREMAP_MAYMOVE unless `maymove` is false (it
/// moves if it cannot grow in place), MREMAP_FIXED to `addr` with `fixed`, MREMAP_DONTUNMAP
/// with `dontunmap` (the old range stays mapped and empty). With `name`, that name denotes
/// the range at its new place and the region is left as it was; without, a whole-region
/// mremap makes the region name the mapping at its new place, and a partial one leaves the
/// region as it was, but for an in-place resize of its last bytes.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MremapOp {
    pub region: String,
    pub size: Size,
    #[serde(default)]
    pub offset: Size,
    #[serde(default)]
    pub length: Option<Size>,
    #[serde(default)]
    pub addr: Option<Size>,
    #[serde(default)]
    pub fixed: bool,
    #[serde(default = "default_maymove")]
    pub maymove: bool,
    #[serde(default)]
    pub dontunmap: bool,
    #[serde(default)]
    pub name: Option<String>,
}

fn default_maymove() -> bool {
    true
}

impl MremapOp {
    /// Its `MREMAP_*` flags.
    pub fn flags(&self) -> MremapFlags {
        let mut f = MremapFlags::empty();
        f.set(MremapFlags::MAYMOVE, self.maymove);
        f.set(MremapFlags::FIXED, self.fixed);
        f.set(MremapFlags::DONTUNMAP, self.dontunmap);
        f
    }
}

/// The `mprotect` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MprotectOp {
    pub region: String,
    #[serde(default)]
    pub offset: Size,
    #[serde(default)]
    pub length: Option<Size>,
    pub prot: Prot,
}

/// The `madvise` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MadviseOp {
    pub region: String,
    #[serde(default)]
    pub offset: Size,
    #[serde(default)]
    pub length: Option<Size>,
    pub advice: Advice,
}

/// The range of a `read`, `write` or `fetch` and how it is walked: one declaration the three
/// share.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessRange {
    pub region: String,
    pub offset: Size,
    pub length: Option<Size>,
    pub stride: Option<Size>,
    /// Bytes touched at each `stride` step, one access every `block_stride` bytes (pft -c:
    /// `block` = lines x 128, `block_stride` = 128); a block stops at its page's end. Without
    /// it, one access per step. (`read` and `write` only.)
    pub block: Option<Size>,
    /// The step inside a `block` (default 64 bytes).
    pub block_stride: Option<Size>,
    /// `sequential` (the default: every `stride` from `offset` on) or `random`: `count`
    /// accesses, each to one of the range's `stride`-sized slots drawn uniformly
    /// (splitmix64 from `seed`, restarted each time the op runs, as the native runner does).
    pub pattern: Pattern,
    pub count: Option<u64>,
    pub seed: Option<u64>,
}

/// Declares an access op: its fields as the workload spells them (parsed with unknown
/// fields refused) and its typed form, an `AccessRange` and the op's own field.
macro_rules! access_op {
    ($(#[$m:meta])* $name:ident, $raw:ident = $rawstr:literal, { $($block:ident)? }, $($own:ident: $ty:ty)?) => {
        $(#[$m])*
        #[derive(Clone, Debug, Deserialize, PartialEq)]
        #[serde(from = $rawstr)]
        pub struct $name {
            pub range: AccessRange,
            $(pub $own: $ty,)?
        }

        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $raw {
            region: String,
            #[serde(default)]
            offset: Size,
            #[serde(default)]
            length: Option<Size>,
            #[serde(default)]
            stride: Option<Size>,
            $(
            #[serde(default)]
            $block: Option<Size>,
            #[serde(default)]
            block_stride: Option<Size>,
            )?
            #[serde(default)]
            pattern: Option<Pattern>,
            #[serde(default)]
            count: Option<u64>,
            #[serde(default)]
            seed: Option<u64>,
            $(
            #[serde(default)]
            $own: $ty,
            )?
        }

        impl From<$raw> for $name {
            fn from(r: $raw) -> $name {
                #[allow(unused_mut, unused_assignments)]
                let (mut block, mut block_stride) = (None, None);
                $( (block, block_stride) = (r.$block, r.block_stride); )?
                $name {
                    range: AccessRange {
                        region: r.region,
                        offset: r.offset,
                        length: r.length,
                        stride: r.stride,
                        block,
                        block_stride,
                        pattern: r.pattern.unwrap_or(Pattern::Sequential),
                        count: r.count,
                        seed: r.seed,
                    },
                    $($own: r.$own,)?
                }
            }
        }
    };
}

access_op!(
    /// The `read` op: `expect` checks every byte read.
    ReadOp, RawReadOp = "RawReadOp", { block }, expect: Option<u8>
);
access_op!(
    /// The `write` op: stores `value` (default 1).
    WriteOp, RawWriteOp = "RawWriteOp", { block }, value: Option<u8>
);

/// The `compare` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CompareOp {
    pub a: Loc,
    pub b: Loc,
    pub length: Size,
    #[serde(default)]
    pub expect: Option<bool>,
    /// Compare one byte every `stride` bytes, a then b at each step (`assert(*p == *q)` in a
    /// loop); without it, memcmp of every byte.
    #[serde(default)]
    pub stride: Option<Size>,
}

/// The `loop` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LoopOp {
    pub count: u64,
    pub body: Vec<Op>,
}

/// The `fork` op (and `thread`: the same fields; the new tasks share the creator's address
/// space, as clone(CLONE_VM | CLONE_THREAD) does, and `exit` of one thread leaves the others).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ForkOp {
    #[serde(default = "default_one")]
    pub count: u64,
    /// CPU of the first child (the next children take the following CPUs); default: the
    /// scheduler spreads tasks round-robin by pid.
    #[serde(default)]
    pub cpu: Option<u64>,
    #[serde(default)]
    pub program: Vec<Op>,
    /// `fork` only: the children join this cgroup (as writing their pid to its
    /// `cgroup.procs`) before they run; default: the parent's.
    #[serde(default)]
    pub cgroup: Option<String>,
}

/// The `thread` op's fields: `fork`'s but `cgroup` (a thread lives in its process's cgroup).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct ThreadOp {
    #[serde(default = "default_one")]
    count: u64,
    #[serde(default)]
    cpu: Option<u64>,
    #[serde(default)]
    program: Vec<Op>,
}

/// The `wait` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WaitOp {}

/// The `sleep` op: the task blocks for `ms` milliseconds of simulated time (nanosleep), its
/// CPU left to other tasks and kernel threads.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SleepOp {
    /// Milliseconds to sleep (nanosleep).
    #[serde(default)]
    pub ms: Option<f64>,
    /// Or sleep until this many milliseconds of simulated time since the run began
    /// (clock_nanosleep with TIMER_ABSTIME): a task already past it does not sleep.
    #[serde(default)]
    pub until_ms: Option<f64>,
}

/// The `exit` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExitOp {}

/// The `snapshot` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SnapshotOp {
    pub label: String,
}

/// The `atomic` op: `count` atomic increments (lock add) of the 8-byte word at `offset`; with
/// `hold` > 0 each is a spinlock acquire that keeps the lock `hold` cycles before releasing.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AtomicOp {
    pub region: String,
    #[serde(default)]
    pub offset: Size,
    #[serde(default = "default_one")]
    pub count: u64,
    #[serde(default)]
    pub hold: u64,
}

access_op!(
    /// The `fetch` op: run the code in a region: one instruction fetch every `stride` bytes
    /// (default 64, one cache line) through the iTLB and the L1 instruction cache. The region
    /// must be mapped executable (`prot` rx or rwx), or the fetch faults with SIGSEGV as on NX
    /// hardware.
    FetchOp, RawFetchOp = "RawFetchOp", {},
);

/// Default stride of `fetch`: one fetch per 64-byte line.
pub const DEFAULT_FETCH_STRIDE: u64 = 64;

/// The `set` op.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SetOp {
    pub knob: String,
    pub value: KnobValue,
}

/// Deserialize one op's fields, tracking the path of a bad field ("size: ...").
fn field<'de, T: Deserialize<'de>, D: Deserializer<'de>>(v: serde_json::Value) -> Result<T, D::Error> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." {
            de::Error::custom(inner)
        } else {
            de::Error::custom(format!("{FIELD_MARK}{path}: {inner}"))
        }
    })
}

/// Marks an error message that starts with a field path, so the caller can join the paths.
const FIELD_MARK: &str = "\u{1}";

/// Every op of the workload format, as its `op` field names it.
pub const OPS: &[&str] = &[
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "mlock",
    "munlock",
    "mlockall",
    "munlockall",
    "read",
    "write",
    "compare",
    "loop",
    "fork",
    "thread",
    "wait",
    "sleep",
    "exit",
    "snapshot",
    "set",
    "atomic",
    "fetch",
    "create",
    "pwrite",
    "pread",
    "fadvise",
    "fsync",
    "exec",
    "brk",
    "memfd_create",
    "fallocate",
    "replay",
    "memory_reclaim",
    "cgroup_write",
];

impl<'de> Deserialize<'de> for Op {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Op, D::Error> {
        let mut v = serde_json::Value::deserialize(d)?;
        let obj = v.as_object_mut().ok_or_else(|| de::Error::custom("an op must be an object with an \"op\" field"))?;
        let op_names = OPS.join(", ");
        let tag = match obj.remove("op") {
            Some(serde_json::Value::String(s)) => s,
            Some(_) => return Err(de::Error::custom(format!("{FIELD_MARK}op: must be a string, one of {op_names}"))),
            None => return Err(de::Error::custom(format!("missing field `op` (one of {op_names})"))),
        };
        Ok(match tag.as_str() {
            "mmap" => Op::Mmap(field::<MmapOp, D>(v)?),
            "munmap" => Op::Munmap(field::<MunmapOp, D>(v)?),
            "mremap" => Op::Mremap(field::<MremapOp, D>(v)?),
            "mlock" => Op::Mlock(field::<MlockOp, D>(v)?),
            "munlock" => Op::Munlock(field::<MunmapOp, D>(v)?),
            "mlockall" => Op::Mlockall(field::<MlockallOp, D>(v)?),
            "munlockall" => Op::Munlockall(field::<MunlockallOp, D>(v)?),
            "mprotect" => Op::Mprotect(field::<MprotectOp, D>(v)?),
            "madvise" => Op::Madvise(field::<MadviseOp, D>(v)?),
            "read" => Op::Read(field::<ReadOp, D>(v)?),
            "write" => Op::Write(field::<WriteOp, D>(v)?),
            "compare" => Op::Compare(field::<CompareOp, D>(v)?),
            "loop" => Op::Loop(field::<LoopOp, D>(v)?),
            "fork" => Op::Fork(field::<ForkOp, D>(v)?),
            "thread" => {
                let t = field::<ThreadOp, D>(v)?;
                Op::Thread(ForkOp { count: t.count, cpu: t.cpu, program: t.program, cgroup: None })
            }
            "wait" => Op::Wait(field::<WaitOp, D>(v)?),
            "sleep" => Op::Sleep(field::<SleepOp, D>(v)?),
            "exit" => Op::Exit(field::<ExitOp, D>(v)?),
            "snapshot" => Op::Snapshot(field::<SnapshotOp, D>(v)?),
            "atomic" => Op::Atomic(field::<AtomicOp, D>(v)?),
            "fetch" => Op::Fetch(field::<FetchOp, D>(v)?),
            "set" => Op::Set(field::<SetOp, D>(v)?),
            "create" => Op::Create(field::<CreateOp, D>(v)?),
            "pwrite" => Op::Pwrite(field::<PwriteOp, D>(v)?),
            "pread" => Op::Pread(field::<PreadOp, D>(v)?),
            "fadvise" => Op::Fadvise(field::<FadviseOp, D>(v)?),
            "fsync" => Op::Fsync(field::<FsyncOp, D>(v)?),
            "exec" => Op::Exec(field::<ExecOp, D>(v)?),
            "brk" => Op::Brk(field::<BrkOp, D>(v)?),
            "memfd_create" => Op::MemfdCreate(field::<MemfdCreateOp, D>(v)?),
            "fallocate" => Op::Fallocate(field::<FallocateOp, D>(v)?),
            "replay" => Op::Replay(field::<ReplayOp, D>(v)?),
            "memory_reclaim" => Op::MemoryReclaim(field::<MemoryReclaimOp, D>(v)?),
            "cgroup_write" => Op::CgroupWrite(field::<CgroupWriteOp, D>(v)?),
            other => {
                return Err(de::Error::custom(format!(
                    "{FIELD_MARK}op: unknown op {other:?} (expected one of {op_names})"
                )))
            }
        })
    }
}

/// Default step inside a `block` of `read` and `write`: one 64-byte line.
pub const DEFAULT_BLOCK_STRIDE: u64 = 64;
/// Default stride of `read` and `write`: one access per 4 KiB page, as the seeds' tests do.
pub const DEFAULT_STRIDE: u64 = 4096;
/// Default byte a `write` stores.
pub const DEFAULT_VALUE: u8 = 1;

/// Parse and validate a workload; the error names the field.
pub fn parse_workload(text: &str) -> Result<Workload, Error> {
    check_nesting(text)?;
    let mut de = serde_json::Deserializer::from_str(text);
    // check_nesting bounds the depth the parser recurses to (MAX_JSON_DEPTH, below the stack's
    // limits), in place of serde_json's own limit of 128, which MAX_NESTING levels pass.
    de.disable_recursion_limit();
    let de = &mut de;
    let w: Workload = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let inner = inner.split(" at line ").next().unwrap_or(&inner).to_string();
        if let Some(rest) = inner.strip_prefix(FIELD_MARK) {
            Error::Workload(format!("{path}.{rest}"))
        } else if path == "." || path.is_empty() {
            Error::Workload(inner)
        } else {
            Error::Workload(format!("{path}: {inner}"))
        }
    })?;
    super::spec_check::validate(&w)?;
    Ok(w)
}

/// A closed vocabulary's word in the workload: parsed once into its type, or an error saying
/// what the words are.
macro_rules! word_deserialize {
    ($ty:ty, $parse:expr, $msg:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                let w = String::deserialize(d)?;
                let parse: fn(&str) -> Option<$ty> = $parse;
                let msg: fn(&str) -> String = $msg;
                parse(&w).ok_or_else(|| de::Error::custom(msg(&w)))
            }
        }
    };
}

word_deserialize!(Prot, Prot::from_word, |w| {
    format!("{w:?} is not none or a combination of r, w and x in that order (r, w, x, rw, rx, wx, rwx)")
});
word_deserialize!(MapFlag, MapFlag::from_word, |w| format!("unknown flag {w:?} (expected {})", MapFlag::words()));
word_deserialize!(Advice, Advice::from_word, |w| format!("{w:?} is not one of {}", Advice::words()));
word_deserialize!(MclFlag, MclFlag::from_word, |w| format!("unknown flag {w:?} (expected {})", MclFlag::words()));
word_deserialize!(FallocMode, FallocMode::from_word, |w| {
    format!("unknown mode {w:?} (expected {})", FallocMode::words())
});
word_deserialize!(Pattern, Pattern::from_word, |w| format!("{w:?} is not one of {}", Pattern::words()));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_example() {
        let w = parse_workload(
            r#"{"name":"hzp-rss","machine":{"profile":"default","memory":"16G","cpus":1},
            "knobs":{"transparent_hugepage/enabled":"always","transparent_hugepage/use_zero_page":1},
            "program":[{"op":"mmap","name":"p","size":"200M","align":"2M","prot":"rw","flags":["private","anonymous"]},
            {"op":"madvise","region":"p","advice":"hugepage"},
            {"op":"read","region":"p","offset":0,"length":"200M","stride":4096},
            {"op":"snapshot","label":"after-read"}]}"#,
        )
        .unwrap();
        assert_eq!(w.program.len(), 4);
        assert_eq!(w.machine.memory, Size(16 << 30));
    }

    /// A workload whose second op is `depth` loop, fork and thread ops one inside another
    /// (in turn, or loops only), the innermost reading `p`.
    fn nested_ops(depth: usize, loops_only: bool) -> String {
        let mut op = r#"{"op":"read","region":"p"}"#.to_string();
        for d in 0..depth {
            op = match if loops_only { 0 } else { d % 3 } {
                0 => format!(r#"{{"op":"loop","count":1,"body":[{op}]}}"#),
                1 => format!(r#"{{"op":"fork","program":[{op}]}}"#),
                _ => format!(r#"{{"op":"thread","program":[{op},{{"op":"wait"}}]}}"#),
            };
        }
        format!(r#"{{"program":[{{"op":"mmap","name":"p","size":4096,"flags":["private","anonymous"]}},{op}]}}"#)
    }

    fn nested(depth: usize) -> String {
        nested_ops(depth, false)
    }

    #[test]
    fn nesting_is_bounded_and_the_error_names_the_field() {
        let w = parse_workload(&nested(MAX_NESTING)).expect("64 levels are allowed");
        assert_eq!(w.program.len(), 2);
        // The 65th level is refused by the scan of the text, however deep the rest goes.
        let want = |depth: usize| {
            // The outermost op is level 1; the op at level 65 is named.
            let mut p = "program[1]".to_string();
            for d in (depth - MAX_NESTING..depth).rev() {
                p += if d % 3 == 0 { ".body[0]" } else { ".program[0]" };
            }
            format!("workload: {p}: nesting deeper than 64 levels (loop, fork, thread)")
        };
        for depth in [MAX_NESTING + 1, 3000] {
            assert_eq!(parse_workload(&nested(depth)).unwrap_err().to_string(), want(depth), "depth {depth}");
        }
        // Loops only (the issue's input): a run of one step is written once, with its count.
        assert_eq!(
            parse_workload(&nested_ops(3000, true)).unwrap_err().to_string(),
            "workload: program[1](.body[0] x64): nesting deeper than 64 levels (loop, fork, thread)"
        );
        // Deep arrays anywhere else: refused before the parser recurses.
        let deep = format!(r#"{{"name":{}1{},"program":[]}}"#, "[".repeat(3000), "]".repeat(3000));
        let e = parse_workload(&deep).unwrap_err().to_string();
        assert_eq!(e, "workload: name[0]([0] x134): nested deeper than 136 levels of arrays and objects");
        let e = parse_workload(&"[".repeat(100_000)).unwrap_err().to_string();
        assert_eq!(e, "workload: ([0] x136): nested deeper than 136 levels of arrays and objects");
        // A key spelled with escapes is not seen by the scan; validation counts the levels.
        let escaped = nested(MAX_NESTING + 1).replace(r#""body""#, r#""bo\u0064y""#);
        assert_eq!(parse_workload(&escaped).unwrap_err().to_string(), want(MAX_NESTING + 1));
        // Strings holding brackets and quotes do not count.
        let w = parse_workload(r#"{"name":"[[{{\"]","program":[{"op":"snapshot","label":"{[\\"}]}"#).unwrap();
        assert_eq!(w.name, "[[{{\"]");
    }

    #[test]
    fn the_deepest_workload_parses_on_a_small_stack() {
        // 64 levels of ops parse and validate within 256 KiB of stack (a thread's default is 2 MiB).
        let text = nested(MAX_NESTING);
        let t = std::thread::Builder::new().stack_size(256 << 10).spawn(move || parse_workload(&text).is_ok());
        assert!(t.expect("spawn").join().expect("no stack overflow"));
    }

    #[test]
    fn errors_name_the_field() {
        let mm = r#"{"op":"mmap","name":"p","size":4096}"#;
        let e =
            parse_workload(&format!(r#"{{"program":[{mm},{{"op":"write","region":"p","block":0}}]}}"#)).unwrap_err();
        assert_eq!(e.to_string(), "workload: program[1].block: must be greater than 0");
        let e = parse_workload(&format!(r#"{{"program":[{mm},{{"op":"read","region":"p","block_stride":8}}]}}"#))
            .unwrap_err();
        assert_eq!(e.to_string(), "workload: program[1].block_stride: needs a block");
        let e = parse_workload(r#"{"program":[{"op":"mmap","name":"p","size":"12Q"}]}"#).unwrap_err();
        assert!(e.to_string().contains("program[0].size"), "{e}");
        let e = parse_workload(r#"{"program":[{"op":"mmap","name":"p","size":4096,"bogus":1}]}"#).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = parse_workload(r#"{"program":[{"op":"read","region":"q"}]}"#).unwrap_err();
        assert!(e.to_string().contains("program[0].region"), "{e}");
        let e = parse_workload(r#"{"knobs":{"nope":1},"program":[]}"#).unwrap_err();
        assert!(e.to_string().contains("knobs.nope"), "{e}");
        let e = parse_workload(
            r#"{"program":[{"op":"loop","count":0,"body":[{"op":"mmap","name":"p","size":4096}]},
            {"op":"read","region":"p"}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("program[1].region"), "{e}");
        let e = parse_workload(r#"{"program":[{"op":"mlockall","flags":[]}]}"#).unwrap_err();
        assert_eq!(e.to_string(), "workload: program[0].flags: must name at least one of current, future, onfault");
        let e = parse_workload(r#"{"program":[{"op":"mlockall","flags":["now"]}]}"#).unwrap_err();
        assert!(e.to_string().contains("program[0].flags") && e.to_string().contains("\"now\""), "{e}");
        let e = parse_workload(r#"{"program":[{"op":"munlockall","flags":["current"]}]}"#).unwrap_err();
        assert!(e.to_string().contains("flags"), "{e}");
        let e =
            parse_workload(&format!(r#"{{"program":[{mm},{{"op":"mlock","region":"p","onfault":1}}]}}"#)).unwrap_err();
        assert!(e.to_string().contains("program[1].onfault"), "{e}");
        let w = parse_workload(&format!(
            r#"{{"program":[{mm},{{"op":"mlock","region":"p","onfault":true}},{{"op":"mlockall","flags":["current","onfault"]}},{{"op":"munlockall"}}]}}"#
        ))
        .unwrap();
        assert!(matches!(&w.program[1], Op::Mlock(MlockOp { onfault: true, .. })));
        assert!(
            matches!(&w.program[2], Op::Mlockall(MlockallOp { flags }) if flags == &[MclFlag::Current, MclFlag::OnFault])
        );
        let e = parse_workload(r#"{"program":[{"op":"jump"}]}"#).unwrap_err();
        assert!(e.to_string().contains("jump"), "{e}");
        let e = parse_workload(r#"{"program":[{"op":"fork","program":[{"op":"write","region":"x","stride":0}]}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("program[0].program[0]"), "{e}");
    }
}
