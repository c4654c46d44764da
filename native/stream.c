/* The benchmark's access streams, natively: mmsim's `make bench` times this program (and runs
 * it under cachegrind) on the same access stream as experiments/bench/{dense,sparse}.json.
 *
 *   stream dense|sparse SIZE_MB PASSES
 *
 * dense:  8-byte loads with stride 8 over SIZE_MB, PASSES times.
 * sparse: one byte per 4 KiB page over SIZE_MB, PASSES times.
 * Prints the number of loads and a checksum (so the loads cannot be elided).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: stream dense|sparse SIZE_MB PASSES\n");
		return 2;
	}
	int dense = strcmp(argv[1], "dense") == 0;
	size_t size = (size_t)strtoull(argv[2], NULL, 10) << 20;
	long passes = strtol(argv[3], NULL, 10);
	unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	size_t stride = dense ? 8 : 4096;
	uint64_t sum = 0, loads = 0;
	for (long r = 0; r < passes; r++) {
		if (dense) {
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
	printf("loads %llu checksum %llu\n", (unsigned long long)loads, (unsigned long long)sum);
	return 0;
}
