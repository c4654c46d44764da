/* mmsim's native runner: executes a workload on the real kernel with real system calls, and
 * reports what the kernel did (per-process faults and /proc/self/status, smaps_rollup, and
 * system-wide /proc/vmstat and /proc/meminfo) at each snapshot, for `mmsim validate`.
 *
 *   runner OUT_FILE [ext4=DIR] [tmpfs=DIR] [memcg=v1:PARENT|memcg=v2:PARENT memcg-home=HOME] < PROGRAM
 *
 * OUT_FILE gets the snapshot and event lines (mmsim passes /dev/stdout, a pipe: a file on a
 * disk or on tmpfs would move the page-cache counters the runner reports). DIR is where the
 * workload's files of that filesystem live: a directory on an ext4 filesystem, one on a tmpfs.
 * The runner makes DIR/mmsim-PID (PID its own), puts every file there, and its first process
 * removes it when it ends (exit, or the end of the program; not when a signal kills it: then
 * mmsim removes it). A program that creates no file needs neither; a create on a filesystem
 * with no DIR ends the run with an error. Writing to /proc/sys/vm/drop_caches needs root.
 * PARENT is the directory of the workload's memory cgroups on the hierarchy (v1 or v2) the
 * memory controller is on, HOME the runner's own cgroup there (see runner_memcg.h).
 *
 * PROGRAM is the workload compiled by mmsim (python/mmsim/runner_program.py), one op per line:
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
 *   cgroup NAME                          a memory cgroup of the workload, PARENT/NAME (a
 *                                        declaration, before the ops: a parent before its
 *                                        children); each snapshot reports it
 *   join NAME                            the first process's cgroup (a declaration)
 *   cgroup_write NAME FILE VALUE         FILE: cgroup v2's name (memory.max, memory.swap.max,
 *                                        memory.high, ...); VALUE: bytes, -1 for "max", 0 or 1
 *                                        for memory.oom.group; a failure is an event
 *                                        ("cgroup_write NAME FILE: EBUSY"); see runner_memcg.h
 *   memory_reclaim NAME BYTES SWAPPINESS a write of "BYTES [swappiness=N]" to NAME's
 *                                        memory.reclaim (cgroup v2); NAME "-": the task's own;
 *                                        SWAPPINESS -1: none, 201: "max"
 *   loop COUNT ... end
 *   fork COUNT [NAME] ... end            each child runs the block, then exits; with NAME in
 *                                        that cgroup (joined before its program), else in its
 *                                        parent's
 *   thread COUNT ... end                 each thread (clone with CLONE_VM | CLONE_THREAD) runs
 *                                        the block, then exits (the thread only, as mmsim's does)
 *   wait
 *   exit
 *   snapshot LABEL
 *
 * Files: see runner_files.h. What the runner does so that nothing it does for itself shows in
 * a count, and about the host (its huge zero folio, split TLB entries): see runner_host.h.
 *
 * The serial schedule (mmsim's engine.schedule=serial): a task a fork or thread op creates
 * runs to its end (exit, or a fatal signal) before the op creates the next one, and the op
 * returns once the last has ended. So no count depends on the timing of concurrent tasks (a
 * sibling holding a folio lock makes fault-around's folio_trylock fail, for one). Pids are
 * logical: an op of COUNT tasks takes the next COUNT numbers at once, as mmsim numbers tasks.
 *
 * Every process appends one JSON line per snapshot to OUT_FILE (O_APPEND; one task runs at a
 * time). Logical pids follow the order of creation, as the simulator numbers its tasks (a
 * counter in shared memory). The ops on memory: see runner_ops.h.
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
#include <stdarg.h>
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
/* The default hugetlb page (x86-64's PMD size): MAP_HUGETLB's unit. */
#define HPAGE (2UL << 20)
/* The buffer of file reads and writes: CHUNK is at most this (mmsim refuses more). */
#define IO_BUF (2UL << 20)
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
	CGROUP_WRITE,
	MEMORY_RECLAIM,
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
/* FLUSH_PAGES pages (MAP_SHARED), mapped only where the TLB splits huge pages (see
 * runner_host.h); NULL elsewhere. */
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

/* Thread stacks, one per nesting level of thread ops, written before the program starts. */
static char *thread_stacks[MAX_THREAD_DEPTH];
static int thread_level;

static void die(const char *msg)
{
	fprintf(stderr, "runner: %s: %s\n", msg, strerror(errno));
	exit(3);
}

#include "runner_host.h"

/* runner_memcg.h's, which the program's parse and the snapshots call. */
static void declare_cgroup(const char *name);
static void declare_first_cgroup(const char *name);
static int cgroup_index(const char *name);
static void own_cgroup(void);
static void task_cgroup_again(void);
static size_t cgroup_fields(char *buf, size_t len, size_t cap);
static size_t swap_fields(char *buf, size_t len, size_t cap);
static void write_line(const char *buf, size_t len);

#include "runner_parse.h"

#include "runner_report.h"

#include "runner_memcg.h"

/* End the running task: a thread this thread only (as mmsim's exit), else the process. */
static void __attribute__((noreturn)) end_task(void)
{
	if (thread_level > 0)
		syscall(SYS_exit, 0);
	exit(0);
}

static void run(int from, int to);

#include "runner_files.h"

#include "runner_ops.h"

/* The next `n` logical pids, as mmsim numbers the tasks of one fork or thread op. */
static int reserve_pids(long long n)
{
	return (int)(__atomic_fetch_add(pid_counter, n, __ATOMIC_SEQ_CST) + 1);
}

/* fork(2) without glibc's atfork work (glibc >= 2.34's _Fork: no malloc or stdio locks taken
 * and reset, which the runner, allocating nothing while ops run, does not need): between the
 * fork and the move to the runner's own cgroup, each side writes as few of the runner's
 * copy-on-write pages as it can, copies charged to the workload's cgroup (runner_memcg.h):
 * the child 2 (its stack and its thread pointer's page, fork()'s 5), the parent 1. */
static pid_t fork_task(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
	return _Fork();
#else
	return fork();
#endif
}

/* A fork op: each child in turn is forked, runs the block and exits before the next (the
 * serial schedule); the parent reaps them at `wait`. */
static void do_fork(int at)
{
	struct op *o = &ops[at];
	int first = reserve_pids(o->a);
	for (long long i = 0; i < o->a; i++) {
		long before = task_minflt(), before_maj = task_majflt();
		/* Fork from the runner's own cgroup: the copy-on-write faults of the runner's own
		 * pages either side takes around fork(2) (stacks, the thread pointer's page) are
		 * charged there, not to the workload's cgroup. */
		own_cgroup();
		pid_t p = fork_task();
		if (p < 0)
			die("fork");
		if (p == 0) {
			/* The child: its counters start at fork (getrusage's do); the faults up to
			 * here and of breaking copy-on-write on the runner's pages are its own, and
			 * their pages are charged to the runner's own cgroup (runner_memcg.h), where
			 * it was forked. */
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
			if (o->c >= 0)
				task_cgroup = (int)o->c;
			task_cgroup_again();
			run(at + 1, o->end);
			_exit(0);
		}
		/* Wait for it to end (its mm torn down), leaving it a zombie for `wait` to reap. */
		siginfo_t si;
		memset(&si, 0, sizeof si);
		while (waitid(P_PID, p, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
			;
		/* Only now make the runner's pages writable again: with the child gone they are
		 * the parent's alone and reused in place. Written while the child lived, each would
		 * be copied or not as the two raced, and under mlockall(MCL_CURRENT) each copy
		 * mlocks the new page and munlocks the old (unevictable_pgs_*), which mmsim's
		 * stand-ins, never written, do not. */
		touch_own();
		task_cgroup_again();
		cur.own_faults += task_minflt() - before;
		cur.own_majflt += task_majflt() - before_maj;
		if (cur.nchildren < MAX_CHILDREN)
			cur.children[cur.nchildren++] = p;
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
		case MMAP:
			do_mmap(o);
			break;
		case BRK:
			do_brk(o);
			break;
		case MUNMAP:
			do_munmap(o);
			break;
		case MLOCK:
		case MUNLOCK:
			do_mlock(o);
			break;
		case MLOCKALL:
			do_mlockall(o);
			break;
		case MUNLOCKALL:
			do_munlockall();
			break;
		case MREMAP:
			do_mremap(o);
			break;
		case MPROTECT:
			do_mprotect(o);
			break;
		case MADVISE:
			do_madvise(o);
			break;
		case CREATE:
			/* The file is written and made cold from the runner's own cgroup: its page
			 * cache, charged while it is written, is not the workload's (mmsim's file
			 * starts cold, never charged). */
			own_cgroup();
			do_create(o);
			task_cgroup_again();
			break;
		case PWRITE:
		case PREAD:
			do_rw(o);
			break;
		case FADVISE:
			do_fadvise(o);
			break;
		case MEMFD_CREATE:
			do_memfd_create(o);
			break;
		case FALLOCATE:
			do_fallocate(o);
			break;
		case FSYNC:
			do_fsync(o);
			break;
		case DROP_CACHES:
			drop_caches(o->a);
			break;
		case CGROUP_WRITE:
			do_cgroup_write(o);
			break;
		case MEMORY_RECLAIM:
			do_memory_reclaim(o);
			break;
		case READ:
		case WRITE:
			do_access(o);
			break;
		case COMPARE:
			do_compare(o);
			break;
		case ATOMIC:
			do_atomic(o);
			break;
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

/* `runner --spawn OUT CMD [ARGS...]` (mmsim validate --trace): run CMD as a child of this
 * small process (vfork: the child's peak RSS starts from this process's, not from Python's)
 * and write what wait4 says of its whole tree to OUT: "minflt majflt maxrss_kb status". With
 * MMSIM_SPAWN_CGROUP (a cgroup.procs path) in the environment, the child joins that cgroup
 * before it execs CMD (validate --trace --memory-max): CMD's memory is charged there, this
 * process's is not; exit 126 if it cannot. */
static int spawn_measure(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: runner --spawn OUT CMD [ARGS...]\n");
		return 2;
	}
	const char *procs = getenv("MMSIM_SPAWN_CGROUP");
	pid_t pid = vfork();
	if (pid < 0)
		die("vfork");
	if (pid == 0) {
		if (procs != NULL && procs[0]) {
			int fd = open(procs, O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, "0", 1) != 1)
				_exit(126);
			close(fd);
		}
		execvp(argv[3], argv + 3);
		_exit(127);
	}
	int status = 0;
	struct rusage ru;
	if (wait4(pid, &status, 0, &ru) < 0)
		die("wait4");
	FILE *f = fopen(argv[2], "w");
	if (f == NULL)
		die(argv[2]);
	fprintf(f, "%ld %ld %ld %d\n", ru.ru_minflt, ru.ru_majflt, ru.ru_maxrss, status);
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "--spawn") == 0)
		return spawn_measure(argc, argv);
	if (argc < 2) {
		fprintf(stderr, "usage: runner OUT_FILE [ext4=DIR] [tmpfs=DIR] [memcg=v1:DIR memcg-home=DIR] < PROGRAM\n");
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
	memcg_open();
	pid_counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (pid_counter == MAP_FAILED)
		die("mmap counter");
	*pid_counter = 1;
	/* No recency for the counter's shared page (VM_RAND_READ: vma_has_recency): each child's
	 * exit would otherwise mark it accessed as it zaps the young pte it read it through, and
	 * the second fork of a run activate it (pgactivate, nr_active_anon), a page mmsim does not
	 * have. */
	madvise((void *)pid_counter, 4096, MADV_RANDOM);
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
	/* A first fork of its own, before the program. The runner's first fork moves one anon
	 * page from the active to the inactive list (nr_active_anon -1, nr_inactive_anon +1;
	 * measured on Linux 6.18, later forks move none): a page the parent writes as fork
	 * returns is copied, the child holding the old one, active, which its exit frees.
	 * mmsim's stand-ins, never written, make no such move, so it is made here, before the
	 * runner's own first snapshot (touch_own below makes its pages its own again). */
	{
		pid_t p = fork_task();
		if (p == 0)
			_exit(0);
		if (p > 0)
			waitpid(p, NULL, 0);
	}
	touch_own();
	open_perf();
	snapshot("__start");
	emit_maps();
	/* The first process joins its cgroup: from here on what it allocates is the workload's. */
	task_cgroup = first_cgroup;
	task_cgroup_again();
	run(0, nops);
	for (int k = 0; k < cur.nchildren; k++)
		waitpid(cur.children[k], NULL, 0);
	if (lock_helper > 0) {
		kill(lock_helper, SIGKILL);
		waitpid(lock_helper, NULL, 0);
	}
	return 0;
}
