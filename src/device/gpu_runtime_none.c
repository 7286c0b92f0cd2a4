/* gpu_runtime_none.c - gpu_runtime.h in builds without CUDA: no device, no graph. */
#include <stdio.h>

#include "core/log.h"
#include "src/device/gpu_runtime.h"

int tb_gpu_device_count(char *why, size_t len) {
    if (why) snprintf(why, len, "this build has no CUDA");
    return -1;
}
int tb_gpu_mem_used(double *used, double *total) {
    *used = *total = 0;
    return -1;
}
int tb_gpu_event_seconds(void *from, void *to, double *s) {
    (void)from, (void)to;
    *s = 0;
    return -1;
}
int tb_gpu_bus_id(int device, char *buf, size_t len) {
    (void)device;
    if (len) buf[0] = '\0';
    return -1;
}
void tb_gpu_copy_d2h_async(void *dst, const void *src, size_t bytes, void *stream) {
    (void)dst, (void)src, (void)bytes, (void)stream;
    TB_FATAL("tb_gpu_copy_d2h_async without CUDA");
}
int tb_gpu_capturing(void *stream) {
    (void)stream;
    return 0;
}
void tb_gpu_record_timing(void *event, void *stream) {
    (void)event, (void)stream;
    TB_FATAL("tb_gpu_record_timing without CUDA");
}
int tb_gpu_capture_begin(void *stream, char *why, size_t len) {
    (void)stream;
    snprintf(why, len, "this build has no CUDA");
    return -1;
}
tb_gpu_graph *tb_gpu_capture_end(void *stream, void *const *events, int nevents, char *why, size_t len) {
    (void)stream, (void)events, (void)nevents;
    snprintf(why, len, "this build has no CUDA");
    return NULL;
}
void tb_gpu_capture_abandon(void *stream) { (void)stream; }
void tb_gpu_graph_launch(tb_gpu_graph *g, void *stream, void *const *events) {
    (void)g, (void)stream, (void)events;
    TB_FATAL("tb_gpu_graph_launch without CUDA");
}
int tb_gpu_graph_nodes(const tb_gpu_graph *g) {
    (void)g;
    return 0;
}
void tb_gpu_graph_destroy(tb_gpu_graph *g) { (void)g; }
