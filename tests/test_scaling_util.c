/* test_scaling_util.c - the scaling row's device utilisation (src/results/scaling.c):
 * NVML's GPU-Util as the median over ranks; a row one of whose ranks read
 * NVML over a window too short for it (util_short, src/device/nvml.h) shows none
 * ("-" and a note naming --scaling-min-seconds) instead of a number -- the first
 * H200 run printed 0 % for a 0.11-s row of a busy GPU -- but keeps GPM's SM
 * activity; and without NVML (the CPU backend) the compute share of the
 * step. The device table's overlap %: the share of the step's
 * communication hidden behind compute, where the exposed time (the
 * allreduce phase) holds the BN statistics broadcast too: over the
 * all-reduce's busy time alone it read 60 % where 70 % was hidden. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/results/scaling.h"
#include "tests/tb_test.h"

static tb_rank_summary rank(double util, int samples, int is_short) {
    tb_rank_summary s;
    memset(&s, 0, sizeof s);
    s.steps = 10;
    s.samples = 640;
    s.step_s = 0.5;
    s.elapsed_s = 0.5;
    s.phase_s[TB_PH_FWD] = 0.1;
    s.phase_s[TB_PH_BWD] = 0.2;
    s.phase_s[TB_PH_OPT] = 0.1; /* compute share 80 % */
    s.util_samples = samples;
    s.util_short = is_short;
    s.util_pct = util;
    s.sm_active_pct = NAN;
    return s;
}

/* the first cell after "mean device utilisation" in the seed table */
static void util_first_cell(const char *txt, char tok[16]) {
    const char *key = "mean device utilisation", *p = strstr(txt, key);
    tok[0] = 0;
    if (p) sscanf(p + strlen(key), "%15s", tok);
}

/* the seed table of rows[0..n) as text */
static char *seed_text(const tb_scaling_row *rows, int n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tb_scaling_write_seed(f, TB_FMT_TEXT, rows, n, 50000, "NVML GPU-Util");
    fclose(f);
    return buf;
}

int main(void) {
    tb_scaling_row rows[2];
    tb_rank_summary one[1] = {rank(NAN, 2, 1)};
    one[0].sm_active_pct = 67.6; /* GPM: two samples inside the window, kept */
    tb_rank_summary two[2] = {rank(40, 3, 0), rank(60, 4, 0)};
    tb_scaling_row_from(&rows[0], one, 1, 64, 50000, 0);
    tb_scaling_row_from(&rows[1], two, 2, 64, 50000, 0);
    tb_scaling_finish(rows, 2);
    TB_CHECK(isnan(rows[0].device_util_pct), "a short window: no utilisation (got %g)", rows[0].device_util_pct);
    TB_CHECK(fabs(rows[0].sm_active_pct - 67.6) < 1e-9, "a short window keeps GPM's SM activity (got %g)",
             rows[0].sm_active_pct);
    TB_CHECK(fabs(rows[1].device_util_pct - 50) < 1e-9, "median of 40 and 60: %g", rows[1].device_util_pct);
    char *txt = seed_text(rows, 2);
    printf("%s", txt);
    char tok[16];
    util_first_cell(txt, tok);
    TB_CHECK(strcmp(tok, "-") == 0 && strstr(txt, "50 % (median)") && strstr(txt, "raise --scaling-min-seconds") &&
                 !strstr(txt, "nan"),
             "the table shows '-' for the short row, 50 %% for the other, and says why");
    free(txt);

    /* one rank of two short: the whole row has none */
    tb_rank_summary mixed[2] = {rank(70, 2, 0), rank(NAN, 2, 1)};
    tb_scaling_row_from(&rows[1], mixed, 2, 64, 50000, 0);
    TB_CHECK(isnan(rows[1].device_util_pct), "a row with one short rank: none (got %g)", rows[1].device_util_pct);

    /* GPU ranks without NVML (none, or one of two): none, not the compute share under the device's name */
    tb_rank_summary none[2] = {rank(0, 0, 0), rank(0, 0, 0)}, half[2] = {rank(40, 3, 0), rank(0, 0, 0)};
    tb_scaling_row_from(&rows[1], none, 2, 64, 50000, 0);
    TB_CHECK(isnan(rows[1].device_util_pct), "GPU, no NVML: none (got %g)", rows[1].device_util_pct);
    tb_scaling_row_from(&rows[1], half, 2, 64, 50000, 0);
    TB_CHECK(isnan(rows[1].device_util_pct), "GPU, NVML on one rank of two: none (got %g)", rows[1].device_util_pct);

    /* no NVML at all (the CPU backend): the compute share, 80 % */
    tb_rank_summary cpu[1] = {rank(0, 0, 0)};
    tb_scaling_row_from(&rows[0], cpu, 1, 64, 50000, 1);
    TB_CHECK(fabs(rows[0].device_util_pct - 80) < 1e-9, "CPU: compute share 80 %%, got %g",
             rows[0].device_util_pct);
    txt = seed_text(rows, 1);
    TB_CHECK(strstr(txt, "80 %") && !strstr(txt, "raise --scaling-min-seconds"), "CPU row prints its share: %s", txt);
    free(txt);

    /* overlap: 10 steps, all-reduce busy 40 ms a step, exposed 16 ms of which 6 ms BN broadcast: of the 40 + 6 ms
     * of communication 16 exposed, 65.2 % hidden (1 - 16 / 40 = 60.0 % counted the broadcast as all-reduce) */
    tb_rank_summary ov[2] = {rank(50, 3, 0), rank(50, 3, 0)};
    for (int i = 0; i < 2; i++) {
        ov[i].comm_busy_s = 0.4, ov[i].phase_s[TB_PH_COMM] = 0.16, ov[i].bcast_s = 0.06;
        ov[i].comm_bytes = 1e9;
    }
    tb_scaling_row_from(&rows[1], ov, 2, 64, 50000, 0);
    char *dev = NULL;
    size_t dlen = 0;
    FILE *df = open_memstream(&dev, &dlen);
    tb_scaling_write_device(df, TB_FMT_TEXT, rows + 1, 1);
    fclose(df);
    printf("%s", dev);
    TB_CHECK(fabs(rows[1].bcast_ms - 6) < 1e-9, "the BN broadcast's median per step: 6 ms (got %g)", rows[1].bcast_ms);
    TB_CHECK(strstr(dev, " 65.2 ") != NULL && strstr(dev, " 60.0 ") == NULL,
             "the device table's overlap is 65.2 %% (16 ms exposed of 40 + 6 ms of communication):\n%s", dev);
    free(dev);
    return tb_test_exit("scaling_util");
}
