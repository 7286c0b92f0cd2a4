/* cuda_engine.c - the graph (backend) API's shared steps from a finalized
 * operation graph to a timed plan (see cuda_engine.h). */
#include "model/cuda/cuda_engine.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/faults.h"
#include "core/log.h"

#define CU_BE_KNOBS CUDNN_KNOB_TYPE_COUNTS /* knob choices read per engine config: every kind cuDNN has */

static long g_live;

long cu_be_live(void) { return g_live; }

cudnnStatus_t cu_be_create(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *d) {
    *d = NULL;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(type, d);
    if (s == CUDNN_STATUS_SUCCESS)
        g_live++;
    else
        *d = NULL;
    return s;
}

void cu_be_destroy(cudnnBackendDescriptor_t *d) {
    if (!*d) return;
    TB_CUDNN_CHECK(cudnnBackendDestroyDescriptor(*d));
    g_live--;
    *d = NULL;
}

cudnnStatus_t cu_be_set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                        int64_t count, const void *value, const char *reason, cu_err *err) {
    cudnnStatus_t s = cudnnBackendSetAttribute(d, name, type, count, value);
    if (s != CUDNN_STATUS_SUCCESS && err && !err->why) err->why = reason, err->s = s;
    return s;
}

#define TRY(call, reason)                                                                                              \
    do {                                                                                                               \
        cudnnStatus_t s_ = (call);                                                                                     \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                                              \
            if (err && !err->why) err->why = (reason), err->s = s_;                                                    \
            return s_;                                                                                                 \
        }                                                                                                              \
    } while (0)

cudnnStatus_t cu_be_tensor(cudnnBackendDescriptor_t *d, const int64_t dim[4], const int64_t stride[4],
                           cudnnDataType_t dt, int64_t uid, int64_t align, int virt, int by_value, cu_err *err) {
    bool v = virt != 0, bv = by_value != 0;
    TRY(cu_be_create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, d), "creating a tensor descriptor");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt), "tensor data type");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim), "tensor dimensions");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride), "tensor strides");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid), "tensor id");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align),
        "tensor alignment");
    if (v) TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v), "virtual tensor");
    if (bv)
        TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv), "by-value tensor");
    TRY(cudnnBackendFinalize(*d), "a tensor descriptor did not finalize");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cu_be_conv_desc(int stride, int pad, cudnnBackendDescriptor_t *d, cu_err *err) {
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t nd = 2, one[2] = {1, 1}, st[2] = {stride, stride}, pd[2] = {pad, pad};
    TRY(cu_be_create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, d), "creating a convolution descriptor");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp),
        "convolution compute type");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode),
        "convolution mode");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nd),
        "convolution spatial dims");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one),
        "convolution dilations");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, st),
        "convolution strides");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pd),
        "convolution pre-paddings");
    TRY(cudnnBackendSetAttribute(*d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pd),
        "convolution post-paddings");
    TRY(cudnnBackendFinalize(*d), "the convolution descriptor did not finalize");
    return CUDNN_STATUS_SUCCESS;
}

static const cudnnBackendDescriptorType_t k_conv_op[3] = {
    CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
    CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
/* per direction: alpha, beta, conv desc, then the X, W, Y roles */
static const cudnnBackendAttributeName_t k_conv_attr[3][6] = {
    {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
    {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
    {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY}};

cudnnStatus_t cu_be_conv_op(int dir, float beta, cudnnBackendDescriptor_t conv, cudnnBackendDescriptor_t x,
                            cudnnBackendDescriptor_t w, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t *op,
                            cu_err *err) {
    float alpha = 1.0f; /* float: the compute type is float */
    cudnnBackendDescriptor_t t[3] = {x, w, y};
    TRY(cu_be_create(k_conv_op[dir], op), "creating the convolution operation");
    TRY(cudnnBackendSetAttribute(*op, k_conv_attr[dir][0], CUDNN_TYPE_FLOAT, 1, &alpha), "convolution alpha");
    TRY(cudnnBackendSetAttribute(*op, k_conv_attr[dir][1], CUDNN_TYPE_FLOAT, 1, &beta), "convolution beta");
    TRY(cudnnBackendSetAttribute(*op, k_conv_attr[dir][2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv),
        "convolution descriptor of the operation");
    for (int i = 0; i < 3; i++)
        TRY(cudnnBackendSetAttribute(*op, k_conv_attr[dir][3 + i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[i]),
            "convolution operation tensors");
    TRY(cudnnBackendFinalize(*op), "the convolution operation did not finalize");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cu_be_op_graph(cudnnHandle_t h, cudnnBackendDescriptor_t *ops, int nops, cudnnBackendDescriptor_t *graph,
                             cu_err *err) {
    cudnnStatus_t s = cu_be_create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*graph);
    if (s != CUDNN_STATUS_SUCCESS) {
        if (err && !err->why) err->why = "the operation graph did not finalize", err->s = s;
        cu_be_destroy(graph);
    }
    return s;
}

void cu_be_heuristics(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, int max,
                      cudnnBackendDescriptor_t *cfgs, int *n, int cap, cu_err *err) {
    cudnnBackendDescriptor_t heur = NULL;
    int64_t count = 0, got = 0;
    cudnnStatus_t s = cu_be_create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(heur);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                     NULL);
    int want = (int)(count < max ? count : max);
    if (want > cap - *n) want = cap - *n;
    int made = 0;
    for (; s == CUDNN_STATUS_SUCCESS && made < want; made++)
        s = cu_be_create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[*n + made]);
    if (s == CUDNN_STATUS_SUCCESS && want > 0)
        s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, want, &got,
                                     &cfgs[*n]);
    if (s != CUDNN_STATUS_SUCCESS) {
        if (err && !err->why)
            err->why = mode == CUDNN_HEUR_MODE_A ? "heuristics mode A failed" : "heuristics FALLBACK failed",
            err->s = s;
        got = 0;
    }
    if (got > want) got = want;
    for (int i = (int)got; i < made; i++) cu_be_destroy(&cfgs[*n + i]); /* created but not filled */
    *n += (int)got;
    cu_be_destroy(&heur);
}

const char *cu_be_engine_check(cudnnBackendDescriptor_t cfg, tb_dtype dt, int tf32, int deterministic, int allow_rtc,
                               long long *index, int *rtc, cu_err *err) {
    cudnnBackendDescriptor_t eng = NULL;
    int64_t n = 0, idx = -1;
    cudnnBackendNumericalNote_t num[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    cudnnBackendBehaviorNote_t beh[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    int inum[CUDNN_NUMERICAL_NOTE_TYPE_COUNT], ibeh[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT], nn = 0, nb = 0;
    const char *why = NULL;
    if (rtc) *rtc = 0;
    cudnnStatus_t s = cu_be_create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &idx);
    if (s == CUDNN_STATUS_SUCCESS) {
        s = cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, num);
        for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
            inum[nn++] = (int)num[i];
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        s = cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                     CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, beh);
        for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < n && i < CUDNN_BEHAVIOR_NOTE_TYPE_COUNT; i++) {
            int is_rtc = beh[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
            if (is_rtc && rtc) *rtc = 1;
            if (!(is_rtc && allow_rtc)) ibeh[nb++] = (int)beh[i];
        }
    }
    if (s != CUDNN_STATUS_SUCCESS) {
        if (err && !err->why) err->why = "reading an engine's index and notes", err->s = s;
        why = "unreadable engine";
    } else {
        why = cu_cgraph_reject(inum, nn, ibeh, nb, dt, tf32, deterministic);
    }
    cu_be_destroy(&eng);
    *index = (long long)idx;
    return why;
}

/* A plan whose attributes are set (s: how that went): finalized, and its
 * workspace bytes; destroyed on any failure. */
static cudnnStatus_t finish_plan(cudnnStatus_t s, cudnnBackendDescriptor_t *plan, size_t *ws) {
    int64_t n = 0, bytes = 0;
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*plan);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &bytes);
    if (s == CUDNN_STATUS_SUCCESS && bytes < 0) s = CUDNN_STATUS_BAD_PARAM;
    if (s != CUDNN_STATUS_SUCCESS) cu_be_destroy(plan);
    *ws = s == CUDNN_STATUS_SUCCESS ? (size_t)bytes : 0;
    return s;
}

cudnnStatus_t cu_be_make_plan(cudnnHandle_t h, cudnnBackendDescriptor_t cfg, cudnnBackendDescriptor_t *plan,
                              size_t *ws) {
    cudnnStatus_t s = cu_be_create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &cfg);
    return finish_plan(s, plan, ws);
}

cudnnStatus_t cu_be_make_pack(cudnnBackendDescriptor_t *pack, int n, const int64_t *uids, void *const *ptrs, void *ws) {
    cudnnStatus_t s = cu_be_create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, pack);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*pack);
    if (s != CUDNN_STATUS_SUCCESS) cu_be_destroy(pack);
    return s;
}

float cu_be_time_plan(cudnnHandle_t h, cudaStream_t st, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack,
                      int reps, cudnnStatus_t *bad) {
    cudaEvent_t a, b;
    TB_CUDA_CHECK(cudaEventCreate(&a));
    TB_CUDA_CHECK(cudaEventCreate(&b));
    float ms = -1.0f;
    cudnnStatus_t s = cudnnBackendExecute(h, plan, pack);
    if (s == CUDNN_STATUS_SUCCESS) {
        TB_CUDA_CHECK(cudaEventRecord(a, st));
        for (int i = 0; i < reps && s == CUDNN_STATUS_SUCCESS; i++) s = cudnnBackendExecute(h, plan, pack);
        TB_CUDA_CHECK(cudaEventRecord(b, st));
        TB_CUDA_CHECK(cudaEventSynchronize(b));
        if (s == CUDNN_STATUS_SUCCESS) {
            TB_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
            ms /= (float)reps;
        }
    }
    if (s != CUDNN_STATUS_SUCCESS) {
        (void)cudaGetLastError(); /* a refused launch; a sticky error returns at the next check */
        *bad = s;
        ms = -1.0f;
    }
    TB_CUDA_CHECK(cudaEventDestroy(a));
    TB_CUDA_CHECK(cudaEventDestroy(b));
    return ms;
}

void cu_be_knobs(cudnnBackendDescriptor_t cfg, char *buf, size_t len) {
    cudnnBackendDescriptor_t k[CU_BE_KNOBS] = {NULL};
    int64_t got = 0;
    size_t used = 0;
    buf[0] = '\0';
    int made = 0;
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    for (; made < CU_BE_KNOBS && s == CUDNN_STATUS_SUCCESS; made++)
        s = cu_be_create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k[made]);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, CU_BE_KNOBS,
                                     &got, k);
    if (s != CUDNN_STATUS_SUCCESS || got > CU_BE_KNOBS) { /* unread, or more than read: "" or a cut list is */
        snprintf(buf, len, "?");                           /* another config (never cached) */
        s = CUDNN_STATUS_NOT_SUPPORTED;
    }
    for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < got && i < CU_BE_KNOBS; i++) {
        cudnnBackendKnobType_t type;
        int64_t val = 0, n = 0;
        if (cudnnBackendGetAttribute(k[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type) !=
                CUDNN_STATUS_SUCCESS ||
            cudnnBackendGetAttribute(k[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &val) !=
                CUDNN_STATUS_SUCCESS) {
            snprintf(buf, len, "?"); /* a part of the list is another config */
            break;
        }
        int w = snprintf(buf + used, len - used, "%sk%d=%lld", used ? "," : "", (int)type, (long long)val);
        if (w < 0 || (size_t)w >= len - used) { /* a truncated list would rebuild another config */
            snprintf(buf, len, "?");
            break;
        }
        used += (size_t)w;
    }
    for (int i = 0; i < CU_BE_KNOBS; i++) cu_be_destroy(&k[i]);
}

int cu_be_parse_knobs(const char *knobs, int64_t *types, int64_t *values, int max) {
    int n = 0;
    const char *p = knobs;
    while (*p) {
        long long t, v;
        int used = 0;
        if (n >= max || sscanf(p, "k%lld=%lld%n", &t, &v, &used) != 2 || used < 4 || t < 0) return -1;
        types[n] = t, values[n] = v, n++;
        p += used;
        if (*p == ',') {
            p++;
            if (!*p) return -1;
        } else if (*p) {
            return -1;
        }
    }
    return n;
}

cudnnStatus_t cu_be_cfg_from(cudnnBackendDescriptor_t graph, long long index, const char *knobs,
                             cudnnBackendDescriptor_t *cfg) {
    int64_t types[CU_BE_KNOBS], values[CU_BE_KNOBS], idx = index;
    int nk = cu_be_parse_knobs(knobs, types, values, CU_BE_KNOBS);
    if (nk < 0 || index < 0) return CUDNN_STATUS_BAD_PARAM;
    cudnnBackendDescriptor_t eng = NULL, k[CU_BE_KNOBS] = {NULL};
    *cfg = NULL;
    cudnnStatus_t s = cu_be_create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &idx);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(eng);
    for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < nk; i++) {
        cudnnBackendKnobType_t type = (cudnnBackendKnobType_t)types[i];
        s = cu_be_create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k[i]);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendSetAttribute(k[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendSetAttribute(k[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &values[i]);
        if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(k[i]);
    }
    if (s == CUDNN_STATUS_SUCCESS) s = cu_be_create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, cfg);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eng);
    if (s == CUDNN_STATUS_SUCCESS && nk > 0)
        s = cudnnBackendSetAttribute(*cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, nk, k);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(*cfg);
    if (s != CUDNN_STATUS_SUCCESS) cu_be_destroy(cfg);
    for (int i = 0; i < nk; i++) cu_be_destroy(&k[i]);
    cu_be_destroy(&eng);
    return s;
}

unsigned char *cu_be_plan_blob(cudnnBackendDescriptor_t plan, size_t *len) {
    int64_t n = 0;
    *len = 0;
    if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n, NULL) !=
            CUDNN_STATUS_SUCCESS ||
        n < 1)
        return NULL;
    unsigned char *blob = malloc((size_t)n);
    if (!blob) TB_FATAL("out of host memory");
    int64_t got = 0;
    if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &got, blob) !=
            CUDNN_STATUS_SUCCESS ||
        got < 1 || got > n) {
        free(blob);
        return NULL;
    }
    *len = (size_t)got;
    return blob;
}

cudnnStatus_t cu_be_plan_from_blob(cudnnHandle_t h, const unsigned char *blob, size_t len,
                                   cudnnBackendDescriptor_t *plan, size_t *ws) {
    cudnnStatus_t s = cu_be_create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan);
    /* the order cudnn-frontend's loadFromJson uses: the serialization, then the handle */
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                                     (int64_t)len, blob);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    return finish_plan(s, plan, ws);
}

cudnnStatus_t cu_be_run_once(cudnnHandle_t h, cudaStream_t st, cudnnBackendDescriptor_t plan,
                             cudnnBackendDescriptor_t pack) {
    static atomic_int trials;
    if (tb_fault_nth("engine-refuses", &trials)) return CUDNN_STATUS_NOT_SUPPORTED;
    cudnnStatus_t s = cudnnBackendExecute(h, plan, pack);
    if (s != CUDNN_STATUS_SUCCESS) {
        (void)cudaGetLastError();
        return s;
    }
    TB_CUDA_CHECK(cudaStreamSynchronize(st));
    return s;
}

/* One candidate config: its plan if its notes pass, it finalizes, its
 * workspace fits and (measured or run_once) it runs; NULL with the reason
 * otherwise. */
static cudnnBackendDescriptor_t try_config(cudnnHandle_t h, cudaStream_t st, cudnnBackendDescriptor_t cfg,
                                           const cu_be_search_req *q, cu_be_pick *c, const char **why,
                                           cudnnStatus_t *ws_s, cu_err *err) {
    cudnnBackendDescriptor_t plan = NULL, pack = NULL;
    *why = cu_be_engine_check(cfg, q->dt, q->tf32, q->deterministic, q->allow_rtc, &c->engine, &c->rtc, err);
    if (*why) return NULL;
    cudnnStatus_t s = cu_be_make_plan(h, cfg, &plan, &c->ws);
    if (s != CUDNN_STATUS_SUCCESS) {
        *why = "no engine's plan finalized", *ws_s = s;
        return NULL;
    }
    int runs = q->measure || q->run_once;
    if (c->ws > q->ws_limit || (runs && c->ws > q->tws_bytes)) {
        *why = "every engine needs more workspace than the limit", *ws_s = CUDNN_STATUS_NOT_SUPPORTED;
        cu_be_destroy(&plan);
        return NULL;
    }
    c->ms = -1.0f;
    if (runs) {
        s = cu_be_make_pack(&pack, q->nuids, q->uids, q->ptrs, q->tws);
        if (s == CUDNN_STATUS_SUCCESS && q->measure) c->ms = cu_be_time_plan(h, st, plan, pack, q->reps, &s);
        else if (s == CUDNN_STATUS_SUCCESS) s = cu_be_run_once(h, st, plan, pack);
        cu_be_destroy(&pack);
        if (s != CUDNN_STATUS_SUCCESS || (q->measure && c->ms < 0)) {
            *why = "no engine ran", *ws_s = s;
            cu_be_destroy(&plan);
            return NULL;
        }
    }
    return plan;
}

void cu_be_search(cudnnHandle_t h, cudaStream_t st, cudnnBackendDescriptor_t graph, const cu_be_search_req *q,
                  cu_be_pick *out, cu_err *err) {
    cudnnBackendDescriptor_t cfgs[2 * CU_BE_HEUR_MAX];
    int ncfg = 0, tried = 0, heur = q->heur_max < CU_BE_HEUR_MAX ? q->heur_max : CU_BE_HEUR_MAX;
    const char *last = NULL;
    cudnnStatus_t last_s = CUDNN_STATUS_NOT_SUPPORTED;
    memset(out, 0, sizeof *out);
    out->ms = -1.0f, out->engine = -1;
    cu_be_heuristics(graph, CUDNN_HEUR_MODE_A, heur, cfgs, &ncfg, 2 * CU_BE_HEUR_MAX, err);
    cu_be_heuristics(graph, CUDNN_HEUR_MODE_FALLBACK, heur, cfgs, &ncfg, 2 * CU_BE_HEUR_MAX, err);
    if (ncfg == 0) {
        if (!err->why) err->why = "the heuristics offer no engine", err->s = CUDNN_STATUS_NOT_SUPPORTED;
        return;
    }
    err->why = NULL; /* one mode answering is enough */
    for (int i = 0; i < ncfg && tried < q->candidates; i++) {
        cu_be_pick c = {NULL, NULL, 0, -1.0f, -1, 0};
        const char *why = NULL;
        cudnnBackendDescriptor_t plan = try_config(h, st, cfgs[i], q, &c, &why, &last_s, err);
        if (!plan) {
            last = why;
            continue;
        }
        tried++;
        if (out->plan && !(c.ms < out->ms)) { /* slower than the one kept */
            cu_be_destroy(&plan);
            continue;
        }
        cu_be_destroy(&out->plan);
        cu_be_destroy(&out->cfg);
        c.plan = plan, c.cfg = cfgs[i];
        cfgs[i] = NULL;
        *out = c;
        if (!q->measure) break; /* the heuristics' first that passes (and runs, with run_once) */
    }
    for (int i = 0; i < ncfg; i++) cu_be_destroy(&cfgs[i]);
    if (!out->plan && !err->why) err->why = last ? last : "no engine passed", err->s = last_s;
}
