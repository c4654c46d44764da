"""The built-in `mmsim validate --suite` cases: each pins one kernel behaviour (THP, the huge
zero page, COW, partial munmaps, VmPTE layouts, shared memory, hugetlb and its PMD sharing,
mlock), run on the kernel and in mmsim by :func:`mmsim.native.validate_case`."""

from __future__ import annotations

from typing import Any

from mmsim.native import Case
from mmsim.native_compare import HUGETLB_COUNTERS


def _w(*ops: dict[str, Any]) -> list[dict[str, Any]]:
    return list(ops)


M = {"op": "mmap", "name": "p", "size": "4M", "align": "2M"}
HUGE = {"op": "madvise", "region": "p", "advice": "hugepage"}
NOHUGE = {"op": "madvise", "region": "p", "advice": "nohugepage"}
B, A = {"op": "snapshot", "label": "before"}, {"op": "snapshot", "label": "after"}


def _split_thp_case(name: str, what: str, op: dict[str, Any]) -> Case:
    """A case that writes a THP, then applies `op` to 4 KiB in its middle (splitting its pmd)."""
    return Case(
        name,
        what,
        _w(M, HUGE, {"op": "write", "region": "p"}, B, op, A),
        counters=("RssAnon", "AnonHugePages", "VmPTE"),
        vmstat=("thp_split_pmd",),
    )


#: A 1 GiB-aligned address far from the runner's mappings (512 GiB; the layout is fixed: ASLR
#: is off), for regions whose page-table sharing depends on their alignment: Linux shares a
#: hugetlb PMD table (huge_pmd_share) only for a 1 GiB window inside a shared vma.
AT_1G = 0x8000000000
SHARED = ["shared", "anonymous"]
HUGETLB_SHARED = ["shared", "anonymous", "hugetlb"]


def _hugetlb_share_case(name: str, what: str, addr: int) -> Case:
    """1 GiB of shared hugetlb memory at `addr` (its pool reserved at mmap), written by the
    parent, then read (one byte per 4 KiB) by 4 children, one after the other. The parent's
    snapshots bracket its faults (after the mmap's reservation) and the children."""
    return Case(
        name,
        what,
        _w(
            {"op": "mmap", "name": "h", "size": "1G", "addr": hex(addr), "fixed": True, "flags": HUGETLB_SHARED},
            B,
            {"op": "write", "region": "h"},
            {"op": "fork", "count": 4, "program": [B, {"op": "read", "region": "h"}, A]},
            {"op": "wait"},
            A,
        ),
        pids=(1, 2, 3, 4, 5),
        counters=("minflt", "VmPTE", "HugetlbPages"),
        vmstat=HUGETLB_COUNTERS,
        knobs={"vm/nr_hugepages": "512"},
    )


def _munmap_middle_case(
    name: str,
    what: str,
    size: str,
    flags: list[str],
    counters: tuple[str, ...],
    vmstat: tuple[str, ...] = (),
    knobs: dict[str, str] | None = None,
) -> Case:
    """Seed 003's bug report: a shared region at AT_1G written by the parent (value 1); 4
    children, one after the other, each read it (their tables: their own, or on Linux the
    parent's PMD tables for hugetlb), munmap 2 MiB at offset 2 MiB, map private anonymous
    memory there (MAP_FIXED), write a value of their own and read it back, and read the rest
    of the region (still 1); the parent then reads the whole region (still 1: no child's write
    reached it)."""

    def child(value: int) -> dict[str, Any]:
        return {
            "op": "fork",
            "program": [
                B,
                {"op": "read", "region": "s", "expect": 1},
                {"op": "munmap", "region": "s", "offset": "2M", "length": "2M"},
                {"op": "mmap", "name": "q", "size": "2M", "addr": hex(AT_1G + (2 << 20)), "fixed": True},
                {"op": "write", "region": "q", "value": value},
                {"op": "read", "region": "q", "expect": value},
                {"op": "read", "region": "s", "length": "2M", "expect": 1},
                {"op": "read", "region": "s", "offset": "4M", "expect": 1},
                A,
            ],
        }

    return Case(
        name,
        what,
        _w(
            {"op": "mmap", "name": "s", "size": size, "addr": hex(AT_1G), "fixed": True, "flags": flags},
            B,
            {"op": "write", "region": "s"},
            *(child(v) for v in (2, 3, 4, 5)),
            {"op": "wait"},
            {"op": "read", "region": "s", "expect": 1},
            A,
        ),
        pids=(1, 2, 3, 4, 5),
        counters=counters,
        vmstat=vmstat,
        knobs=dict(knobs or {}),
    )


#: A cold 64 MiB ext4 file (create: written, fsync'ed and dropped from the page cache on the
#: kernel) and the private read-only mapping of it that the read cases use (ext4 places it
#: 2 MiB-aligned itself, thp_get_unmapped_area).
CREATE = {"op": "create", "file": "f", "size": "64M"}
MAP_F = {"op": "mmap", "name": "m", "size": "64M", "file": "f", "flags": ["private"], "prot": "r"}
READ_M = {"op": "read", "region": "m"}
#: Fault-around skips a folio whose read is still in flight on the kernel, so a cold read that
#: outruns the device takes more faults there, one per 16-page window it meets in flight (435
#: to 442 seen on this machine's 64 MiB cold read; 435 when every window is complete in time, as
#: in mmsim, whose I/O completes when submitted). Major faults stay exact.
IO_TIMING = {"minflt": 16}

FILE_CASES = [
    Case(
        "file-cold-read",
        (
            "a cold ext4 file read through a 4 KiB private mapping, one byte per page: one major fault (the "
            "read-around of read_ahead_kb), then async readahead windows of growing folio order, 16 pages per "
            "fault at order 0, one fault per folio above, PMD-mapped order-9 folios (minflt within 16: "
            "fault-around skips folios whose I/O is in flight)"
        ),
        _w(CREATE, MAP_F, B, READ_M, A),
        counters=("minflt", "majflt", "RssFile"),
        vmstat=("pgmajfault", "thp_file_mapped", "FilePmdMapped", "nr_file_hugepages"),
        tolerance=IO_TIMING,
    ),
    Case(
        "file-cold-read-hugepage",
        (
            "the same with MADV_HUGEPAGE: the fault reads two PMD folios from the aligned index, whatever THP "
            "enabled says; 1 major + 31 minor faults, all 32 folios PMD-mapped (FilePmdMapped 65536 kB)"
        ),
        _w(CREATE, MAP_F, {"op": "madvise", "region": "m", "advice": "hugepage"}, B, READ_M, A),
        counters=("minflt", "majflt", "RssFile"),
        vmstat=("pgmajfault", "thp_file_mapped", "FilePmdMapped", "nr_file_hugepages"),
    ),
    Case(
        "file-written-1m-then-mapped",
        (
            "a file cached by 1 MiB write()s has 256-page folios (fgf_set_order); a read of its mapping takes "
            "one fault per folio, the one holding the end of the file in 16-page windows: 79 faults, none major"
        ),
        _w(
            {"op": "create", "file": "f", "size": 0},
            {"op": "pwrite", "file": "f", "length": "64M", "chunk": "1M"},
            MAP_F,
            B,
            {"op": "read", "region": "m", "expect": 1},
            A,
        ),
        counters=("minflt", "majflt", "RssFile"),
        vmstat=("pgmajfault", "thp_file_mapped"),
    ),
    Case(
        "tmpfs-fault-around",
        "a tmpfs file (order-0 shmem folios) read through a 2 MiB-aligned shared mapping: fault-around maps 16 "
        "pages per fault, 1024 faults for 64 MiB",
        _w(
            {"op": "create", "file": "t", "size": 0, "fs": "tmpfs"},
            {"op": "pwrite", "file": "t", "length": "64M", "chunk": "1M"},
            {"op": "mmap", "name": "m", "size": "64M", "file": "t", "flags": ["shared"], "prot": "r", "align": "2M"},
            B,
            {"op": "read", "region": "m", "expect": 1},
            A,
        ),
        counters=("minflt", "majflt", "RssShmem", "RssFile"),
    ),
    Case(
        "collapse-ext4",
        "MADV_COLLAPSE on an ext4 mapping: EINVAL on a kernel without CONFIG_READ_ONLY_THP_FOR_FS, nothing collapsed",
        _w(CREATE, MAP_F, READ_M, B, {"op": "madvise", "region": "m", "advice": "collapse"}, A),
        counters=("minflt", "RssFile"),
        vmstat=("thp_collapse_alloc", "FilePmdMapped"),
    ),
    Case(
        "collapse-tmpfs",
        (
            "MADV_COLLAPSE on a 2 MiB-aligned tmpfs mapping with shmem_enabled never: 32 PMD folios replace the "
            "16384 pages (thp_collapse_alloc +32) and map the range by PMDs (ShmemPmdMapped +65536 kB)"
        ),
        _w(
            {"op": "create", "file": "t", "size": "64M", "fs": "tmpfs"},
            {"op": "pwrite", "file": "t", "length": "64M", "chunk": "1M"},
            {"op": "mmap", "name": "m", "size": "64M", "file": "t", "flags": ["shared"], "prot": "rw", "align": "2M"},
            {"op": "read", "region": "m"},
            B,
            {"op": "madvise", "region": "m", "advice": "collapse"},
            A,
        ),
        counters=("minflt", "RssShmem"),
        vmstat=("thp_collapse_alloc", "ShmemPmdMapped", "thp_file_mapped"),
    ),
    Case(
        "collapse-tmpfs-text",
        (
            "MADV_COLLAPSE on program text in tmpfs (the exec op's private r-x mapping, 2 MiB-aligned): "
            "collapse_file puts 2 PMD folios in the file's page cache (thp_collapse_alloc +2) and the text is "
            "mapped by its pmds (ShmemPmdMapped +4096 kB); no copy, RssShmem unchanged, no fault"
        ),
        _w(
            {"op": "create", "file": "t", "size": 0, "fs": "tmpfs"},
            {"op": "pwrite", "file": "t", "length": "4M", "chunk": "1M"},
            {"op": "exec", "file": "t", "name": "text", "text_size": "4M", "align": "2M"},
            {"op": "read", "region": "text"},
            B,
            {"op": "madvise", "region": "text", "advice": "collapse"},
            {"op": "read", "region": "text"},
            A,
        ),
        counters=("minflt", "RssShmem", "RssFile"),
        vmstat=("thp_collapse_alloc", "ShmemPmdMapped", "thp_file_mapped"),
    ),
    Case(
        "file-pmd-cow",
        (
            "a write to a private writable mapping of a PMD-mapped file folio: the pmd is zapped, not split "
            "into ptes (thp_split_pmd +1, FilePmdMapped -2048 kB, RssFile -2048 kB) and the one page copied "
            "(RssAnon +4 kB), 1 fault"
        ),
        _w(
            CREATE,
            {"op": "mmap", "name": "m", "size": "64M", "file": "f", "flags": ["private"], "prot": "rw", "align": "2M"},
            {"op": "madvise", "region": "m", "advice": "hugepage"},
            READ_M,
            B,
            {"op": "write", "region": "m", "offset": "60M", "length": "1", "value": 7},
            A,
        ),
        counters=("minflt", "majflt", "RssFile", "RssAnon"),
        vmstat=("thp_split_pmd", "FilePmdMapped"),
    ),
    Case(
        "pread-cold",
        (
            "read() of a cold file in 4 KiB calls: readahead windows ramp from 4 pages at order 0 to 2048 at "
            "PMD order (30 PMD folios, nr_file_hugepages +30), every page read once (pgpgin 65536 kB), no fault"
        ),
        _w(CREATE, B, {"op": "pread", "file": "f", "chunk": "4K", "expect": 0}, A),
        counters=("minflt", "majflt"),
        vmstat=("nr_file_hugepages", "pgpgin", "pgmajfault"),
    ),
    Case(
        "file-two-processes",
        (
            "two processes map one file cached by read() (the folio layout of 4 KiB reads, no I/O timing): the "
            "second (a child) takes as many faults as the first, all minor, maps the same folios the same way "
            "(thp_file_mapped +30 each) and counts them in its RssFile; Mapped counts each page once (+65536 kB)"
        ),
        _w(
            CREATE,
            {"op": "pread", "file": "f", "chunk": "4K"},
            {"op": "mmap", "name": "m", "size": "64M", "file": "f", "flags": ["shared"], "prot": "r"},
            B,
            READ_M,
            {"op": "fork", "program": [B, READ_M, A]},
            {"op": "wait"},
            A,
        ),
        pids=(1, 2),
        counters=("minflt", "majflt", "RssFile"),
        vmstat=("pgmajfault", "thp_file_mapped", "Mapped"),
    ),
    Case(
        "file-exec-text-hugepage",
        (
            "text mapped by the exec op (the ELF loader's private r-x mapping at 2 MiB alignment) with "
            "MADV_HUGEPAGE: 6.18's readahead reads PMD folios, and a read of the 4 MiB takes 2 faults (1 major), "
            "each range mapped by one pmd (thp_file_mapped +2, FilePmdMapped +4096 kB, RssFile +4096 kB)"
        ),
        _w(
            {"op": "create", "file": "f", "size": "4M"},
            {"op": "exec", "file": "f", "name": "text", "text_size": "4M", "align": "2M"},
            {"op": "madvise", "region": "text", "advice": "hugepage"},
            B,
            {"op": "read", "region": "text"},
            A,
        ),
        counters=("minflt", "majflt", "RssFile"),
        vmstat=("thp_file_mapped", "FilePmdMapped", "pgmajfault"),
    ),
    Case(
        "file-mlock-cold",
        (
            "mlock populates a cold file mapping through GUP: the fault that waits for the read returns "
            "VM_FAULT_RETRY and is not counted, and __mm_populate faults the page in again, minor (no major "
            "fault for the task; pgmajfault +1 system-wide); fault-around maps 16 pages per fault: 32 faults for "
            "2 MiB read-only; a private writable range is COW-populated page by page (16 for 64 KiB)"
        ),
        _w(
            {"op": "create", "file": "f", "size": "4M"},
            {"op": "mmap", "name": "m", "size": "2M", "file": "f", "flags": ["private"], "prot": "r"},
            {"op": "mmap", "name": "w", "size": "64K", "file": "f", "file_offset": "3M", "flags": ["private"]},
            B,
            {"op": "mlock", "region": "m"},
            {"op": "mlock", "region": "w"},
            A,
        ),
        counters=("minflt", "majflt", "RssFile", "RssAnon", "VmLck"),
        vmstat=("pgmajfault",),
    ),
    Case(
        "file-shared-write-after-fsync",
        (
            "writeback write-protects a shared file mapping (folio_mkclean): 64 KiB written through a shared "
            "ext4 mapping (1 major + 15 faults), fsync'ed, written again: 16 more faults (page_mkwrite)"
        ),
        _w(
            {"op": "create", "file": "f", "size": "64K"},
            {"op": "mmap", "name": "m", "size": "64K", "file": "f", "flags": ["shared"]},
            {"op": "write", "region": "m", "value": 5},
            {"op": "fsync", "file": "f"},
            B,
            {"op": "write", "region": "m", "value": 6},
            A,
        ),
        counters=("minflt", "majflt", "RssFile"),
        vmstat=("pgmajfault",),
    ),
    Case(
        "file-shared-pmd-write-after-fsync",
        (
            "the same on PMD-mapped folios (MADV_HUGEPAGE, 4 MiB): a write to the write-protected pmd splits it "
            "(wp_huge_pmd: no huge_fault on ext4) and the shared fault maps the folio by a writable pmd again "
            "(do_set_pmd): 2 faults, thp_split_pmd +2, thp_file_mapped +2"
        ),
        _w(
            {"op": "create", "file": "f", "size": "4M"},
            {"op": "mmap", "name": "m", "size": "4M", "file": "f", "flags": ["shared"], "align": "2M"},
            {"op": "madvise", "region": "m", "advice": "hugepage"},
            {"op": "write", "region": "m", "value": 5},
            {"op": "fsync", "file": "f"},
            B,
            {"op": "write", "region": "m", "value": 6},
            A,
        ),
        counters=("minflt", "majflt", "RssFile", "AnonHugePages"),
        vmstat=("thp_split_pmd", "thp_file_mapped", "FilePmdMapped"),
    ),
]

SUITE = [
    Case(
        "anon-4k-read",
        "a read fault maps the 4 KiB zero page: one fault per page, no RSS, one PTE table per 2 MiB",
        _w(M, NOHUGE, B, {"op": "read", "region": "p"}, A),
    ),
    Case(
        "anon-4k-write",
        "a write fault allocates a zeroed 4 KiB page: one fault and 4 kB of RssAnon per page",
        _w(M, NOHUGE, B, {"op": "write", "region": "p"}, A),
    ),
    Case(
        "thp-read-zero-page",
        "a read fault of a THP range maps the huge zero page: one fault per 2 MiB, no RSS, a deposited PTE table",
        _w(M, HUGE, B, {"op": "read", "region": "p"}, A),
        vmstat=("thp_fault_alloc",),
        knobs={"transparent_hugepage/use_zero_page": "1"},
    ),
    Case(
        "thp-read-no-zero-page",
        "with use_zero_page 0 a read fault of a THP range allocates a real THP: RSS grows 2 MiB per fault",
        _w(M, HUGE, B, {"op": "read", "region": "p"}, A),
        vmstat=("thp_fault_alloc",),
        knobs={"transparent_hugepage/use_zero_page": "0"},
    ),
    Case(
        "thp-write-after-read",
        "a write to the huge zero page allocates a THP (Linux >= 6.13)",
        _w(M, HUGE, {"op": "read", "region": "p"}, B, {"op": "write", "region": "p"}, A),
        vmstat=("thp_fault_alloc",),
        knobs={"transparent_hugepage/use_zero_page": "1"},
    ),
    Case(
        "thp-write",
        "a write fault of a THP range allocates a THP: one fault per 2 MiB, 2048 kB of AnonHugePages",
        _w(M, HUGE, B, {"op": "write", "region": "p"}, A),
        vmstat=("thp_fault_alloc",),
    ),
    Case(
        "cow-4k-after-fork",
        "fork write-protects private pages; the child's writes copy them (one fault per page)",
        _w(
            M,
            NOHUGE,
            {"op": "write", "region": "p"},
            {"op": "fork", "program": [B, {"op": "write", "region": "p", "value": 2}, A]},
            {"op": "wait"},
        ),
        pids=(2,),
        counters=("minflt", "RssAnon"),
    ),
    Case(
        "cow-thp-after-fork",
        "a child's write to a THP it shares splits its pmd and copies 4 KiB, not 2 MiB",
        _w(
            M,
            HUGE,
            {"op": "write", "region": "p"},
            {"op": "fork", "program": [B, {"op": "write", "region": "p", "length": 1, "value": 2}, A]},
            {"op": "wait"},
        ),
        pids=(2,),
        counters=("minflt", "RssAnon", "AnonHugePages"),
    ),
    _split_thp_case(
        "munmap-part-of-thp",
        "munmap of 4 KiB inside a THP splits its pmd (thp_split_pmd) and unmaps one page",
        {"op": "munmap", "region": "p", "offset": "1M", "length": "4K"},
    ),
    _split_thp_case(
        "mprotect-part-of-thp",
        "mprotect of 4 KiB inside a THP splits that pmd only",
        {"op": "mprotect", "region": "p", "offset": "1M", "length": "4K", "prot": "r"},
    ),
    _split_thp_case(
        "dontneed-part-of-thp",
        "MADV_DONTNEED of 4 KiB inside a THP splits the pmd and zaps one page",
        {"op": "madvise", "region": "p", "offset": "1M", "length": "4K", "advice": "dontneed"},
    ),
    # Aligned so that the 64 KiB fault-around windows do not depend on where ASLR puts it.
    Case(
        "shared-anon-across-fork",
        "a child reading a shared region the parent wrote faults once per 16 pages "
        "(fault-around maps pages already in the shmem cache)",
        _w(
            {"op": "mmap", "name": "s", "size": "16M", "align": "2M", "flags": ["shared", "anonymous"]},
            {"op": "write", "region": "s"},
            {"op": "fork", "program": [B, {"op": "read", "region": "s"}, A]},
            {"op": "wait"},
        ),
        pids=(2,),
        counters=("minflt", "RssShmem"),
    ),
    Case(
        "fork-many-shared",
        "16 processes (one after the other) reading one 64 MiB shared region each build their own page "
        "tables: 32 PTE tables (128 kB of VmPTE) and 1024 faults (fault-around) apiece",
        _w(
            {"op": "mmap", "name": "s", "size": "64M", "align": "2M", "flags": ["shared", "anonymous"]},
            {"op": "write", "region": "s"},
            # One child at a time: children faulting the same shmem pages at once make
            # fault-around's folio_trylock fail and take extra faults (folio locks are not
            # modelled).
            {
                "op": "loop",
                "count": 16,
                "body": [
                    {"op": "fork", "program": [B, {"op": "read", "region": "s"}, A]},
                    {"op": "wait"},
                ],
            },
        ),
        pids=tuple(range(2, 18)),
        counters=("minflt", "VmPTE", "RssShmem"),
    ),
    Case(
        "vmpte-sparse",
        "8 pages 1 GiB apart each need their own PTE and PMD tables",
        _w(
            {"op": "mmap", "name": "p", "size": "8G", "align": "1G"},
            NOHUGE,
            B,
            {"op": "write", "region": "p", "stride": "1G"},
            A,
        ),
        counters=("minflt", "VmPTE"),
    ),
    Case(
        "vmpte-dense",
        "64 pages in 64 adjacent 2 MiB slots of a 1 GiB region: 64 PTE tables and its own PMD table",
        _w(
            {"op": "mmap", "name": "p", "size": "1G", "align": "1G"},
            NOHUGE,
            B,
            {"op": "write", "region": "p", "length": "128M", "stride": "2M"},
            A,
        ),
        counters=("minflt", "VmPTE"),
    ),
    Case(
        "shmem-2g-16-readers",
        (
            "16 processes (one after the other) reading a 2 GiB shared region the parent wrote (1 GiB-aligned), "
            "one byte per 4 KiB, each build their own page tables: 1,024 PTE, 2 PMD and a PUD table (VmPTE "
            "+4,108 kB; the first's nr_page_table_pages +1,027) and take 32,768 faults (64 KiB fault-around: the "
            "host's fault_around_bytes, mirrored; validate does not write it, it is in debugfs)"
        ),
        _w(
            {"op": "mmap", "name": "s", "size": "2G", "addr": hex(AT_1G), "fixed": True, "flags": SHARED},
            {"op": "write", "region": "s"},
            {"op": "fork", "count": 16, "program": [B, {"op": "read", "region": "s"}, A]},
            {"op": "wait"},
        ),
        pids=tuple(range(2, 18)),
        counters=("minflt", "RssShmem", "VmPTE"),
        vmstat=("nr_page_table_pages",),
        own_tables=True,
    ),
    _hugetlb_share_case(
        "hugetlb-1g-aligned-share",
        (
            "1 GiB of shared hugetlb memory at a 1 GiB-aligned address, reserved at mmap, written by the parent "
            "(512 faults: HugePages_Free and HugePages_Rsvd -512); 4 children reading it each attach to the "
            "parent's PMD table (huge_pmd_share) in one fault: VmPTE +8 kB (PUD + shared PMD), HugetlbPages +0"
        ),
        AT_1G,
    ),
    _hugetlb_share_case(
        "hugetlb-misaligned",
        (
            "the same 1 GiB of shared hugetlb memory 2 MiB past a 1 GiB boundary: no 1 GiB window lies inside the "
            "vma, so nothing is shared: each child takes 512 faults from the page cache, VmPTE +12 kB (PUD + 2 "
            "PMD tables), HugetlbPages +1 GiB"
        ),
        AT_1G + (2 << 20),
    ),
    _munmap_middle_case(
        "munmap-middle-shmem",
        (
            "seed 003's bug report on shmem: 4 children each munmap 2 MiB in the middle of an 8 MiB shared region "
            "the parent wrote, map private memory there (MAP_FIXED) and write their own value; each reads it "
            "back and the parent's region stays intact: 640 faults (128 with fault-around, 512 private writes), "
            "VmPTE +24 kB per child"
        ),
        "8M",
        SHARED,
        ("minflt", "RssAnon", "RssShmem", "VmPTE"),
    ),
    _munmap_middle_case(
        "munmap-middle-hugetlb",
        (
            "seed 003's bug report on 2 GiB of shared hugetlb memory: a child attaches to the parent's two PMD "
            "tables (2 faults); its munmap of 2 MiB at offset 2 MiB splits the vma, which unshares the first "
            "1 GiB (hugetlb_split), so it refaults the 511 pages left there (HugetlbPages +1,046,528 kB) and "
            "keeps the second shared: 1,025 faults, VmPTE +16 kB; no page goes back to the pool"
        ),
        "2G",
        HUGETLB_SHARED,
        ("minflt", "RssAnon", "VmPTE", "HugetlbPages"),
        vmstat=HUGETLB_COUNTERS,
        knobs={"vm/nr_hugepages": "1024"},
    ),
    *FILE_CASES,
]

# --------------------------------------------------------------------------------------------
# Memory under pressure (issue 57): memory cgroups, reclaim and swap
# --------------------------------------------------------------------------------------------

#: A swap file of 1 GiB on the ext4 directory, made for each native run (native_swap.py).
SWAP_1G = {"machine": {"swap": [{"size": "1G", "kind": "file"}]}}
#: 2 MiB-aligned private memory of SIZE with 4 KiB pages only (MADV_NOHUGEPAGE), as the research
#: measured it: a THP written to a swap file is split anyway (thp_swpout_fallback).
W, R = {"op": "write", "region": "p", "value": 7}, {"op": "read", "region": "p", "expect": 7}


def _anon(size: str) -> list[dict[str, Any]]:
    return [
        {"op": "mmap", "name": "p", "size": size, "align": "2M"},
        {"op": "madvise", "region": "p", "advice": "nohugepage"},
    ]


#: Reclaim's and swap's /proc/vmstat events a pressure case compares (system-wide, between the
#: first pid's snapshots; memory cgroup reclaim counts in these, not in pgscan_direct).
SWAP_EVENTS = ("pswpout", "pswpin", "swap_ra", "swap_ra_hit", "pgmajfault", "workingset_refault_anon")
RECLAIM_EVENTS = ("pgscan_anon", "pgsteal_anon", "pgscan_file", "pgsteal_file", "pgscan_direct", "allocstall_normal")
#: A cgroup's sizes and events, as v1 names them (this host) and as v2 does.
V1_USAGE = ("memory.usage_in_bytes", "memory.max_usage_in_bytes", "memory.failcnt", "memory.memsw.usage_in_bytes")
V2_USAGE = ("memory.current", "memory.peak", "memory.swap.current", "memory.events max", "memory.events oom_kill")
V1_ANON = ("memory.stat rss", "memory.stat swap", "memory.stat swapcached", "memory.stat pgpgin", "memory.stat pgpgout")
V2_ANON = ("memory.stat anon", "memory.stat swapcached", "memory.stat pswpout", "memory.stat pswpin")

#: The cases of memory under pressure (memory cgroups, the LRU, reclaim and swap). Those not
#: in PRESSURE_OPEN are part of SUITE. Each is run PRESSURE_RUNS times natively (the host's reclaim varies a little)
#: and a counter passes inside the runs' spread. Swap is the whole host's: a case with swap
#: runs only where no other swap device is on. On a host whose memory controller is on cgroup
#: v1 (this one), mmsim runs with cgroup/memory=v1 and the v2-only cases are skipped, saying so.
PRESSURE_CASES = [
    # (a) A cgroup's limit forces reclaim of its anonymous memory to swap: 256 MiB written
    # through a 128 MiB memory.max (about half of it swapped out while writing: pswpout,
    # pgscan_anon/pgsteal_anon; v1 failcnt, max_usage = the limit), then read back (every
    # page swapped in: 8-page cluster readahead of the rotational swap file, majflt about 1/8
    # of the pages, swap_ra, workingset_refault_anon). Memory cgroup reclaim is not
    # pgscan_direct or allocstall: those stay 0.
    Case(
        "memcg-swap-256m-in-128m",
        (
            "256 MiB written in a cgroup of memory.max 128M with a 1 GiB swap file, then read again: reclaim "
            "swaps half out while writing and everything in while reading (majflt about 1 in 8: page-cluster 3)"
        ),
        _w(*_anon("256M"), B, W, R, A),
        counters=("minflt", "majflt", "RssAnon", "VmSwap"),
        vmstat=SWAP_EVENTS + RECLAIM_EVENTS + ("SwapFree", "SwapCached"),
        setup={"cgroups": {"box": {"memory.max": "128M"}}, "cgroup": "box", **SWAP_1G},
        cgroup=V1_USAGE + V1_ANON + V2_USAGE + V2_ANON,
    ),
    # (b) MADV_PAGEOUT of 64 MiB written: every page written to swap (pswpout 16384, VmSwap
    # +65536 kB, RssAnon -65536 kB) and left in the swap cache (SwapCached +65536 kB; v1's
    # memory.stat swap stays 0: it counts a page only once it leaves the swap cache).
    Case(
        "swap-pageout-64m",
        (
            "MADV_PAGEOUT of 64 MiB written (unlimited cgroup): pswpout 16384, VmSwap +65536 kB, RssAnon "
            "-65536 kB, every folio still in the swap cache (SwapCached +65536 kB; v1 memory.stat swap 0)"
        ),
        _w(*_anon("64M"), W, B, {"op": "madvise", "region": "p", "advice": "pageout"}, A),
        counters=("minflt", "majflt", "RssAnon", "VmSwap"),
        vmstat=("pswpout", "pswpin", "swpout_zero", "SwapCached", "SwapFree", "nr_swapcached"),
        setup={"cgroups": {"box": {}}, "cgroup": "box", **SWAP_1G},
        cgroup=V1_ANON + V2_ANON,
    ),
    # (b) ... then read back: the folios are still in the swap cache, so each read is a minor
    # fault that maps it (16384 faults, no major fault, no swap I/O, no readahead).
    Case(
        "swap-pageout-64m-read-back",
        (
            "the 64 MiB read back after MADV_PAGEOUT: swap-cache hits, 16384 minor faults, no major fault, "
            "pswpin 0, swap_ra 0; VmSwap -65536 kB, the slots kept (SwapFree unchanged)"
        ),
        _w(*_anon("64M"), W, {"op": "madvise", "region": "p", "advice": "pageout"}, B, R, A),
        counters=("minflt", "majflt", "RssAnon", "VmSwap"),
        vmstat=(*SWAP_EVENTS, "SwapCached", "SwapFree"),
        setup={"cgroups": {"box": {}}, "cgroup": "box", **SWAP_1G},
        cgroup=V1_ANON + V2_ANON,
    ),
    # (b, v2 only) ... with the swap cache reclaimed in between by a write to memory.reclaim:
    # the read then swaps every page in (pswpin 16384; cluster readahead: about 2050 major
    # faults, swap_ra about 14334). v1 has no memory.reclaim: skipped on this host.
    Case(
        "swap-pageout-reclaim-read-back",
        (
            "MADV_PAGEOUT of 64 MiB, the swap cache reclaimed by memory.reclaim, read back: pswpin 16384, about "
            "2050 major faults (8-page cluster readahead), swap_ra about 14334 (cgroup v2)"
        ),
        _w(
            *_anon("64M"),
            W,
            {"op": "madvise", "region": "p", "advice": "pageout"},
            {"op": "memory_reclaim", "cgroup": "box", "bytes": "64M"},
            B,
            R,
            A,
        ),
        counters=("minflt", "majflt", "RssAnon", "VmSwap"),
        vmstat=(*SWAP_EVENTS, "SwapCached"),
        setup={"cgroups": {"box": {}}, "cgroup": "box", **SWAP_1G},
        cgroup=V2_ANON,
    ),
    # (c) Page cache under a limit: a cold 512 MiB ext4 file (made by the first process, outside
    # the cgroup) read twice with read() by a child in a cgroup of memory.max 256M. The first
    # read fills the cgroup and reclaim evicts the file's older pages (pgscan_file,
    # pgsteal_file); the second reads them from the disk again, refaults (workingset_refault_file)
    # that may activate. No swap: the file's pages are clean. Note: DAMON on this host evicts
    # cold page cache within seconds, also this file's (the spread of the runs shows it).
    Case(
        "memcg-file-512m-in-256m",
        (
            "a cold 512 MiB ext4 file read twice by read() in a cgroup of memory.max 256M: page cache reclaim "
            "(pgscan_file, pgsteal_file) and the second read's refaults (workingset_refault_file); v1 cache and "
            "pgpgin/pgpgout"
        ),
        _w(
            {"op": "create", "file": "f", "size": "512M"},
            B,
            {
                "op": "fork",
                "cgroup": "box",
                "program": [
                    B,
                    {"op": "pread", "file": "f", "chunk": "1M"},
                    {"op": "pread", "file": "f", "chunk": "1M"},
                    A,
                ],
            },
            {"op": "wait"},
            A,
        ),
        pids=(1, 2),
        counters=("minflt", "majflt"),
        vmstat=(
            "pgscan_file",
            "pgsteal_file",
            "pgscan_anon",
            "workingset_refault_file",
            "workingset_activate_file",
            "pgactivate",
            "pgdeactivate",
            "pgpgin",
        ),
        setup={"cgroups": {"box": {"memory.max": "256M"}}},
        cgroup=(
            "memory.usage_in_bytes",
            "memory.max_usage_in_bytes",
            "memory.failcnt",
            "memory.stat cache",
            "memory.stat pgpgin",
            "memory.stat pgpgout",
            "memory.stat workingset_refault_file",
            "memory.stat inactive_file",
            "memory.stat active_file",
            "memory.current",
            "memory.stat file",
        ),
    ),
    # (c2) `dd` in a container: a 64 MiB file written by write() in a cgroup of memory.max
    # 16M, then read back. Reclaim meets dirty page cache at the LRU's end, wakes the flusher
    # and (v1) sleeps on it; the cgroup stays at its limit and nobody is OOM-killed.
    Case(
        "memcg-file-write-64m-in-16m",
        (
            "a 64 MiB ext4 file written by write() in a cgroup of memory.max 16M, then read: reclaim wakes the "
            "flusher for the dirty page cache instead of OOM-killing (oom_kill 0, max usage the limit)"
        ),
        _w(
            B,
            {
                "op": "fork",
                "cgroup": "box",
                "program": [
                    B,
                    {"op": "create", "file": "f", "size": 0},
                    {"op": "pwrite", "file": "f", "length": "64M", "chunk": "1M", "value": 5},
                    {"op": "pread", "file": "f", "chunk": "1M", "expect": 5},
                    A,
                ],
            },
            {"op": "wait"},
            A,
        ),
        pids=(1, 2),
        counters=("minflt", "majflt"),
        vmstat=("oom_kill", "pgscan_anon", "pgsteal_file", "pgscan_file"),
        setup={"cgroups": {"box": {"memory.max": "16M"}}},
        cgroup=(
            "memory.max_usage_in_bytes",
            "memory.stat cache",
            "memory.stat pgpgin",
            "memory.stat pgpgout",
            "memory.events oom_kill",
            "memory.peak",
        ),
    ),
    # (d) A fork after MADV_PAGEOUT: the child inherits the swap entries (its VmSwap); its reads
    # find the folios in the swap cache (minor faults, no swap I/O), and the parent's swap PTEs
    # keep the slots.
    Case(
        "swap-fork-after-pageout",
        (
            "a child forked after MADV_PAGEOUT of 64 MiB reads it all: 16384 minor faults on swap-cache "
            "folios, no major fault, no pswpin; its VmSwap -65536 kB, RssAnon +65536 kB"
        ),
        _w(
            *_anon("64M"),
            W,
            {"op": "madvise", "region": "p", "advice": "pageout"},
            {"op": "fork", "program": [B, R, A]},
            {"op": "wait"},
        ),
        pids=(2,),
        counters=("minflt", "majflt", "RssAnon", "VmSwap"),
        vmstat=(*SWAP_EVENTS, "SwapCached", "SwapFree"),
        setup={"cgroups": {"box": {}}, "cgroup": "box", **SWAP_1G},
        cgroup=V1_ANON + V2_ANON,
    ),
    # (g) shmem through swap: MADV_PAGEOUT of 64 MiB of shared anonymous memory written. Each
    # folio is written by shmem_writeout (pswpout 16384) and leaves the shmem page cache for
    # the swap cache (nr_shmem -16384, SwapCached +65536 kB, RssShmem -65536 kB; VmSwap stays:
    # shmem's swap is no process's MM_SWAPENTS).
    Case(
        "shmem-pageout-64m",
        (
            "MADV_PAGEOUT of 64 MiB of shared anonymous memory written: shmem_writeout writes every page "
            "(pswpout 16384), nr_shmem -16384, SwapCached +65536 kB, RssShmem -65536 kB, VmSwap 0"
        ),
        _w(
            {"op": "mmap", "name": "p", "size": "64M", "flags": SHARED},
            W,
            B,
            {"op": "madvise", "region": "p", "advice": "pageout"},
            A,
        ),
        counters=("minflt", "majflt", "RssShmem", "VmSwap"),
        vmstat=("pswpout", "pswpin", "swpout_zero", "nr_shmem", "SwapCached", "SwapFree", "nr_swapcached"),
        setup={"cgroups": {"box": {}}, "cgroup": "box", **SWAP_1G},
        cgroup=("memory.stat shmem", "memory.stat swapcached", "memory.stat swap", "memory.stat pswpout"),
    ),
    # (g) ... read back: swap-cache hits, minor faults only; each page goes back to the page cache
    # and gives up its slot (shmem_swapin_folio: SwapFree back, SwapCached 0).
    Case(
        "shmem-pageout-64m-read-back",
        (
            "the 64 MiB of shared anonymous memory read back after MADV_PAGEOUT: swap-cache hits, 16384 "
            "minor faults, no major fault, pswpin 0; nr_shmem +16384, the slots freed (SwapFree +65536 kB)"
        ),
        _w(
            {"op": "mmap", "name": "p", "size": "64M", "flags": SHARED},
            W,
            {"op": "madvise", "region": "p", "advice": "pageout"},
            B,
            R,
            A,
        ),
        counters=("minflt", "majflt", "RssShmem", "VmSwap"),
        vmstat=("pswpin", "pgmajfault", "swap_ra", "nr_shmem", "SwapCached", "SwapFree"),
        setup={"cgroups": {"box": {}}, "cgroup": "box", **SWAP_1G},
        cgroup=("memory.stat shmem", "memory.stat swapcached", "memory.stat swap"),
    ),
    # (g) A tmpfs-backed shared mapping larger than its cgroup: 128 MiB of shared anonymous
    # memory written through memory.max 64M, then read back: reclaim swaps shmem out while
    # writing and back in while reading (cluster readahead by slot: shmem_swapin_cluster).
    Case(
        "memcg-shmem-128m-in-64m",
        (
            "128 MiB of shared anonymous memory written in a cgroup of memory.max 64M with a 1 GiB swap file, "
            "then read: shmem swapped out while writing, in while reading (majflt about 1 in 8)"
        ),
        _w({"op": "mmap", "name": "p", "size": "128M", "flags": SHARED}, B, W, R, A),
        counters=("minflt", "majflt", "RssShmem"),
        vmstat=SWAP_EVENTS + RECLAIM_EVENTS + ("nr_shmem", "SwapFree", "SwapCached"),
        setup={"cgroups": {"box": {"memory.max": "64M"}}, "cgroup": "box", **SWAP_1G},
        cgroup=(*V1_USAGE, "memory.stat shmem", "memory.stat swap", "memory.stat swapcached", *V2_USAGE),
    ),
    # (e) memory.high (v2 only): 128 MiB written through a memory.high of 64M with memory.max
    # unlimited: the task reclaims and is throttled on its way back to user space (memory.events
    # high), never OOM-killed. v1 has no memory.high: skipped on this host.
    Case(
        "memcg-high-throttle",
        (
            "128 MiB written in a cgroup of memory.high 64M (memory.max max) with swap: reclaim on return to "
            "user space (memory.events high), usage held near 64M, no OOM kill (cgroup v2)"
        ),
        _w(*_anon("128M"), B, W, A),
        counters=("minflt", "RssAnon", "VmSwap"),
        vmstat=SWAP_EVENTS + RECLAIM_EVENTS,
        setup={"cgroups": {"box": {"memory.high": "64M"}}, "cgroup": "box", **SWAP_1G},
        cgroup=V2_USAGE + V2_ANON + ("memory.events high",),
    ),
    # (f) No swap allowed: memory.swap.max 0 (v1: memsw limit = memory limit = 64M) with a swap
    # device on. A child writing 128 MiB there cannot swap (reclaim scans no anon: pgscan_anon
    # 0, pswpout 0) and is OOM-killed by the cgroup's OOM killer (oom_kill +1, the child's
    # SIGKILL; v1 memory.oom_control oom_kill 1, max_usage = the limit; memory.failcnt stays 0:
    # memsw is charged first and its failcnt is never counted in 6.18).
    Case(
        "memcg-memsw-oom",
        (
            "a child writes 128 MiB in a cgroup of memory.max 64M and memory.swap.max 0: no swap-out "
            "(pgscan_anon 0, pswpout 0), the cgroup's OOM killer kills it (oom_kill +1, SIGKILL; v1 "
            "oom_control oom_kill 1, failcnt 0)"
        ),
        _w(
            B,
            {"op": "fork", "cgroup": "box", "program": [*_anon("128M"), W]},
            {"op": "wait"},
            A,
        ),
        counters=("minflt",),
        vmstat=("oom_kill", "pswpout", "pgscan_anon", "pgsteal_anon", "pgscan_file"),
        setup={"cgroups": {"box": {"memory.max": "64M", "memory.swap.max": 0}}, **SWAP_1G},
        cgroup=(
            "memory.oom_control oom_kill",
            "memory.oom_control under_oom",
            "memory.failcnt",
            "memory.max_usage_in_bytes",
            "memory.memsw.max_usage_in_bytes",
            "memory.usage_in_bytes",
            "memory.events oom_kill",
            "memory.events max",
            "memory.peak",
        ),
    ),
]


#: The pressure cases mmsim does not yet agree on with this machine's kernel, and what differs
#: (measured with 5 native runs each, Linux 6.18.44, cgroup v1; docs/validation.md). They stay
#: out of SUITE, which must pass; `python -m mmsim.validate_suite --open` runs them.
PRESSURE_OPEN = {
    "memcg-swap-256m-in-128m": (
        "faults, swap-ins, swap-outs, pgsteal, rss/swap/swapcached agree within a few pages of the runs' spread; "
        "pgscan_anon is 2.4% above the kernel's (its runs spread 0.25%), v1 memory.failcnt 7% below, and "
        "memory.memsw.usage one page below: mmsim does not charge slab objects (vm_area_struct, anon_vma) "
        "to a memcg"
    ),
    "memcg-shmem-128m-in-64m": (
        "writing agrees within 7% (pswpout 17905 vs 16807, pgsteal_anon 16466 vs 16551); reading agrees on "
        "pswpin (32782 vs 32774), majflt (4102 vs 4098), swap_ra and pgsteal_anon (32776 vs 32778), but the "
        "kernel writes 8000 more pages while reading (pswpout 39567 vs 31486, every one rotated: pgrotated "
        "39564) and ends with 6800 of them still in the swap cache (SwapCached +27180 kB vs -5104 kB, shmem "
        "and RssShmem that much lower). Not the I/O scheduler: the same with vda's scheduler set to none"
    ),
    "memcg-file-write-64m-in-16m": (
        "neither side OOM-kills and both hold the limit (max usage 16M); writing alone agrees within one 1 MiB "
        "folio (pgsteal_file 12288 vs 12544, pgscan_file 13056 vs 13568, failcnt 48 vs 49, pgpgin 64 = 64, every "
        "kernel run alike) but the kernel's reclaim finds the folios already under writeback "
        "(nr_vmscan_immediate_reclaim 0 vs 768) and it ends with 4 MiB dirty, mmsim 16 MiB: its flusher keeps "
        "writing what the writer dirties after the wake-up, mmsim's writes what is dirty at the wake-up at once; "
        "reading back then thrashes readahead on both, the kernel's pgsteal_file 25% higher"
    ),
}

SUITE += [c for c in PRESSURE_CASES if c.name not in PRESSURE_OPEN]


def _main() -> None:
    """``python -m mmsim.validate_suite [--open] [NAME ...]``: run pressure cases (all of
    PRESSURE_CASES, or with --open those of PRESSURE_OPEN) on this host and in mmsim, and print
    each counter, kernel (its runs' range) beside mmsim."""
    import sys

    from mmsim.native import validate_case
    from mmsim.native_compare import differs
    from mmsim.native_host import host_lock, host_settings

    args = sys.argv[1:]
    names = [a for a in args if a != "--open"]
    cases = [c for c in PRESSURE_CASES if (c.name in PRESSURE_OPEN or "--open" not in args)]
    with host_lock():
        host = host_settings()
        for c in cases:
            if names and c.name not in names:
                continue
            r = validate_case(c, host)
            print(f"{r['status'].upper():5} {c.name}  {r.get('reason', '')}")
            for x in r["counters"]:
                runs = f"{x.get('kernel_min', x['kernel'])}..{x.get('kernel_max', x['kernel'])}"
                mark = "  <-- differs" if differs(x) else ""
                print(f"      {x['name']:45} kernel {runs:>24}  mmsim {x['simulated']:>12}{mark}")


if __name__ == "__main__":
    _main()
