/* Caches a block through the offloading cache, waits, and checks every byte; then the error path. */
/* nanosleep is POSIX, not ISO C: a -std=c11 build declares it only with this defined first. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "steer_offload.h"

int main(void) {
    SteerCache *cache = steer_cache_new(NULL, NULL, "cpu");
    if (!cache) {
        fprintf(stderr, "steer_cache_new: %s\n", steer_last_error());
        return 1;
    }
    size_t len = 1 << 20;
    unsigned char *block = malloc(len);
    for (size_t i = 0; i < len; i++) block[i] = (unsigned char)(i * 7);

    SteerCacheData *first = steer_cache_access(cache, block, len);
    SteerCacheData *second = steer_cache_access(cache, block, len); /* a hit: the same entry */
    steer_cache_data_wait(second);
    const void *cached = steer_cache_data_location(first);
    if (memcmp(cached, block, len) != 0 || cached != steer_cache_data_location(second)) {
        fprintf(stderr, "cached bytes differ from the source\n");
        return 1;
    }
    printf("backend %s: %zu bytes cached at %p (source %p), cached=%d\n", steer_cache_backend(cache), len, cached,
           (void *)block, steer_cache_data_is_cached(first));

    if (steer_cache_access(cache, block, 0) != NULL) return 1;
    printf("zero-sized block refused: %s\n", steer_last_error());
    if (steer_cache_new("fastest", NULL, NULL) != NULL) return 1;
    printf("unknown placement refused: %s\n", steer_last_error());

    steer_cache_data_free(first);
    steer_cache_data_free(second);
    steer_cache_free(cache);
    if (steer_live_allocations() != 0) {
        /* The copy thread may still hold the entry for an instant after finishing. */
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    printf("live allocations after freeing: %zu\n", steer_live_allocations());
    free(block);
    return steer_live_allocations() == 0 ? 0 : 1;
}
