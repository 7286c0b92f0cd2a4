/* test_nvml.c - src/device/nvml.c against tests/nvml/fake_nvml.c (loaded as
 * libnvidia-ml.so.1 through LD_LIBRARY_PATH): symbol loading, device
 * lookup by PCI bus id and its error, static facts, one reading, the
 * sampler's window (mean GPU-Util of alternating 20/80 readings = 50, GPM
 * SM activity between successive samples = 42.5), reset, and a window
 * shorter than the period read once at its end; GPU-Util from the
 * driver's own timestamped samples inside the window (the fake's 70 %)
 * in place of the readings' mean, and the window rule on made-up samples
 * (a sample whose period began before the window is left out). */
#include <math.h>
#include <string.h>
#include <time.h>

#include "src/device/nvml.h"
#include "tests/tb_test.h"

static void sleep_s(double s) {
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

int main(void) {
    char err[512];
    tb_nvml *nv = tb_nvml_open(err, sizeof err);
    TB_CHECK(nv != NULL, "tb_nvml_open: %s", err);
    if (!nv) return tb_test_exit("nvml");
    char drv[64];
    int cuda = 0;
    tb_nvml_driver_version(nv, drv, sizeof drv, &cuda);
    TB_CHECK(strcmp(drv, "580.159.04") == 0 && cuda == 13000, "driver '%s' cuda %d", drv, cuda);

    TB_CHECK(tb_nvml_device(nv, "0000:02:00.0", err, sizeof err) == NULL && strstr(err, "0000:02:00.0"),
             "unknown bus id must fail naming it: '%s'", err);
    tb_nvml_dev *d = tb_nvml_device(nv, "0000:01:00.0", err, sizeof err);
    TB_CHECK(d != NULL, "device: %s", err);
    if (!d) return tb_test_exit("nvml");
    TB_CHECK(tb_nvml_device(nv, "0000:01:00.0", err, sizeof err) == d, "same device twice: same handle");

    tb_nvml_static st;
    tb_nvml_static_info(d, &st);
    TB_CHECK(strcmp(st.name, "Fake H100") == 0, "name %s", st.name);
    TB_CHECK(st.pcie_gen == 5 && st.pcie_width == 16 && st.nvlinks_active == 2 && st.gpm_supported == 1,
             "pcie gen %d x%d, nvlinks %d, gpm %d", st.pcie_gen, st.pcie_width, st.nvlinks_active,
             st.gpm_supported);
    TB_CHECK(st.sm_clock_max_mhz == 1980 && st.mem_total_bytes > 8e10, "clock %d mem %g", st.sm_clock_max_mhz,
             st.mem_total_bytes);

    tb_nvml_now now;
    tb_nvml_read(d, &now);
    TB_CHECK(now.sm_clock_mhz == 1980 && now.power_w == 350 && now.temp_c == 41, "clock %g power %g temp %g",
             now.sm_clock_mhz, now.power_w, now.temp_c);

    int nvlink = -1, p2p = -1, level = -1;
    TB_CHECK(tb_nvml_peer(d, d, &nvlink, &p2p, &level) == 0 && nvlink == 1 && level == 0, "peer %d %d %d",
             nvlink, p2p, level);

    /* the window rule on made-up samples, 100 ms apart, out of order: the
     * one at t0 + 50 ms speaks for [t0 - 50 ms, t0 + 50 ms] (idle before the
     * window): left out; those at t0 + 150 and + 250 ms count */
    {
        unsigned long long t0 = 1000000000ULL, ts[4] = {t0 + 150000, t0 - 50000, t0 + 250000, t0 + 50000};
        double pct[4] = {100, 0, 100, 0}, m = -1;
        int used = tb_nvml_util_in_window(ts, pct, 4, t0, &m);
        TB_CHECK(used == 2 && m == 100, "window rule: %d samples, mean %g (want 2, 100: the straddling one out)",
                 used, m);
        TB_CHECK(tb_nvml_util_in_window(ts, pct, 1, t0, &m) == 0, "one sample: no period to tell, none used");
        /* jitter of a few ms around the 100-ms period keeps a sample that starts at t0 */
        unsigned long long tj[3] = {t0 + 98000, t0 + 199000, t0 + 301000};
        double pj[3] = {40, 60, 80};
        used = tb_nvml_util_in_window(tj, pj, 3, t0, &m);
        TB_CHECK(used == 3 && fabs(m - 60) < 1e-9, "jittered samples: %d used, mean %g (want 3, 60)", used, m);
    }

    tb_nvml_sampler *s = tb_nvml_sampler_start(d, 0.01);
    sleep_s(0.25);
    tb_nvml_stats a;
    tb_nvml_sampler_stats(s, &a);
    TB_CHECK(a.samples >= 6, "samples %d after 0.25 s at 10 ms", a.samples);
    /* the driver's samples (70 %) in place of the readings' mean (alternating 20/80: about 50) */
    TB_CHECK(a.util_driver_samples >= 1 && a.util_pct_mean == 70 && tb_nvml_util_valid(&a),
             "GPU-Util from %d driver samples: %g (want >= 1, 70, valid in a 0.25-s window)", a.util_driver_samples,
             a.util_pct_mean);
    TB_CHECK(fabs(a.sm_active_pct_mean - 42.5) < 1e-9, "SM activity %g", a.sm_active_pct_mean);
    TB_CHECK(a.sm_clock_mhz_mean == 1980 && a.sm_clock_mhz_min == 1980 && a.temp_c_max == 41, "clock %g/%g temp %g",
             a.sm_clock_mhz_mean, a.sm_clock_mhz_min, a.temp_c_max);
    /* a driver without samples: the readings' mean (alternating 20/80: 50
     * for an even count, within 60/n otherwise) */
    setenv("FAKE_NVML_NO_SAMPLES", "1", 1);
    tb_nvml_sampler_reset(s);
    sleep_s(0.25);
    tb_nvml_stats r;
    tb_nvml_sampler_stats(s, &r);
    unsetenv("FAKE_NVML_NO_SAMPLES");
    TB_CHECK(r.util_driver_samples == 0 && r.samples >= 6 && fabs(r.util_pct_mean - 50) <= 60.0 / r.samples + 1e-9,
             "no driver samples: %d of them, the readings' mean %g over %d", r.util_driver_samples, r.util_pct_mean,
             r.samples);
    tb_nvml_sampler_reset(s);
    tb_nvml_stats b;
    tb_nvml_sampler_stats(s, &b);
    TB_CHECK(b.samples <= 1, "after reset %d samples", b.samples);
    sleep_s(0.1);
    tb_nvml_sampler_stats(s, &b);
    TB_CHECK(b.samples >= 2 && fabs(b.sm_active_pct_mean - 42.5) < 1e-9, "after reset: %d samples, SM %g",
             b.samples, b.sm_active_pct_mean);
    /* the window's length, from the reset: what callers hold against
     * TB_NVML_UTIL_MIN_WINDOW_S */
    TB_CHECK(b.window_s >= 0.1 && b.window_s < 0.1 + 5.0, "window after reset + 0.1 s: %g s", b.window_s);
    TB_CHECK(a.window_s >= 0.25, "window since start %g s", a.window_s);
    tb_nvml_sampler_stop(s);

    /* a window shorter than the period (a feed row of a few short steps:
     * the first GPU run's feed_gpu_table rows 1 and 2 had none at 50 ms):
     * one reading at its end, from tb_nvml_sampler_stats */
    s = tb_nvml_sampler_start(d, 30.0);
    sleep_s(0.05); /* the thread's first reading is done; its next is 30 s away */
    tb_nvml_sampler_reset(s);
    tb_nvml_stats c;
    tb_nvml_sampler_stats(s, &c);
    TB_CHECK(c.samples == 1 && (c.util_pct_mean == 20 || c.util_pct_mean == 80) && isnan(c.sm_active_pct_mean),
             "a window with no reading: %d samples, util %g, SM %g (want 1, one of the fake's 20/80, NaN)",
             c.samples, c.util_pct_mean, c.sm_active_pct_mean);
    tb_nvml_sampler_stats(s, &c);
    TB_CHECK(c.samples == 1, "a second read of that window took another reading: %d samples", c.samples);
    tb_nvml_sampler_stop(s);
    tb_nvml_close(nv);
    return tb_test_exit("nvml");
}
