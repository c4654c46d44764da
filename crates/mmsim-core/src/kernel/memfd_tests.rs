//! memfd_create(2), ftruncate(2) and fallocate(2) on tmpfs and hugetlbfs: the page cache
//! (Shmem, nr_shmem), RssShmem, the faults of a later mapping, the hugetlb pool and its
//! reservations, hole punching and the errors, as Linux 6.18's mm/shmem.c,
//! fs/hugetlbfs/inode.c and fs/open.c have them (tools/testing/selftests/mm/hugetlb-madvise.c
//! and memfd_test.c's scenarios). Workloads run with the reference model and the invariants
//! after every op.

use serde_json::{json, Value};

use super::memfd::FileRef;
use super::mmap::Errno;
use super::uapi::{FallocFlags, MfdFlags};
use super::Kernel;
use crate::kernel::knobs::Knobs;
use crate::report::{Report, Snapshot};
use crate::test_support::{run, snap};
use crate::units::Geometry;
use crate::workload::spec::parse_workload;

/// (meminfo Shmem kB, the first process's RssShmem kB, its minor faults).
fn shmem(s: &Snapshot) -> [i64; 3] {
    let p = s.processes.iter().find(|p| p.pid == 1).expect("pid 1");
    [s.meminfo.get("Shmem").unwrap(), p.rss_shmem, p.minflt]
}

/// HugePages_Free, _Rsvd, nr_hugetlb (pages of 4 KiB) and the first process's HugetlbPages.
fn pool(s: &Snapshot) -> [i64; 4] {
    let p = s.processes.iter().find(|p| p.pid == 1).expect("pid 1");
    [
        s.meminfo.get("HugePages_Free").unwrap(),
        s.meminfo.get("HugePages_Rsvd").unwrap(),
        s.vmstat.get("nr_hugetlb").unwrap(),
        p.hugetlb_pages,
    ]
}

fn messages(r: &Report) -> Vec<&str> {
    r.events.iter().filter(|e| e.kind == "syscall").map(|e| e.message.as_str()).collect()
}

/// fallocate of a tmpfs memfd fills its page cache, not RSS; a shared mapping then faults
/// each page in (minor faults, no allocation: fault-around skips the !uptodate fallocated
/// pages); PUNCH_HOLE|KEEP_SIZE takes whole pages out of the cache and of the mapping.
#[test]
fn tmpfs_fallocate_caches_pages_and_punch_hole_unmaps_them() {
    let r = run(json!({"program": [
        {"op": "memfd_create", "file": "m", "size": "1M"},
        {"op": "snapshot", "label": "created"},
        {"op": "fallocate", "file": "m", "length": "1M"},
        {"op": "snapshot", "label": "allocated"},
        {"op": "mmap", "name": "s", "size": "1M", "flags": ["shared"], "file": "m"},
        {"op": "read", "region": "s", "expect": 0},
        {"op": "snapshot", "label": "read"},
        {"op": "write", "region": "s", "value": 5},
        {"op": "fallocate", "file": "m", "offset": "64K", "length": "64K", "mode": ["punch_hole", "keep_size"]},
        {"op": "snapshot", "label": "punched"},
        {"op": "read", "region": "s", "offset": "60K", "length": "8K"},
        {"op": "fallocate", "file": "m", "offset": 100, "length": 5000, "mode": ["punch_hole", "keep_size"]},
        {"op": "read", "region": "s", "length": "8K"},
        {"op": "snapshot", "label": "partial"}]}));
    let base = shmem(snap(&r, "created"));
    let d = |l: &str| {
        let s = shmem(snap(&r, l));
        [s[0] - base[0], s[1] - base[1], s[2] - base[2]]
    };
    assert_eq!(d("allocated"), [1024, 0, 0], "Shmem grows, RssShmem does not");
    assert_eq!(d("read"), [1024, 1024, 256], "one minor fault a page: fault-around skips !uptodate pages");
    assert_eq!(d("punched"), [1024 - 64, 1024 - 64, 256], "16 pages freed and unmapped");
    // The hole's pages fault in again (16 of them, fault-around maps nothing there); the
    // partial punch zeroes bytes 100..5100 and frees no page.
    assert_eq!(d("partial"), [1024 - 64 + 4, 1024 - 64 + 4, 256 + 1], "{:?}", messages(&r));
}

/// A second fallocate of pages an earlier one left !uptodate clears them and marks them
/// uptodate (`shmem_get_folio_gfp`'s SGP_FALLOC on a fallocated folio), so a mapping's first
/// fault maps all of them by fault-around: one minor fault for 16 pages, not 16
/// (`validate --random` seed 2026 case 1277: the kernel mapped 5 pages with 1 fault).
#[test]
fn a_second_fallocate_makes_the_pages_uptodate() {
    for (again, faults) in [(false, 16), (true, 1)] {
        let mut program = vec![
            json!({"op": "memfd_create", "file": "m", "size": "64K"}),
            json!({"op": "fallocate", "file": "m", "length": "64K"}),
        ];
        if again {
            program.push(json!({"op": "fallocate", "file": "m", "length": "64K"}));
        }
        program.extend([
            json!({"op": "snapshot", "label": "allocated"}),
            json!({"op": "mmap", "name": "s", "size": "64K", "flags": ["shared"], "file": "m"}),
            json!({"op": "read", "region": "s", "expect": 0}),
            json!({"op": "snapshot", "label": "read"}),
        ]);
        let r = run(json!({ "program": program }));
        let (a, b) = (shmem(snap(&r, "allocated")), shmem(snap(&r, "read")));
        assert_eq!([b[1] - a[1], b[2] - a[2]], [64, faults], "again {again}");
    }
}

/// An allocation the pool cannot cover fails with ENOSPC, keeping what it allocated; a
/// shared mapping reserves only the indices fallocate did not fill; a fault finds the
/// fallocated page; punching a whole huge page frees it and unmaps it, an unaligned range
/// rounds in (the partial pages are zeroed, none freed).
#[test]
fn hugetlbfs_fallocate_takes_pool_pages_and_punch_hole_frees_them() {
    let r = run(json!({"knobs": {"vm/nr_hugepages": 4}, "program": [
        {"op": "memfd_create", "file": "h", "size": "8M", "hugetlb": true},
        {"op": "snapshot", "label": "created"},
        {"op": "fallocate", "file": "h", "offset": "1M", "length": "2M"},
        {"op": "snapshot", "label": "allocated"},
        {"op": "mmap", "name": "s", "size": "8M", "flags": ["shared"], "file": "h"},
        {"op": "snapshot", "label": "mapped"},
        {"op": "write", "region": "s", "value": 9},
        {"op": "snapshot", "label": "written"},
        {"op": "fallocate", "file": "h", "offset": "2M", "length": "2M", "mode": ["punch_hole", "keep_size"]},
        {"op": "snapshot", "label": "punched"},
        {"op": "fallocate", "file": "h", "offset": "5M", "length": "2M", "mode": ["punch_hole", "keep_size"]},
        {"op": "read", "region": "s", "offset": "4M", "length": "1M", "expect": 9},
        {"op": "read", "region": "s", "offset": "5M", "length": "2M", "expect": 0},
        {"op": "read", "region": "s", "offset": "7M", "length": "1M", "expect": 9},
        {"op": "snapshot", "label": "partial"},
        {"op": "memfd_create", "file": "g", "size": "4M", "hugetlb": true},
        {"op": "fallocate", "file": "g", "length": "4M"},
        {"op": "snapshot", "label": "enospc"},
        {"op": "memfd_create", "file": "odd", "size": "3M", "hugetlb": true}]}));
    assert_eq!(pool(snap(&r, "created")), [4, 0, 0, 0]);
    assert_eq!(pool(snap(&r, "allocated")), [2, 0, 1024, 0], "1M..3M rounds out to two huge pages");
    assert_eq!(pool(snap(&r, "mapped")), [2, 2, 1024, 0], "indices 2 and 3 reserved, 0 and 1 cached");
    assert_eq!(pool(snap(&r, "written")), [0, 0, 2048, 8192]);
    assert_eq!(pool(snap(&r, "punched")), [1, 0, 1536, 6144], "index 1 freed and unmapped");
    assert_eq!(pool(snap(&r, "partial")), [1, 0, 1536, 6144], "5M..7M rounds in to no whole page");
    // g takes the one free page, then finds none; the page stays.
    assert_eq!(pool(snap(&r, "enospc")), [0, 0, 2048, 6144]);
    let m = messages(&r);
    assert_eq!(m, ["fallocate g: ENOSPC", "ftruncate odd: EINVAL"], "{:?}", r.events);
}

/// Writing to index 1 after the punch faults a new page in (from no reservation), and the
/// last mapping going leaves the memfd's pages in its page cache: the name holds them.
#[test]
fn a_hugetlb_memfd_keeps_its_pages_after_munmap() {
    let r = run(json!({"knobs": {"vm/nr_hugepages": 3}, "program": [
        {"op": "memfd_create", "file": "h", "size": "4M", "hugetlb": true},
        {"op": "mmap", "name": "s", "size": "4M", "flags": ["shared"], "file": "h"},
        {"op": "write", "region": "s", "value": 3},
        {"op": "fallocate", "file": "h", "offset": "2M", "length": "2M", "mode": ["punch_hole", "keep_size"]},
        {"op": "snapshot", "label": "punched"},
        {"op": "write", "region": "s", "offset": "2M", "length": 1, "value": 4},
        {"op": "munmap", "region": "s"},
        {"op": "snapshot", "label": "unmapped"},
        {"op": "mmap", "name": "t", "size": "4M", "flags": ["shared"], "file": "h"},
        {"op": "read", "region": "t", "length": 1, "expect": 3},
        {"op": "read", "region": "t", "offset": "2M", "length": 1, "expect": 4},
        {"op": "snapshot", "label": "again"}]}));
    assert_eq!(pool(snap(&r, "punched")), [2, 0, 512, 2048]);
    assert_eq!(pool(snap(&r, "unmapped")), [1, 0, 1024, 0], "the file keeps both pages");
    assert_eq!(pool(snap(&r, "again")), [1, 0, 1024, 4096]);
}

/// vfs_fallocate's checks, in Linux's order, and the filesystems: ext4 is not modelled.
#[test]
fn fallocate_errors_are_linuxs() {
    let mut k = Kernel::new(64 << 20, Knobs::default(), Geometry::X86_64);
    let f = k.sys_memfd_create("m", MfdFlags::empty()).ret.unwrap();
    k.do_ftruncate(f, 8192).ret.unwrap();
    let (ph, ks) = (FallocFlags::PUNCH_HOLE, FallocFlags::KEEP_SIZE);
    for (mode, off, len, want) in [
        (FallocFlags::empty(), 0, 0, Errno::EINVAL),
        (FallocFlags::empty(), 1 << 63, 4096, Errno::EINVAL),
        (ph, 0, 4096, Errno::EOPNOTSUPP),
        (FallocFlags::from_bits_retain(0x40), 0, 4096, Errno::EOPNOTSUPP),
        (ks, (1 << 63) - 4096, 8192, Errno::EFBIG),
    ] {
        assert_eq!(k.vfs_fallocate(f, mode, off, len).ret, Err(want), "{mode:?} {off} {len}");
    }
    assert_eq!(k.sys_memfd_create("x", MfdFlags::from_bits_retain(0x100)).ret, Err(Errno::EINVAL));
    // KEEP_SIZE allocates past i_size without growing it; without, i_size grows.
    k.vfs_fallocate(f, ks, 0, 16384).ret.unwrap();
    assert_eq!((k.inode(0).i_size, k.stat.items[super::vmstat::VmItem::NrShmem]), (8192, 4));
    k.vfs_fallocate(f, FallocFlags::empty(), 0, 20000).ret.unwrap();
    assert_eq!((k.inode(0).i_size, k.stat.items[super::vmstat::VmItem::NrShmem]), (20000, 5));
    let FileRef::Inode(_) = f else { panic!("a tmpfs memfd is an inode") };
    let e = k.file_create("e", 8192, super::shmem::Fs::Ext4).unwrap();
    assert_eq!(k.vfs_fallocate(FileRef::Inode(e), FallocFlags::empty(), 0, 4096).ret, Err(Errno::EOPNOTSUPP));
    k.check_invariants().unwrap();
}

/// The workload's errors name the field: an unknown or repeated mode, and what mmsim does not
/// model of a hugetlb memfd (a private mapping, read(2)).
#[test]
fn bad_memfd_and_fallocate_ops_name_the_field() {
    let err = |prog: Value| parse_workload(&json!({ "program": prog }).to_string()).unwrap_err().to_string();
    let e = err(json!([{"op": "memfd_create", "file": "m", "size": 4096},
        {"op": "fallocate", "file": "m", "length": 1, "mode": ["hole"]}]));
    assert!(e.contains("program[1].mode") && e.contains("punch_hole, keep_size"), "{e}");
    let e = err(json!([{"op": "memfd_create", "file": "m", "size": 4096},
        {"op": "fallocate", "file": "m", "length": 1, "mode": ["keep_size", "keep_size"]}]));
    assert!(e.contains("program[1].mode") && e.contains("twice"), "{e}");
    let e = err(json!([{"op": "fallocate", "file": "m", "length": 1}]));
    assert!(e.contains("program[0].file") && e.contains("no file named"), "{e}");
    let e = err(json!([{"op": "memfd_create", "file": "h", "size": "2M", "hugetlb": true},
        {"op": "mmap", "name": "p", "size": "2M", "file": "h", "flags": ["private"]}]));
    assert!(e.contains("program[1].flags") && e.contains("private mapping of the hugetlb memfd"), "{e}");
    let e = err(json!([{"op": "memfd_create", "file": "h", "size": "2M", "hugetlb": true},
        {"op": "pread", "file": "h"}]));
    assert!(e.contains("program[1].file") && e.contains("hugetlb memfd"), "{e}");
    // A create of the name makes it an ordinary file again.
    parse_workload(
        &json!({"program": [{"op": "memfd_create", "file": "h", "size": "2M", "hugetlb": true},
            {"op": "create", "file": "h", "size": 4096, "fs": "tmpfs"}, {"op": "pread", "file": "h"}]})
        .to_string(),
    )
    .unwrap();
}
