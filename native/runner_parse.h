/* The program (included once, by runner.c, which defines `struct op` and the tables): the
 * line format of the header of runner.c read into `ops`. Protections come as PROT_* bits and
 * advice as MADV_* values, which the Python side takes from the engine's schema. */

static int has_region(const char *name)
{
	for (int i = 0; i < nregions; i++)
		if (!strcmp(regions[i].name, name))
			return 1;
	return 0;
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
	int stack[64], depth = 0, threads = 0;
	while (fgets(line, sizeof line, f)) {
		struct op *o = &ops[nops];
		memset(o, 0, sizeof *o);
		if (sscanf(line, "%31s", w) != 1)
			continue;
		if (nops >= MAX_OPS - 1) {
			fprintf(stderr, "runner: program too long (at most %d ops)\n", MAX_OPS - 1);
			exit(3);
		}
		if (!strcmp(w, "mmap")) {
			o->kind = MMAP;
			sscanf(line, "%*s %63s %lld %lld %lld %lld %lld %lld %63s %lld", o->name, &o->a, &o->b, &o->c, &o->d,
			       &o->f, &o->g, o->name2, &o->e);
		} else if (!strcmp(w, "mlock") || !strcmp(w, "munlock")) {
			o->kind = w[1] == 'l' ? MLOCK : MUNLOCK;
			sscanf(line, "%*s %63s %lld %lld %lld", o->name, &o->a, &o->b, &o->c);
		} else if (!strcmp(w, "mlockall")) {
			o->kind = MLOCKALL;
			sscanf(line, "%*s %lld", &o->a);
			uses_mlockall = 1;
		} else if (!strcmp(w, "munlockall")) {
			o->kind = MUNLOCKALL;
			uses_mlockall = 1;
		} else if (!strcmp(w, "mremap")) {
			o->kind = MREMAP;
			sscanf(line, "%*s %63s %lld %lld %lld %lld %lld %63s", o->name, &o->a, &o->b, &o->c, &o->d, &o->e,
			       o->name2);
		} else if (!strcmp(w, "brk")) {
			o->kind = BRK;
			sscanf(line, "%*s %63s %lld", o->name, &o->a);
		} else if (!strcmp(w, "munmap")) {
			o->kind = MUNMAP;
			sscanf(line, "%*s %63s %lld %lld", o->name, &o->a, &o->b);
		} else if (!strcmp(w, "mprotect")) {
			o->kind = MPROTECT;
			sscanf(line, "%*s %63s %lld %lld %lld", o->name, &o->a, &o->b, &o->c);
		} else if (!strcmp(w, "madvise")) {
			o->kind = MADVISE;
			sscanf(line, "%*s %63s %lld %lld %63s %lld", o->name, &o->a, &o->b, o->name2, &o->c);
		} else if (!strcmp(w, "create")) {
			char fs[16] = "";
			o->kind = CREATE;
			sscanf(line, "%*s %63s %lld %15s", o->name, &o->a, fs);
			o->c = !strcmp(fs, "tmpfs") ? TMPFS : EXT4;
			if (strcmp(fs, fs_names[o->c])) {
				fprintf(stderr, "runner: create %s: unknown filesystem %s\n", o->name, fs);
				exit(3);
			}
		} else if (!strcmp(w, "pwrite") || !strcmp(w, "pread")) {
			o->kind = w[1] == 'w' ? PWRITE : PREAD;
			o->b = -1;
			o->c = 4096;
			o->d = w[1] == 'w' ? 1 : -1;
			sscanf(line, "%*s %63s %lld %lld %lld %lld", o->name, &o->a, &o->b, &o->c, &o->d);
			if (o->c < 1 || (size_t)o->c > IO_BUF) {
				fprintf(stderr, "runner: %s %s: CHUNK %lld is not in [1, %lu]\n", w, o->name, o->c, IO_BUF);
				exit(3);
			}
		} else if (!strcmp(w, "fadvise")) {
			o->kind = FADVISE;
			sscanf(line, "%*s %63s %lld %lld %63s", o->name, &o->a, &o->b, o->name2);
			if (!strcmp(o->name2, "dontneed"))
				o->c = POSIX_FADV_DONTNEED;
			else if (!strcmp(o->name2, "willneed"))
				o->c = POSIX_FADV_WILLNEED;
			else {
				fprintf(stderr, "runner: fadvise %s: unknown advice %s\n", o->name, o->name2);
				exit(3);
			}
		} else if (!strcmp(w, "memfd_create")) {
			o->kind = MEMFD_CREATE;
			sscanf(line, "%*s %63s %lld %lld", o->name, &o->a, &o->b);
		} else if (!strcmp(w, "fallocate")) {
			o->kind = FALLOCATE;
			sscanf(line, "%*s %63s %lld %lld %lld", o->name, &o->a, &o->b, &o->c);
		} else if (!strcmp(w, "fsync")) {
			o->kind = FSYNC;
			sscanf(line, "%*s %63s", o->name);
		} else if (!strcmp(w, "drop_caches")) {
			o->kind = DROP_CACHES;
			sscanf(line, "%*s %lld", &o->a);
		} else if (!strcmp(w, "read") || !strcmp(w, "write")) {
			o->kind = w[0] == 'r' ? READ : WRITE;
			o->g = -1;
			sscanf(line, "%*s %63s %lld %lld %lld %lld %lld %lld %lld %llu", o->name, &o->a, &o->b, &o->c, &o->d,
			       &o->e, &o->f, &o->g, &o->h);
		} else if (!strcmp(w, "compare")) {
			o->kind = COMPARE;
			sscanf(line, "%*s %63s %lld %63s %lld %lld %lld %lld", o->name, &o->a, o->name2, &o->b, &o->c, &o->d,
			       &o->e);
		} else if (!strcmp(w, "atomic")) {
			o->kind = ATOMIC;
			sscanf(line, "%*s %63s %lld %lld", o->name, &o->a, &o->b);
		} else if (!strcmp(w, "cgroup") || !strcmp(w, "join")) {
			/* Declarations (runner_memcg.h), not ops. */
			char name[128];
			if (sscanf(line, "%*s %127s", name) != 1) {
				fprintf(stderr, "runner: %s: expected a cgroup's name\n", w);
				exit(3);
			}
			if (w[0] == 'c')
				declare_cgroup(name);
			else
				declare_first_cgroup(name);
			continue;
		} else if (!strcmp(w, "cgroup_write")) {
			char name[128];
			o->kind = CGROUP_WRITE;
			if (sscanf(line, "%*s %127s %63s %lld", name, o->name2, &o->a) != 3) {
				fprintf(stderr, "runner: cgroup_write: expected NAME FILE VALUE\n");
				exit(3);
			}
			o->c = cgroup_index(name);
		} else if (!strcmp(w, "memory_reclaim")) {
			char name[128];
			o->kind = MEMORY_RECLAIM;
			o->b = -1;
			if (sscanf(line, "%*s %127s %lld %lld", name, &o->a, &o->b) < 2) {
				fprintf(stderr, "runner: memory_reclaim: expected NAME BYTES [SWAPPINESS]\n");
				exit(3);
			}
			o->c = strcmp(name, "-") ? cgroup_index(name) : -1;
		} else if (!strcmp(w, "loop") || !strcmp(w, "fork") || !strcmp(w, "thread")) {
			char name[128] = "";
			o->kind = w[0] == 'l' ? LOOP : w[0] == 'f' ? FORK : THREAD;
			sscanf(line, "%*s %lld %127s", &o->a, name);
			/* A fork's children join cgroup NAME (-1: their parent's). */
			o->c = o->kind == FORK && name[0] ? cgroup_index(name) : -1;
			if (depth == (int)(sizeof stack / sizeof stack[0])) {
				fprintf(stderr, "runner: blocks nested deeper than %d\n", depth);
				exit(3);
			}
			if (o->kind == THREAD && ++threads > thread_depth_needed)
				thread_depth_needed = threads;
			stack[depth++] = nops;
		} else if (!strcmp(w, "end")) {
			o->kind = END;
			if (depth == 0) {
				fprintf(stderr, "runner: unbalanced end\n");
				exit(3);
			}
			ops[stack[--depth]].end = nops;
			if (ops[stack[depth]].kind == THREAD)
				threads--;
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
	if (thread_depth_needed > MAX_THREAD_DEPTH) {
		fprintf(stderr, "runner: thread ops nested deeper than %d\n", MAX_THREAD_DEPTH);
		exit(3);
	}
}
