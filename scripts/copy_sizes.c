/* One core copying buffers of several sizes from a 256 MiB ring (in order, each buffer once per
 * pass) into one reused destination, three ways: the C library's memcpy, `rep movsb`, and a loop
 * of 32-byte AVX2 loads and stores. Prints the best of three 20-ms timings, ns per copy.
 * Shows whether a validate row that copies depends on the copy loop or on the memory
 * (docs/calibrate.md, the Zen 4 host).
 *   gcc -O2 -mavx2 scripts/copy_sizes.c -o /tmp/copy_sizes && taskset -c 0 /tmp/copy_sizes */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

__attribute__((noinline)) static void avx2_copy(char *to, const char *from, size_t n) {
    for (size_t i = 0; i < n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(from + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(from + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(from + i + 64));
        __m256i d = _mm256_loadu_si256((const __m256i *)(from + i + 96));
        _mm256_storeu_si256((__m256i *)(to + i), a);
        _mm256_storeu_si256((__m256i *)(to + i + 32), b);
        _mm256_storeu_si256((__m256i *)(to + i + 64), c);
        _mm256_storeu_si256((__m256i *)(to + i + 96), d);
    }
}

__attribute__((noinline)) static void movsb_copy(char *to, const char *from, size_t n) {
    __asm__ volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(n) : : "memory");
}

int main(void) {
    const size_t ring_bytes = 256ul << 20;
    char *ring = aligned_alloc(2ul << 20, ring_bytes);
    char *app = aligned_alloc(4096, 2ul << 20);
    if (!ring || !app) return 1;
    madvise(ring, ring_bytes, MADV_HUGEPAGE);
    memset(ring, 1, ring_bytes);
    memset(app, 0, 2ul << 20);
    const size_t sizes[] = {2048, 4096, 8192, 16384, 32768, 65536, 1ul << 20};
    const char *names[] = {"memcpy", "rep movsb", "avx2 loop"};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k], buffers = ring_bytes / n;
        for (int way = 0; way < 3; way++) {
            size_t at = 0;
            double best = 1e18;
            for (int repeat = 0; repeat < 3; repeat++) {
                size_t copies = 0;
                double start = now_ns();
                while (now_ns() - start < 2e7) {
                    for (int j = 0; j < 64; j++, copies++, at = (at + 1) % buffers) {
                        const char *from = ring + at * n;
                        if (way == 0) memcpy(app, from, n);
                        else if (way == 1) movsb_copy(app, from, n);
                        else avx2_copy(app, from, n);
                        __asm__ volatile("" : : "r"(app[0]) : "memory");
                    }
                }
                double per = (now_ns() - start) / copies;
                if (per < best) best = per;
            }
            printf("%8zu B  %-9s %9.1f ns  %5.1f GB/s\n", n, names[way], best, n / best);
        }
    }
    return 0;
}
