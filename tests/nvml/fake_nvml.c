/* fake_nvml.c - a stand-in libnvidia-ml.so.1 for host tests of src/device/nvml.c:
 * one device at PCI bus id 0000:01:00.0 ("Fake H100"), readings that move
 * in a known way (GPU-Util alternates 20/80, SM clock 1980 MHz, GPM SM
 * activity 42.5 %), two NVLinks up, the driver's own GPU-Util samples every
 * 100 ms of the wall clock reading 70 %. Only the entry points trainbench
 * uses. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version, isSupportedDevice; } nvmlGpmSupport_t;
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct { char *shortName, *longName, *unit; } metricInfo;
} nvmlGpmMetric_t;
typedef struct {
    unsigned int version, numMetrics;
    nvmlGpmSample_t sample1, sample2;
    nvmlGpmMetric_t metrics[210];
} nvmlGpmMetricsGet_t;

static int g_dev;                      /* the one device's handle target */
static int g_samples[8], g_next_sample;
static int g_util_calls;
#define DEV ((nvmlDevice_t)&g_dev)

nvmlReturn_t nvmlInit_v2(void) { return 0; }
nvmlReturn_t nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(nvmlReturn_t r) { return r == 6 ? "Not Found" : "Unknown Error"; }
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n) {
    strncpy(v, "580.159.04", n);
    return 0;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return 0; }
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *id, nvmlDevice_t *d) {
    if (strcmp(id, "0000:01:00.0") != 0) return 6; /* NVML_ERROR_NOT_FOUND */
    *d = DEV;
    return 0;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int n) {
    (void)d;
    strncpy(name, "Fake H100", n);
    return 0;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    (void)d;
    m->total = 85520809984ULL;
    m->free = m->total / 2;
    m->used = m->total - m->free;
    return 0;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    (void)d;
    u->gpu = (g_util_calls++ % 2) ? 80 : 20;
    u->memory = 30;
    return 0;
}
typedef union { double d; unsigned int ui; unsigned long long ull; } nvmlValue_t;
typedef struct { unsigned long long timeStamp; nvmlValue_t sampleValue; } nvmlSample_t;
/* GPU-Util samples (type 1) at every 100-ms boundary of the wall clock after
 * lastSeen up to now, each 70 %, as unsigned ints (value type 1); samples
 * NULL: their count. 6 = NVML_ERROR_NOT_FOUND when there are none, or
 * with FAKE_NVML_NO_SAMPLES=1 (a driver that keeps none). */
nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t d, int type, unsigned long long last, int *vt, unsigned int *n,
                                  nvmlSample_t *out) {
    (void)d;
    if (type != 1) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    const char *none = getenv("FAKE_NVML_NO_SAMPLES");
    if (none && none[0] == '1') return 6;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    unsigned long long now = (unsigned long long)t.tv_sec * 1000000ULL + (unsigned long long)t.tv_nsec / 1000ULL;
    unsigned long long first = (last / 100000ULL + 1) * 100000ULL;
    unsigned int k = 0;
    for (unsigned long long s = first; s <= now && (!out || k < *n); s += 100000ULL, k++)
        if (out) {
            out[k].timeStamp = s;
            out[k].sampleValue.ui = 70;
        }
    if (k == 0) return 6;
    *vt = 1;
    *n = k;
    return 0;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *c) {
    (void)d;
    *c = type == 1 ? 1980 : 2619;
    return 0;
}
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int *c) {
    (void)d;
    *c = type == 1 ? 1980 : 2619;
    return 0;
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { (void)d; *v = 5; return 0; }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { (void)d; *v = 16; return 0; }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { (void)d; *v = 5; return 0; }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { (void)d; *v = 16; return 0; }
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *on) {
    (void)d;
    *on = link < 2;
    return 0;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int s, unsigned int *t) { (void)d; (void)s; *t = 41; return 0; }
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) { (void)d; *mw = 350000; return 0; }
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int idx, int *s) {
    (void)a; (void)b;
    *s = idx == 2 ? 0 : 0;
    return 0;
}
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *lvl) {
    (void)a; (void)b;
    *lvl = 0;
    return 0;
}
nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t *s) {
    (void)d;
    if (s->version != 1) return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    s->isSupportedDevice = 1;
    return 0;
}
nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *s) {
    if (g_next_sample == 8) return 999;
    *s = (nvmlGpmSample_t)&g_samples[g_next_sample++];
    return 0;
}
nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s) { (void)s; return 0; }
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, nvmlGpmSample_t s) {
    (void)d;
    static int tick;
    *(int *)s = ++tick;
    return 0;
}
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *m) {
    if (m->version != 1 || m->numMetrics < 1) return 25;
    /* samples must be two distinct, successive ones */
    int a = *(int *)m->sample1, b = *(int *)m->sample2;
    for (unsigned i = 0; i < m->numMetrics; i++) {
        m->metrics[i].nvmlReturn = (b == a + 1 && m->metrics[i].metricId == 2) ? 0 : 3;
        m->metrics[i].value = 42.5;
    }
    return 0;
}
