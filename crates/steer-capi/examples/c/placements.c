/* Runs the rx-default scenario with its DMA placed in memory and then in the consumer's L2, and
 * prints the DRAM read bandwidth of each; then shows a refused override. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "steer.h"

/* The first "read_gbps" of a result is the DRAM's (a real program would use a JSON parser). */
static double dram_read_gbps(const char *json) {
    const char *key = strstr(json, "\"read_gbps\":");
    return key ? strtod(key + strlen("\"read_gbps\":"), NULL) : -1.0;
}

static int report(double fraction, void *calls) {
    (void)fraction;
    ++*(int *)calls;
    return 0; /* non-zero would stop the run */
}

int main(void) {
    const char *placements[] = {"placement=\"memory\"", "placement=\"l2\""};
    for (size_t i = 0; i < 2; i++) {
        const char *overrides[] = {placements[i], "sim.warmup_us=200", "sim.measure_us=200"};
        char *json = NULL;
        int calls = 0;
        SteerSimStatus status = steer_sim_run("rx-default", overrides, 3, report, &calls, &json);
        if (status != STEER_SIM_STATUS_OK) {
            fprintf(stderr, "steer_sim_run: %s\n", steer_sim_last_error());
            return 1;
        }
        printf("steer %s, %s: DRAM read %.2f GB/s (%d progress calls)\n", steer_sim_version(), placements[i],
               dram_read_gbps(json), calls);
        steer_sim_free(json);
    }

    const char *bad[] = {"sim.measure_us=-1"};
    char *json = NULL;
    SteerSimStatus status = steer_sim_run("rx-default", bad, 1, NULL, NULL, &json);
    if (status != STEER_SIM_STATUS_INPUT_ERROR || json != NULL) return 1;
    printf("refused: %s\n", steer_sim_last_error());
    return 0;
}
