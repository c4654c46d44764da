/* The runner's reports (included once, by runner.c, which defines the state they read):
 * snapshots (getrusage, perf counters, /proc/self/status and smaps_rollup, /proc/vmstat and
 * /proc/meminfo, read with read(2) into static buffers after draining this CPU's mlock batch),
 * event lines (a failed syscall, a failed expect of a file read, a file the kernel kept
 * cached, a fatal signal, written from its handler with async-signal-safe formatting) and the
 * address-space map the simulator mirrors.
 *
 * A snapshot line has the task's "minflt" and "majflt" (getrusage, the runner's own faults
 * taken out: see runner.c), /proc/self/status's VmRSS VmHWM RssAnon RssFile RssShmem VmPTE
 * VmLck HugetlbPages VmSwap, smaps_rollup's AnonHugePages and LazyFree, system-wide "vmstat"
 * and "meminfo" objects (the keys below; a kernel without one has no key), "perf", the
 * workload's "cgroups" and /proc/swaps' rows ("swaps": runner_memcg.h). The process is in the
 * runner's own cgroup while it reads them (runner_memcg.h). */

/* Append ,"KEY":value pairs from a /proc file whose lines are "Key: value kB" or "key value". */
static int proc_fields(char *buf, size_t cap, const char *path, const char *const *keys, int colon)
{
	size_t len = 0;
	if (slurp(path, file_buf, sizeof file_buf) < 0)
		return 0;
	for (char *line = file_buf; *line;) {
		char *nl = strchr(line, '\n');
		for (int i = 0; keys[i]; i++) {
			size_t k = strlen(keys[i]);
			if (!strncmp(line, keys[i], k) && line[k] == (colon ? ':' : ' ')) {
				long long v = atoll(line + k + 1);
				len += snprintf(buf + len, cap - len, ",\"%s\":%lld", keys[i], v);
			}
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return (int)len;
}

/* Drain this CPU's mlock folio batch (mm/mlock.c mlock_fbatch): munlock_folio queues a small
 * folio there and its unevictable_pgs_munlocked and NR_MLOCK change only when 31 have queued
 * or something calls lru_add_drain(), so after a munmap of 512 locked 4 KiB pages the kernel
 * has counted 496. mlock_vma_pages_range calls lru_add_drain() before its walk: mlock and
 * munlock of the runner's own PROT_NONE page (no fault: populate stops with ENOMEM at once)
 * drain it, and leave VmLck as it was. With the runner pinned to one CPU (main), the batch
 * drained is the one the workload filled, and a snapshot sees every munlock done, as mmsim
 * counts them. lru_add_drain drains the CPU's other folio batches too: MADV_FREE's lazyfree
 * batch (pglazyfree, and smaps' LazyFree, change only when a folio leaves it). Best effort:
 * without CAP_IPC_LOCK and RLIMIT_MEMLOCK it does nothing. Where an mlockall(MCL_CURRENT) of
 * the workload locked the page with the rest (drain_locked), it is munlocked and locked
 * again, as it was. */
static void drain_mlock_batch(void)
{
	if (drain_page == NULL)
		return;
	if (drain_locked) {
		/* An mlockall(MCL_CURRENT) locked the page too: munlock, then lock it again as it
		 * was (the populate's ENOMEM at a PROT_NONE page is no failure). */
		munlock(drain_page, 4096);
		mlock2(drain_page, 4096, drain_locked == 2 ? MLOCK_ONFAULT : 0);
		return;
	}
	if (mlock(drain_page, 4096) < 0 && errno != ENOMEM)
		return;
	munlock(drain_page, 4096);
}

static void snapshot(const char *label)
{
	static const char *const meminfo[] = {"MemFree", "AnonPages", "AnonHugePages", "PageTables", "Shmem",
					      "HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp",
					      "Hugetlb",
					      /* The page cache (kB): files, their huge folios and PMD maps. */
					      "Cached", "Buffers", "Mapped", "Dirty", "FilePmdMapped", "FileHugePages",
					      "ShmemPmdMapped", "ShmemHugePages",
					      /* Swap and the LRU lists (kB). */
					      "SwapTotal", "SwapFree", "SwapCached", "Active", "Inactive",
					      "Active(anon)", "Inactive(anon)", "Active(file)", "Inactive(file)",
					      "Unevictable", NULL};
	static const char *const status[] = {"VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem",
					     "VmPTE", "VmLck", "HugetlbPages", "VmSwap", NULL};
	static const char *const smaps[] = {"AnonHugePages", "LazyFree", NULL};
	static const char *const vmstat[] = {"pgfault", "thp_fault_alloc", "thp_fault_fallback", "thp_split_pmd",
					     "thp_zero_page_alloc", "thp_zero_page_alloc_failed", "nr_page_table_pages",
					     "nr_anon_pages", "nr_anon_transparent_hugepages", "thp_collapse_alloc",
					     "unevictable_pgs_mlocked", "unevictable_pgs_munlocked", "nr_mlock",
					     "nr_hugetlb",
					     /* MADV_FREE: pages made lazyfree (counted as this CPU's lazyfree
					      * batch drains: drain_mlock_batch drains it too) and discarded. */
					     "pglazyfree", "pglazyfreed",
					     /* The page cache: pages, events, and KiB read from disks. */
					     "nr_file_pages", "nr_mapped", "nr_shmem", "nr_file_hugepages",
					     "nr_file_pmdmapped", "nr_shmem_hugepages", "nr_shmem_pmdmapped", "pgmajfault",
					     "pgpgin", "thp_file_alloc", "thp_file_fallback", "thp_file_mapped",
					     /* Reclaim and swap: scans and steals by who reclaimed (memory
					      * cgroup reclaim counts only the _anon and _file ones here),
					      * the LRU lists' moves and sizes, refaults, swap I/O and
					      * readahead, stalls and OOM kills. */
					     "pswpin", "pswpout", "pgscan_kswapd", "pgscan_direct",
					     "pgscan_khugepaged", "pgscan_proactive", "pgsteal_kswapd",
					     "pgsteal_direct", "pgsteal_khugepaged", "pgsteal_proactive", "pgscan_anon",
					     "pgscan_file", "pgsteal_anon", "pgsteal_file", "pgactivate", "pgdeactivate",
					     "pgrefill", "pgrotated", "workingset_refault_anon", "workingset_refault_file",
					     "workingset_activate_anon", "workingset_activate_file",
					     "workingset_restore_anon", "workingset_restore_file",
					     "workingset_nodereclaim", "swap_ra", "swap_ra_hit", "swpin_zero",
					     "swpout_zero", "allocstall_normal", "allocstall_movable", "pageoutrun",
					     "thp_swpout", "thp_swpout_fallback", "thp_split_page", "oom_kill",
					     "nr_inactive_anon", "nr_active_anon", "nr_inactive_file", "nr_active_file",
					     "nr_unevictable", "nr_isolated_anon", "nr_isolated_file", "nr_swapcached",
					     "nr_writeback", "nr_vmscan_write", NULL};
	static char buf[1 << 17], vm[8192], mi[4096], pf[1024], un[512];
	struct rusage ru;
	int vlen, mlen, plen = 0, ulen = 0;
	size_t len;
	own_cgroup();
	getrusage(RUSAGE_THREAD, &ru);
	for (int i = 0; i < NEVENTS; i++) {
		unsigned long long v;
		if (cur.perf_fd[i] >= 0 && read(cur.perf_fd[i], &v, sizeof v) == sizeof v) {
			/* The runner's own faults are not the workload's (0: page-faults, 1:
			 * minor-faults, 2: major-faults). */
			if (i <= 1)
				v -= (unsigned long long)(cur.own_faults - cur.own_before_perf);
			if (i == 0 || i == 2)
				v -= (unsigned long long)(cur.own_majflt - cur.own_maj_before_perf);
			plen += snprintf(pf + plen, sizeof pf - plen, ",\"%s\":%llu", events[i].name, v);
		} else {
			ulen += snprintf(un + ulen, sizeof un - ulen, ",\"%s\"", events[i].name);
		}
	}
	drain_mlock_batch();
	/* System-wide counters: fold the per-cpu deltas first (needs root; best effort). */
	int fd = open("/proc/sys/vm/stat_refresh", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0) {
		}
		close(fd);
	}
	len = snprintf(buf, sizeof buf,
		       "{\"label\":\"%s\",\"pid\":%d,\"aslr\":%s,\"minflt\":%ld,\"runner_minflt\":%ld,\"majflt\":%ld,"
		       "\"runner_majflt\":%ld",
		       label, cur.pid, aslr ? "true" : "false", ru.ru_minflt - cur.own_faults, cur.own_faults,
		       ru.ru_majflt - cur.own_majflt, cur.own_majflt);
	len += proc_fields(buf + len, sizeof buf - len, "/proc/self/status", status, 1);
	len += proc_fields(buf + len, sizeof buf - len, "/proc/self/smaps_rollup", smaps, 1);
	vlen = proc_fields(vm, sizeof vm, "/proc/vmstat", vmstat, 0);
	mlen = proc_fields(mi, sizeof mi, "/proc/meminfo", meminfo, 1);
	len += snprintf(buf + len, sizeof buf - len,
			",\"vmstat\":{%s},\"meminfo\":{%s},\"perf\":{%s},\"unsupported\":[%s]", vlen ? vm + 1 : "",
			mlen ? mi + 1 : "", plen ? pf + 1 : "", ulen ? un + 1 : "");
	len = cgroup_fields(buf, len, sizeof buf - 2);
	len = swap_fields(buf, len, sizeof buf - 2);
	if (len >= sizeof buf - 2) {
		fprintf(stderr, "runner: snapshot %s: more than %zu bytes\n", label, sizeof buf);
		exit(3);
	}
	len += (size_t)snprintf(buf + len, sizeof buf - len, "}\n");
	if (write(out_fd, buf, len) != (ssize_t)len)
		die("write snapshot");
	task_cgroup_again();
}

/* Events: one JSON line each (see the header). Outside a signal handler. */
static void write_line(const char *buf, size_t len)
{
	if (write(out_fd, buf, len) != (ssize_t)len)
		die("write event");
}

/* A workload's name for a JSON string: quotes and backslashes escaped (into esc). */
static const char *escaped(const char *name, char *esc, size_t cap)
{
	size_t k = 0;
	for (const char *c = name; *c && k + 2 < cap; c++) {
		if (*c == '"' || *c == '\\')
			esc[k++] = '\\';
		esc[k++] = *c;
	}
	esc[k] = 0;
	return esc;
}

/* A failed system call of the workload ("syscall": "mmap NAME (SIZE bytes): ENOMEM", as mmsim
 * words it). Names are the workload's: quotes and backslashes are escaped. */
static void event_syscall(const char *call, const char *name, size_t size, int err)
{
	static char buf[512], esc[160];
	escaped(name, esc, sizeof esc);
	const char *e = strerrorname_np(err);
	int len = snprintf(buf, sizeof buf,
			   "{\"label\":\"__event\",\"pid\":%d,\"kind\":\"syscall\",\"errno\":\"%s\","
			   "\"message\":\"%s %s (%zu bytes): %s\"}\n",
			   cur.pid, e ? e : "?", call, esc, size, e ? e : "?");
	write_line(buf, (size_t)len);
}

/* A failed call of an op that goes on ("syscall": "madvise REGION ADVICE: EINVAL", "pread
 * FILE: ENOENT", as mmsim words them; `what` NULL: none). */
static void event_fail(const char *call, const char *name, const char *what, int err)
{
	static char buf[512], esc[160], esc2[160];
	const char *e = strerrorname_np(err);
	int len = snprintf(buf, sizeof buf,
			   "{\"label\":\"__event\",\"pid\":%d,\"kind\":\"syscall\",\"errno\":\"%s\","
			   "\"message\":\"%s%s%s%s%s: %s\"}\n",
			   cur.pid, e ? e : "?", call, *name ? " " : "", escaped(name, esc, sizeof esc), what ? " " : "",
			   what ? escaped(what, esc2, sizeof esc2) : "", e ? e : "?");
	write_line(buf, (size_t)len);
}

/* The first byte of a pread op that is not its EXPECT ("expect", as mmsim's failed expects:
 * "pread FILE at 0xOFFSET: expected E, found V"). */
static void event_expect(const char *file, unsigned long long at, long long expect, int found)
{
	static char buf[512], esc[160];
	int len = snprintf(buf, sizeof buf,
			   "{\"label\":\"__event\",\"pid\":%d,\"kind\":\"expect\","
			   "\"message\":\"pread %s at 0x%llx: expected %lld, found %d\"}\n",
			   cur.pid, escaped(file, esc, sizeof esc), at, expect, found);
	write_line(buf, (size_t)len);
}

/* A created ext4 file of which the kernel kept `cached` of its `pages` in the page cache after
 * fsync and POSIX_FADV_DONTNEED ("not-cold"): the run's counts then depend on the host. */
static void event_not_cold(const char *file, long cached, long pages)
{
	static char buf[512], esc[160];
	escaped(file, esc, sizeof esc);
	int len = snprintf(buf, sizeof buf,
			   "{\"label\":\"__event\",\"pid\":%d,\"kind\":\"not-cold\",\"file\":\"%s\","
			   "\"cached\":%ld,\"message\":\"create %s: %ld of its %ld pages stayed in the page cache\"}\n",
			   cur.pid, esc, cached, esc, cached, pages);
	write_line(buf, (size_t)len);
}

/* Async-signal-safe formatting for the handler below. */
static size_t put_str(char *b, size_t n, size_t cap, const char *s)
{
	while (*s && n + 1 < cap)
		b[n++] = *s++;
	return n;
}

static size_t put_num(char *b, size_t n, size_t cap, unsigned long v, unsigned base)
{
	char t[24];
	int k = 0;
	do {
		t[k++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (k && n + 1 < cap)
		b[n++] = t[--k];
	return n;
}

/* SIGSEGV and SIGBUS: report the task's death (kind "segfault", as mmsim reports both), then
 * die of the signal (its action is the default again: SA_RESETHAND). */
static void on_fatal_signal(int sig, siginfo_t *si, void *ctx)
{
	static char b[320];
	unsigned long addr = (unsigned long)si->si_addr;
	size_t n = 0;
	sigset_t set;
	(void)ctx;
	n = put_str(b, n, sizeof b, "{\"label\":\"__event\",\"pid\":");
	n = put_num(b, n, sizeof b, (unsigned long)cur.pid, 10);
	n = put_str(b, n, sizeof b, ",\"kind\":\"segfault\",\"signal\":\"");
	n = put_str(b, n, sizeof b, sig == SIGBUS ? "SIGBUS" : "SIGSEGV");
	n = put_str(b, n, sizeof b, "\",\"addr\":");
	n = put_num(b, n, sizeof b, addr, 10);
	n = put_str(b, n, sizeof b, sig == SIGBUS ? ",\"message\":\"SIGBUS at 0x" : ",\"message\":\"segfault at 0x");
	n = put_num(b, n, sizeof b, addr, 16);
	n = put_str(b, n, sizeof b, "\"}\n");
	if (write(out_fd, b, n) < 0) {
	}
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
}

static void catch_fatal_signals(void)
{
	struct sigaction sa;
	struct rlimit none = {0, 0};
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fatal_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	/* A workload's death is not worth a core file (a hugetlb one would be gigabytes). */
	setrlimit(RLIMIT_CORE, &none);
}

/* One line of the runner's address space before the program (label "__maps"): every mapping
 * as [start, end, perms, kind], so that mmsim can start from the same layout (where its
 * top-down mmap puts a region, which page tables already exist, and which neighbour a region
 * may merge with, depend on it). kind: "stack", "heap", "file" (a path), "special" (another
 * [name]: vdso, vvar, vsyscall) or "" (anonymous); and "brk": [start_brk, brk], where the
 * heap begins and its break. */
static void emit_maps(void)
{
	/* start_brk is the 47th field of /proc/self/stat, after the command's ")". */
	if (slurp("/proc/self/stat", file_buf, sizeof file_buf) < 0)
		die("/proc/self/stat");
	char *f = strrchr(file_buf, ')');
	for (int field = 2; f && field < 47; field++)
		f = strchr(f + 1, ' ');
	if (!f || sscanf(f + 1, "%lu", &start_brk) != 1)
		die("start_brk");
	static char out[1 << 16];
	size_t len = 0;
	if (slurp("/proc/self/maps", file_buf, sizeof file_buf) < 0)
		die("/proc/self/maps");
	len += snprintf(out + len, sizeof out - len, "{\"label\":\"__maps\",\"pid\":1,\"maps\":[");
	int first = 1;
	for (char *line = file_buf; *line && len + 128 < sizeof out;) {
		char *nl = strchr(line, '\n');
		unsigned long a, b;
		char perms[8];
		if (nl)
			*nl = 0;
		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3) {
			const char *name = strpbrk(line, "/[");
			const char *kind = !name                      ? ""
					   : *name == '/'             ? "file"
					   : !strncmp(name, "[stack]", 7) ? "stack"
					   : !strncmp(name, "[heap]", 6)  ? "heap"
									  : "special";
			len += snprintf(out + len, sizeof out - len, "%s[%lu,%lu,\"%s\",\"%s\"]", first ? "" : ",", a, b,
					perms, kind);
		}
		first = 0;
		if (!nl)
			break;
		line = nl + 1;
	}
	len += snprintf(out + len, sizeof out - len, "],\"brk\":[%lu,%lu]}\n", start_brk, (unsigned long)sbrk(0));
	if (write(out_fd, out, len) != (ssize_t)len)
		die("write maps");
}
