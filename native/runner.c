/* mmsim's native runner: executes a workload on the real kernel with real system calls, and
 * reports what the kernel did (per-process faults and /proc/self/status, smaps_rollup, and
 * system-wide /proc/vmstat and /proc/meminfo) at each snapshot, for `mmsim validate`.
 *
 *   runner OUT_FILE [ext4=DIR] [tmpfs=DIR] < PROGRAM
 *
 * OUT_FILE gets the snapshot and event lines (mmsim passes /dev/stdout, a pipe: a file on a
 * disk or on tmpfs would move the page-cache counters the runner reports). DIR is where the
 * workload's files of that filesystem live: a directory on an ext4 filesystem, one on a tmpfs.
 * The runner makes DIR/mmsim-PID (PID its own), puts every file there, and its first process
 * removes it when it ends (exit, or the end of the program; not when a signal kills it: then
 * mmsim removes it). A program that creates no file needs neither; a create on a filesystem
 * with no DIR ends the run with an error. Writing to /proc/sys/vm/drop_caches needs root.
 *
 * PROGRAM is the workload compiled by mmsim (python/mmsim/native.py), one op per line:
 *
 *   mmap NAME SIZE ALIGN PROT FLAGS ADDR FIXED [FILE FILE_OFFSET]
 *                                        PROT: PROT_* bits; FLAGS: bit 0 MAP_SHARED
 *                                        (else MAP_PRIVATE), bit 1 MAP_HUGETLB, bit 2 a mapping
 *                                        of FILE at FILE_OFFSET (else anonymous; FILE "-");
 *                                        FIXED: 0 or 1; ADDR: a hint (0: none), the address
 *                                        with FIXED. With MAP_HUGETLB the kernel rounds the
 *                                        length up to 2 MiB (the region's size is the rounded
 *                                        one). A file is opened read-write, mapped and closed;
 *                                        with ALIGN a file's or a hugetlb mapping's place is
 *                                        that of a private anonymous mapping of
 *                                        SIZE + ALIGN (mapped PROT_NONE, the file mapped over
 *                                        it MAP_FIXED at the aligned address, the rest unmapped)
 *   munmap NAME OFFSET LENGTH            LENGTH -1: to the region's end; nothing left of
 *                                        the region past OFFSET: no call (as mmsim)
 *   mlock NAME OFFSET LENGTH ONFAULT     mlock(), or with ONFAULT 1 mlock2(MLOCK_ONFAULT)
 *   munlock NAME OFFSET LENGTH
 *   mlockall FLAGS                       FLAGS: MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT (1, 2, 4);
 *                                        a failure is an event ("mlockall: EINVAL")
 *   munlockall
 *   mremap NAME SIZE FLAGS ADDR OFFSET LENGTH NEW
 *                                        mremap(2) of [OFFSET, OFFSET + LENGTH) of the region
 *                                        (LENGTH -1: to its end) to SIZE bytes, FLAGS the
 *                                        MREMAP_* bits, ADDR the new address; NEW "-" or a
 *                                        region name. Named as mmsim does: NEW names the range
 *                                        at its new place (at its old one if the call failed
 *                                        and NEW is new); without NEW, a whole-region mremap
 *                                        moves the region, a partial one resizes it only when
 *                                        it resized the region's last bytes in place
 *   mprotect NAME OFFSET LENGTH PROT     PROT: PROT_* bits
 *   brk NAME DELTA                       sbrk(DELTA); NAME is the heap from where the break
 *                                        was at the first brk op naming it to the break now
 *   madvise NAME OFFSET LENGTH ADVICE MADV
 *                                        ADVICE: the workload's word, MADV: its MADV_* value
 *                                        (the engine's schema); a failure is an event
 *                                        ("madvise NAME ADVICE: EINVAL")
 *   read NAME OFFSET LENGTH STRIDE EXPECT BLOCK BSTRIDE COUNT SEED
 *                                        EXPECT -1: none; BLOCK 0: one byte per step, else
 *                                        BLOCK bytes every BSTRIDE within the page; COUNT -1:
 *                                        sequential, else COUNT accesses to STRIDE-sized
 *                                        slots drawn by splitmix64 from SEED (as mmsim's
 *                                        pattern "random")
 *   write NAME OFFSET LENGTH STRIDE VALUE BLOCK BSTRIDE COUNT SEED
 *   compare A OFFA B OFFB LENGTH STRIDE EXPECT   STRIDE 0: memcmp; EXPECT -1/0/1
 *   atomic NAME OFFSET COUNT             COUNT locked adds of 0 to the 8-byte word at OFFSET
 *                                        (a locked read-modify-write that leaves memory as it
 *                                        is, as mmsim's atomic op does)
 *   create FILE SIZE FS                  FS ext4 or tmpfs. ext4: FILE is created (or truncated)
 *                                        and SIZE zero bytes written with write() from the
 *                                        runner's buffer (2 MiB calls), then fsync() and
 *                                        posix_fadvise(DONTNEED) over the file, until
 *                                        cachestat (else mincore on a temporary mapping) says
 *                                        no page is cached (a few tries; if some stay, a
 *                                        "not-cold" event). tmpfs: created empty, ftruncate
 *                                        to SIZE (sparse). The name in the other FS's
 *                                        directory is removed: a name is one file
 *   pwrite FILE OFFSET LENGTH CHUNK VALUE
 *                                        pwrite() calls of CHUNK bytes (the last shorter)
 *                                        from OFFSET, every byte VALUE; LENGTH -1: to the
 *                                        file's size at the op
 *   pread FILE OFFSET LENGTH CHUNK EXPECT
 *                                        pread() calls of CHUNK bytes from OFFSET, until
 *                                        LENGTH (-1: no limit) or a short read (EOF); EXPECT
 *                                        -1: none, else the first byte that differs is an
 *                                        event ("expect": "pread FILE at 0xOFF: expected E,
 *                                        found V"; one per op, which goes on)
 *   memfd_create FILE SIZE HUGETLB       memfd_create(FILE, MFD_CLOEXEC, | MFD_HUGETLB if
 *                                        HUGETLB is 1), then ftruncate to SIZE; the descriptor
 *                                        stays open and FILE names it from then on (a file op
 *                                        reopens it through /proc/self/fd, as it opens a path)
 *   fallocate FILE OFFSET LENGTH MODE    fallocate; MODE the FALLOC_FL_* bits
 *   fadvise FILE OFFSET LENGTH ADVICE    posix_fadvise; ADVICE dontneed or willneed; LENGTH 0:
 *                                        to the end
 *   fsync FILE
 *   drop_caches VALUE                    VALUE written to /proc/sys/vm/drop_caches
 *   loop COUNT ... end
 *   fork COUNT ... end                   each child runs the block, then exits
 *   thread COUNT ... end                 each thread (clone with CLONE_VM | CLONE_THREAD) runs
 *                                        the block, then exits (the thread only, as mmsim's does)
 *   wait
 *   exit
 *   snapshot LABEL
 *
 * Files: see runner_files.h.
 *
 * The serial schedule (mmsim's engine.schedule=serial): a task a fork or thread op creates
 * runs to its end (exit, or a fatal signal) before the op creates the next one, and the op
 * returns once the last has ended. So no count depends on the timing of concurrent tasks (a
 * sibling holding a folio lock makes fault-around's folio_trylock fail, for one). Pids are
 * logical: an op of COUNT tasks takes the next COUNT numbers at once, as mmsim numbers tasks.
 *
 * The runner is invisible: nothing it does for itself shows in a reported count.
 *  - Before the program starts it writes every page of its own private writable memory
 *    (stack, data, bss, heap, thread stacks, the 2 MiB buffer of file reads and writes)
 *    and marks it MADV_NOHUGEPAGE, and it allocates nothing once the program runs (no malloc,
 *    no stdio on files: /proc is read with read(2) into static buffers).
 *  - It reads a byte of every page of its own file mappings (its text and read-only data,
 *    libc's, ld.so's) before the program, so that no code it first runs during the program
 *    faults (minor, or major where the page was no longer cached).
 *  - After a fork both sides write every such writable page again (breaking copy-on-write at
 *    once), and the child reads its file mappings again (fork copies no page table entry of
 *    a file mapping without anonymous pages: vma_needs_copy). The faults that takes, with
 *    any glibc's fork wrapper took, are the runner's own: `minflt`, `majflt` and perf's
 *    page-faults, minor-faults and major-faults are reported without them (they are in
 *    `runner_minflt` and `runner_majflt`). RSS and page tables are unchanged by it: a COW
 *    break maps a copy where the shared page was, and the child's RssFile is back to what
 *    its parent had (its own text) before the child's first snapshot.
 *  - Its output goes to a pipe (see OUT_FILE), and a file it creates is made cold before the
 *    workload sees it, so the page cache it reports is the workload's.
 *  - minflt is the task's own (getrusage RUSAGE_THREAD), as mmsim counts faults per task.
 *
 * mlockall(MCL_CURRENT) locks the runner's own mappings too. mmsim's stand-ins of them (see
 * python/mmsim/native.py host_layout) are locked alike (VmLck) and their pages present alike
 * (no populate fault: the runner wrote or read every page of its own before the program, its
 * vdso's too), but the pages of its file mappings are the page cache's, which other processes
 * map and may have mlocked, in folios whose size the filesystem chose: how many of them an
 * mlockall counts in unevictable_pgs_mlocked (and munlockall in _munlocked) would be the
 * host's. So for a program with an mlockall op, a lock helper (start_lock_helper) holds them
 * mlocked from before the program to its end: the runner's own mlocks and munlocks of them
 * then change no count (mlock_count goes up and down), as mmsim's stand-ins of them, which
 * map the zero page, change none. The runner's writable memory is its own, written, and
 * mirrored by written stand-ins: its mlocks count on both sides.
 *
 * Host state: before the program, the runner reads a 2 MiB-aligned MADV_HUGEPAGE range and
 * unmaps it. Where THP and use_zero_page are on, that makes sure the huge zero folio exists
 * and keeps it (the mm that mapped it holds a reference until it exits), so that a workload's
 * thp_zero_page_alloc does not depend on whether the host had freed it; mmsim then starts
 * with it allocated (python/mmsim/native.py).
 *
 * Split TLB entries: a CPU caches a 2 MiB mapping's translation as one TLB entry, so a write
 * fault that makes a read-only huge entry writable (hugetlb_wp or do_huge_pmd_wp_page
 * reusing the folio after the fork's child ended: no TLB flush, as x86 relies on the faulting
 * access dropping the stale entry) is the only fault there, as mmsim counts it. In a virtual
 * machine whose memory the host maps with 4 KiB pages (a KVM guest, Firecracker's), the CPU
 * caches each 4 KiB piece of a huge mapping it touched as an entry of its own, the fault
 * drops only the one it hit, and every other piece still cached read-only (read before, or
 * walked speculatively ahead of the writes) takes a spurious write fault: a private hugetlb
 * mapping of 8 MiB read and then written after a fork took 80 to 220 minor faults instead of
 * 4, varying with what the TLB held. The runner tests for it before the program
 * (probe_split_tlb: a THP, or else a hugetlb page, written, forked, read and written again
 * takes 1 fault where the CPU caches it whole, about 500 where it splits it). Only where it
 * splits, the runner maps FLUSH_PAGES pages of its own (MAP_SHARED: they never merge with a
 * workload's mapping; each forked child writes them too) and, after each access of a write
 * or atomic op that faulted, flushes its TLB (flush_tlb: an mprotect of those pages to
 * read-only, a range above x86's tlb_single_page_flush_ceiling, 33 by default, so a flush
 * of the whole address space, and back), which drops the stale pieces as the fault drops
 * the whole entry elsewhere. The flush changes no page, table or fault count.
 *
 * Every process appends one JSON line per snapshot to OUT_FILE (O_APPEND; one task runs at a
 * time). Logical pids follow the order of creation, as the
 * simulator numbers its tasks (a counter in shared memory). Alignment is done by mapping
 * size + align and trimming, as posix_memalign-style code does (a free aligned hint is taken
 * as is); mmsim places `align` the same way (kernel/mmap.rs). Reads touch one byte per
 * stride through a volatile pointer, so the compiler cannot elide them.
 *
 * Events are lines too (label "__event", with "kind" and "message" as mmsim's events). Every
 * system call of an op that fails is one ("syscall", with "errno", the message as mmsim's
 * engine words it): a failed mmap ("mmap NAME (SIZE bytes): ENOMEM") ends the task, as in
 * mmsim; a failed munmap, mprotect, mlock, munlock, mremap ("munmap NAME: EINVAL",
 * "mremap NAME: EFAULT"), madvise ("madvise NAME ADVICE: EINVAL") or file op ("open FILE:
 * ENOENT", "pread FILE: EIO") is an event and the task goes on (mmsim validate compares the
 * list of them, task by task); a task
 * killed by SIGSEGV or SIGBUS ("segfault", with "signal" and "addr") says so from its signal
 * handler, then dies of the signal (no core dump: RLIMIT_CORE is 0); a child killed by any
 * other signal is reported by its parent ("killed"). The runner goes on after a child's death;
 * its first process's death by SIGSEGV or SIGBUS ends the run with that signal. A create
 * whose file the kernel keeps cached is a "not-cold" event (with "file" and "cached" pages):
 * the run's counts then depend on the host, and validate says so.
 *
 * The runner re-executes itself once with address-space layout randomisation off
 * (personality ADDR_NO_RANDOMIZE, as `setarch -R` does). Which PMD and PUD tables already
 * exist when a region is first touched depends on where the kernel put it relative to the
 * process's other mappings: with ASLR a 64 MiB region lands in a 1 GiB slot of its own about
 * one run in 16 and the kernel's VmPTE is one table larger. A fixed layout makes every run
 * of a workload count the same tables.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_OPS 4096
#define MAX_REGIONS 64
#define MAX_CHILDREN 4096
/* Thread ops nested in thread ops: each level runs on a stack of its own. */
#define MAX_THREAD_DEPTH 16
#define THREAD_STACK (512 * 1024)
/* The main stack the runner's own calls may reach, written before the program starts. */
#define MAIN_STACK (512 * 1024)
#define MAX_OWN 128
/* The default hugetlb page (x86-64's PMD size): MAP_HUGETLB's unit. */
#define HPAGE (2UL << 20)
/* The buffer of file reads and writes: CHUNK is at most this (mmsim refuses more). */
#define IO_BUF (2UL << 20)
/* Pages whose mprotect flushes the whole TLB: more than x86's tlb_single_page_flush_ceiling. */
#define FLUSH_PAGES 64
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

enum kind {
	MMAP,
	MUNMAP,
	MREMAP,
	MLOCK,
	MUNLOCK,
	MLOCKALL,
	MUNLOCKALL,
	MPROTECT,
	MADVISE,
	READ,
	WRITE,
	COMPARE,
	ATOMIC,
	LOOP,
	FORK,
	THREAD,
	WAIT,
	EXIT,
	SNAPSHOT,
	CREATE,
	PWRITE,
	PREAD,
	FADVISE,
	FSYNC,
	MEMFD_CREATE,
	FALLOCATE,
	DROP_CACHES,
	BRK,
	END
};

struct op {
	enum kind kind;
	char name[64], name2[64];
	long long a, b, c, d, e, f, g;
	unsigned long long h;
	int end; /* for LOOP/FORK/THREAD: index of the matching END */
};

static struct op ops[MAX_OPS];
static int nops;
static int thread_depth_needed;

struct region {
	char name[64];
	char *addr;
	size_t size;
};
static struct region regions[MAX_REGIONS];
static int nregions;
/* The heap's start (/proc/self/stat's start_brk), read before the program. */
static unsigned long start_brk;

/* Name [addr, addr + size) NAME, a new region or the one of that name. */
static void set_region(const char *name, char *addr, size_t size)
{
	struct region *r = NULL;
	for (int k = 0; k < nregions; k++)
		if (!strcmp(regions[k].name, name))
			r = &regions[k];
	if (!r) {
		if (nregions == MAX_REGIONS) {
			fprintf(stderr, "runner: more than %d regions\n", MAX_REGIONS);
			exit(3);
		}
		r = &regions[nregions++];
	}
	snprintf(r->name, sizeof r->name, "%s", name);
	r->addr = addr;
	r->size = size;
}

static int out_fd;

/* Where the workload's files live: DIR/mmsim-PID of each filesystem ("" where none is given). */
enum fs { EXT4, TMPFS, NFS };
static const char *const fs_names[NFS] = {"ext4", "tmpfs"};
static char fs_dir[NFS][PATH_MAX];
static pid_t main_pid;
/* A file's path (sized so that the compiler sees no truncation of "DIR/NAME"). */
static char path_buf[NFS * PATH_MAX + 512];
/* File reads and writes go through this buffer (IO_BUF bytes, mapped in main): written before
 * the program like all of the runner's memory, so that a read() into it takes no fault. Not
 * in .bss: without ASLR the heap follows .bss in one vma, which 2 MiB more would make wide
 * enough for a THP where THP is "always" (malloc's first touch of the heap would fault one). */
static char *io_buf;
/* One PROT_NONE page, mlocked and munlocked before each snapshot (see drain_mlock_batch). */
static char *drain_page;
/* The drain page's lock, as an mlockall(MCL_CURRENT) of this mm left it: 0 none, 1 VM_LOCKED,
 * 2 VM_LOCKED | VM_LOCKONFAULT (threads share it with their mm; a forked child starts at 0). */
static int drain_locked;
/* The program has an mlockall op: the lock helper holds the runner's file pages mlocked (see
 * start_lock_helper). */
static int uses_mlockall;
static pid_t lock_helper;
/* FLUSH_PAGES pages (MAP_SHARED), mapped only where the TLB splits huge pages (see the header
 * and flush_tlb); NULL elsewhere. */
static char *flush_pages;
static volatile long *pid_counter;
static volatile unsigned long sink;
/* The layout is randomised (set once in main; forked children inherit the personality). */
static int aslr;

/* perf events of this process (opened at start and again in each child): software events
 * work everywhere; hardware ones only where the host (or its hypervisor) exposes a PMU. */
#define CACHE(c, op, r) ((c) | ((op) << 8) | ((r) << 16))
static const struct {
	const char *name;
	unsigned type;
	unsigned long long config;
} events[] = {
	{"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
	{"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
	{"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
	{"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
	{"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
	{"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
	{"dTLB-load-misses", PERF_TYPE_HW_CACHE,
	 CACHE(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)},
	{"LLC-load-misses", PERF_TYPE_HW_CACHE,
	 CACHE(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS)},
};
#define NEVENTS (int)(sizeof events / sizeof events[0])

/* What is the running task's own: its logical pid, the children it has not reaped, its perf
 * events and the faults the runner took for itself. A thread shares the globals of its
 * process, so a thread op saves its creator's task and restores it when the thread ends
 * (the creator is blocked meanwhile: the serial schedule). */
struct task {
	int pid;
	int nchildren;
	pid_t children[MAX_CHILDREN];
	int perf_fd[NEVENTS];
	long own_faults, own_majflt;
	long own_before_perf, own_maj_before_perf; /* own faults before its perf events opened */
};
static struct task cur = {.pid = 1};

/* The runner's own private writable memory, and its private file mappings (code, read-only
 * data), from /proc/self/maps before the program. */
static struct {
	char *start, *end;
	int writable;
} own[MAX_OWN];
static int nown;

/* Thread stacks, one per nesting level of thread ops, written before the program starts. */
static char *thread_stacks[MAX_THREAD_DEPTH];
static int thread_level;

static void die(const char *msg)
{
	fprintf(stderr, "runner: %s: %s\n", msg, strerror(errno));
	exit(3);
}

static long task_minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_minflt;
}

static long task_majflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_majflt;
}

static long task_faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_minflt + ru.ru_majflt;
}

/* Flush this task's TLB where the CPU splits huge pages (see the header): the pages go
 * read-only (their ptes change: a flush of more than the ceiling, so of everything) and
 * writable again (an upgrade: no flush, no fault). */
static void flush_tlb(void)
{
	if (flush_pages == NULL)
		return;
	mprotect(flush_pages, FLUSH_PAGES * 4096UL, PROT_READ);
	mprotect(flush_pages, FLUSH_PAGES * 4096UL, PROT_READ | PROT_WRITE);
}

/* Map them in this process's page table (a forked child: fork copies no pte of a shared
 * mapping), so that its mprotect changes them. */
static void touch_flush_pages(void)
{
	if (flush_pages != NULL)
		for (size_t i = 0; i < FLUSH_PAGES * 4096UL; i += 4096)
			((volatile char *)flush_pages)[i] = 1;
}

/* Whether the CPU caches a huge mapping in 4 KiB pieces (see the header): a 2 MiB page is
 * written (1 fault: it is one pmd mapping; else -1, no test), write-protected by a fork whose
 * child exits at once, read, and written again: 1 fault (the reuse) where its translation is
 * one TLB entry (0), more where each piece read is one (1). */
static int probe_split_tlb(char *a)
{
	size_t huge = 2UL << 20;
	long before = task_faults();
	for (size_t i = 0; i < huge; i += 4096)
		((volatile char *)a)[i] = 1;
	if (task_faults() - before != 1)
		return -1;
	pid_t p = fork();
	if (p < 0)
		return -1;
	if (p == 0)
		_exit(0);
	while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
		;
	for (size_t i = 0; i < huge; i += 4096)
		sink += ((volatile char *)a)[i];
	before = task_faults();
	for (size_t i = 0; i < huge; i += 4096)
		((volatile char *)a)[i] = 2;
	return task_faults() - before > 1;
}

/* Test with a THP (MADV_HUGEPAGE), else a hugetlb page (where the pool has one); where the
 * TLB splits them, map the flush pages. */
static void setup_tlb_flush(void)
{
	size_t huge = 2UL << 20;
	int split = -1;
	char *p = mmap(NULL, 2 * huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
		char *a = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
		if (madvise(a, huge, MADV_HUGEPAGE) == 0)
			split = probe_split_tlb(a);
		munmap(p, 2 * huge);
	}
	if (split < 0) {
		p = mmap(NULL, huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		if (p != MAP_FAILED) {
			split = probe_split_tlb(p);
			munmap(p, huge);
		}
	}
	if (split <= 0)
		return;
	flush_pages = mmap(NULL, FLUSH_PAGES * 4096UL, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (flush_pages == MAP_FAILED)
		flush_pages = NULL;
	touch_flush_pages();
}

static void open_perf(void)
{
	for (int i = 0; i < NEVENTS; i++) {
		struct perf_event_attr a;
		memset(&a, 0, sizeof a);
		a.size = sizeof a;
		a.type = events[i].type;
		a.config = events[i].config;
		a.exclude_hv = 1;
		cur.perf_fd[i] = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	}
	cur.own_before_perf = cur.own_faults;
	cur.own_maj_before_perf = cur.own_majflt;
}

static void close_perf(void)
{
	for (int k = 0; k < NEVENTS; k++)
		if (cur.perf_fd[k] >= 0)
			close(cur.perf_fd[k]);
}

/* Write every page of the runner's own private writable memory (a read and a write of the
 * same byte): before the program it allocates them, after a fork it breaks copy-on-write. */
static void touch_own(void)
{
	for (int i = 0; i < nown; i++)
		if (own[i].writable)
			for (volatile char *p = own[i].start; p < own[i].end; p += 4096)
				*p = *p;
}

/* Read every page of the runner's own file mappings: fork does not copy the page tables of
 * a file mapping without anonymous pages (vma_needs_copy), so a child would otherwise fault
 * on the runner's code as it first runs it. */
static void read_own(void)
{
	for (int i = 0; i < nown; i++)
		if (!own[i].writable)
			for (volatile char *p = own[i].start; p < own[i].end; p += 4096)
				sink += *p;
}

/* Read a whole small file (a /proc file) into buf with read(2): no stdio, no allocation. */
static int slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	size_t len = 0;
	ssize_t n;
	if (fd < 0)
		return -1;
	while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = 0;
	return (int)len;
}

static char file_buf[1 << 16];

/* Record the private writable mappings the runner has before the program (its own). */
static void find_own(void)
{
	if (slurp("/proc/self/maps", file_buf, sizeof file_buf) < 0)
		die("/proc/self/maps");
	for (char *line = file_buf; *line && nown < MAX_OWN;) {
		char *nl = strchr(line, '\n');
		unsigned long a, b;
		char perms[8];
		if (nl)
			*nl = 0;
		int path = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &a, &b, perms, &path) >= 3 && perms[0] == 'r' &&
		    perms[3] == 'p') {
			int writable = perms[1] == 'w';
			/* Writable private memory, or a file's pages, or the vdso's (not [vvar]: an
			 * mlockall populates the vdso, not VM_IO/VM_PFNMAP [vvar]). */
			if (writable || (path > 0 && (line[path] == '/' || !strncmp(line + path, "[vdso]", 6)))) {
				own[nown].start = (char *)a;
				own[nown].end = (char *)b;
				own[nown].writable = writable;
				if (writable)
					madvise((void *)a, b - a, MADV_NOHUGEPAGE);
				nown++;
			}
		}
		if (!nl)
			break;
		line = nl + 1;
	}
}

#include "runner_parse.h"

#include "runner_report.h"

/* End the running task: a thread this thread only (as mmsim's exit), else the process. */
static void __attribute__((noreturn)) end_task(void)
{
	if (thread_level > 0)
		syscall(SYS_exit, 0);
	exit(0);
}

static size_t span(struct region *r, long long off, long long len)
{
	if (len < 0 || (size_t)(off + len) > r->size)
		return off < (long long)r->size ? r->size - off : 0;
	return len;
}

static void run(int from, int to);

#include "runner_files.h"

/* The mapping of an mmap op (see the header): MAP_FAILED with errno on failure; the region's
 * size in *sizep. */
static char *map_region(const struct op *o, size_t *sizep)
{
	/* MAP_HUGETLB: the kernel rounds the length up to the huge page (2 MiB); an ALIGN of
	 * 2 MiB or less is the kernel's own, a larger one is a PROT_NONE reservation. */
	size_t unit = o->d & 2 ? HPAGE : 4096;
	size_t size = ((size_t)o->a + unit - 1) & ~(unit - 1), align = o->b > (long long)unit ? (size_t)o->b : 0;
	int file = (o->d & 4) != 0, fd = -1;
	int flags = (o->d & 1 ? MAP_SHARED : MAP_PRIVATE) | (file ? 0 : MAP_ANONYMOUS) | (o->d & 2 ? MAP_HUGETLB : 0);
	int prot = (int)o->c;
	off_t off = file ? (off_t)o->e : 0;
	void *hint = (void *)(uintptr_t)o->f;
	char *p;
	*sizep = size;
	/* O_RDWR only where a shared mapping may be made writable: a private mapping of a file
	 * opened read-only leaves it eligible for read-only file THP (file_thp_enabled). */
	if (file && (fd = open_file(o->name2, o->d & 1 ? O_RDWR : O_RDONLY)) < 0)
		return MAP_FAILED;
	if (o->g) { /* MAP_FIXED: exactly there, replacing what was mapped */
		p = mmap(hint, size, prot, flags | MAP_FIXED, fd, off);
		align = 0;
	} else if (o->f && !align) { /* a hint */
		p = mmap(hint, size, prot, flags, fd, off);
	} else {
		p = MAP_FAILED;
		if (o->f && !(o->f % align)) { /* an aligned hint is taken if free */
			p = mmap(hint, size, prot, flags, fd, off);
			if (p != MAP_FAILED && p != (char *)hint) {
				munmap(p, size);
				p = MAP_FAILED;
			} else if (p != MAP_FAILED) {
				align = 0;
			}
		}
		if (p == MAP_FAILED && (!(file || (o->d & 2)) || !align)) {
			p = mmap(NULL, size + align, prot, flags, fd, off);
		} else if (p == MAP_FAILED) {
			/* A file's offset stays where it is, and a hugetlb mapping reserves only
			 * its own huge pages: reserve SIZE + ALIGN, map the region over its aligned
			 * part; the trim below unmaps the rest of the reservation. */
			p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (p != MAP_FAILED) {
				char *a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
				if (mmap(a, size, prot, flags | MAP_FIXED, fd, off) == MAP_FAILED) {
					int e = errno;
					munmap(p, size + align);
					errno = e;
					p = MAP_FAILED;
				}
			}
		}
	}
	if (fd >= 0) {
		int e = errno;
		close(fd);
		errno = e;
	}
	if (p != MAP_FAILED && align) {
		char *a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
		if (a > p)
			munmap(p, a - p);
		if (a + size < p + size + align)
			munmap(a + size, p + size + align - (a + size));
		p = a;
	}
	return p;
}

/* splitmix64 (Vigna's public-domain splitmix64.c): mmsim's pattern "random" draws the same. */
static unsigned long long splitmix64(unsigned long long *state)
{
	unsigned long long z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* One step of a read or write at region offset `at`: one byte, or with a block (o->e bytes
 * every o->f, stopping at the page's end) each of its bytes. */
static void access_block(const struct op *o, struct region *r, size_t at)
{
	volatile char *p = (volatile char *)r->addr;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t end = o->e > 0 ? at + (size_t)o->e : at + 1, step = o->e > 0 && o->f > 0 ? (size_t)o->f : 1;
	size_t page_end = (at / page + 1) * page;
	/* Where the TLB splits huge pages, a write that faulted is followed by a flush (see the
	 * header). */
	long before = flush_pages != NULL && o->kind == WRITE ? task_faults() : 0;
	if (end > page_end)
		end = page_end;
	for (size_t k = at; k < end; k += step) {
		if (o->kind == WRITE) {
			p[k] = (char)o->d;
		} else {
			char v = p[k];
			sink += (unsigned char)v;
			if (o->d >= 0 && (unsigned char)v != o->d) {
				fprintf(stderr, "runner: pid %d: read %s+%zu: expected %lld, found %d\n", cur.pid, o->name, k,
					o->d, (unsigned char)v);
				exit(1);
			}
		}
	}
	if (flush_pages != NULL && o->kind == WRITE && task_faults() != before)
		flush_tlb();
}

/* The next `n` logical pids, as mmsim numbers the tasks of one fork or thread op. */
static int reserve_pids(long long n)
{
	return (int)(__atomic_fetch_add(pid_counter, n, __ATOMIC_SEQ_CST) + 1);
}

/* A fork op: each child in turn is forked, runs the block and exits before the next (the
 * serial schedule); the parent reaps them at `wait`. */
static void do_fork(int at)
{
	struct op *o = &ops[at];
	int first = reserve_pids(o->a);
	for (long long i = 0; i < o->a; i++) {
		long before = task_minflt(), before_maj = task_majflt();
		pid_t p = fork();
		if (p < 0)
			die("fork");
		if (p == 0) {
			/* The child: its counters start at fork (getrusage's do); the faults up to
			 * here and of breaking copy-on-write on the runner's pages are its own. */
			cur.pid = first + (int)i;
			cur.nchildren = 0;
			drain_locked = 0; /* dup_mmap: the child's vmas are not locked */
			close_perf();
			read_own();
			touch_own();
			touch_flush_pages();
			/* The pid counter is shared memory: fork does not copy its page table entry. */
			sink += (unsigned long)*pid_counter;
			cur.own_faults = task_minflt();
			cur.own_majflt = task_majflt();
			open_perf();
			run(at + 1, o->end);
			_exit(0);
		}
		touch_own();
		cur.own_faults += task_minflt() - before;
		cur.own_majflt += task_majflt() - before_maj;
		if (cur.nchildren < MAX_CHILDREN)
			cur.children[cur.nchildren++] = p;
		/* Wait for it to end (its mm torn down), leaving it a zombie for `wait` to reap. */
		siginfo_t si;
		memset(&si, 0, sizeof si);
		while (waitid(P_PID, p, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
			;
		/* A child killed by a signal its handler does not catch (SIGKILL: the OOM killer). */
		if ((si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) && si.si_status != SIGSEGV &&
		    si.si_status != SIGBUS) {
			static char buf[256];
			const char *name = sigabbrev_np(si.si_status);
			int len = snprintf(buf, sizeof buf,
					   "{\"label\":\"__event\",\"pid\":%d,\"kind\":\"killed\",\"signal\":\"SIG%s\","
					   "\"message\":\"killed by SIG%s\"}\n",
					   first + (int)i, name ? name : "?", name ? name : "?");
			write_line(buf, (size_t)len);
		}
	}
}

struct thread_arg {
	int at, pid;
};

static int thread_main(void *v)
{
	struct thread_arg *a = v;
	cur.pid = a->pid;
	cur.nchildren = 0;
	cur.own_faults = task_minflt();
	cur.own_majflt = task_majflt();
	open_perf();
	run(a->at + 1, ops[a->at].end);
	close_perf();
	return 0; /* glibc's clone() then exits the thread only (SYS_exit) */
}

/* A thread op: each thread in turn is created (clone with CLONE_VM | CLONE_THREAD), runs the
 * block and exits before the next; the creator waits on its CLONE_CHILD_CLEARTID word. */
static void do_thread(int at)
{
	struct op *o = &ops[at];
	int first = reserve_pids(o->a);
	static struct task saved[MAX_THREAD_DEPTH];
	char *stack = thread_stacks[thread_level];
	for (long long i = 0; i < o->a; i++) {
		long before = task_minflt(), before_maj = task_majflt();
		struct thread_arg arg = {at, first + (int)i};
		static volatile pid_t tid_word[MAX_THREAD_DEPTH];
		saved[thread_level] = cur;
		tid_word[thread_level] = 1;
		thread_level++;
		int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
			    CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
		pid_t tid = clone(thread_main, stack + THREAD_STACK, flags, &arg, &tid_word[thread_level - 1], NULL,
				  &tid_word[thread_level - 1]);
		if (tid < 0)
			die("clone");
		pid_t v;
		while ((v = tid_word[thread_level - 1]) != 0)
			syscall(SYS_futex, &tid_word[thread_level - 1], FUTEX_WAIT, v, NULL, NULL, 0);
		thread_level--;
		cur = saved[thread_level];
		cur.own_faults += task_minflt() - before;
		cur.own_majflt += task_majflt() - before_maj;
	}
}

static void run(int from, int to)
{
	for (int i = from; i < to; i++) {
		struct op *o = &ops[i];
		switch (o->kind) {
		case MMAP: {
			size_t size;
			char *p = map_region(o, &size);
			if (p == MAP_FAILED) {
				/* As mmsim: the failure is an event and the task ends. */
				event_syscall("mmap", o->name, (size_t)o->a, errno);
				end_task();
			}
			set_region(o->name, p, size);
			break;
		}
		case BRK: {
			/* sbrk(DELTA): the region is the heap from where the break was at the first
			 * brk op naming it to the break now. */
			char *from = sbrk(0);
			for (int k = 0; k < nregions; k++)
				if (!strcmp(regions[k].name, o->name))
					from = regions[k].addr;
			if (sbrk(o->a) == (void *)-1)
				event_fail("brk", o->name, NULL, errno);
			char *now = sbrk(0);
			set_region(o->name, from, now > from ? (size_t)(now - from) : 0);
			break;
		}
		case MUNMAP: {
			/* Nothing to unmap (an offset at or past the region's end) is no call, as
			 * in mmsim (munmap of length 0 would fail with EINVAL). */
			struct region *r = region(o->name);
			size_t len = span(r, o->a, o->b);
			if (len > 0 && munmap(r->addr + o->a, len) < 0)
				event_fail("munmap", o->name, NULL, errno);
			break;
		}
		case MLOCK:
		case MUNLOCK: {
			struct region *r = region(o->name);
			char *a = r->addr + o->a;
			size_t len = span(r, o->a, o->b);
			int err = o->kind == MUNLOCK ? munlock(a, len) : o->c ? mlock2(a, len, MLOCK_ONFAULT) : mlock(a, len);
			if (err < 0)
				event_fail(o->kind == MLOCK ? "mlock" : "munlock", o->name, NULL, errno);
			break;
		}
		case MLOCKALL:
			if (mlockall((int)o->a) < 0)
				event_fail("mlockall", "", NULL, errno);
			else if (o->a & MCL_CURRENT)
				drain_locked = o->a & MCL_ONFAULT ? 2 : 1;
			break;
		case MUNLOCKALL:
			if (munlockall() < 0)
				event_fail("munlockall", "", NULL, errno);
			else
				drain_locked = 0;
			break;
		case MREMAP: {
			struct region *r = region(o->name);
			size_t off = (size_t)o->d, len = o->e >= 0 ? (size_t)o->e : off < r->size ? r->size - off : 0;
			char *old = r->addr + off;
			int named = strcmp(o->name2, "-") != 0;
			/* The system call itself: glibc's wrapper passes no new address without
			 * MREMAP_FIXED. */
			void *p = (void *)syscall(SYS_mremap, old, len, (size_t)o->a, (unsigned long)o->b,
						  (unsigned long)o->c);
			if (p != MAP_FAILED) {
				if (named)
					set_region(o->name2, p, (size_t)o->a);
				else if (off == 0 && len == r->size)
					set_region(o->name, p, (size_t)o->a);
				else if (p == (void *)old && off + len == r->size)
					r->size = off + (size_t)o->a;
			} else {
				int e = errno;
				if (named && !has_region(o->name2))
					set_region(o->name2, old, len);
				event_fail("mremap", o->name, NULL, e);
			}
			break;
		}
		case MPROTECT: {
			struct region *r = region(o->name);
			if (mprotect(r->addr + o->a, span(r, o->a, o->b), (int)o->c) < 0)
				event_fail("mprotect", o->name, NULL, errno);
			break;
		}
		case MADVISE: {
			struct region *r = region(o->name);
			if (madvise(r->addr + o->a, span(r, o->a, o->b), (int)o->c) < 0)
				event_fail("madvise", o->name, o->name2, errno);
			break;
		}
		case CREATE:
			do_create(o);
			break;
		case PWRITE:
		case PREAD:
			do_rw(o);
			break;
		case FADVISE: {
			int fd = open_file(o->name, O_RDONLY);
			int err = fd < 0 ? errno : posix_fadvise(fd, o->a, o->b, (int)o->c);
			if (fd >= 0)
				close(fd);
			if (err)
				event_fail(fd < 0 ? "open" : "fadvise", o->name, fd < 0 ? NULL : o->name2, err);
			break;
		}
		case MEMFD_CREATE:
			do_memfd_create(o);
			break;
		case FALLOCATE: {
			int fd = open_file(o->name, O_RDWR);
			/* As mmsim names it: "open FILE: ENOENT", or the write open's other error
			 * ("fallocate FILE: ETXTBSY"). */
			if (fd < 0 || fallocate(fd, (int)o->c, o->a, o->b) < 0)
				event_fail(fd < 0 && errno == ENOENT ? "open" : "fallocate", o->name, NULL, errno);
			if (fd >= 0)
				close(fd);
			break;
		}
		case FSYNC: {
			int fd = open_file(o->name, O_RDONLY);
			if (fd < 0 || fsync(fd) < 0)
				event_fail(fd < 0 ? "open" : "fsync", o->name, NULL, errno);
			if (fd >= 0)
				close(fd);
			break;
		}
		case DROP_CACHES:
			drop_caches(o->a);
			break;
		case READ:
		case WRITE: {
			struct region *r = region(o->name);
			size_t n = span(r, o->a, o->b), stride = o->c > 0 ? (size_t)o->c : 4096;
			if (o->g < 0) {
				for (size_t k = 0; k < n; k += stride)
					access_block(o, r, (size_t)o->a + k);
			} else {
				/* pattern "random": slot = (splitmix64 output x slots) >> 64 (Lemire). */
				unsigned long long state = o->h, slots = (n + stride - 1) / stride;
				for (long long i = 0; i < o->g && slots > 0; i++) {
					unsigned long long slot =
						(unsigned long long)(((unsigned __int128)splitmix64(&state) * slots) >> 64);
					access_block(o, r, (size_t)o->a + slot * stride);
				}
			}
			break;
		}
		case COMPARE: {
			struct region *a = region(o->name), *b = region(o->name2);
			const char *pa = a->addr + o->a, *pb = b->addr + o->b;
			int equal = 1;
			if (o->d > 0) {
				/* `*p == *q` in a loop that stops at the first difference, as mmsim's does. */
				for (long long k = 0; k < o->c && equal; k += o->d)
					if (((volatile const char *)pa)[k] != ((volatile const char *)pb)[k])
						equal = 0;
			} else {
				equal = memcmp(pa, pb, o->c) == 0;
			}
			sink += equal;
			if (o->e >= 0 && equal != o->e) {
				fprintf(stderr, "runner: pid %d: compare: expected %s\n", cur.pid, o->e ? "equal" : "different");
				exit(1);
			}
			break;
		}
		case ATOMIC: {
			struct region *r = region(o->name);
			volatile long long *word = (volatile long long *)(r->addr + (o->a & ~7LL));
			long before = flush_pages != NULL ? task_faults() : 0;
			for (long long k = 0; k < o->b; k++)
				__asm__ volatile("lock addq $0, %0" : "+m"(*word) : : "memory", "cc");
			if (flush_pages != NULL && task_faults() != before)
				flush_tlb();
			break;
		}
		case LOOP:
			for (long long k = 0; k < o->a; k++)
				run(i + 1, o->end);
			i = o->end;
			break;
		case FORK:
			do_fork(i);
			i = o->end;
			break;
		case THREAD:
			do_thread(i);
			i = o->end;
			break;
		case WAIT:
			for (int k = 0; k < cur.nchildren; k++)
				waitpid(cur.children[k], NULL, 0);
			cur.nchildren = 0;
			break;
		case EXIT:
			end_task();
		case SNAPSHOT:
			snapshot(o->name);
			break;
		case END:
			break;
		}
	}
}

/* Write the main stack's pages the runner's own calls may reach (a deep frame, written). */
static void __attribute__((noinline)) grow_stack(void)
{
	volatile char pad[MAIN_STACK];
	for (size_t i = 0; i < sizeof pad; i += 4096)
		pad[i] = 0;
}

/* The lock helper (see the header), for a program with an mlockall op: a child that reads
 * and mlocks every page of the runner's private read-only mappings (its file mappings and the
 * vdso, with the anonymous pages relocation left in them), tells the runner it is done, and
 * sleeps until the runner ends (or dies: PR_SET_PDEATHSIG). */
static void start_lock_helper(void)
{
	int fds[2];
	char c = 0;
	if (!uses_mlockall)
		return;
	if (pipe(fds) < 0)
		die("pipe");
	lock_helper = fork();
	if (lock_helper < 0)
		die("fork lock helper");
	if (lock_helper == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		read_own();
		for (int i = 0; i < nown; i++)
			if (!own[i].writable)
				mlock(own[i].start, (size_t)(own[i].end - own[i].start));
		if (write(fds[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		die("lock helper");
	close(fds[0]);
}

/* Make sure the huge zero folio exists and keep it (see the header). */
static void hold_huge_zero_folio(void)
{
	size_t huge = 2 << 20;
	char *p = mmap(NULL, 2 * huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	char *a = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	madvise(a, huge, MADV_HUGEPAGE);
	sink += *(volatile char *)a;
	munmap(p, 2 * huge);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: runner OUT_FILE [ext4=DIR] [tmpfs=DIR] < PROGRAM\n");
		return 2;
	}
	int pers = personality(0xffffffff);
	if (pers != -1 && !(pers & ADDR_NO_RANDOMIZE) && personality((unsigned long)pers | ADDR_NO_RANDOMIZE) != -1)
		execv("/proc/self/exe", argv); /* on failure, run with the layout randomised */
	aslr = !(personality(0xffffffff) & ADDR_NO_RANDOMIZE);
	out_fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
	if (out_fd < 0)
		die(argv[1]);
	make_dirs(argc, argv);
	parse(stdin);
	pid_counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (pid_counter == MAP_FAILED)
		die("mmap counter");
	*pid_counter = 1;
	for (int i = 0; i < thread_depth_needed; i++) {
		thread_stacks[i] = mmap(NULL, THREAD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (thread_stacks[i] == MAP_FAILED)
			die("mmap thread stack");
	}
	io_buf = mmap(NULL, IO_BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (io_buf == MAP_FAILED)
		die("mmap I/O buffer");
	madvise(io_buf, IO_BUF, MADV_NOHUGEPAGE);
	hold_huge_zero_folio();
	/* Pinned to the CPU it starts on, children and threads too (they inherit it): per-CPU
	 * batches (the mlock batch above) then fill and drain on one CPU, in program order. The
	 * serial schedule runs one task at a time anyway. */
	int cpu = sched_getcpu();
	if (cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		sched_setaffinity(0, sizeof set, &set);
	}
	setup_tlb_flush();
	drain_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (drain_page == MAP_FAILED)
		drain_page = NULL;
	catch_fatal_signals();
	grow_stack();
	/* Everything the runner will write exists now: record it and write it once more (a
	 * first snapshot too, whose code and buffers are then faulted in). */
	find_own();
	read_own();
	start_lock_helper();
	touch_own();
	open_perf();
	snapshot("__start");
	emit_maps();
	run(0, nops);
	for (int k = 0; k < cur.nchildren; k++)
		waitpid(cur.children[k], NULL, 0);
	if (lock_helper > 0) {
		kill(lock_helper, SIGKILL);
		waitpid(lock_helper, NULL, 0);
	}
	return 0;
}
