/* The memory ops (included once, by runner.c, which defines the state they use and runs each
 * op of the line format in its header with one of these): mmap, brk, munmap, mlock and
 * munlock, mlockall and munlockall, mremap, mprotect, madvise, reads and writes, compare and
 * atomic. A failed system call is an event ("munmap NAME: EINVAL") and the task goes on; a
 * failed mmap ends the task, as in mmsim. Alignment is done by mapping size + align and
 * trimming, as posix_memalign-style code does (a free aligned hint is taken as is); mmsim
 * places `align` the same way (kernel/mmap.rs). Reads touch one byte per stride through a
 * volatile pointer, so the compiler cannot elide them. */

static size_t span(struct region *r, long long off, long long len)
{
	if (len < 0 || (size_t)(off + len) > r->size)
		return off < (long long)r->size ? r->size - off : 0;
	return len;
}

/* The mapping of an mmap op (see the header of runner.c): MAP_FAILED with errno on failure;
 * the region's size in *sizep. */
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
	/* Where the TLB splits huge pages, a write that faulted is followed by a flush (see
	 * runner_host.h). */
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

static void do_mmap(const struct op *o)
{
	size_t size;
	char *p = map_region(o, &size);
	if (p == MAP_FAILED) {
		/* As mmsim: the failure is an event and the task ends. */
		event_syscall("mmap", o->name, (size_t)o->a, errno);
		end_task();
	}
	set_region(o->name, p, size);
}

static void do_brk(const struct op *o)
{
	/* sbrk(DELTA): the region is the heap from where the break was at the first brk op naming
	 * it to the break now. */
	char *from = sbrk(0);
	for (int k = 0; k < nregions; k++)
		if (!strcmp(regions[k].name, o->name))
			from = regions[k].addr;
	if (sbrk(o->a) == (void *)-1)
		event_fail("brk", o->name, NULL, errno);
	char *now = sbrk(0);
	set_region(o->name, from, now > from ? (size_t)(now - from) : 0);
}

static void do_munmap(const struct op *o)
{
	/* Nothing to unmap (an offset at or past the region's end) is no call, as in mmsim (munmap
	 * of length 0 would fail with EINVAL). */
	struct region *r = region(o->name);
	size_t len = span(r, o->a, o->b);
	if (len > 0 && munmap(r->addr + o->a, len) < 0)
		event_fail("munmap", o->name, NULL, errno);
}

/* An mlock op (mlock, or mlock2 with MLOCK_ONFAULT) or a munlock op. */
static void do_mlock(const struct op *o)
{
	struct region *r = region(o->name);
	char *a = r->addr + o->a;
	size_t len = span(r, o->a, o->b);
	int err = o->kind == MUNLOCK ? munlock(a, len) : o->c ? mlock2(a, len, MLOCK_ONFAULT) : mlock(a, len);
	if (err < 0)
		event_fail(o->kind == MLOCK ? "mlock" : "munlock", o->name, NULL, errno);
}

static void do_mlockall(const struct op *o)
{
	if (mlockall((int)o->a) < 0)
		event_fail("mlockall", "", NULL, errno);
	else if (o->a & MCL_CURRENT)
		drain_locked = o->a & MCL_ONFAULT ? 2 : 1;
}

static void do_munlockall(void)
{
	if (munlockall() < 0)
		event_fail("munlockall", "", NULL, errno);
	else
		drain_locked = 0;
}

/* An mremap op, the region named as mmsim names it (see the header of runner.c). */
static void do_mremap(const struct op *o)
{
	struct region *r = region(o->name);
	size_t off = (size_t)o->d, len = o->e >= 0 ? (size_t)o->e : off < r->size ? r->size - off : 0;
	char *old = r->addr + off;
	int named = strcmp(o->name2, "-") != 0;
	/* The system call itself: glibc's wrapper passes no new address without MREMAP_FIXED. */
	void *p = (void *)syscall(SYS_mremap, old, len, (size_t)o->a, (unsigned long)o->b, (unsigned long)o->c);
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
}

static void do_mprotect(const struct op *o)
{
	struct region *r = region(o->name);
	if (mprotect(r->addr + o->a, span(r, o->a, o->b), (int)o->c) < 0)
		event_fail("mprotect", o->name, NULL, errno);
}

static void do_madvise(const struct op *o)
{
	struct region *r = region(o->name);
	if (madvise(r->addr + o->a, span(r, o->a, o->b), (int)o->c) < 0)
		event_fail("madvise", o->name, o->name2, errno);
}

/* A read or write op: sequential, or COUNT slots drawn as mmsim's pattern "random" draws them. */
static void do_access(const struct op *o)
{
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
}

static void do_compare(const struct op *o)
{
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
}

/* An atomic op; where the TLB splits huge pages, a flush after it if it faulted (see
 * runner_host.h). */
static void do_atomic(const struct op *o)
{
	struct region *r = region(o->name);
	volatile long long *word = (volatile long long *)(r->addr + (o->a & ~7LL));
	long before = flush_pages != NULL ? task_faults() : 0;
	for (long long k = 0; k < o->b; k++)
		__asm__ volatile("lock addq $0, %0" : "+m"(*word) : : "memory", "cc");
	if (flush_pages != NULL && task_faults() != before)
		flush_tlb();
}
