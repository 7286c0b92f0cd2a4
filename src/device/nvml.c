/* nvml.c - NVML through dlopen, and the training-time sampler (see nvml.h).
 *
 * The declarations below are the few NVML entry points and structures
 * trainbench uses, written from NVML's documented C ABI (nvml.h, CUDA 12.9
 * edition): the library is versioned by symbol (_v2) and struct version
 * fields, so these stay valid across drivers. */
#include "src/device/nvml.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/thread_start.h"
#include "core/timer.h"

/* ---- the NVML ABI we use ------------------------------------------------------- */
typedef int nvmlReturn_t;               /* 0 = NVML_SUCCESS */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
    unsigned int version;               /* NVML_GPM_SUPPORT_VERSION = 1 */
    unsigned int isSupportedDevice;
} nvmlGpmSupport_t;
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct {
        char *shortName, *longName, *unit;
    } metricInfo;
} nvmlGpmMetric_t;
#define TB_NVML_GPM_METRIC_MAX 210      /* NVML_GPM_METRIC_MAX of the 12.9 header */
typedef struct {
    unsigned int version;               /* NVML_GPM_METRICS_GET_VERSION = 1 */
    unsigned int numMetrics;
    nvmlGpmSample_t sample1, sample2;
    nvmlGpmMetric_t metrics[TB_NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;
typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;
typedef struct {
    unsigned long long timeStamp; /* CPU time, microseconds */
    nvmlValue_t sampleValue;
} nvmlSample_t;
enum { NVML_GPU_UTILIZATION_SAMPLES = 1 };
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum { NVML_TEMPERATURE_GPU = 0 };
enum { NVML_FEATURE_ENABLED = 1 };
enum { NVML_P2P_CAPS_INDEX_READ = 0, NVML_P2P_CAPS_INDEX_NVLINK = 2 };
enum { NVML_P2P_STATUS_OK = 0 };
enum { NVML_GPM_METRIC_SM_UTIL = 2 };
#define TB_NVML_NVLINK_MAX_LINKS 18

struct tb_nvml {
    void *lib;
    nvmlReturn_t (*Init)(void);
    nvmlReturn_t (*Shutdown)(void);
    const char *(*ErrorString)(nvmlReturn_t);
    nvmlReturn_t (*SystemGetDriverVersion)(char *, unsigned int);
    nvmlReturn_t (*SystemGetCudaDriverVersion)(int *);
    nvmlReturn_t (*DeviceGetHandleByPciBusId)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*DeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*DeviceGetClockInfo)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*DeviceGetMaxClockInfo)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*DeviceGetCurrPcieLinkGeneration)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetCurrPcieLinkWidth)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetMaxPcieLinkGeneration)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetMaxPcieLinkWidth)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int, int *);
    nvmlReturn_t (*DeviceGetTemperature)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*DeviceGetPowerUsage)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*DeviceGetP2PStatus)(nvmlDevice_t, nvmlDevice_t, int, int *);
    nvmlReturn_t (*DeviceGetTopologyCommonAncestor)(nvmlDevice_t, nvmlDevice_t, int *);
    /* the driver's own GPU-Util samples, timestamped: optional */
    nvmlReturn_t (*DeviceGetSamples)(nvmlDevice_t, int, unsigned long long, int *, unsigned int *, nvmlSample_t *);
    /* GPM: optional (drivers before R520 lack it) */
    nvmlReturn_t (*GpmQueryDeviceSupport)(nvmlDevice_t, nvmlGpmSupport_t *);
    nvmlReturn_t (*GpmSampleAlloc)(nvmlGpmSample_t *);
    nvmlReturn_t (*GpmSampleFree)(nvmlGpmSample_t);
    nvmlReturn_t (*GpmSampleGet)(nvmlDevice_t, nvmlGpmSample_t);
    nvmlReturn_t (*GpmMetricsGet)(nvmlGpmMetricsGet_t *);
    tb_nvml_dev *devs[64];
    int ndevs;
};

struct tb_nvml_dev {
    tb_nvml *nv;
    nvmlDevice_t h;
    int gpm;                            /* GPM usable on this device */
};

/* C11 forbids converting void* to a function pointer; POSIX guarantees it
 * works, so go through memcpy. */
static int load_sym(void *lib, const char *name, void *fnptr, int required, char *err, size_t errlen) {
    void *p = dlsym(lib, name);
    if (!p) {
        if (required)
            snprintf(err, errlen, "libnvidia-ml.so.1 lacks %s: the NVIDIA driver is too old", name);
        return !required;
    }
    memcpy(fnptr, &p, sizeof p);
    return 1;
}

tb_nvml *tb_nvml_open(char *err, size_t errlen) {
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen,
                 "NVML not available: libnvidia-ml.so.1 could not be loaded (%s); it comes with the "
                 "NVIDIA driver, so GPU utilisation and clocks are not sampled",
                 dlerror());
        return NULL;
    }
    tb_nvml *nv = calloc(1, sizeof *nv);
    if (!nv) TB_FATAL("out of host memory");
    nv->lib = lib;
    int ok = 1;
#define REQ(field, sym) ok = ok && load_sym(lib, sym, &nv->field, 1, err, errlen)
#define OPT(field, sym) load_sym(lib, sym, &nv->field, 0, err, errlen)
    REQ(Init, "nvmlInit_v2");
    REQ(Shutdown, "nvmlShutdown");
    REQ(ErrorString, "nvmlErrorString");
    REQ(SystemGetDriverVersion, "nvmlSystemGetDriverVersion");
    REQ(DeviceGetHandleByPciBusId, "nvmlDeviceGetHandleByPciBusId_v2");
    REQ(DeviceGetName, "nvmlDeviceGetName");
    REQ(DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo");
    REQ(DeviceGetUtilizationRates, "nvmlDeviceGetUtilizationRates");
    REQ(DeviceGetClockInfo, "nvmlDeviceGetClockInfo");
    REQ(DeviceGetMaxClockInfo, "nvmlDeviceGetMaxClockInfo");
    OPT(SystemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion_v2");
    OPT(DeviceGetCurrPcieLinkGeneration, "nvmlDeviceGetCurrPcieLinkGeneration");
    OPT(DeviceGetCurrPcieLinkWidth, "nvmlDeviceGetCurrPcieLinkWidth");
    OPT(DeviceGetMaxPcieLinkGeneration, "nvmlDeviceGetMaxPcieLinkGeneration");
    OPT(DeviceGetMaxPcieLinkWidth, "nvmlDeviceGetMaxPcieLinkWidth");
    OPT(DeviceGetNvLinkState, "nvmlDeviceGetNvLinkState");
    OPT(DeviceGetTemperature, "nvmlDeviceGetTemperature");
    OPT(DeviceGetPowerUsage, "nvmlDeviceGetPowerUsage");
    OPT(DeviceGetP2PStatus, "nvmlDeviceGetP2PStatus");
    OPT(DeviceGetTopologyCommonAncestor, "nvmlDeviceGetTopologyCommonAncestor");
    OPT(DeviceGetSamples, "nvmlDeviceGetSamples");
    OPT(GpmQueryDeviceSupport, "nvmlGpmQueryDeviceSupport");
    OPT(GpmSampleAlloc, "nvmlGpmSampleAlloc");
    OPT(GpmSampleFree, "nvmlGpmSampleFree");
    OPT(GpmSampleGet, "nvmlGpmSampleGet");
    OPT(GpmMetricsGet, "nvmlGpmMetricsGet");
#undef REQ
#undef OPT
    if (!ok) {
        dlclose(lib);
        free(nv);
        return NULL;
    }
    nvmlReturn_t r = nv->Init();
    if (r != 0) {
        snprintf(err, errlen, "NVML not available: nvmlInit failed: %s (is the NVIDIA driver loaded?)",
                 nv->ErrorString(r));
        dlclose(lib);
        free(nv);
        return NULL;
    }
    return nv;
}

void tb_nvml_close(tb_nvml *nv) {
    if (!nv) return;
    for (int i = 0; i < nv->ndevs; i++) free(nv->devs[i]);
    nv->Shutdown();
    dlclose(nv->lib);
    free(nv);
}

void tb_nvml_driver_version(tb_nvml *nv, char *buf, size_t len, int *cuda_version) {
    buf[0] = '\0';
    *cuda_version = 0;
    char v[96];
    if (nv->SystemGetDriverVersion(v, sizeof v) == 0) snprintf(buf, len, "%s", v);
    if (nv->SystemGetCudaDriverVersion) nv->SystemGetCudaDriverVersion(cuda_version);
}

tb_nvml_dev *tb_nvml_device(tb_nvml *nv, const char *pci_bus_id, char *err, size_t errlen) {
    nvmlDevice_t h;
    nvmlReturn_t r = nv->DeviceGetHandleByPciBusId(pci_bus_id, &h);
    if (r != 0) {
        snprintf(err, errlen, "NVML does not know the GPU at PCI bus id %s: %s", pci_bus_id,
                 nv->ErrorString(r));
        return NULL;
    }
    for (int i = 0; i < nv->ndevs; i++)
        if (nv->devs[i]->h == h) return nv->devs[i];
    if (nv->ndevs == (int)(sizeof nv->devs / sizeof nv->devs[0])) TB_FATAL("more than 64 NVML devices");
    tb_nvml_dev *d = calloc(1, sizeof *d);
    if (!d) TB_FATAL("out of host memory");
    d->nv = nv;
    d->h = h;
    if (nv->GpmQueryDeviceSupport && nv->GpmSampleAlloc && nv->GpmSampleGet && nv->GpmMetricsGet &&
        nv->GpmSampleFree) {
        nvmlGpmSupport_t s = {1, 0};
        d->gpm = nv->GpmQueryDeviceSupport(h, &s) == 0 && s.isSupportedDevice;
    }
    nv->devs[nv->ndevs++] = d;
    return d;
}

static int u_or(nvmlReturn_t (*fn)(nvmlDevice_t, unsigned int *), nvmlDevice_t h) {
    unsigned int v;
    return fn && fn(h, &v) == 0 ? (int)v : -1;
}

void tb_nvml_static_info(tb_nvml_dev *d, tb_nvml_static *out) {
    tb_nvml *nv = d->nv;
    memset(out, 0, sizeof *out);
    if (nv->DeviceGetName(d->h, out->name, sizeof out->name) != 0) snprintf(out->name, sizeof out->name, "?");
    nvmlMemory_t m;
    out->mem_total_bytes = nv->DeviceGetMemoryInfo(d->h, &m) == 0 ? (double)m.total : -1;
    unsigned int c;
    out->sm_clock_max_mhz = nv->DeviceGetMaxClockInfo(d->h, NVML_CLOCK_SM, &c) == 0 ? (int)c : -1;
    out->mem_clock_max_mhz = nv->DeviceGetMaxClockInfo(d->h, NVML_CLOCK_MEM, &c) == 0 ? (int)c : -1;
    out->pcie_gen = u_or(nv->DeviceGetCurrPcieLinkGeneration, d->h);
    out->pcie_width = u_or(nv->DeviceGetCurrPcieLinkWidth, d->h);
    out->pcie_gen_max = u_or(nv->DeviceGetMaxPcieLinkGeneration, d->h);
    out->pcie_width_max = u_or(nv->DeviceGetMaxPcieLinkWidth, d->h);
    out->nvlinks_active = nv->DeviceGetNvLinkState ? 0 : -1;
    for (unsigned l = 0; nv->DeviceGetNvLinkState && l < TB_NVML_NVLINK_MAX_LINKS; l++) {
        int on = 0;
        if (nv->DeviceGetNvLinkState(d->h, l, &on) == 0 && on == NVML_FEATURE_ENABLED) out->nvlinks_active++;
    }
    out->gpm_supported = d->gpm;
}

void tb_nvml_read(tb_nvml_dev *d, tb_nvml_now *out) {
    tb_nvml *nv = d->nv;
    out->util_pct = out->mem_util_pct = out->sm_clock_mhz = out->mem_clock_mhz = NAN;
    out->power_w = out->temp_c = NAN;
    nvmlUtilization_t u;
    if (nv->DeviceGetUtilizationRates(d->h, &u) == 0) {
        out->util_pct = u.gpu;
        out->mem_util_pct = u.memory;
    }
    unsigned int v;
    if (nv->DeviceGetClockInfo(d->h, NVML_CLOCK_SM, &v) == 0) out->sm_clock_mhz = v;
    if (nv->DeviceGetClockInfo(d->h, NVML_CLOCK_MEM, &v) == 0) out->mem_clock_mhz = v;
    if (nv->DeviceGetPowerUsage && nv->DeviceGetPowerUsage(d->h, &v) == 0) out->power_w = v / 1000.0;
    if (nv->DeviceGetTemperature && nv->DeviceGetTemperature(d->h, NVML_TEMPERATURE_GPU, &v) == 0)
        out->temp_c = v;
}

int tb_nvml_peer(tb_nvml_dev *a, tb_nvml_dev *b, int *nvlink, int *p2p_read, int *level) {
    tb_nvml *nv = a->nv;
    if (!nv->DeviceGetP2PStatus || !nv->DeviceGetTopologyCommonAncestor) return -1;
    int s = -1;
    *nvlink = nv->DeviceGetP2PStatus(a->h, b->h, NVML_P2P_CAPS_INDEX_NVLINK, &s) == 0 &&
              s == NVML_P2P_STATUS_OK;
    *p2p_read = nv->DeviceGetP2PStatus(a->h, b->h, NVML_P2P_CAPS_INDEX_READ, &s) == 0 &&
                s == NVML_P2P_STATUS_OK;
    return nv->DeviceGetTopologyCommonAncestor(a->h, b->h, level) == 0 ? 0 : -1;
}

const char *tb_nvml_level_name(int level) {
    switch (level) {
    case 0: return "same board";
    case 10: return "PCIe switch";
    case 20: return "PCIe switches";
    case 30: return "host bridge";
    case 40: return "NUMA node";
    case 50: return "system (SMP link)";
    default: return "unknown";
    }
}

/* ---- the sampler thread ----------------------------------------------------------- */

struct tb_nvml_sampler {
    tb_nvml_dev *d;
    double period_s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    /* the window */
    double t0; /* the window's start, tb_now() */
    unsigned long long t0_us; /* the same, CLOCK_REALTIME microseconds (the driver's samples' clock) */
    int n, n_clock, n_power, n_sm;
    double util_sum, sm_sum, clock_sum, clock_min, power_sum, temp_max;
    nvmlGpmSample_t gpm[2];
    int gpm_have;                       /* gpm[0] holds the previous sample */
};

static unsigned long long wall_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (unsigned long long)t.tv_sec * 1000000ULL + (unsigned long long)t.tv_nsec / 1000ULL;
}

static void window_clear(tb_nvml_sampler *s) {
    s->t0 = tb_now();
    s->t0_us = wall_us();
    s->n = s->n_clock = s->n_power = s->n_sm = 0;
    s->util_sum = s->sm_sum = s->clock_sum = s->power_sum = 0;
    s->clock_min = INFINITY;
    s->temp_max = -INFINITY;
    s->gpm_have = 0;
}

/* SM activity between the previous GPM sample and a new one; NaN when not
 * available (first sample of a window, or GPM unsupported). */
static double gpm_sm_active(tb_nvml_sampler *s) {
    tb_nvml *nv = s->d->nv;
    if (!s->d->gpm) return NAN;
    if (nv->GpmSampleGet(s->d->h, s->gpm[1]) != 0) return NAN;
    double v = NAN;
    if (s->gpm_have) {
        nvmlGpmMetricsGet_t *mg = calloc(1, sizeof *mg);
        if (!mg) TB_FATAL("out of host memory");
        mg->version = 1;
        mg->numMetrics = 1;
        mg->sample1 = s->gpm[0];
        mg->sample2 = s->gpm[1];
        mg->metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
        if (nv->GpmMetricsGet(mg) == 0 && mg->metrics[0].nvmlReturn == 0) v = mg->metrics[0].value;
        free(mg);
    }
    nvmlGpmSample_t t = s->gpm[0]; /* the new sample becomes the previous one */
    s->gpm[0] = s->gpm[1];
    s->gpm[1] = t;
    s->gpm_have = 1;
    return v;
}

/* One reading into the window (s->mu held). */
static void take_reading(tb_nvml_sampler *s) {
    tb_nvml_now now;
    tb_nvml_read(s->d, &now);
    double sm = gpm_sm_active(s);
    if (!isnan(now.util_pct)) {
        s->util_sum += now.util_pct;
        s->n++;
    }
    if (!isnan(sm)) {
        s->sm_sum += sm;
        s->n_sm++;
    }
    if (!isnan(now.sm_clock_mhz)) {
        s->clock_sum += now.sm_clock_mhz;
        if (now.sm_clock_mhz < s->clock_min) s->clock_min = now.sm_clock_mhz;
        s->n_clock++;
    }
    if (!isnan(now.power_w)) {
        s->power_sum += now.power_w;
        s->n_power++;
    }
    if (!isnan(now.temp_c) && now.temp_c > s->temp_max) s->temp_max = now.temp_c;
}

static void *sampler_main(void *arg) {
    tb_nvml_sampler *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        take_reading(s);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double t = until.tv_sec + until.tv_nsec * 1e-9 + s->period_s;
        until.tv_sec = (time_t)t;
        until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

tb_nvml_sampler *tb_nvml_sampler_start(tb_nvml_dev *d, double period_s) {
    tb_nvml_sampler *s = calloc(1, sizeof *s);
    if (!s) TB_FATAL("out of host memory");
    s->d = d;
    s->period_s = period_s > 0.01 ? period_s : 0.01;
    if (d->gpm && (d->nv->GpmSampleAlloc(&s->gpm[0]) != 0 || d->nv->GpmSampleAlloc(&s->gpm[1]) != 0))
        d->gpm = 0; /* sampling goes on without SM activity */
    window_clear(s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    tb_thread_start(&s->thread, NULL, sampler_main, s, "the NVML sampling thread");
    return s;
}

void tb_nvml_sampler_reset(tb_nvml_sampler *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    window_clear(s);
    pthread_mutex_unlock(&s->mu);
}

static int cmp_u64(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

int tb_nvml_util_in_window(const unsigned long long *ts_us, const double *pct, int n, unsigned long long t0_us,
                           double *mean) {
    if (n < 2) return 0;
    /* the sample period: the median step between successive timestamps */
    unsigned long long *t = malloc((size_t)n * sizeof *t), *d = malloc((size_t)n * sizeof *d);
    if (!t || !d) TB_FATAL("out of host memory");
    memcpy(t, ts_us, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_u64);
    int nd = 0;
    for (int i = 1; i < n; i++)
        if (t[i] > t[i - 1]) d[nd++] = t[i] - t[i - 1];
    unsigned long long period = 0;
    if (nd > 0) {
        qsort(d, (size_t)nd, sizeof *d, cmp_u64);
        period = d[nd / 2];
    }
    free(t);
    free(d);
    if (period == 0) return 0;
    /* a sample speaks for the period ending at its timestamp: inside the
     * window when that period began at t0 or later (a twentieth of a
     * period of jitter allowed) */
    double sum = 0;
    int used = 0;
    for (int i = 0; i < n; i++)
        if (ts_us[i] >= t0_us + period - period / 20) {
            sum += pct[i];
            used++;
        }
    if (used) *mean = sum / used;
    return used;
}

/* GPU-Util over the window from the driver's own timestamped samples
 * (nvmlDeviceGetSamples), into *mean: the number of samples used, 0 when
 * the driver has none to give (then the readings' mean stands). */
static int driver_util(tb_nvml_sampler *s, double *mean) {
    tb_nvml *nv = s->d->nv;
    if (!nv->DeviceGetSamples) return 0;
    unsigned int n = 0;
    int vt = 0;
    if (nv->DeviceGetSamples(s->d->h, NVML_GPU_UTILIZATION_SAMPLES, s->t0_us, &vt, &n, NULL) != 0 || n == 0)
        return 0;
    nvmlSample_t *buf = calloc(n, sizeof *buf);
    unsigned long long *ts = calloc(n, sizeof *ts);
    double *v = calloc(n, sizeof *v);
    if (!buf || !ts || !v) TB_FATAL("out of host memory");
    int used = 0;
    if (nv->DeviceGetSamples(s->d->h, NVML_GPU_UTILIZATION_SAMPLES, s->t0_us, &vt, &n, buf) == 0) {
        for (unsigned i = 0; i < n; i++) {
            const nvmlValue_t *x = &buf[i].sampleValue;
            ts[i] = buf[i].timeStamp;
            v[i] = vt == 0 ? x->dVal : vt == 1 ? (double)x->uiVal : vt == 2 ? (double)x->ulVal
                 : vt == 3 ? (double)x->ullVal : vt == 4 ? (double)x->sllVal : vt == 5 ? (double)x->siVal
                                                                             : (double)x->usVal;
        }
        used = tb_nvml_util_in_window(ts, v, (int)n, s->t0_us, mean);
    }
    free(buf);
    free(ts);
    free(v);
    return used;
}

void tb_nvml_sampler_stats(tb_nvml_sampler *s, tb_nvml_stats *o) {
    pthread_mutex_lock(&s->mu);
    if (s->n == 0) take_reading(s); /* a window shorter than the period: one reading at its end */
    o->samples = s->n;
    o->window_s = tb_now() - s->t0;
    o->util_pct_mean = s->n ? s->util_sum / s->n : NAN;
    double dm = NAN;
    o->util_driver_samples = driver_util(s, &dm);
    if (o->util_driver_samples > 0) o->util_pct_mean = dm;
    o->sm_active_pct_mean = s->n_sm ? s->sm_sum / s->n_sm : NAN;
    o->sm_clock_mhz_mean = s->n_clock ? s->clock_sum / s->n_clock : NAN;
    o->sm_clock_mhz_min = s->n_clock ? s->clock_min : NAN;
    o->power_w_mean = s->n_power ? s->power_sum / s->n_power : NAN;
    o->temp_c_max = isinf(s->temp_max) ? NAN : s->temp_max;
    pthread_mutex_unlock(&s->mu);
}

void tb_nvml_sampler_stop(tb_nvml_sampler *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    if (s->gpm[0]) s->d->nv->GpmSampleFree(s->gpm[0]);
    if (s->gpm[1]) s->d->nv->GpmSampleFree(s->gpm[1]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
