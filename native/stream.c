/* The benchmark's access streams, natively: mmsim's `make bench` times this program (and runs
 * it under cachegrind) on the same access streams as experiments/bench/<stream>.json.
 *
 *   stream dense SIZE_MB PASSES          8-byte loads with stride 8 over SIZE_MB, PASSES times
 *   stream sparse SIZE_MB PASSES         one byte per 4 KiB page over SIZE_MB, PASSES times
 *   stream stride64 SIZE_MB PASSES       one byte per 4 KiB page written, then PASSES times a
 *                                        load every 64 bytes (a line each)
 *   stream random SIZE_MB COUNT REPEATS SEED
 *                                        one byte per 4 KiB page written, then REPEATS times
 *                                        COUNT 8-byte loads at 8-byte slots drawn uniformly
 *                                        (splitmix64 from SEED, the slot (output x slots) >> 64:
 *                                        mmsim's pattern "random", restarted each repeat)
 *   stream text SIZE_MB COUNT REPEATS SEED
 *                                        SIZE_MB of code, each 64-byte line 15 four-byte NOPs
 *                                        and a RET (16 instructions), made read-only and
 *                                        executable, then REPEATS times COUNT calls of lines
 *                                        drawn as above (random instruction fetches of a line)
 *   stream faults SIZE_MB CHILDREN       a shared anonymous mapping written one byte per page
 *                                        by the parent, then read one byte per page by
 *                                        CHILDREN forked children at once
 *
 * Prints the number of loads (or calls) and a checksum (so that they cannot be elided).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* splitmix64 (Vigna's public-domain splitmix64.c): mmsim's pattern "random" draws the same. */
static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t slot(uint64_t *state, uint64_t slots)
{
	return (uint64_t)(((unsigned __int128)splitmix64(state) * slots) >> 64);
}

static unsigned char *map(size_t size, int flags)
{
	unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

static void touch_pages(unsigned char *p, size_t size)
{
	for (size_t i = 0; i < size; i += 4096)
		p[i] = 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: stream dense|sparse|stride64 SIZE_MB PASSES\n"
			"       stream random|text SIZE_MB COUNT REPEATS SEED\n"
			"       stream faults SIZE_MB CHILDREN\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return usage();
	const char *mode = argv[1];
	size_t size = (size_t)strtoull(argv[2], NULL, 10) << 20;
	uint64_t sum = 0, loads = 0;
	if (!strcmp(mode, "dense") || !strcmp(mode, "sparse") || !strcmp(mode, "stride64")) {
		long passes = strtol(argv[3], NULL, 10);
		unsigned char *p = map(size, MAP_PRIVATE);
		size_t stride = !strcmp(mode, "dense") ? 8 : !strcmp(mode, "sparse") ? 4096 : 64;
		if (stride == 64)
			touch_pages(p, size);
		for (long r = 0; r < passes; r++) {
			if (stride == 8) {
				const volatile uint64_t *q = (const volatile uint64_t *)p;
				for (size_t i = 0; i < size / 8; i++)
					sum += q[i];
			} else {
				const volatile unsigned char *q = p;
				for (size_t i = 0; i < size; i += stride)
					sum += q[i];
			}
			loads += size / stride;
		}
	} else if ((!strcmp(mode, "random") || !strcmp(mode, "text")) && argc == 6) {
		uint64_t count = strtoull(argv[3], NULL, 10);
		long repeats = strtol(argv[4], NULL, 10);
		uint64_t seed = strtoull(argv[5], NULL, 10);
		unsigned char *p = map(size, MAP_PRIVATE);
		if (!strcmp(mode, "random")) {
			touch_pages(p, size);
			const volatile uint64_t *q = (const volatile uint64_t *)p;
			for (long r = 0; r < repeats; r++) {
				uint64_t state = seed;
				for (uint64_t i = 0; i < count; i++)
					sum += q[slot(&state, size / 8)];
				loads += count;
			}
		} else {
			/* 15 x `nopl 0x0(%rax)` (0f 1f 40 00) and `ret` in every line. */
			static const unsigned char nop4[4] = {0x0f, 0x1f, 0x40, 0x00};
			for (size_t l = 0; l < size; l += 64) {
				for (int i = 0; i < 15; i++)
					memcpy(p + l + 4 * i, nop4, 4);
				p[l + 60] = 0xc3;
			}
			if (mprotect(p, size, PROT_READ | PROT_EXEC)) {
				perror("mprotect");
				return 1;
			}
			for (long r = 0; r < repeats; r++) {
				uint64_t state = seed;
				for (uint64_t i = 0; i < count; i++) {
					void (*f)(void) = (void (*)(void))(p + 64 * slot(&state, size / 64));
					f();
					sum++;
				}
				loads += count;
			}
		}
	} else if (!strcmp(mode, "faults")) {
		int children = atoi(argv[3]);
		unsigned char *p = map(size, MAP_SHARED);
		touch_pages(p, size);
		for (int c = 0; c < children; c++) {
			pid_t pid = fork();
			if (pid < 0) {
				perror("fork");
				return 1;
			}
			if (pid == 0) {
				const volatile unsigned char *q = p;
				uint64_t s = 0;
				for (size_t i = 0; i < size; i += 4096)
					s += q[i];
				_exit(s == 0 ? 1 : 0);
			}
		}
		for (int c = 0; c < children; c++) {
			int status;
			if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
				fprintf(stderr, "a child failed\n");
				return 1;
			}
		}
		loads = (uint64_t)(children + 1) * (size / 4096);
		sum = loads;
	} else {
		return usage();
	}
	printf("loads %llu checksum %llu\n", (unsigned long long)loads, (unsigned long long)sum);
	return 0;
}
