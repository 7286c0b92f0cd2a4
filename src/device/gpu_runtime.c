/* gpu_runtime.c - device facts and CUDA graphs for src/ (see gpu_runtime.h). */
#include "src/device/gpu_runtime.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_check.h"
#include "core/log.h"

int tb_gpu_device_count(char *why, size_t len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (why) snprintf(why, len, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return -1;
    }
    if (n == 0 && why) snprintf(why, len, "no CUDA device is visible");
    return n;
}

int tb_gpu_mem_used(double *used, double *total) {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    *used = (double)(t - f);
    *total = (double)t;
    return 0;
}

int tb_gpu_event_seconds(void *from, void *to, double *s) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, (cudaEvent_t)from, (cudaEvent_t)to) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    *s = (double)ms * 1e-3;
    return 0;
}

int tb_gpu_bus_id(int device, char *buf, size_t len) {
    if (cudaDeviceGetPCIBusId(buf, (int)len, device) != cudaSuccess) {
        (void)cudaGetLastError();
        if (len) buf[0] = '\0';
        return -1;
    }
    return 0;
}

void tb_gpu_copy_d2h_async(void *dst, const void *src, size_t bytes, void *stream) {
    TB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)stream));
}

int tb_gpu_capturing(void *stream) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    TB_CUDA_CHECK(cudaStreamIsCapturing((cudaStream_t)stream, &cs));
    return cs != cudaStreamCaptureStatusNone;
}

void tb_gpu_record_timing(void *event, void *stream) {
    if (tb_gpu_capturing(stream))
        TB_CUDA_CHECK(cudaEventRecordWithFlags((cudaEvent_t)event, (cudaStream_t)stream, cudaEventRecordExternal));
    else
        TB_CUDA_CHECK(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
}

struct tb_gpu_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int nodes;
    int nevents;
    cudaGraphNode_t *ev_node;   /* [nevents] node recording event i (NULL: not in the graph) */
    cudaEvent_t *current;       /* [nevents] what each node records now */
};

int tb_gpu_capture_begin(void *stream, char *why, size_t len) {
    cudaError_t e = cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, len, "cudaStreamBeginCapture: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

tb_gpu_graph *tb_gpu_capture_end(void *stream, void *const *events, int nevents, char *why, size_t len) {
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &graph);
    if (e != cudaSuccess || !graph) {
        (void)cudaGetLastError();
        snprintf(why, len, "the capture failed (cudaStreamEndCapture: %s)", cudaGetErrorString(e));
        if (graph) (void)cudaGraphDestroy(graph);
        return NULL;
    }
    tb_gpu_graph *g = calloc(1, sizeof *g);
    if (!g) TB_FATAL("out of host memory");
    g->graph = graph;
    g->nevents = nevents;
    g->ev_node = calloc((size_t)(nevents ? nevents : 1), sizeof *g->ev_node);
    g->current = calloc((size_t)(nevents ? nevents : 1), sizeof *g->current);
    if (!g->ev_node || !g->current) TB_FATAL("out of host memory");
    size_t n = 0;
    TB_CUDA_CHECK(cudaGraphGetNodes(graph, NULL, &n));
    cudaGraphNode_t *nodes = calloc(n ? n : 1, sizeof *nodes);
    if (!nodes) TB_FATAL("out of host memory");
    TB_CUDA_CHECK(cudaGraphGetNodes(graph, nodes, &n));
    g->nodes = (int)n;
    for (size_t i = 0; i < n; i++) {
        enum cudaGraphNodeType t;
        TB_CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &t));
        if (t != cudaGraphNodeTypeEventRecord) continue;
        cudaEvent_t ev;
        TB_CUDA_CHECK(cudaGraphEventRecordNodeGetEvent(nodes[i], &ev));
        for (int k = 0; k < nevents; k++)
            if ((cudaEvent_t)events[k] == ev) {
                if (g->ev_node[k]) TB_FATAL("timing event %d is recorded twice in the captured step", k);
                g->ev_node[k] = nodes[i];
                g->current[k] = ev;
            }
    }
    free(nodes);
    e = cudaGraphInstantiate(&g->exec, graph, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, len, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
        tb_gpu_graph_destroy(g);
        return NULL;
    }
    return g;
}

void tb_gpu_capture_abandon(void *stream) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
        /* an invalidated capture returns no graph (and an error): either way it is over */
        cudaGraph_t graph = NULL;
        cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &graph);
        tb_info("# cuda graph: the abandoned capture ended: %s", e == cudaSuccess ? "no error" : cudaGetErrorString(e));
        if (graph) (void)cudaGraphDestroy(graph);
    }
    (void)cudaGetLastError();
}

void tb_gpu_graph_launch(tb_gpu_graph *g, void *stream, void *const *events) {
    if (events)
        for (int k = 0; k < g->nevents; k++)
            if (g->ev_node[k] && g->current[k] != (cudaEvent_t)events[k]) {
                TB_CUDA_CHECK(cudaGraphExecEventRecordNodeSetEvent(g->exec, g->ev_node[k], (cudaEvent_t)events[k]));
                g->current[k] = (cudaEvent_t)events[k];
            }
    TB_CUDA_CHECK(cudaGraphLaunch(g->exec, (cudaStream_t)stream));
}

int tb_gpu_graph_nodes(const tb_gpu_graph *g) { return g->nodes; }

void tb_gpu_graph_destroy(tb_gpu_graph *g) {
    if (!g) return;
    if (g->exec) TB_CUDA_CHECK(cudaGraphExecDestroy(g->exec));
    if (g->graph) TB_CUDA_CHECK(cudaGraphDestroy(g->graph));
    free(g->ev_node);
    free(g->current);
    free(g);
}
