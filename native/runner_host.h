/* The runner's own memory and the host under it (included once, by runner.c, which defines
 * the state they use): the faults a task took (getrusage) and its perf events, the runner's
 * own pages (found in /proc/self/maps before the program, written or read again after a
 * fork), the lock helper, the huge zero folio, and the TLB flush of a host whose CPU caches
 * huge pages in pieces.
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
 *  - Its output goes to a pipe (see OUT_FILE in runner.c), and a file it creates is made cold
 *    before the workload sees it, so the page cache it reports is the workload's.
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
 * with it allocated (python/mmsim/native_host.py host_knobs).
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
 */

/* The main stack the runner's own calls may reach, written before the program starts. */
#define MAIN_STACK (512 * 1024)
#define MAX_OWN 128
/* Pages whose mprotect flushes the whole TLB: more than x86's tlb_single_page_flush_ceiling. */
#define FLUSH_PAGES 64

/* The runner's own private writable memory, and its private file mappings (code, read-only
 * data), from /proc/self/maps before the program. */
static struct {
	char *start, *end;
	int writable;
} own[MAX_OWN];
static int nown;

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
	else
		madvise(flush_pages, FLUSH_PAGES * 4096UL, MADV_RANDOM); /* as the pid counter's */
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
