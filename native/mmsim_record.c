/* mmsimrec: mmsim's recorder, a Valgrind tool.
 *
 * It records what a program does to memory, per thread, for mmsim to replay: each run of a
 * basic block the program executes (start address, bytes, instructions), each load and store
 * (address, size), every system call (number, six arguments, result, and for calls on files
 * the file: its path, size, device, inode and the position read or written), the address space
 * when the program starts (its ELF segments, the loader, the stack, the vdso), the start of
 * each forked process and exec'd image, and the exit status.
 *
 * Records go, in frames of at most PIPE_BUF bytes, to the file given by --out (the FIFO that
 * `mmsim record` reads and compresses): one write(2) per frame, so the frames of the processes
 * a program forks (each inherits the descriptor) never interleave inside one another. A frame
 * is an 8-byte header (payload length, pid: little-endian u32s) and records that decode on
 * their own: the address deltas start again from zero in each frame, and each frame begins
 * with the thread it is of. docs/trace-format.md has the record layout.
 *
 * Built by `mmsim record` (python/mmsim/recorder_build.py) against the installed Valgrind's
 * tool headers and libcoregrind/libvex, as Valgrind builds its own tools.
 */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_options.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"

/* Valgrind core's (pub_core_libcfile.h; not in the tool headers, but in libcoregrind, which the
 * tool is linked with): moves a descriptor into the range Valgrind keeps from the program. */
extern Int VG_(safe_fd)(Int oldfd);
extern Int VG_(fcntl)(Int fd, Int cmd, Addr arg);
/* The first of the descriptors Valgrind keeps for itself (safe_fd puts them there). */
extern Int VG_(fd_hard_limit);

/* Record tags (docs/trace-format.md). */
enum {
	T_THREAD = 0x01,  /* tid */
	T_RUN = 0x02,     /* zz(pc - last_pc), bytes, instructions */
	T_LOAD_N = 0x03,  /* zz(addr - last_addr), size */
	T_STORE_N = 0x04, /* zz(addr - last_addr), size */
	T_REPEAT = 0x05,  /* n, k, k x zz(stride): the last run and the k accesses after it, n times more */
	T_LOAD = 0x10,    /* + log2(size), 0..6: zz(addr - last_addr) */
	T_STORE = 0x18,   /* + log2(size), 0..6: zz(addr - last_addr) */
	T_SYSCALL = 0x20, /* nr, 6 args, zz(result), file info */
	T_MAP = 0x21,     /* start, length, prot, kind, offset, file info */
	T_PROC = 0x22,    /* how (0 a new image: the first, or exec'd; 1 forked), parent pid */
	T_EXIT = 0x23,    /* zz(status) */
};

/* A frame is at most PIPE_BUF bytes: written whole by one write(2) to a pipe. */
#define FRAME_MAX 4096
#define FRAME_HDR 8
/* The longest path kept (longer ones are cut, flagged in the file info). */
#define PATH_KEEP 1024

static const HChar *clo_out = NULL;
/* --repeat=no: write every iteration (tests compare the two). */
static Bool clo_repeat = True;
static Int out_fd = -1;
static Int my_pid;
static UChar frame[FRAME_MAX];
static Int flen = FRAME_HDR;
static Addr last_pc, last_addr;
static Int cur_tid;
static Bool maps_done;
/* The status of the exit_group (or the last thread's exit) the process made: Valgrind gives
 * the tool's fini no exit code. */
static Long exit_status;

static inline void put(UChar b)
{
	frame[flen++] = b;
}

static inline void uv(ULong v)
{
	while (v >= 0x80) {
		frame[flen++] = (UChar)(v | 0x80);
		v >>= 7;
	}
	frame[flen++] = (UChar)v;
}

static inline void zz(Long v)
{
	uv(((ULong)v << 1) ^ (ULong)(v >> 63));
}

/* Repeats (T_REPEAT): a rep-prefixed string instruction runs under Valgrind as one block per
 * iteration: a run of the same instruction and its accesses, each a fixed stride on from the
 * last (memset's rep stosb: a run and a 1-byte store per byte). Such iterations are held back
 * and written as one repeat record. The template is the last iteration written: its run and
 * the accesses after it (at most REP_MAX); a candidate is an iteration in progress whose run
 * matched it. */
#define REP_MAX 2
/* Room kept in a frame for what settle() may write: a candidate's run and accesses and a
 * repeat record. */
#define RESERVE (2 * (1 + 10 + 5 + 5) + 2 * REP_MAX * (1 + 10 + 5) + 1 + 10 + 5 + REP_MAX * 10)
static Bool it_valid, cand;
static Addr it_pc;
static UWord it_bytes, it_n;
static Int it_k, cand_j;
static Bool it_store[REP_MAX];
static Addr it_addr[REP_MAX], cand_addr[REP_MAX];
static UWord it_size[REP_MAX];
static Long it_stride[REP_MAX];
static ULong rep;

static void frame_start(void)
{
	flen = FRAME_HDR;
	last_pc = 0;
	last_addr = 0;
	it_valid = False;
	cand = False;
	rep = 0;
	put(T_THREAD);
	uv((ULong)cur_tid);
}

static void flush(void)
{
	if (out_fd < 0 || flen <= FRAME_HDR)
		return;
	UInt len = (UInt)(flen - FRAME_HDR), pid = (UInt)my_pid;
	for (Int i = 0; i < 4; i++) {
		frame[i] = (UChar)(len >> (8 * i));
		frame[4 + i] = (UChar)(pid >> (8 * i));
	}
	Int off = 0;
	while (off < flen) {
		Int n = VG_(write)(out_fd, frame + off, flen - off);
		if (n <= 0) {
			/* The reader went away: nothing more can be recorded. */
			out_fd = -1;
			break;
		}
		off += n;
	}
	frame_start();
}

/* Write a run (no room check: callers make room). */
static void put_run(Addr pc, UWord bytes, UWord ninstr)
{
	put(T_RUN);
	zz((Long)(pc - last_pc));
	uv(bytes);
	uv(ninstr);
	last_pc = pc + bytes;
}

static void put_mem(Bool store, Addr a, UWord size)
{
	UChar base = store ? T_STORE : T_LOAD;
	Int k = -1;
	switch (size) {
	case 1: k = 0; break;
	case 2: k = 1; break;
	case 4: k = 2; break;
	case 8: k = 3; break;
	case 16: k = 4; break;
	case 32: k = 5; break;
	case 64: k = 6; break;
	}
	if (k >= 0) {
		put((UChar)(base + k));
		zz((Long)(a - last_addr));
	} else {
		put(store ? T_STORE_N : T_LOAD_N);
		zz((Long)(a - last_addr));
		uv(size);
	}
	last_addr = a;
}

/* Write the iterations held back: the repeat record (the template advanced), then a
 * candidate that did not complete, which becomes the template. */
static void settle(void)
{
	if (rep > 0) {
		put(T_REPEAT);
		uv(rep);
		uv((ULong)it_k);
		for (Int i = 0; i < it_k; i++) {
			zz(it_stride[i]);
			it_addr[i] += (Addr)((Long)rep * it_stride[i]);
		}
		if (it_k > 0)
			last_addr = it_addr[it_k - 1];
		rep = 0;
	}
	if (cand) {
		put_run(it_pc, it_bytes, it_n);
		for (Int i = 0; i < cand_j; i++) {
			put_mem(it_store[i], cand_addr[i], it_size[i]);
			it_addr[i] = cand_addr[i];
		}
		it_k = cand_j;
		cand = False;
	}
}

/* Make room for a record of at most n bytes (and for what settle() may write first). */
static inline void room(Int n)
{
	if (flen + n + RESERVE > FRAME_MAX) {
		settle();
		flush();
	}
}

/* Make room for a record other than a run or an access: what was held back goes first, and
 * the record ends the template (a repeat follows only a run and its accesses). */
static void room_other(Int n)
{
	room(n);
	settle();
	it_valid = False;
}

/* ---- what the program runs --------------------------------------------------------------- */

static VG_REGPARM(3) void h_run(Addr pc, UWord bytes, UWord ninstr)
{
	room(1 + 10 + 5 + 5);
	if (cand) {
		if (cand_j == it_k) {
			/* The candidate repeated the template: held back as one more iteration. */
			if (rep == 0)
				for (Int i = 0; i < it_k; i++)
					it_stride[i] = (Long)(cand_addr[i] - it_addr[i]);
			rep++;
			cand = False;
		} else {
			settle();
		}
	}
	if (clo_repeat && it_valid && pc == it_pc && bytes == it_bytes && ninstr == it_n && it_k <= REP_MAX) {
		cand = True;
		cand_j = 0;
		return;
	}
	settle();
	put_run(pc, bytes, ninstr);
	it_valid = True;
	it_pc = pc;
	it_bytes = bytes;
	it_n = ninstr;
	it_k = 0;
}

static inline void mem(Bool store, Addr a, UWord size)
{
	room(1 + 10 + 5);
	if (cand) {
		Int j = cand_j;
		if (j < it_k && store == it_store[j] && size == it_size[j] &&
		    (rep == 0 || a == it_addr[j] + (Addr)((Long)(rep + 1) * it_stride[j]))) {
			cand_addr[j] = a;
			cand_j++;
			return;
		}
		settle();
	} else if (rep > 0) {
		settle();
	}
	put_mem(store, a, size);
	if (it_valid) {
		if (it_k < REP_MAX) {
			it_store[it_k] = store;
			it_addr[it_k] = a;
			it_size[it_k] = size;
		}
		it_k++;
	}
}

static VG_REGPARM(2) void h_load(Addr a, UWord size)
{
	mem(False, a, size);
}

static VG_REGPARM(2) void h_store(Addr a, UWord size)
{
	mem(True, a, size);
}

/* ---- files ------------------------------------------------------------------------------- */

/* File info: mode, size, dev, ino, zz(pos), path length, path; pos -1 when not asked for. An fd
 * that fstat refuses gives mode 0 and nothing else known. */
static void file_info(Int fd, Long pos)
{
	struct vg_stat st;
	VG_(memset)(&st, 0, sizeof st);
	HChar path[PATH_KEEP + 1];
	Int plen = 0;
	if (fd >= 0 && VG_(fstat)(fd, &st) == 0) {
		HChar link[64];
		VG_(sprintf)(link, "/proc/self/fd/%d", fd);
		plen = VG_(readlink)(link, path, PATH_KEEP);
		if (plen < 0)
			plen = 0;
	}
	uv(st.mode);
	uv((ULong)st.size);
	uv(st.dev);
	uv(st.ino);
	zz(pos);
	uv((ULong)plen);
	for (Int i = 0; i < plen; i++)
		put((UChar)path[i]);
}

/* The file position after a read or write of fd (the offset it started at: pos - result). */
static Long file_pos(Int fd)
{
	return (Long)VG_(lseek)(fd, 0, VKI_SEEK_CUR);
}

/* ---- the address space at start ---------------------------------------------------------- */

static void emit_maps(ThreadId tid)
{
	enum { MAX_SEGS = 4096 };
	static Addr starts[MAX_SEGS];
	Int n = VG_(am_get_segment_starts)(SkAnonC | SkFileC | SkShmC, starts, MAX_SEGS);
	Addr sp = VG_(get_SP)(tid);
	for (Int i = 0; i < n; i++) {
		NSegment const *s = VG_(am_find_nsegment)(starts[i]);
		if (s == NULL)
			continue;
		const HChar *name = s->kind == SkFileC ? VG_(am_get_filename)(s) : NULL;
		Int plen = name ? (Int)VG_(strlen)(name) : 0;
		/* Valgrind lends the program a page of the tool's own text (its trampolines): not
		 * the program's. */
		if (plen >= 21 && VG_(strcmp)(name + plen - 21, "/mmsimrec-amd64-linux") == 0)
			continue;
		if (plen > PATH_KEEP)
			plen = PATH_KEEP;
		room_other(1 + 6 * 10 + 4 * 10 + 5 + PATH_KEEP);
		put(T_MAP);
		uv(s->start);
		uv(s->end + 1 - s->start);
		uv((s->hasR ? 1 : 0) | (s->hasW ? 2 : 0) | (s->hasX ? 4 : 0));
		/* kind: 0 anonymous, 1 file, 2 shm, 3 the stack, 4 the client's brk heap */
		UInt kind = s->kind == SkFileC ? 1 : s->kind == SkShmC ? 2 : 0;
		if (s->kind == SkAnonC && sp >= s->start && sp <= s->end)
			kind = 3;
		if (s->kind == SkAnonC && s->isCH)
			kind = 4;
		uv(kind);
		uv((ULong)s->offset);
		/* The file's size now (the replay creates it so). */
		struct vg_stat st;
		VG_(memset)(&st, 0, sizeof st);
		if (name == NULL || sr_isError(VG_(stat)(name, &st)))
			st.size = 0;
		uv(s->mode);
		uv((ULong)st.size);
		uv(s->dev);
		uv(s->ino);
		zz(-1);
		uv((ULong)plen);
		for (Int k = 0; k < plen; k++)
			put((UChar)name[k]);
	}
}

static void start_client_code(ThreadId tid, ULong blocks)
{
	Int os_tid = VG_(gettid)();
	if (!maps_done) {
		/* The image is in place once its code first runs (cur_tid is the pid already). */
		maps_done = True;
		emit_maps(tid);
	}
	if (os_tid != cur_tid) {
		room_other(1 + 10);
		cur_tid = os_tid;
		put(T_THREAD);
		uv((ULong)cur_tid);
	}
}

/* ---- system calls ------------------------------------------------------------------------ */

static void syscall_head(UInt nr, UWord *args, Long result)
{
	room_other(1 + 5 + 6 * 10 + 10 + 6 * 10 + 5 + PATH_KEEP);
	put(T_SYSCALL);
	uv(nr);
	for (Int i = 0; i < 6; i++)
		uv(args[i]);
	zz(result);
}

static void pre_syscall(ThreadId tid, UInt nr, UWord *args, UInt nargs)
{
	UWord a[6] = {0};
	for (UInt i = 0; i < 6 && i < nargs; i++)
		a[i] = args[i];
	switch (nr) {
	case __NR_exit:
	case __NR_exit_group:
		/* No return: recorded before. */
		exit_status = (Long)(Int)a[0];
		syscall_head(nr, a, 0);
		file_info(-1, -1);
		break;
	case __NR_execve:
	case __NR_execveat:
		/* A successful one does not return: the new image's first frame (a proc record of
		 * this pid) says it happened. A failed one is recorded after, with its path. */
		settle();
		flush();
		break;
	case __NR_clone:
	case __NR_clone3:
	case __NR_fork:
	case __NR_vfork:
		/* A forked child must not write the parent's pending records again. */
		settle();
		flush();
		break;
	}
}

static void post_syscall(ThreadId tid, UInt nr, UWord *args, UInt nargs, SysRes res)
{
	if (nr == __NR_exit || nr == __NR_exit_group)
		return;
	UWord a[6] = {0};
	for (UInt i = 0; i < 6 && i < nargs; i++)
		a[i] = args[i];
	Long r = sr_isError(res) ? -(Long)sr_Err(res) : (Long)sr_Res(res);
	syscall_head(nr, a, r);
	if (nr == __NR_execve || nr == __NR_execveat) {
		const HChar *p = (const HChar *)(nr == __NR_execve ? a[0] : a[1]);
		Int plen = p ? (Int)VG_(strlen)(p) : 0;
		if (plen > PATH_KEEP)
			plen = PATH_KEEP;
		uv(0), uv(0), uv(0), uv(0), zz(-1), uv((ULong)plen);
		for (Int i = 0; i < plen; i++)
			put((UChar)p[i]);
		return;
	}
	Int fd = -1;
	Long pos = -1;
	switch (nr) {
	case __NR_open:
	case __NR_openat:
	case __NR_creat:
	case __NR_memfd_create:
#ifdef __NR_openat2
	case __NR_openat2:
#endif
		fd = r >= 0 ? (Int)r : -1;
		break;
	case __NR_mmap:
		fd = (a[3] & VKI_MAP_ANONYMOUS) ? -1 : (Int)a[4];
		break;
	case __NR_read:
	case __NR_write:
	case __NR_readv:
	case __NR_writev:
		fd = (Int)a[0];
		pos = r >= 0 ? file_pos(fd) : -1;
		if (pos >= 0)
			pos -= r;
		break;
	case __NR_pread64:
	case __NR_pwrite64:
	case __NR_preadv:
	case __NR_pwritev:
	case __NR_fsync:
	case __NR_fdatasync:
	case __NR_fadvise64:
	case __NR_fallocate:
	case __NR_ftruncate:
		fd = (Int)a[0];
		break;
	}
	file_info(fd, pos);
}

/* ---- processes --------------------------------------------------------------------------- */

static void open_out(void)
{
	if (clo_out == NULL)
		return;
	SysRes r = VG_(open)(clo_out, VKI_O_WRONLY, 0);
	if (sr_isError(r)) {
		VG_(umsg)("mmsimrec: cannot open --out=%s\n", clo_out);
		VG_(exit)(1);
	}
	/* Into Valgrind's own range of descriptors: the program cannot close it. Kept across
	 * exec (safe_fd sets close-on-exec): the FIFO must always have a writer until the whole
	 * tree is done, or the reader would take the gap of an exec for the end. */
	out_fd = VG_(safe_fd)((Int)sr_Res(r));
	VG_(fcntl)(out_fd, VKI_F_SETFD, 0);
	/* An exec'd image inherits its predecessor's descriptor of the FIFO: close it now that
	 * this one is open (Valgrind's range holds only a dozen). */
	struct vg_stat me, st;
	if (VG_(fstat)(out_fd, &me) != 0)
		return;
	for (Int fd = VG_(fd_hard_limit); fd < VG_(fd_hard_limit) + 64; fd++) {
		if (fd != out_fd && VG_(fstat)(fd, &st) == 0 && st.dev == me.dev && st.ino == me.ino)
			VG_(close)(fd);
	}
}

static void at_fork_child(ThreadId tid)
{
	my_pid = VG_(getpid)();
	cur_tid = VG_(gettid)();
	frame_start();
	room_other(1 + 5 + 10);
	put(T_PROC);
	uv(1);
	uv((ULong)VG_(getppid)());
}

static Bool process_cmd_line_option(const HChar *arg)
{
	if VG_STR_CLO (arg, "--out", clo_out) {
	} else if VG_BOOL_CLO (arg, "--repeat", clo_repeat) {
	} else
		return False;
	return True;
}

static void print_usage(void)
{
	VG_(printf)("    --out=FILE        where the frames of records go (a FIFO mmsim reads)\n");
	VG_(printf)("    --repeat=no       write each iteration of a repeating block (default: repeats)\n");
}

static void print_debug_usage(void)
{
	VG_(printf)("    (none)\n");
}

static void post_clo_init(void)
{
	my_pid = VG_(getpid)();
	cur_tid = my_pid;
	open_out();
	frame_start();
	/* An image's first record (an exec'd one keeps its pid). */
	room_other(1 + 5 + 10);
	put(T_PROC);
	uv(0);
	uv((ULong)VG_(getppid)());
}

static void fini(Int exitcode)
{
	room_other(1 + 10);
	put(T_EXIT);
	zz(exit_status);
	flush();
}

/* ---- instrumentation --------------------------------------------------------------------- */

static void add_call(IRSB *sb, const HChar *name, void *fn, IRExpr **argv, IRExpr *guard)
{
	IRDirty *di = unsafeIRDirty_0_N(argv[2] ? 3 : 2, name, VG_(fnptr_to_fnentry)(fn), argv);
	if (guard)
		di->guard = guard;
	addStmtToIRSB(sb, IRStmt_Dirty(di));
}

static void add_mem(IRSB *sb, Bool store, IRExpr *addr, Int size, IRExpr *guard)
{
	IRExpr **argv = mkIRExprVec_2(addr, mkIRExpr_HWord((HWord)size));
	if (store)
		add_call(sb, "h_store", h_store, argv, guard);
	else
		add_call(sb, "h_load", h_load, argv, guard);
}

/* The runs of instructions from statement i to the end of the superblock or its next side
 * exit: one call per run of contiguous instructions. */
static void add_runs(IRSB *out, IRSB *in, Int i)
{
	Addr start = 0;
	UWord bytes = 0, n = 0;
	for (; i < in->stmts_used; i++) {
		IRStmt *st = in->stmts[i];
		if (st == NULL)
			continue;
		if (st->tag == Ist_Exit)
			break;
		if (st->tag != Ist_IMark)
			continue;
		Addr pc = (Addr)st->Ist.IMark.addr;
		UWord len = st->Ist.IMark.len;
		if (n > 0 && pc != start + bytes) {
			add_call(out, "h_run", h_run,
				 mkIRExprVec_3(mkIRExpr_HWord(start), mkIRExpr_HWord(bytes), mkIRExpr_HWord(n)), NULL);
			n = 0;
		}
		if (n == 0) {
			start = pc;
			bytes = 0;
		}
		bytes += len;
		n++;
	}
	if (n > 0)
		add_call(out, "h_run", h_run,
			 mkIRExprVec_3(mkIRExpr_HWord(start), mkIRExpr_HWord(bytes), mkIRExpr_HWord(n)), NULL);
}

static IRSB *instrument(VgCallbackClosure *closure, IRSB *in, const VexGuestLayout *layout,
			const VexGuestExtents *vge, const VexArchInfo *archinfo, IRType gwt, IRType hwt)
{
	IRSB *out = deepCopyIRSBExceptStmts(in);
	IRTypeEnv *env = in->tyenv;
	Int i = 0;
	while (i < in->stmts_used && in->stmts[i]->tag != Ist_IMark) {
		addStmtToIRSB(out, in->stmts[i]);
		i++;
	}
	Bool seg = True;
	for (; i < in->stmts_used; i++) {
		IRStmt *st = in->stmts[i];
		if (st == NULL || st->tag == Ist_NoOp)
			continue;
		switch (st->tag) {
		case Ist_IMark:
			if (seg) {
				add_runs(out, in, i);
				seg = False;
			}
			break;
		case Ist_Exit:
			addStmtToIRSB(out, st);
			seg = True;
			continue;
		case Ist_WrTmp: {
			IRExpr *d = st->Ist.WrTmp.data;
			if (d->tag == Iex_Load)
				add_mem(out, False, d->Iex.Load.addr, sizeofIRType(d->Iex.Load.ty), NULL);
			break;
		}
		case Ist_Store:
			add_mem(out, True, st->Ist.Store.addr, sizeofIRType(typeOfIRExpr(env, st->Ist.Store.data)), NULL);
			break;
		case Ist_StoreG: {
			IRStoreG *sg = st->Ist.StoreG.details;
			add_mem(out, True, sg->addr, sizeofIRType(typeOfIRExpr(env, sg->data)), sg->guard);
			break;
		}
		case Ist_LoadG: {
			IRLoadG *lg = st->Ist.LoadG.details;
			IRType wide = Ity_INVALID, loaded = Ity_INVALID;
			typeOfIRLoadGOp(lg->cvt, &wide, &loaded);
			add_mem(out, False, lg->addr, sizeofIRType(loaded), lg->guard);
			break;
		}
		case Ist_Dirty: {
			IRDirty *d = st->Ist.Dirty.details;
			if (d->mFx == Ifx_Read || d->mFx == Ifx_Modify)
				add_mem(out, False, d->mAddr, d->mSize, NULL);
			if (d->mFx == Ifx_Write || d->mFx == Ifx_Modify)
				add_mem(out, True, d->mAddr, d->mSize, NULL);
			break;
		}
		case Ist_CAS: {
			IRCAS *cas = st->Ist.CAS.details;
			Int size = sizeofIRType(typeOfIRExpr(env, cas->dataLo)) * (cas->dataHi ? 2 : 1);
			add_mem(out, False, cas->addr, size, NULL);
			add_mem(out, True, cas->addr, size, NULL);
			break;
		}
		case Ist_LLSC:
			if (st->Ist.LLSC.storedata == NULL)
				add_mem(out, False, st->Ist.LLSC.addr, sizeofIRType(typeOfIRTemp(env, st->Ist.LLSC.result)), NULL);
			else
				add_mem(out, True, st->Ist.LLSC.addr, sizeofIRType(typeOfIRExpr(env, st->Ist.LLSC.storedata)), NULL);
			break;
		default:
			break;
		}
		addStmtToIRSB(out, st);
	}
	return out;
}

static void pre_clo_init(void)
{
	VG_(details_name)("mmsimrec");
	VG_(details_version)("1");
	VG_(details_description)("mmsim's recorder of memory behaviour");
	VG_(details_copyright_author)("The mmsim developers.");
	VG_(details_bug_reports_to)("the mmsim issue tracker");
	VG_(details_avg_translation_sizeB)(400);
	VG_(basic_tool_funcs)(post_clo_init, instrument, fini);
	VG_(needs_command_line_options)(process_cmd_line_option, print_usage, print_debug_usage);
	VG_(needs_syscall_wrapper)(pre_syscall, post_syscall);
	VG_(track_start_client_code)(start_client_code);
	VG_(atfork)(NULL, NULL, at_fork_child);
}

VG_DETERMINE_INTERFACE_VERSION(pre_clo_init)
