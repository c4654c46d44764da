//! The checks of a parsed workload that span fields or depend on op order (names made before
//! use, nesting): what serde's types alone cannot say.

use super::spec::*;
use crate::error::Error;

pub(super) fn validate(w: &Workload) -> Result<(), Error> {
    let err = |path: String, msg: &str| Error::Workload(format!("{path}: {msg}"));
    if w.machine.memory.0 < 16 << 20 {
        return Err(err("machine.memory".into(), "must be at least 16M"));
    }
    if w.machine.memory.0 > 1 << 44 {
        return Err(err("machine.memory".into(), "must be at most 16T"));
    }
    if w.machine.cpus == 0 || w.machine.cpus > 4096 {
        return Err(err("machine.cpus".into(), "must be between 1 and 4096"));
    }
    if w.start_brk.is_some_and(|b| b.0 % 4096 != 0 || !(65536..(1 << 47) - (1 << 30)).contains(&b.0)) {
        return Err(err("start_brk".into(), "must be a multiple of 4096 between 64K and 128T - 1G"));
    }
    if !crate::hw::profile::names().contains(&w.machine.profile.as_str()) {
        let known = crate::hw::profile::names().join(", ");
        return Err(err(
            "machine.profile".into(),
            &format!("unknown profile {:?} (known: {known})", w.machine.profile),
        ));
    }
    let mut k = crate::kernel::knobs::Knobs::default();
    for (name, v) in &w.knobs {
        k.set(name, &v.0).map_err(|e| err(format!("knobs.{name}"), &e.to_string()))?;
    }
    super::spec_memcg::check_memcg(&w.cgroups, &w.machine.swap).map_err(|(path, m)| err(path, &m))?;
    if let Some(c) = &w.cgroup {
        check_cgroup_ref(&w.cgroups, c).map_err(|m| err("cgroup".into(), &m))?;
    }
    let mut names = Vec::new();
    validate_ops(&w.program, "program", &mut names, 0, &w.cgroups)
}

/// A cgroup an op or the top level names: declared in `cgroups`.
fn check_cgroup_ref(cgroups: &std::collections::BTreeMap<String, CgroupSpec>, name: &str) -> Result<(), String> {
    if cgroups.contains_key(name) {
        return Ok(());
    }
    let known: Vec<&str> = cgroups.keys().map(String::as_str).collect();
    Err(if known.is_empty() {
        format!("no cgroup named {name:?}: the workload declares none (top-level \"cgroups\")")
    } else {
        format!("no cgroup named {name:?} (declared: {})", known.join(", "))
    })
}

/// The strides and pattern of a `read`, `write` or `fetch`, or the field at fault and why:
/// `random` needs a `count`; `count` and `seed` belong to `random` only.
fn check_access(r: &AccessRange) -> Result<(), (&'static str, String)> {
    for (field, v) in [("stride", r.stride), ("block", r.block), ("block_stride", r.block_stride)] {
        if v.is_some_and(|s| s.0 == 0) {
            return Err((field, "must be greater than 0".into()));
        }
    }
    if r.block.is_none() && r.block_stride.is_some() {
        return Err(("block_stride", "needs a block".into()));
    }
    match r.pattern {
        Pattern::Sequential => {
            if r.count.is_some() || r.seed.is_some() {
                let field = if r.count.is_some() { "count" } else { "seed" };
                return Err((field, "belongs to pattern \"random\"".into()));
            }
        }
        Pattern::Random => {
            if r.count.is_none() {
                return Err(("count", "pattern \"random\" needs a count of accesses".into()));
            }
        }
    }
    Ok(())
}

/// Validate `ops`, which `depth` loop, fork and thread ops enclose.
fn validate_ops(
    ops: &[Op],
    path: &str,
    names: &mut Vec<String>,
    depth: usize,
    cgroups: &std::collections::BTreeMap<String, CgroupSpec>,
) -> Result<(), Error> {
    let err = |i: usize, field: &str, msg: String| Error::Workload(format!("{path}[{i}].{field}: {msg}"));
    for (i, op) in ops.iter().enumerate() {
        // What the op names must have been made by an op before it.
        for (field, name, file) in op.references() {
            let (made, what) = if file {
                (names.contains(&file_key(name)), format!("no file named {name:?} is created before this op"))
            } else {
                (names.iter().any(|n| n == name), format!("no region named {name:?} is mapped before this op"))
            };
            if !made {
                return Err(err(i, field, what));
            }
        }
        op.check_fields().map_err(|(field, msg)| err(i, field, msg))?;
        match op {
            Op::Fork(ForkOp { cgroup: Some(c), .. })
            | Op::MemoryReclaim(MemoryReclaimOp { cgroup: Some(c), .. })
            | Op::CgroupWrite(CgroupWriteOp { cgroup: c, .. }) => {
                check_cgroup_ref(cgroups, c).map_err(|m| err(i, "cgroup", m))?
            }
            Op::Thread(ForkOp { cgroup: Some(_), .. }) => {
                return Err(err(i, "cgroup", "a thread stays in its process's cgroup (only fork takes one)".into()))
            }
            _ => {}
        }
        op.check_hugetlbfs(names).map_err(|(field, msg)| err(i, field, msg))?;
        match op {
            Op::Mmap(MmapOp { name, .. })
            | Op::Exec(ExecOp { name, .. })
            | Op::Brk(BrkOp { name, .. })
            | Op::Mremap(MremapOp { name: Some(name), .. })
                if !names.contains(name) =>
            {
                names.push(name.clone())
            }
            Op::Create(CreateOp { file, .. }) => {
                names.retain(|n| n != &hugetlb_file_key(file));
                names.push(file_key(file))
            }
            Op::MemfdCreate(MemfdCreateOp { file, hugetlb, .. }) => {
                names.retain(|n| n != &hugetlb_file_key(file));
                names.push(file_key(file));
                if *hugetlb {
                    names.push(hugetlb_file_key(file));
                }
            }
            Op::Loop(_) | Op::Fork(_) | Op::Thread(_) if depth >= MAX_NESTING => {
                return Err(Error::Workload(format!(
                    "{path}[{i}]: nesting deeper than {MAX_NESTING} levels (loop, fork, thread)"
                )));
            }
            // A body that never runs maps nothing: its regions are not known after the loop.
            Op::Loop(LoopOp { body, count: 0 }) => {
                validate_ops(body, &format!("{path}[{i}].body"), &mut names.clone(), depth + 1, cgroups)?
            }
            Op::Loop(LoopOp { body, .. }) => {
                validate_ops(body, &format!("{path}[{i}].body"), names, depth + 1, cgroups)?
            }
            Op::Fork(ForkOp { program, .. }) | Op::Thread(ForkOp { program, .. }) => {
                validate_ops(program, &format!("{path}[{i}].program"), &mut names.clone(), depth + 1, cgroups)?
            }
            _ => {}
        }
    }
    Ok(())
}

impl Op {
    /// The regions and files the op names, each as (field, name, is a file).
    fn references(&self) -> Vec<(&'static str, &str, bool)> {
        match self {
            Op::Mmap(MmapOp { file: Some(f), .. }) | Op::Exec(ExecOp { file: f, .. }) => vec![("file", f, true)],
            Op::Munmap(MunmapOp { region, .. })
            | Op::Mlock(MlockOp { region, .. })
            | Op::Munlock(MunmapOp { region, .. })
            | Op::Mremap(MremapOp { region, .. })
            | Op::Mprotect(MprotectOp { region, .. })
            | Op::Madvise(MadviseOp { region, .. })
            | Op::Atomic(AtomicOp { region, .. })
            | Op::Read(ReadOp { range: AccessRange { region, .. }, .. })
            | Op::Write(WriteOp { range: AccessRange { region, .. }, .. })
            | Op::Fetch(FetchOp { range: AccessRange { region, .. } }) => vec![("region", region, false)],
            Op::Compare(CompareOp { a, b, .. }) => vec![("a.region", &a.region, false), ("b.region", &b.region, false)],
            Op::Pwrite(PwriteOp { file, .. })
            | Op::Pread(PreadOp { file, .. })
            | Op::Fadvise(FadviseOp { file, .. })
            | Op::Fsync(FsyncOp { file })
            | Op::Fallocate(FallocateOp { file, .. }) => vec![("file", file, true)],
            _ => Vec::new(),
        }
    }

    /// What mmsim does not model of a hugetlbfs file (a memfd of MFD_HUGETLB, by `names`): a
    /// private mapping of it, read(2), write(2), posix_fadvise and exec of it.
    fn check_hugetlbfs(&self, names: &[String]) -> Result<(), (&'static str, String)> {
        let hugetlbfs = |f: &str| names.contains(&hugetlb_file_key(f));
        match self {
            Op::Mmap(MmapOp { file: Some(f), flags, .. }) if hugetlbfs(f) && !flags.contains(&MapFlag::Shared) => {
                Err(("flags", format!("a private mapping of the hugetlb memfd {f:?} is not modelled (map it shared)")))
            }
            Op::Exec(ExecOp { file: f, .. })
            | Op::Pwrite(PwriteOp { file: f, .. })
            | Op::Pread(PreadOp { file: f, .. })
            | Op::Fadvise(FadviseOp { file: f, .. })
            | Op::Fsync(FsyncOp { file: f })
                if hugetlbfs(f) =>
            {
                Err(("file", format!("{f:?} is a hugetlb memfd: only mmap (shared) and fallocate are modelled")))
            }
            _ => Ok(()),
        }
    }

    /// The checks of the op's own fields that their types do not make: ranges, and fields
    /// that go together. The field at fault and why.
    fn check_fields(&self) -> Result<(), (&'static str, String)> {
        let fail = |field: &'static str, msg: &str| Err((field, msg.to_string()));
        let pow2_align = |a: &Option<Size>| a.is_some_and(|a| !a.0.is_power_of_two() || a.0 < 4096);
        match self {
            Op::Mmap(m) => return m.check_fields(),
            Op::Exec(ExecOp { text_size, align, addr, .. }) => {
                if text_size.0 == 0 || text_size.0 > 1 << 47 {
                    return fail("text_size", "must be between 1 byte and 128 TiB");
                }
                if pow2_align(align) {
                    return fail("align", "must be a power of two of at least 4096");
                }
                if addr.is_some_and(|x| x.0 % 4096 != 0) {
                    return fail("addr", "must be a multiple of the page size (4096)");
                }
            }
            Op::Mlockall(MlockallOp { flags }) if flags.is_empty() => {
                return Err(("flags", format!("must name at least one of {}", MclFlag::words())));
            }
            Op::Mremap(MremapOp { size, addr, fixed, name, .. }) => {
                if size.0 == 0 {
                    return fail("size", "must be greater than 0");
                }
                if name.as_ref().is_some_and(|n| n.is_empty()) {
                    return fail("name", "must not be empty");
                }
                if addr.is_some() != *fixed {
                    let field = if *fixed { "fixed" } else { "addr" };
                    return fail(field, "an address is given with fixed: true (MREMAP_FIXED), and only then");
                }
            }
            Op::Read(ReadOp { range, .. }) | Op::Write(WriteOp { range, .. }) | Op::Fetch(FetchOp { range }) => {
                check_access(range)?
            }
            Op::Compare(CompareOp { length, stride, .. }) => {
                if length.0 == 0 {
                    return fail("length", "must be greater than 0");
                }
                if stride.is_some_and(|s| s.0 == 0) {
                    return fail("stride", "must be greater than 0");
                }
            }
            Op::Create(CreateOp { file, size, fs }) => {
                check_file_name(file).map_err(|m| ("file", m.to_string()))?;
                if !matches!(fs.as_str(), "ext4" | "tmpfs") {
                    return Err(("fs", format!("{fs:?} is not one of ext4, tmpfs")));
                }
                if size.0 > 1 << 47 {
                    return fail("size", "larger than 128 TiB");
                }
            }
            Op::MemfdCreate(MemfdCreateOp { file, size, .. }) => {
                check_file_name(file).map_err(|m| ("file", m.to_string()))?;
                if size.0 > 1 << 47 {
                    return fail("size", "larger than 128 TiB");
                }
            }
            Op::Fallocate(FallocateOp { mode, .. }) => {
                let mut seen = Vec::new();
                for m in mode {
                    if seen.contains(m) {
                        return Err(("mode", format!("{:?} is given twice", m.word())));
                    }
                    seen.push(*m);
                }
            }
            Op::Pwrite(PwriteOp { chunk: Some(c), .. }) | Op::Pread(PreadOp { chunk: Some(c), .. })
                if c.0 == 0 || c.0 > 1 << 30 =>
            {
                return fail("chunk", "must be between 1 byte and 1 GiB");
            }
            Op::Fadvise(FadviseOp { advice, .. }) if !matches!(advice.as_str(), "dontneed" | "willneed") => {
                return Err(("advice", format!("{advice:?} is not one of dontneed, willneed")));
            }
            Op::Fork(ForkOp { count, .. }) | Op::Thread(ForkOp { count, .. }) => {
                if *count == 0 {
                    return fail("count", "must be at least 1");
                }
                if *count > 100_000 {
                    return fail("count", "at most 100000 processes per fork op");
                }
            }
            Op::Set(SetOp { knob, value }) => {
                let mut k = crate::kernel::knobs::Knobs::default();
                k.set(knob, &value.0).map_err(|e| ("knob", e.to_string()))?;
            }
            Op::MemoryReclaim(MemoryReclaimOp { bytes, swappiness, .. }) => {
                if bytes.0 == 0 {
                    return fail("bytes", "must be greater than 0");
                }
                if swappiness.is_some_and(|s| s > 200) {
                    return fail("swappiness", "must be between 0 and 200");
                }
            }
            Op::CgroupWrite(w) => super::spec_memcg::check_cgroup_write(w)?,
            Op::Sleep(SleepOp { ms, until_ms }) => {
                let (field, v) = match (ms, until_ms) {
                    (Some(v), None) => ("ms", v),
                    (None, Some(v)) => ("until_ms", v),
                    _ => return fail("ms", "exactly one of ms and until_ms is required"),
                };
                if !(v.is_finite() && (0.0..=1e9).contains(v)) {
                    return fail(field, "must be a number of milliseconds between 0 and 1e9");
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl MmapOp {
    /// An mmap's size, alignment and flags, which go together.
    fn check_fields(&self) -> Result<(), (&'static str, String)> {
        let MmapOp { size, align, flags, file, file_offset, .. } = self;
        let fail = |field: &'static str, msg: &str| Err((field, msg.to_string()));
        if size.0 == 0 {
            return fail("size", "must be greater than 0");
        }
        if size.0 > 1 << 47 {
            return fail("size", "larger than the 128 TiB user address space");
        }
        if align.is_some_and(|a| !a.0.is_power_of_two() || a.0 < 4096) {
            return fail("align", "must be a power of two of at least 4096");
        }
        if flags.iter().filter(|f| matches!(f, MapFlag::Private | MapFlag::Shared)).count() != 1 {
            return fail("flags", "exactly one of private and shared is required");
        }
        if file.is_some() {
            if let Some(bad) = flags.iter().find(|f| matches!(f, MapFlag::Anonymous | MapFlag::Hugetlb)) {
                return Err(("flags", format!("{:?} does not go with a file", bad.word())));
            }
            if file_offset.is_some_and(|o| o.0 % 4096 != 0) {
                return fail("file_offset", "must be a multiple of the page size (4096)");
            }
        } else {
            if file_offset.is_some() {
                return fail("file_offset", "needs a file");
            }
            if !flags.contains(&MapFlag::Anonymous) {
                return fail("flags", "a mapping is of a file (\"file\") or anonymous (add \"anonymous\")");
            }
        }
        Ok(())
    }
}
