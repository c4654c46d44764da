/* Memory cgroups and swap (included once, by runner.c, which defines the state they use): the
 * workload's cgroups, which processes join, the ops that write their files (`cgroup_write`,
 * `memory_reclaim`), and what a snapshot reports of them and of the swap devices.
 *
 * mmsim made the cgroups before the runner started (python/mmsim/native_memcg.py), as
 * children of one directory of the run's own, PARENT (`memcg=v1:PARENT` or `memcg=v2:PARENT`
 * on the command line), with the workload's limits written; the runner's own cgroup, where it
 * started, is HOME (`memcg-home=HOME`). The program declares them (`cgroup NAME`, in an
 * order where a parent comes before its children) and names the first process's
 * (`join NAME`); a cgroup is PARENT/NAME.
 *
 * The runner is invisible here too: what it does for itself is charged to HOME, never to a
 * workload's cgroup. A task is in its cgroup only while it runs the workload's ops: a
 * snapshot moves its process to HOME while it reads /proc and the cgroup files (a read of a
 * seq_file allocates its buffer with __GFP_ACCOUNT, and a new pid's /proc inodes and
 * dentries are accounted slab), and back; a forked child moves to HOME at once, breaks
 * copy-on-write on the runner's own pages there (touch_own: on cgroup v1 a page stays charged
 * where it was allocated) and then joins its cgroup, the fork op's `cgroup` or its parent's;
 * the parent breaks its copy-on-write in HOME too. The first process joins after its first
 * snapshot and the address-space map, just before the program. A move is a write of "0" (the
 * writing task's process) to cgroup.procs, through a descriptor opened before the program.
 *
 * Files, by hierarchy (the workload names cgroup v2's; native_memcg.py refuses, before the
 * run, what v1 cannot express):
 *   v2: memory.max, memory.high, memory.low, memory.min, memory.swap.max, memory.swap.high and
 *       memory.oom.group are written as they are; memory.peak through the one descriptor a
 *       snapshot reads it with (a write resets the peak that descriptor reads); memory.reclaim
 *       "BYTES [swappiness=N|max]".
 *   v1: memory.max is memory.limit_in_bytes, memory.swap.max the difference of
 *       memory.memsw.limit_in_bytes and it (memsw = max + swap.max, "max" = -1). A change of
 *       one keeps the other: the limit and memsw are written in the order the kernel accepts
 *       (memsw >= limit at every step: memsw first when it grows, the limit first when memsw
 *       shrinks). The v2-only files and memory.reclaim are an event ("unavailable").
 *
 * A snapshot's "cgroups" has, per declared cgroup, on v1: memory.usage_in_bytes,
 * memory.max_usage_in_bytes, memory.limit_in_bytes, memory.failcnt, memory.memsw.usage_in_bytes,
 * memory.memsw.max_usage_in_bytes, memory.memsw.limit_in_bytes, memory.kmem.usage_in_bytes
 * (what of the usage is kernel memory), memory.stat and memory.oom_control (objects of the
 * file's keys in its order); on v2: memory.current, memory.peak, memory.swap.current,
 * memory.swap.peak, memory.stat, memory.events, memory.events.local, memory.swap.events. A file
 * the kernel lacks is left out. "swaps" has /proc/swaps' rows: [Filename, Type, Size, Used,
 * Priority].
 */

#define MAX_CGROUPS 32

enum memcg_mode { MEMCG_NONE, MEMCG_V1, MEMCG_V2 };
static int memcg_mode;
static char memcg_parent[PATH_MAX];
static char memcg_home[PATH_MAX];

static struct {
	char name[128];
	char dir[PATH_MAX + 160];
	int procs_fd; /* its cgroup.procs, for writing */
	int peak_fd;  /* v2: memory.peak, read and reset through this one descriptor */
} cgroups[MAX_CGROUPS];
static int ncgroups;
static int home_procs_fd = -1;
/* The first process's cgroup (the `join` line; -1: none, it stays in HOME). */
static int first_cgroup = -1;
/* The cgroup the running process is in as the workload sees it (-1: HOME), and the one it
 * is in now (a snapshot moves it to HOME for a while). */
static int task_cgroup = -1;
static int in_cgroup = -1;
static char cg_path[PATH_MAX + 256];

/* `memcg=v1:PARENT`, `memcg=v2:PARENT` or `memcg-home=HOME` (1), else 0. */
static int memcg_arg(const char *arg)
{
	if (!strncmp(arg, "memcg-home=", 11)) {
		snprintf(memcg_home, sizeof memcg_home, "%s", arg + 11);
		return 1;
	}
	if (strncmp(arg, "memcg=", 6))
		return 0;
	if (!strncmp(arg + 6, "v1:", 3))
		memcg_mode = MEMCG_V1;
	else if (!strncmp(arg + 6, "v2:", 3))
		memcg_mode = MEMCG_V2;
	else {
		fprintf(stderr, "runner: %s: expected memcg=v1:DIR or memcg=v2:DIR\n", arg);
		exit(2);
	}
	snprintf(memcg_parent, sizeof memcg_parent, "%s", arg + 9);
	return 1;
}

/* The index of a declared cgroup (parse time). */
static int cgroup_index(const char *name)
{
	for (int i = 0; i < ncgroups; i++)
		if (!strcmp(cgroups[i].name, name))
			return i;
	fprintf(stderr, "runner: cgroup %s is not declared\n", name);
	exit(3);
}

/* A `cgroup NAME` line. */
static void declare_cgroup(const char *name)
{
	if (ncgroups == MAX_CGROUPS) {
		fprintf(stderr, "runner: more than %d cgroups\n", MAX_CGROUPS);
		exit(3);
	}
	snprintf(cgroups[ncgroups].name, sizeof cgroups[ncgroups].name, "%s", name);
	cgroups[ncgroups].procs_fd = cgroups[ncgroups].peak_fd = -1;
	ncgroups++;
}

/* A `join NAME` line. */
static void declare_first_cgroup(const char *name)
{
	first_cgroup = cgroup_index(name);
}

/* Open every cgroup's cgroup.procs (and on v2 memory.peak), and HOME's, before the program. */
static void memcg_open(void)
{
	if (!ncgroups)
		return;
	if (memcg_mode == MEMCG_NONE || !memcg_home[0]) {
		fprintf(stderr, "runner: the program declares cgroups: give memcg=v1:DIR (or v2) and memcg-home=DIR\n");
		exit(2);
	}
	snprintf(cg_path, sizeof cg_path, "%s/cgroup.procs", memcg_home);
	home_procs_fd = open(cg_path, O_WRONLY | O_CLOEXEC);
	if (home_procs_fd < 0)
		die(cg_path);
	for (int i = 0; i < ncgroups; i++) {
		snprintf(cgroups[i].dir, sizeof cgroups[i].dir, "%s/%s", memcg_parent, cgroups[i].name);
		snprintf(cg_path, sizeof cg_path, "%s/cgroup.procs", cgroups[i].dir);
		cgroups[i].procs_fd = open(cg_path, O_WRONLY | O_CLOEXEC);
		if (cgroups[i].procs_fd < 0)
			die(cg_path);
		if (memcg_mode == MEMCG_V2) {
			snprintf(cg_path, sizeof cg_path, "%s/memory.peak", cgroups[i].dir);
			cgroups[i].peak_fd = open(cg_path, O_RDWR | O_CLOEXEC);
		}
	}
}

/* Move this process to cgroup `i` (-1: HOME). */
static void move_to_cgroup(int i)
{
	if (i == in_cgroup)
		return;
	int fd = i < 0 ? home_procs_fd : cgroups[i].procs_fd;
	if (write(fd, "0", 1) != 1) {
		snprintf(cg_path, sizeof cg_path, "join %s", i < 0 ? memcg_home : cgroups[i].dir);
		die(cg_path);
	}
	in_cgroup = i;
}

/* The runner's own work: in HOME. */
static void own_cgroup(void)
{
	move_to_cgroup(-1);
}

/* The workload's ops: in the task's cgroup. */
static void task_cgroup_again(void)
{
	move_to_cgroup(task_cgroup);
}

/* A cgroup file's path ("" NAME: the directory). */
static const char *cg_file(int i, const char *name)
{
	snprintf(cg_path, sizeof cg_path, "%s/%s", cgroups[i].dir, name);
	return cg_path;
}

/* A number a cgroup file holds (v1's limits print PAGE_COUNTER_MAX's bytes when unlimited;
 * v2's "max": -1); -2 where the file cannot be read. */
static long long cg_read_number(int i, const char *name)
{
	static char b[64];
	if (slurp(cg_file(i, name), b, sizeof b) < 0)
		return -2;
	if (!strncmp(b, "max", 3))
		return -1;
	return atoll(b);
}

/* v1's unlimited: at least PAGE_COUNTER_MAX pages' bytes (a write of -1 sets it). */
static int v1_unlimited(long long v)
{
	return v < 0 || v >= 9223372036854771712LL / 2;
}

/* Write `value` (-1: "max"; v1: -1) to a cgroup file; the errno, or 0. */
static int cg_write(int i, const char *name, long long value)
{
	char v[32];
	int len = memcg_mode == MEMCG_V2 && value < 0 ? snprintf(v, sizeof v, "max")
						       : snprintf(v, sizeof v, "%lld", value);
	int fd = open(cg_file(i, name), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int err = write(fd, v, (size_t)len) == len ? 0 : errno;
	close(fd);
	return err;
}

/* v1: the limit and memsw limit that make memory.max `max` and memory.swap.max `swap` (-1:
 * "max"; memsw is -1 when either is), written in an order the kernel accepts. */
static int v1_set_limits(int i, long long max, long long swap)
{
	long long memsw = max < 0 || swap < 0 ? -1 : max + swap;
	long long now = cg_read_number(i, "memory.memsw.limit_in_bytes");
	int grows = memsw < 0 || (now >= 0 && !v1_unlimited(now) && memsw > now);
	int err;
	if (grows) {
		err = cg_write(i, "memory.memsw.limit_in_bytes", memsw);
		return err ? err : cg_write(i, "memory.limit_in_bytes", max);
	}
	err = cg_write(i, "memory.limit_in_bytes", max);
	return err ? err : cg_write(i, "memory.memsw.limit_in_bytes", memsw);
}

/* An event saying the host cannot do what an op asks. */
static void event_unavailable(const char *what, const char *cg, const char *why)
{
	static char buf[512];
	int len = snprintf(buf, sizeof buf,
			   "{\"label\":\"__event\",\"pid\":%d,\"kind\":\"unavailable\",\"message\":\"%s %s: %s\"}\n",
			   cur.pid, what, cg, why);
	write_line(buf, (size_t)len);
}

static const char *const V2_ONLY = "a cgroup v2 file, and the host's memory controller is on cgroup v1";

/* cgroup_write CGROUP FILE VALUE (see the header of runner.c). */
static void do_cgroup_write(const struct op *o)
{
	int i = (int)o->c, err = 0;
	const char *file = o->name2;
	if (!strcmp(file, "cgroup.procs")) {
		/* "0": this process moves to cgroup i; its ops from here on are charged there. */
		if (in_cgroup == i || write(cgroups[i].procs_fd, "0", 1) == 1)
			task_cgroup = in_cgroup = i;
		else
			event_fail("cgroup_write", cgroups[i].name, file, errno);
		return;
	}
	if (memcg_mode == MEMCG_V2) {
		if (!strcmp(file, "memory.peak")) {
			if (cgroups[i].peak_fd < 0 || write(cgroups[i].peak_fd, "reset", 5) != 5)
				err = cgroups[i].peak_fd < 0 ? ENOENT : errno;
		} else {
			err = cg_write(i, file, o->a);
		}
	} else if (!strcmp(file, "memory.max") || !strcmp(file, "memory.swap.max")) {
		long long limit = cg_read_number(i, "memory.limit_in_bytes");
		long long memsw = cg_read_number(i, "memory.memsw.limit_in_bytes");
		long long max = v1_unlimited(limit) ? -1 : limit;
		long long swap = v1_unlimited(memsw) || max < 0 ? -1 : memsw - limit;
		if (!strcmp(file, "memory.max"))
			max = o->a;
		else
			swap = o->a;
		err = v1_set_limits(i, max, swap);
	} else {
		event_unavailable("cgroup_write", cgroups[i].name, V2_ONLY);
		return;
	}
	if (err)
		event_fail("cgroup_write", cgroups[i].name, file, err);
}

/* memory_reclaim CGROUP BYTES SWAPPINESS (v2's memory.reclaim; SWAPPINESS -1: none, 201: max). */
static void do_memory_reclaim(const struct op *o)
{
	int i = o->c >= 0 ? (int)o->c : task_cgroup;
	if (i < 0) {
		event_unavailable("memory_reclaim", "-", "the task is in no cgroup of the workload");
		return;
	}
	if (memcg_mode != MEMCG_V2) {
		event_unavailable("memory_reclaim", cgroups[i].name, V2_ONLY);
		return;
	}
	char v[64];
	int len = o->b < 0	   ? snprintf(v, sizeof v, "%lld", o->a)
		  : o->b > 200 ? snprintf(v, sizeof v, "%lld swappiness=max", o->a)
			       : snprintf(v, sizeof v, "%lld swappiness=%lld", o->a, o->b);
	int fd = open(cg_file(i, "memory.reclaim"), O_WRONLY | O_CLOEXEC);
	int err = fd < 0 ? errno : write(fd, v, (size_t)len) == len ? 0 : errno;
	if (fd >= 0)
		close(fd);
	if (err)
		event_fail("memory_reclaim", cgroups[i].name, NULL, err);
}

/* Append printf's output at buf[len] (cap bytes in all); cap once it does not fit. */
static size_t __attribute__((format(printf, 4, 5))) appendf(char *buf, size_t len, size_t cap, const char *fmt, ...)
{
	va_list ap;
	if (len >= cap)
		return cap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + len, cap - len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap - len ? cap : len + (size_t)n;
}

/* Append `"KEY":{"k":v,...}` of a file of "key value" lines (memory.stat, memory.events, ...),
 * in the file's order; nothing where it cannot be read. */
static size_t cg_object(char *buf, size_t len, size_t cap, int i, const char *name, const char *sep)
{
	static char text[8192];
	if (slurp(cg_file(i, name), text, sizeof text) < 0)
		return len;
	len = appendf(buf, len, cap, "%s\"%s\":{", sep, name);
	int first = 1;
	for (char *line = text; *line;) {
		char *nl = strchr(line, '\n');
		char key[64];
		long long v;
		if (nl)
			*nl = 0;
		if (sscanf(line, "%63s %lld", key, &v) == 2) {
			len = appendf(buf, len, cap, "%s\"%s\":%lld", first ? "" : ",", key, v);
			first = 0;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return appendf(buf, len, cap, "}");
}

/* Append `"KEY":N` of a one-number file (nothing where it cannot be read). */
static size_t cg_number(char *buf, size_t len, size_t cap, int i, const char *name, const char *sep)
{
	long long v = cg_read_number(i, name);
	if (v == -2)
		return len;
	if (v == -1)
		return appendf(buf, len, cap, "%s\"%s\":\"max\"", sep, name);
	return appendf(buf, len, cap, "%s\"%s\":%lld", sep, name, v);
}

/* v2's memory.peak, read through the descriptor its resets went through. */
static size_t cg_peak(char *buf, size_t len, size_t cap, int i)
{
	char b[64];
	ssize_t n = cgroups[i].peak_fd >= 0 ? pread(cgroups[i].peak_fd, b, sizeof b - 1, 0) : -1;
	if (n <= 0)
		return len;
	b[n] = 0;
	return appendf(buf, len, cap, ",\"memory.peak\":%lld", atoll(b));
}

/* Append `,"cgroups":{...}` (nothing without cgroups). In HOME (see the header). */
static size_t cgroup_fields(char *buf, size_t len, size_t cap)
{
	static const char *const v1_numbers[] = {"memory.usage_in_bytes",
						 "memory.max_usage_in_bytes",
						 "memory.limit_in_bytes",
						 "memory.failcnt",
						 "memory.memsw.usage_in_bytes",
						 "memory.memsw.max_usage_in_bytes",
						 "memory.memsw.limit_in_bytes",
						 "memory.kmem.usage_in_bytes",
						 NULL};
	static const char *const v1_objects[] = {"memory.stat", "memory.oom_control", NULL};
	static const char *const v2_numbers[] = {"memory.current", "memory.swap.current", "memory.swap.peak", NULL};
	static const char *const v2_objects[] = {"memory.stat", "memory.events", "memory.events.local",
						 "memory.swap.events", NULL};
	if (!ncgroups)
		return len;
	int v1 = memcg_mode == MEMCG_V1;
	len = appendf(buf, len, cap, ",\"cgroups\":{");
	for (int i = 0; i < ncgroups; i++) {
		len = appendf(buf, len, cap, "%s\"%s\":{", i ? "," : "", cgroups[i].name);
		size_t start = len;
		for (const char *const *f = v1 ? v1_numbers : v2_numbers; *f; f++)
			len = cg_number(buf, len, cap, i, *f, len == start ? "" : ",");
		if (!v1)
			len = cg_peak(buf, len, cap, i);
		for (const char *const *f = v1 ? v1_objects : v2_objects; *f; f++)
			len = cg_object(buf, len, cap, i, *f, len == start ? "" : ",");
		len = appendf(buf, len, cap, "}");
	}
	return appendf(buf, len, cap, "}");
}

/* Append `,"swaps":[[FILENAME,TYPE,SIZE,USED,PRIORITY],...]`: /proc/swaps' rows (kB). */
static size_t swap_fields(char *buf, size_t len, size_t cap)
{
	static char text[8192];
	if (slurp("/proc/swaps", text, sizeof text) < 0)
		return len;
	len = appendf(buf, len, cap, ",\"swaps\":[");
	int first = 1;
	char *line = strchr(text, '\n'); /* the header */
	while (line && *++line) {
		char *nl = strchr(line, '\n');
		char file[256], type[32];
		long long size, used, prio;
		if (nl)
			*nl = 0;
		if (sscanf(line, "%255s %31s %lld %lld %lld", file, type, &size, &used, &prio) == 5) {
			static char esc[520];
			len = appendf(buf, len, cap, "%s[\"%s\",\"%s\",%lld,%lld,%lld]", first ? "" : ",",
					escaped(file, esc, sizeof esc), type, size, used, prio);
			first = 0;
		}
		line = nl;
	}
	return appendf(buf, len, cap, "]");
}
