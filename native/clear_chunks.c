// clear_chunks: time `rep stosb` clears (what clear_page_erms and Linux's clear_pages()
// issue) of a populated buffer in chunks of 4 KiB up to the whole buffer, the best of 7
// passes each. It measures what one clear call's size changes on this machine: the profile's
// `cost.clear_streaming_min` comes from it.
//
//   cc -O2 -o target/native/clear_chunks native/clear_chunks.c && target/native/clear_chunks 1536
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static inline void rep_stosb(void *p, size_t n) {
    asm volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(0) : "memory");
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t size = (argc > 1 ? strtoull(argv[1], 0, 0) : 1536) << 20;
    char *b = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (b == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(b, size, MADV_NOHUGEPAGE);
    memset(b, 1, size);
    size_t chunks[] = {4096, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 24 << 20, 32 << 20, 48 << 20, 64 << 20, 128 << 20, size};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        double best = 1e9;
        for (int pass = 0; pass < 7; pass++) {
            double t0 = now();
            for (size_t off = 0; off < size; off += chunks[c])
                rep_stosb(b + off, off + chunks[c] <= size ? chunks[c] : size - off);
            double t = now() - t0;
            if (t < best)
                best = t;
        }
        printf("chunk %10zu B: %.4f s, %6.2f GB/s, %7.2f ns per 4 KiB\n", chunks[c], best, size / best / 1e9,
               best / (size / 4096) * 1e9);
    }
    return 0;
}
