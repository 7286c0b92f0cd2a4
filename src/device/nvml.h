/* nvml.h - NVIDIA's management library, loaded at run time (dlopen of
 * libnvidia-ml.so.1, shipped with the driver): no build dependency, and a
 * machine without the driver gets one clear reason instead of a link error.
 *
 * What trainbench reads through it: the driver version, per-device name,
 * memory, clocks, PCIe link, NVLink links and peer topology (probe,
 * preflight), and while training, sampled on a thread of its own:
 *   - GPU-Util (nvmlDeviceGetUtilizationRates): the share of time in which
 *     any kernel ran. One busy SM reads 100 %.
 *   - SM activity (the GPM metric NVML_GPM_METRIC_SM_UTIL, Hopper and
 *     later): the share of SMs busy, DCGM's "SM active". Reported beside
 *     GPU-Util where the device supports GPM, NaN elsewhere.
 *   - SM clock, power, temperature.
 * Devices are matched by PCI bus id, the key CUDA and NVML share. */
#ifndef TB_NVML_H
#define TB_NVML_H

#include <stddef.h>

typedef struct tb_nvml tb_nvml;
typedef struct tb_nvml_dev tb_nvml_dev;

/* Loads and initialises NVML; NULL with a one-line reason in err. */
tb_nvml *tb_nvml_open(char *err, size_t errlen);
void tb_nvml_close(tb_nvml *nv);
/* "580.159.04" and the CUDA version the driver supports (13000 = 13.0);
 * "" / 0 when unknown. */
void tb_nvml_driver_version(tb_nvml *nv, char *buf, size_t len, int *cuda_version);

/* The device with this PCI bus id ("0000:3B:00.0", as cudaDeviceGetPCIBusId
 * writes it); NULL with a reason in err. Freed by tb_nvml_close. */
tb_nvml_dev *tb_nvml_device(tb_nvml *nv, const char *pci_bus_id, char *err, size_t errlen);

/* What does not change while a program runs. -1 where NVML cannot say. */
typedef struct {
    char name[96];
    double mem_total_bytes;
    int sm_clock_max_mhz, mem_clock_max_mhz;
    int pcie_gen, pcie_width;          /* current link */
    int pcie_gen_max, pcie_width_max;  /* what the slot and device allow */
    int nvlinks_active;                /* links in state enabled (0 on PCIe cards) */
    int gpm_supported;                 /* 1: SM activity can be sampled */
} tb_nvml_static;
void tb_nvml_static_info(tb_nvml_dev *d, tb_nvml_static *out);

/* One reading now. NaN where NVML cannot say. */
typedef struct {
    double util_pct;       /* GPU-Util over NVML's last sample period */
    double mem_util_pct;   /* memory-controller busy share */
    double sm_clock_mhz, mem_clock_mhz;
    double power_w, temp_c;
} tb_nvml_now;
void tb_nvml_read(tb_nvml_dev *d, tb_nvml_now *out);

/* Peer relation of two devices (preflight's topology table): NVLink between
 * them, P2P reads allowed, and NVML's common-ancestor level (0 internal,
 * 10 one PCIe switch, 20 several switches, 30 host bridge, 40 NUMA node,
 * 50 system). Returns 0, or -1 when NVML cannot say. */
int tb_nvml_peer(tb_nvml_dev *a, tb_nvml_dev *b, int *nvlink, int *p2p_read, int *level);
/* "NVLink", "PCIe switch", "host bridge", "NUMA node", "system (SMP link)" */
const char *tb_nvml_level_name(int level);

/* ---- sampling during training ------------------------------------------------
 * A thread reads the device every period_s; tb_nvml_sampler_reset starts a
 * new averaging window (a scaling row, say) and tb_nvml_sampler_stats reads
 * the window so far. A window that got no GPU-Util reading yet (shorter
 * than the period, or started just after a reading: a feed row of 4 short
 * steps) gets one from tb_nvml_sampler_stats, at its end, rather than none:
 * NVML's GPU-Util is itself the busy share of the driver's last sample
 * period (1/6 s to 1 s), which then holds the window, as it holds each of
 * the thread's readings. SM activity needs two GPM samples in a window:
 * NaN after that one reading.
 *
 * That last period may lie mostly before a short window: on the first H200
 * run a 0.11-s scaling row (10 steps of 11 ms, the GPU busy throughout)
 * read 0 % because the driver's period still held the idle barrier before
 * it. So window_s says how long the window was, and a caller reports
 * GPU-Util only for windows of TB_NVML_UTIL_MIN_WINDOW_S or more (NVML's
 * longest sample period). Where the driver gives its own timestamped
 * samples (nvmlDeviceGetSamples), GPU-Util is instead the mean of those
 * whose whole period lies in the window (util_driver_samples), which
 * speaks for a window of any length that holds one. */
#define TB_NVML_UTIL_MIN_WINDOW_S 1.0
/* How long a measured row (a scaling row, a feed row) runs at least by
 * default where NVML samples the GPU: the minimum window, with a margin. */
#define TB_NVML_UTIL_ROW_S (1.25 * TB_NVML_UTIL_MIN_WINDOW_S)
typedef struct tb_nvml_sampler tb_nvml_sampler;
typedef struct {
    int samples;
    double window_s;           /* since the sampler started or was last reset */
    double util_pct_mean;      /* GPU-Util: from the driver's samples when util_driver_samples > 0 */
    int util_driver_samples;   /* the driver's own timestamped GPU-Util samples whose whole period lies in
                                * the window (nvmlDeviceGetSamples); 0: none, the readings' mean stands */
    double sm_active_pct_mean; /* GPM SM activity; NaN when unsupported */
    double sm_clock_mhz_mean, sm_clock_mhz_min;
    double power_w_mean, temp_c_max;
} tb_nvml_stats;
/* Whether st's GPU-Util speaks for its window: the driver's own samples
 * inside it, or a window of TB_NVML_UTIL_MIN_WINDOW_S or more (above). */
static inline int tb_nvml_util_valid(const tb_nvml_stats *st) {
    return st->util_driver_samples > 0 || st->window_s >= TB_NVML_UTIL_MIN_WINDOW_S;
}
/* The driver's GPU-Util samples (timestamps ts_us, CPU microseconds, in any
 * order; each the busy % of the sample period ending at its timestamp)
 * whose whole period lies after t0_us: their mean into *mean, and how many
 * (0: fewer than two samples to tell the period from, or none inside). The
 * period is the median step between timestamps. */
int tb_nvml_util_in_window(const unsigned long long *ts_us, const double *pct, int n, unsigned long long t0_us,
                           double *mean);
tb_nvml_sampler *tb_nvml_sampler_start(tb_nvml_dev *d, double period_s);
void tb_nvml_sampler_reset(tb_nvml_sampler *s);
void tb_nvml_sampler_stats(tb_nvml_sampler *s, tb_nvml_stats *out);
void tb_nvml_sampler_stop(tb_nvml_sampler *s);

#endif
