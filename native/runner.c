/* mmsim's native runner: executes a workload on the real kernel with real system calls, and
 * reports what the kernel did (per-process faults and /proc/self/status, smaps_rollup, and
 * system-wide /proc/vmstat) at each snapshot, for `mmsim validate`.
 *
 *   runner OUT_FILE < PROGRAM
 *
 * PROGRAM is the workload compiled by mmsim (python/mmsim/native.py), one op per line:
 *
 *   mmap NAME SIZE ALIGN PROT SHARED ADDR FIXED
 *                                        PROT: none r rw rx rwx; SHARED, FIXED: 0 or 1;
 *                                        ADDR: a hint (0: none), the address with FIXED
 *   munmap NAME OFFSET LENGTH            LENGTH -1: to the region's end
 *   mprotect NAME OFFSET LENGTH PROT
 *   madvise NAME OFFSET LENGTH ADVICE    ADVICE: hugepage nohugepage dontneed
 *   read NAME OFFSET LENGTH STRIDE EXPECT    EXPECT -1: none
 *   write NAME OFFSET LENGTH STRIDE VALUE
 *   compare A OFFA B OFFB LENGTH STRIDE EXPECT   STRIDE 0: memcmp; EXPECT -1/0/1
 *   atomic NAME OFFSET COUNT             COUNT locked adds of 0 to the 8-byte word at OFFSET
 *                                        (a locked read-modify-write that leaves memory as it
 *                                        is, as mmsim's atomic op does)
 *   loop COUNT ... end
 *   fork COUNT ... end                   each child runs the block, then exits
 *   wait
 *   exit
 *   snapshot LABEL
 *
 * Every process appends one JSON line per snapshot to OUT_FILE (O_APPEND, so lines from
 * several processes do not interleave). Logical pids follow the order of creation, as the
 * simulator numbers its tasks (a counter in shared memory). Alignment is done by mapping
 * size + align and trimming, as posix_memalign-style code does. Reads touch one byte per
 * stride through a volatile pointer, so the compiler cannot elide them.
 *
 * The runner re-executes itself once with address-space layout randomisation off
 * (personality ADDR_NO_RANDOMIZE, as `setarch -R` does). Which PMD and PUD tables already
 * exist when a region is first touched depends on where the kernel put it relative to the
 * process's other mappings: with ASLR a 64 MiB region lands in a 1 GiB slot of its own about
 * one run in 16 and the kernel's VmPTE is one table larger. A fixed layout makes every run
 * of a workload count the same tables.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_OPS 4096
#define MAX_REGIONS 64
#define MAX_CHILDREN 4096

enum kind { MMAP, MUNMAP, MPROTECT, MADVISE, READ, WRITE, COMPARE, ATOMIC, LOOP, FORK, WAIT, EXIT, SNAPSHOT, END };

struct op {
	enum kind kind;
	char name[64], name2[64];
	long long a, b, c, d, e, f, g;
	int end; /* for LOOP/FORK: index of the matching END */
};

static struct op ops[MAX_OPS];
static int nops;

struct region {
	char name[64];
	char *addr;
	size_t size;
};
static struct region regions[MAX_REGIONS];
static int nregions;

static int out_fd;
static int my_pid = 1;
static volatile long *pid_counter;
static pid_t children[MAX_CHILDREN];
static int nchildren;
static volatile unsigned long sink;

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
static int perf_fd[NEVENTS];

static void open_perf(void)
{
	for (int i = 0; i < NEVENTS; i++) {
		struct perf_event_attr a;
		memset(&a, 0, sizeof a);
		a.size = sizeof a;
		a.type = events[i].type;
		a.config = events[i].config;
		a.exclude_hv = 1;
		perf_fd[i] = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	}
}

static void die(const char *msg)
{
	fprintf(stderr, "runner: %s: %s\n", msg, strerror(errno));
	exit(3);
}

static int prot_of(const char *p)
{
	if (!strcmp(p, "none"))
		return PROT_NONE;
	if (!strcmp(p, "r"))
		return PROT_READ;
	if (!strcmp(p, "rw") || !strcmp(p, "w"))
		return PROT_READ | PROT_WRITE;
	if (!strcmp(p, "rx") || !strcmp(p, "x"))
		return PROT_READ | PROT_EXEC;
	return PROT_READ | PROT_WRITE | PROT_EXEC;
}

static struct region *region(const char *name)
{
	for (int i = 0; i < nregions; i++)
		if (!strcmp(regions[i].name, name))
			return &regions[i];
	fprintf(stderr, "runner: no region %s\n", name);
	exit(3);
}

static void parse(FILE *f)
{
	char line[512], w[32];
	int stack[64], depth = 0;
	while (fgets(line, sizeof line, f)) {
		struct op *o = &ops[nops];
		memset(o, 0, sizeof *o);
		if (sscanf(line, "%31s", w) != 1)
			continue;
		if (nops >= MAX_OPS - 1) {
			fprintf(stderr, "runner: program too long\n");
			exit(3);
		}
		if (!strcmp(w, "mmap")) {
			char prot[8];
			o->kind = MMAP;
			sscanf(line, "%*s %63s %lld %lld %7s %lld %lld %lld", o->name, &o->a, &o->b, prot, &o->d, &o->f, &o->g);
			o->c = prot_of(prot);
		} else if (!strcmp(w, "munmap")) {
			o->kind = MUNMAP;
			sscanf(line, "%*s %63s %lld %lld", o->name, &o->a, &o->b);
		} else if (!strcmp(w, "mprotect")) {
			char prot[8];
			o->kind = MPROTECT;
			sscanf(line, "%*s %63s %lld %lld %7s", o->name, &o->a, &o->b, prot);
			o->c = prot_of(prot);
		} else if (!strcmp(w, "madvise")) {
			char adv[16];
			o->kind = MADVISE;
			sscanf(line, "%*s %63s %lld %lld %15s", o->name, &o->a, &o->b, adv);
			o->c = !strcmp(adv, "hugepage") ? MADV_HUGEPAGE : !strcmp(adv, "nohugepage") ? MADV_NOHUGEPAGE : MADV_DONTNEED;
		} else if (!strcmp(w, "read") || !strcmp(w, "write")) {
			o->kind = w[0] == 'r' ? READ : WRITE;
			sscanf(line, "%*s %63s %lld %lld %lld %lld", o->name, &o->a, &o->b, &o->c, &o->d);
		} else if (!strcmp(w, "compare")) {
			o->kind = COMPARE;
			sscanf(line, "%*s %63s %lld %63s %lld %lld %lld %lld", o->name, &o->a, o->name2, &o->b, &o->c, &o->d,
			       &o->e);
		} else if (!strcmp(w, "atomic")) {
			o->kind = ATOMIC;
			sscanf(line, "%*s %63s %lld %lld", o->name, &o->a, &o->b);
		} else if (!strcmp(w, "loop") || !strcmp(w, "fork")) {
			o->kind = w[0] == 'l' ? LOOP : FORK;
			sscanf(line, "%*s %lld", &o->a);
			stack[depth++] = nops;
		} else if (!strcmp(w, "end")) {
			o->kind = END;
			if (depth == 0) {
				fprintf(stderr, "runner: unbalanced end\n");
				exit(3);
			}
			ops[stack[--depth]].end = nops;
		} else if (!strcmp(w, "wait")) {
			o->kind = WAIT;
		} else if (!strcmp(w, "exit")) {
			o->kind = EXIT;
		} else if (!strcmp(w, "snapshot")) {
			o->kind = SNAPSHOT;
			sscanf(line, "%*s %63s", o->name);
		} else {
			fprintf(stderr, "runner: unknown op %s\n", w);
			exit(3);
		}
		nops++;
	}
}

/* Append "KEY": value pairs from a /proc file whose lines are "Key: value kB" or "key value". */
static int proc_fields(char *buf, size_t cap, const char *path, const char *const *keys, int colon)
{
	FILE *f = fopen(path, "r");
	size_t len = 0;
	char line[256];
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		for (int i = 0; keys[i]; i++) {
			size_t k = strlen(keys[i]);
			if (!strncmp(line, keys[i], k) && line[k] == (colon ? ':' : ' ')) {
				long long v = atoll(line + k + 1);
				len += snprintf(buf + len, cap - len, ",\"%s\":%lld", keys[i], v);
			}
		}
	}
	fclose(f);
	return (int)len;
}

static void snapshot(const char *label);

/* Run the snapshot code once without output: after a fork, the child's first use of the
 * library, heap and stack pages it shares with its parent takes copy-on-write faults that
 * are the runner's, not the workload's. */
static int quiet;
/* The layout is randomised (set once in main; forked children inherit the personality). */
static int aslr;
static void warm(void)
{
	/* Write the stack pages the runner's own calls may reach (copy-on-write after fork). */
	volatile char pad[256 * 1024];
	for (size_t i = 0; i < sizeof pad; i += 4096)
		pad[i] = 0;
	quiet = 1;
	snapshot("warm");
	quiet = 0;
}

static void snapshot(const char *label)
{
	static const char *const meminfo[] = {"MemFree", "AnonPages", "AnonHugePages", "PageTables", "Shmem", NULL};
	static const char *const status[] = {"VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "VmPTE", NULL};
	static const char *const smaps[] = {"AnonHugePages", NULL};
	static const char *const vmstat[] = {"pgfault", "thp_fault_alloc", "thp_fault_fallback", "thp_split_pmd",
					     "thp_zero_page_alloc", "thp_zero_page_alloc_failed", "nr_page_table_pages",
					     "nr_anon_pages", "nr_anon_transparent_hugepages", NULL};
	char buf[8192], vm[2048], mi[1024], pf[1024], un[512];
	struct rusage ru;
	int len, vlen, mlen, plen = 0, ulen = 0;
	getrusage(RUSAGE_SELF, &ru);
	for (int i = 0; i < NEVENTS; i++) {
		unsigned long long v;
		if (perf_fd[i] >= 0 && read(perf_fd[i], &v, sizeof v) == sizeof v)
			plen += snprintf(pf + plen, sizeof pf - plen, ",\"%s\":%llu", events[i].name, v);
		else
			ulen += snprintf(un + ulen, sizeof un - ulen, ",\"%s\"", events[i].name);
	}
	/* System-wide counters: fold the per-cpu deltas first (needs root; best effort). */
	int fd = open("/proc/sys/vm/stat_refresh", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0) {
		}
		close(fd);
	}
	len = snprintf(buf, sizeof buf, "{\"label\":\"%s\",\"pid\":%d,\"aslr\":%s,\"minflt\":%ld,\"majflt\":%ld",
		       label, my_pid, aslr ? "true" : "false", ru.ru_minflt, ru.ru_majflt);
	len += proc_fields(buf + len, sizeof buf - len, "/proc/self/status", status, 1);
	len += proc_fields(buf + len, sizeof buf - len, "/proc/self/smaps_rollup", smaps, 1);
	vlen = proc_fields(vm, sizeof vm, "/proc/vmstat", vmstat, 0);
	mlen = proc_fields(mi, sizeof mi, "/proc/meminfo", meminfo, 1);
	len += snprintf(buf + len, sizeof buf - len,
			",\"vmstat\":{%s},\"meminfo\":{%s},\"perf\":{%s},\"unsupported\":[%s]}\n", vlen ? vm + 1 : "",
			mlen ? mi + 1 : "", plen ? pf + 1 : "", ulen ? un + 1 : "");
	if (!quiet && write(out_fd, buf, len) != len)
		die("write snapshot");
}

static size_t span(struct region *r, long long off, long long len)
{
	if (len < 0 || (size_t)(off + len) > r->size)
		return off < (long long)r->size ? r->size - off : 0;
	return len;
}

static void run(int from, int to);

static void do_fork(int at)
{
	struct op *o = &ops[at];
	for (long long i = 0; i < o->a; i++) {
		long id = __atomic_add_fetch(pid_counter, 1, __ATOMIC_SEQ_CST);
		pid_t p = fork();
		if (p < 0)
			die("fork");
		if (p == 0) {
			my_pid = (int)id;
			nchildren = 0;
			for (int k = 0; k < NEVENTS; k++)
				if (perf_fd[k] >= 0)
					close(perf_fd[k]);
			open_perf();
			warm();
			run(at + 1, o->end);
			_exit(0);
		}
		if (nchildren < MAX_CHILDREN)
			children[nchildren++] = p;
	}
}

static void run(int from, int to)
{
	for (int i = from; i < to; i++) {
		struct op *o = &ops[i];
		switch (o->kind) {
		case MMAP: {
			size_t size = (o->a + 4095) & ~4095ULL, align = o->b > 4096 ? (size_t)o->b : 0;
			int flags = (o->d ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS;
			char *p;
			if (o->g) { /* MAP_FIXED: exactly there, replacing what was mapped */
				p = mmap((void *)(uintptr_t)o->f, size, (int)o->c, flags | MAP_FIXED, -1, 0);
				align = 0;
			} else if (o->f && !align) { /* a hint */
				p = mmap((void *)(uintptr_t)o->f, size, (int)o->c, flags, -1, 0);
			} else {
				p = mmap(NULL, size + align, (int)o->c, flags, -1, 0);
			}
			if (p == MAP_FAILED)
				die("mmap");
			if (align) {
				char *a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
				if (a > p)
					munmap(p, a - p);
				if (a + size < p + size + align)
					munmap(a + size, p + size + align - (a + size));
				p = a;
			}
			if (nregions == MAX_REGIONS)
				die("too many regions");
			struct region *r = NULL;
			for (int k = 0; k < nregions; k++)
				if (!strcmp(regions[k].name, o->name))
					r = &regions[k];
			if (!r)
				r = &regions[nregions++];
			snprintf(r->name, sizeof r->name, "%s", o->name);
			r->addr = p;
			r->size = size;
			break;
		}
		case MUNMAP: {
			struct region *r = region(o->name);
			munmap(r->addr + o->a, span(r, o->a, o->b));
			break;
		}
		case MPROTECT: {
			struct region *r = region(o->name);
			mprotect(r->addr + o->a, span(r, o->a, o->b), (int)o->c);
			break;
		}
		case MADVISE: {
			struct region *r = region(o->name);
			madvise(r->addr + o->a, span(r, o->a, o->b), (int)o->c);
			break;
		}
		case READ:
		case WRITE: {
			struct region *r = region(o->name);
			volatile char *p = (volatile char *)r->addr + o->a;
			size_t n = span(r, o->a, o->b), stride = o->c > 0 ? (size_t)o->c : 4096;
			for (size_t k = 0; k < n; k += stride) {
				if (o->kind == WRITE) {
					p[k] = (char)o->d;
				} else {
					char v = p[k];
					sink += (unsigned char)v;
					if (o->d >= 0 && (unsigned char)v != o->d) {
						fprintf(stderr, "runner: pid %d: read %s+%zu: expected %lld, found %d\n", my_pid,
							o->name, (size_t)o->a + k, o->d, (unsigned char)v);
						exit(1);
					}
				}
			}
			break;
		}
		case COMPARE: {
			struct region *a = region(o->name), *b = region(o->name2);
			const char *pa = a->addr + o->a, *pb = b->addr + o->b;
			int equal = 1;
			if (o->d > 0) {
				for (long long k = 0; k < o->c; k += o->d)
					if (((volatile const char *)pa)[k] != ((volatile const char *)pb)[k])
						equal = 0;
			} else {
				equal = memcmp(pa, pb, o->c) == 0;
			}
			sink += equal;
			if (o->e >= 0 && equal != o->e) {
				fprintf(stderr, "runner: pid %d: compare: expected %s\n", my_pid, o->e ? "equal" : "different");
				exit(1);
			}
			break;
		}
		case ATOMIC: {
			struct region *r = region(o->name);
			volatile long long *word = (volatile long long *)(r->addr + (o->a & ~7LL));
			for (long long k = 0; k < o->b; k++)
				__asm__ volatile("lock addq $0, %0" : "+m"(*word) : : "memory", "cc");
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
		case WAIT:
			for (int k = 0; k < nchildren; k++)
				waitpid(children[k], NULL, 0);
			nchildren = 0;
			break;
		case EXIT:
			exit(0);
		case SNAPSHOT:
			snapshot(o->name);
			break;
		case END:
			break;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: runner OUT_FILE < PROGRAM\n");
		return 2;
	}
	int pers = personality(0xffffffff);
	if (pers != -1 && !(pers & ADDR_NO_RANDOMIZE) && personality((unsigned long)pers | ADDR_NO_RANDOMIZE) != -1)
		execv("/proc/self/exe", argv); /* on failure, run with the layout randomised */
	aslr = !(personality(0xffffffff) & ADDR_NO_RANDOMIZE);
	out_fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
	if (out_fd < 0)
		die(argv[1]);
	parse(stdin);
	pid_counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (pid_counter == MAP_FAILED)
		die("mmap counter");
	*pid_counter = 1;
	open_perf();
	warm();
	snapshot("__start");
	run(0, nops);
	for (int k = 0; k < nchildren; k++)
		waitpid(children[k], NULL, 0);
	return 0;
}
