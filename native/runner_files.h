/* The runner's files (included once, by runner.c, which defines the state they use): a
 * workload's files by name, create (made cold), memfd_create, pread/pwrite, fadvise,
 * fallocate, fsync, drop_caches, and the run's directories, made at start and removed when
 * the first process ends.
 *
 * Files are found by name, in the ext4 then the tmpfs directory, by every process and thread
 * of the run. Each pwrite, pread, fadvise and fsync op opens the file, makes its calls and
 * closes it (a fresh struct file: readahead state starts anew with each op); a file mapping
 * opens it, maps it and closes the descriptor. A failed call of a file op is an event
 * ("syscall": "open FILE: ENOENT", "pread FILE: EIO", "fadvise FILE ADVICE: EINVAL", as
 * mmsim words them) and the op ends there.
 *
 * A memfd_create op's file has no path: its descriptor stays open to the end of the run
 * (children and threads share it) and a file op opens /proc/self/fd/FD, a new open file of
 * the same inode, as it would open a path. A later create or memfd_create of the name
 * closes it (a name is one file).
 */

/* The memfds by name, with their descriptors. */
static struct {
	char name[64];
	int fd;
} memfds[64];
static int nmemfds;

/* The descriptor of the memfd a name names, -1 if none. */
static int memfd_of(const char *name)
{
	for (int i = 0; i < nmemfds; i++)
		if (!strcmp(memfds[i].name, name))
			return memfds[i].fd;
	return -1;
}

/* Forget (and close) the memfd of a name. */
static void memfd_forget(const char *name)
{
	for (int i = 0; i < nmemfds; i++) {
		if (!strcmp(memfds[i].name, name)) {
			close(memfds[i].fd);
			memfds[i] = memfds[--nmemfds];
			return;
		}
	}
}

/* Open a workload's file by name: in the ext4 directory, else the tmpfs one (see the header).
 * -1 with errno ENOENT where neither has it. */
static int open_file(const char *name, int flags)
{
	int mfd = memfd_of(name);
	if (mfd >= 0) {
		snprintf(path_buf, sizeof path_buf, "/proc/self/fd/%d", mfd);
		return open(path_buf, flags | O_CLOEXEC);
	}
	for (int i = 0; i < NFS; i++) {
		if (!fs_dir[i][0])
			continue;
		snprintf(path_buf, sizeof path_buf, "%s/%s", fs_dir[i], name);
		int fd = open(path_buf, flags | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT)
			return fd;
	}
	errno = ENOENT;
	return -1;
}

/* The pages of a file in the page cache: cachestat(2) (Linux >= 6.5), else mincore(2) on a
 * temporary mapping (no page of it is touched: no fault, no page table). */
static long cached_pages(int fd, size_t size)
{
	struct {
		unsigned long long off, len;
	} range = {0, 0};
	struct {
		unsigned long long nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
	} cs;
	static unsigned char vec[1 << 16];
	if (syscall(SYS_cachestat, fd, &range, &cs, 0) == 0)
		return (long)cs.nr_cache;
	size_t len = (size + 4095) & ~4095UL;
	if (len == 0)
		return 0;
	char *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	long n = 0;
	for (size_t at = 0; at < len; at += sizeof vec * 4096) {
		size_t part = len - at < sizeof vec * 4096 ? len - at : sizeof vec * 4096;
		if (mincore(p + at, part, vec) < 0) {
			n = -1;
			break;
		}
		for (size_t k = 0; k < part / 4096; k++)
			n += vec[k] & 1;
	}
	munmap(p, len);
	return n;
}

/* create FILE SIZE FS (see the header): an ext4 file of zeros on the disk and not cached, a
 * sparse tmpfs file. */
static void do_create(const struct op *o)
{
	int fs = (int)o->c;
	memfd_forget(o->name);
	if (!fs_dir[fs][0]) {
		fprintf(stderr, "runner: create %s: no directory for %s files (give %s=DIR)\n", o->name, fs_names[fs],
			fs_names[fs]);
		exit(3);
	}
	for (int i = 0; i < NFS; i++) {
		if (i != fs && fs_dir[i][0]) {
			snprintf(path_buf, sizeof path_buf, "%s/%s", fs_dir[i], o->name);
			unlink(path_buf);
		}
	}
	snprintf(path_buf, sizeof path_buf, "%s/%s", fs_dir[fs], o->name);
	int fd = open(path_buf, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		event_fail("create", o->name, NULL, errno);
		return;
	}
	size_t size = (size_t)o->a;
	if (fs == TMPFS) {
		if (ftruncate(fd, (off_t)size) < 0)
			event_fail("create", o->name, NULL, errno);
		close(fd);
		return;
	}
	memset(io_buf, 0, IO_BUF);
	for (size_t at = 0; at < size;) {
		ssize_t n = write(fd, io_buf, size - at < IO_BUF ? size - at : IO_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			event_fail("create", o->name, NULL, n < 0 ? errno : EIO);
			close(fd);
			return;
		}
		at += (size_t)n;
	}
	if (fsync(fd) < 0) {
		event_fail("create", o->name, NULL, errno);
		close(fd);
		return;
	}
	long cached = 0;
	for (int tries = 0; tries < 8; tries++) {
		if (tries)
			usleep(1000U << tries);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		cached = cached_pages(fd, size);
		if (cached == 0)
			break;
	}
	close(fd);
	if (cached != 0)
		event_not_cold(o->name, cached, (long)((size + 4095) / 4096));
}

/* memfd_create FILE SIZE HUGETLB (see the header): memfd_create, then ftruncate to SIZE; a
 * file of the name in a directory goes. */
static void do_memfd_create(const struct op *o)
{
	memfd_forget(o->name);
	for (int i = 0; i < NFS; i++) {
		if (fs_dir[i][0]) {
			snprintf(path_buf, sizeof path_buf, "%s/%s", fs_dir[i], o->name);
			unlink(path_buf);
		}
	}
	if (nmemfds == (int)(sizeof memfds / sizeof memfds[0])) {
		fprintf(stderr, "runner: memfd_create %s: more than %d memfds\n", o->name, nmemfds);
		exit(3);
	}
	int fd = memfd_create(o->name, MFD_CLOEXEC | (o->b ? MFD_HUGETLB : 0));
	if (fd < 0) {
		event_fail("memfd_create", o->name, NULL, errno);
		return;
	}
	snprintf(memfds[nmemfds].name, sizeof memfds[nmemfds].name, "%s", o->name);
	memfds[nmemfds++].fd = fd;
	if (ftruncate(fd, (off_t)o->a) < 0)
		event_fail("ftruncate", o->name, NULL, errno);
}

/* pwrite and pread FILE OFFSET LENGTH CHUNK VALUE|EXPECT (see the header). */
static void do_rw(const struct op *o)
{
	const char *call = o->kind == PWRITE ? "pwrite" : "pread";
	int fd = open_file(o->name, o->kind == PWRITE ? O_WRONLY : O_RDONLY);
	if (fd < 0) {
		/* As mmsim names it: "open FILE: ENOENT", or a write open's other error
		 * ("pwrite FILE: ETXTBSY"). */
		event_fail(o->kind == PWRITE && errno != ENOENT ? call : "open", o->name, NULL, errno);
		return;
	}
	size_t chunk = (size_t)o->c;
	long long end = o->b < 0 ? LLONG_MAX : o->a + o->b;
	if (o->kind == PWRITE) {
		if (o->b < 0) {
			struct stat st;
			end = fstat(fd, &st) == 0 ? (long long)st.st_size : o->a;
		}
		memset(io_buf, (int)o->d, chunk);
	}
	int failed = 0;
	for (long long at = o->a; at < end;) {
		size_t n = end - at < (long long)chunk ? (size_t)(end - at) : chunk;
		ssize_t got = o->kind == PWRITE ? pwrite(fd, io_buf, n, at) : pread(fd, io_buf, n, at);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			event_fail(call, o->name, NULL, errno);
			break;
		}
		if (o->kind == PREAD && o->d >= 0 && !failed) {
			for (ssize_t k = 0; k < got; k++) {
				if ((unsigned char)io_buf[k] != o->d) {
					event_expect(o->name, (unsigned long long)(at + k), o->d, (unsigned char)io_buf[k]);
					failed = 1;
					break;
				}
			}
		}
		at += got;
		if ((size_t)got < n) /* EOF (a write does not stop short on a regular file) */
			break;
	}
	close(fd);
}

/* A fadvise op: posix_fadvise over a descriptor of its own. */
static void do_fadvise(const struct op *o)
{
	int fd = open_file(o->name, O_RDONLY);
	int err = fd < 0 ? errno : posix_fadvise(fd, o->a, o->b, (int)o->c);
	if (fd >= 0)
		close(fd);
	if (err)
		event_fail(fd < 0 ? "open" : "fadvise", o->name, fd < 0 ? NULL : o->name2, err);
}

static void do_fallocate(const struct op *o)
{
	int fd = open_file(o->name, O_RDWR);
	/* As mmsim names it: "open FILE: ENOENT", or the write open's other error
	 * ("fallocate FILE: ETXTBSY"). */
	if (fd < 0 || fallocate(fd, (int)o->c, o->a, o->b) < 0)
		event_fail(fd < 0 && errno == ENOENT ? "open" : "fallocate", o->name, NULL, errno);
	if (fd >= 0)
		close(fd);
}

static void do_fsync(const struct op *o)
{
	int fd = open_file(o->name, O_RDONLY);
	if (fd < 0 || fsync(fd) < 0)
		event_fail(fd < 0 ? "open" : "fsync", o->name, NULL, errno);
	if (fd >= 0)
		close(fd);
}

/* Write VALUE to /proc/sys/vm/drop_caches (root: mmsim checks it before the run). */
static void drop_caches(long long value)
{
	char v[24];
	int len = snprintf(v, sizeof v, "%lld", value);
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, v, (size_t)len) != len)
		die("/proc/sys/vm/drop_caches (needs root)");
	close(fd);
}

/* Remove the run's directories and the files in them (the first process, as it ends). */
static void remove_files(void)
{
	if (getpid() != main_pid)
		return;
	for (int i = 0; i < NFS; i++) {
		if (!fs_dir[i][0])
			continue;
		DIR *d = opendir(fs_dir[i]);
		struct dirent *e;
		while (d && (e = readdir(d)) != NULL) {
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				snprintf(path_buf, sizeof path_buf, "%s/%s", fs_dir[i], e->d_name);
				unlink(path_buf);
			}
		}
		if (d)
			closedir(d);
		rmdir(fs_dir[i]);
	}
}

/* ext4=DIR and tmpfs=DIR: the run's directory DIR/mmsim-PID of each (see the header). */
static void make_dirs(int argc, char **argv)
{
	main_pid = getpid();
	for (int k = 2; k < argc; k++) {
		int fs = -1;
		if (memcg_arg(argv[k]))
			continue;
		for (int i = 0; i < NFS; i++)
			if (!strncmp(argv[k], fs_names[i], strlen(fs_names[i])) && argv[k][strlen(fs_names[i])] == '=')
				fs = i;
		if (fs < 0) {
			fprintf(stderr, "runner: %s: expected ext4=DIR or tmpfs=DIR\n", argv[k]);
			exit(2);
		}
		const char *dir = argv[k] + strlen(fs_names[fs]) + 1;
		if (snprintf(fs_dir[fs], sizeof fs_dir[fs], "%s/mmsim-%d", dir, (int)main_pid) >= (int)sizeof fs_dir[fs]) {
			fprintf(stderr, "runner: %s: path too long\n", argv[k]);
			exit(2);
		}
	}
	/* A directory an earlier runner of the same pid left (killed by a signal) goes first. */
	remove_files();
	atexit(remove_files);
	for (int i = 0; i < NFS; i++)
		if (fs_dir[i][0] && mkdir(fs_dir[i], 0755) < 0)
			die(fs_dir[i]);
}
