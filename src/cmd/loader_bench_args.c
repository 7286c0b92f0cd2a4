/* loader_bench_args.c - loader-bench's shared list arguments, stage columns,
 * CPU budget and memory samples (see loader_bench_args.h). */
#include "src/cmd/loader_bench_args.h"

#include "core/cpu_dispatch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/procmem.h"
#include "src/device/device.h"
#include "src/feed/feed.h"

int tb_bench_int_list(const char *s, int lo, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > 1024 || n == max) return -1;
        out[n++] = (int)v;
        p = end;
        if (*p == ',') {
            if (!*++p) return -1; /* "1,2,": no number after the comma */
        } else if (*p) {
            return -1;
        }
    }
    return n;
}

int tb_bench_onoff_list(const char *s, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        int v;
        if (strncmp(p, "on", 2) == 0) v = 1, p += 2;
        else if (strncmp(p, "off", 3) == 0) v = 0, p += 3;
        else return -1;
        if (n == max) return -1;
        out[n++] = v;
        if (*p == ',') {
            if (!*++p) return -1; /* "on,": nothing after the comma */
        } else if (*p) {
            return -1;
        }
    }
    return n;
}

int tb_bench_rows(const char *s, tb_feed_config *rows, tb_decode_mode *dec, tb_decode_mode def, int def_streams,
                  int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char item[64];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item || n == max) return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        p += len + (p[len] == ',');
        if (strcmp(item, "resident") == 0) { /* the on-device rate of the same step: no loader */
            memset(&rows[n], 0, sizeof rows[n]);
            rows[n].resident = 1;
            dec[n++] = def;
            continue;
        }
        int t, pf, streams = def_streams, used = 0;
        char pin[8] = "", mode[16] = "", nvj[96] = "";
        int got = sscanf(item, "%d:%d:%7[a-z]%n:%15[a-z-]%n:%d%n", &t, &pf, pin, &used, mode, &used, &streams, &used);
        if (got == 5 && item[used] == ':') { /* a 6th field: this row's --nvjpeg, KEY=VALUE joined by '+' */
            snprintf(nvj, sizeof nvj, "%s", item + used + 1);
            for (char *q = nvj; *q; q++)
                if (*q == '+') *q = ',';
            used += 1 + (int)strlen(item + used + 1);
        }
        if (got < 3 || item[used] != '\0' || t < 0 || t > 1024 || pf < 2 || pf > 1024) return -1;
        if (streams < 0 || streams > 16) return -1;
        if (strcmp(pin, "on") != 0 && strcmp(pin, "off") != 0) return -1;
        tb_decode_mode row_mode = def;
        if (got >= 4 && tb_decode_parse(mode, &row_mode) != 0) return -1; /* %n does not count in got */
        memset(&rows[n], 0, sizeof rows[n]);
        rows[n].threads = t;
        rows[n].prefetch = pf;
        rows[n].pinned = strcmp(pin, "on") == 0;
        rows[n].decode_streams = streams;
        snprintf(rows[n].nvjpeg, sizeof rows[n].nvjpeg, "%s", nvj);
        dec[n] = row_mode;
        n++;
    }
    return n;
}

const char *tb_bench_num(char *buf, size_t len, double v, int prec) {
    if (isnan(v)) snprintf(buf, len, "-");
    else snprintf(buf, len, "%.*f", prec, v);
    return buf;
}

void tb_bench_stage_spec(char *spec, size_t len) {
    size_t used = strlen(spec);
    for (int k = 0; k < TB_STAGE_COUNT && used < len; k++)
        used += (size_t)snprintf(spec + used, len - used, ",stage_%s_ms", tb_loader_stage_name(k));
}

void tb_bench_print_stages(FILE *f, const double ms[TB_STAGE_COUNT]) {
    fprintf(f, "#   stages, ms per batch:");
    for (int k = 0; k < TB_STAGE_COUNT; k++)
        if (!isnan(ms[k]) && ms[k] > 0) fprintf(f, " %s %.2f", tb_loader_stage_name(k), ms[k]);
    fprintf(f, " (host stages summed over the threads that ran them; dev_*: device time)\n");
}

/* ---- memory samples -------------------------------------------------------------------- */

void tb_mem_log_init(tb_mem_log *m, int device) {
    memset(m, 0, sizeof *m);
    m->device = device;
    tb_table_init(&m->tab, "memory",
                  "batch:i,t_s,rss_mib,decoder_device_mib,decoder_pinned_mib,device_used_mib");
}

void tb_mem_log_sample(tb_mem_log *m, const tb_loader *ld, int64_t batches, double t_s) {
    int64_t dev = 0, pinned = 0;
    tb_loader_memory(ld, &dev, &pinned);
    double used = NAN, total = 0;
    if (!m->device || tb_gpu_mem_used(&used, &total) != 0) used = NAN;
    long long rss = tb_rss_bytes();
    double v[6] = {(double)batches, t_s, rss >= 0 ? (double)rss / 1048576.0 : NAN, (double)dev / 1048576.0,
                   (double)pinned / 1048576.0, used / 1048576.0};
    tb_table_row(&m->tab, v, NULL);
    if (m->n == 0) memcpy(m->first, v + 1, sizeof m->first);
    memcpy(m->last, v + 1, sizeof m->last);
    m->n++;
}

void tb_mem_log_print(FILE *f, const tb_mem_log *m) {
    if (m->n < 2) return;
    static const char *what[4] = {"RSS", "decoders' device memory", "decoders' pinned memory", "device memory in use"};
    fprintf(f, "# memory over %.1f s (%d samples, from the first timed batch):", m->last[0] - m->first[0], m->n);
    for (int k = 0; k < 4; k++) {
        double a = m->first[k + 1], b = m->last[k + 1];
        if (isnan(a) || isnan(b)) continue;
        fprintf(f, "%s %s %.1f -> %.1f MiB", k ? ";" : "", what[k], a, b);
        if (a > 0) fprintf(f, " (%+.2f %%)", 100.0 * (b - a) / a);
    }
    fprintf(f, "\n");
}

void tb_mem_log_free(tb_mem_log *m) { tb_table_free(&m->tab); }

void tb_bench_print_cpu_level(FILE *f) {
    char buf[256];
    tb_cpu_dispatch_describe(buf, sizeof buf);
    fprintf(f, "# cpu vector loops: %s\n", buf);
}
