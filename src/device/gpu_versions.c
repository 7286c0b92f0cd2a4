/* gpu_versions.c - version decoding and the mismatch policy (see
 * gpu_versions.h). Policy, per library:
 *   driver   major below the runtime's: CUDA calls fail (error); same major,
 *            older minor: minor-version compatibility runs, but newer PTX
 *            cannot be JIT-compiled (warn); newer: supported (flagged)
 *   cuDNN    another major: ABI break (error); another minor: loaded older
 *            may lack engines or symbols, newer is supported (warn)
 *   cuDNN's own CUDA runtime major != ours: two runtimes in one process (error)
 *   cuBLAS   another major: error; another minor: warn
 *   NCCL     another minor or patch: warn (the wire protocol must match on
 *            every rank, and older releases lack non-blocking init/abort) */
#include "src/device/gpu_versions.h"

#include "comm/nccl.h" /* TB_NCCL_MIN_CODE */

#include <stdio.h>
#include <string.h>

static int cuda_major(int c) { return c / 1000; }
static int cuda_minor(int c) { return (c % 1000) / 10; }
static int lib_major(int c) { return c / 10000; }
static int lib_minor(int c) { return (c % 10000) / 100; }

void tb_lib_version_string(tb_lib_kind kind, int code, char *buf, int len) {
    if (code <= 0) {
        snprintf(buf, (size_t)len, "none");
    } else if (kind == TB_LIB_DRIVER || kind == TB_LIB_CUDNN_CUDART) {
        snprintf(buf, (size_t)len, "%d.%d", cuda_major(code), cuda_minor(code));
    } else if (kind == TB_LIB_NCCL) {
        int major, minor, patch;
        tb_nccl_version_parts(code, &major, &minor, &patch);
        snprintf(buf, (size_t)len, "%d.%d.%d", major, minor, patch);
    } else {
        snprintf(buf, (size_t)len, "%d.%d.%d", lib_major(code), lib_minor(code), code % 100);
    }
}

const char *tb_verdict_name(tb_ver_verdict v) {
    switch (v) {
    case TB_VER_MATCH: return "match";
    case TB_VER_DIFFERS_OK: return "differs (supported)";
    case TB_VER_WARN: return "MISMATCH (warning)";
    case TB_VER_ERROR: return "MISMATCH (error)";
    default: return "absent";
    }
}

void tb_version_judge(tb_lib_kind kind, int compiled, int loaded, tb_lib_check *o) {
    static const char *const names[] = {"CUDA driver vs runtime", "cuDNN", "cuDNN's CUDA runtime", "cuBLAS",
                                        "NCCL"};
    memset(o, 0, sizeof *o);
    o->what = names[kind];
    o->compiled = compiled;
    o->loaded = loaded;
    tb_lib_version_string(kind, compiled, o->compiled_s, sizeof o->compiled_s);
    tb_lib_version_string(kind, loaded, o->loaded_s, sizeof o->loaded_s);
    const char *c = o->compiled_s, *l = o->loaded_s;
    if (loaded <= 0) {
        o->verdict = TB_VER_ABSENT;
        snprintf(o->note, sizeof o->note,
                 kind == TB_LIB_DRIVER ? "no NVIDIA driver on this host: the CUDA backend cannot run"
                                       : "%s could not be loaded",
                 o->what);
        return;
    }
    if (loaded == compiled) {
        o->verdict = TB_VER_MATCH;
        snprintf(o->note, sizeof o->note, "built against %s, running %s", c, l);
        return;
    }
    switch (kind) {
    case TB_LIB_DRIVER:
        if (cuda_major(loaded) < cuda_major(compiled)) {
            o->verdict = TB_VER_ERROR;
            snprintf(o->note, sizeof o->note,
                     "the driver supports CUDA %s, older than the runtime %s trainbench was built with: "
                     "CUDA calls fail; update the driver or build with a CUDA %d toolkit",
                     l, c, cuda_major(loaded));
        } else if (loaded < compiled) {
            o->verdict = TB_VER_WARN;
            snprintf(o->note, sizeof o->note,
                     "driver CUDA %s is older than the runtime %s: runs under minor-version "
                     "compatibility, but PTX newer than the driver cannot be JIT-compiled; update the "
                     "driver",
                     l, c);
        } else {
            o->verdict = TB_VER_DIFFERS_OK;
            snprintf(o->note, sizeof o->note, "driver CUDA %s is newer than the runtime %s: supported", l, c);
        }
        return;
    case TB_LIB_CUDNN_CUDART:
        if (cuda_major(loaded) != cuda_major(compiled)) {
            o->verdict = TB_VER_ERROR;
            snprintf(o->note, sizeof o->note,
                     "the loaded cuDNN was built for CUDA %s but trainbench for CUDA %s: install the "
                     "cuDNN build for CUDA %d",
                     l, c, cuda_major(compiled));
        } else {
            o->verdict = TB_VER_DIFFERS_OK;
            snprintf(o->note, sizeof o->note, "cuDNN built with CUDA %s, trainbench with %s: same major",
                     l, c);
        }
        return;
    case TB_LIB_CUDNN:
    case TB_LIB_CUBLAS:
        if (lib_major(loaded) != lib_major(compiled)) {
            o->verdict = TB_VER_ERROR;
            snprintf(o->note, sizeof o->note,
                     "%s %s is loaded but trainbench was built against %s: another major version "
                     "breaks the ABI; fix LD_LIBRARY_PATH or rebuild",
                     o->what, l, c);
        } else {
            o->verdict = TB_VER_WARN;
            snprintf(o->note, sizeof o->note,
                     "%s %s is loaded but trainbench was built against %s: %s; results may not compare "
                     "with runs on %s",
                     o->what, l, c,
                     loaded < compiled ? "an older library may lack engines or entry points used"
                                       : "newer is supported",
                     c);
        }
        return;
    case TB_LIB_NCCL:
        if (loaded < TB_NCCL_MIN_CODE) { /* what tb_nccl_create refuses */
            o->verdict = TB_VER_ERROR;
            snprintf(o->note, sizeof o->note,
                     "NCCL %s is loaded but trainbench needs 2.18 or newer (non-blocking communicators, "
                     "ncclCommSplit with a config): put a newer libnccl.so.2 first on LD_LIBRARY_PATH",
                     l);
            return;
        }
        o->verdict = TB_VER_WARN;
        snprintf(o->note, sizeof o->note,
                 "NCCL %s is loaded but trainbench was built against %s: every rank must load the same "
                 "NCCL%s",
                 l, c, loaded < compiled ? ", and an older one may lack non-blocking init and abort" : "");
        return;
    }
}
