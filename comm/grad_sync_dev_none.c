/* grad_sync_dev_none.c - grad_sync_dev.h in builds without CUDA: there is no
 * device buffer to reduce, and nothing calls it (the trainer takes the host
 * path, comm/grad_sync.c, on the CPU backend). */
#include "comm/grad_sync_dev.h"
#include "core/log.h"

tb_grad_sync_dev *tb_grad_sync_dev_create(const tb_grad_sync_dev_opts *o) {
    (void)o;
    TB_FATAL("the device gradient path needs a CUDA build");
}
void tb_grad_sync_dev_destroy(tb_grad_sync_dev *g) { (void)g; }
int tb_grad_sync_dev_bucket_count(const tb_grad_sync_dev *g) {
    (void)g;
    return 0;
}
void tb_grad_sync_dev_bucket(const tb_grad_sync_dev *g, int i, size_t *offset, size_t *count) {
    (void)g, (void)i;
    *offset = *count = 0;
}
int tb_grad_sync_dev_staged(const tb_grad_sync_dev *g) {
    (void)g;
    return 0;
}
size_t tb_grad_sync_dev_device_bytes(const tb_grad_sync_dev *g) {
    (void)g;
    return 0;
}
void *tb_grad_sync_dev_stream(const tb_grad_sync_dev *g) {
    (void)g;
    return NULL;
}
void tb_grad_sync_dev_bcast(tb_grad_sync_dev *g, void *buf, size_t count, tb_dev_type t, int root) {
    (void)g, (void)buf, (void)count, (void)t, (void)root;
}
void tb_grad_sync_dev_begin(tb_grad_sync_dev *g, int64_t step, int slot) { (void)g, (void)step, (void)slot; }
void tb_grad_sync_dev_ready(void *g, size_t offset, size_t count) { (void)g, (void)offset, (void)count; }
int tb_grad_sync_dev_launched(const tb_grad_sync_dev *g) {
    (void)g;
    return 0;
}
void tb_grad_sync_dev_finish(tb_grad_sync_dev *g, double *host_wait_s) {
    (void)g;
    if (host_wait_s) *host_wait_s = 0;
}
int tb_grad_sync_dev_timing_events(tb_grad_sync_dev *g, int slot, void **events) {
    (void)g, (void)slot, (void)events;
    return 0;
}
int tb_grad_sync_dev_bucket_times(tb_grad_sync_dev *g, int slot, void *ref_event, double *ready, double *start,
                                  double *end) {
    (void)g, (void)slot, (void)ref_event, (void)ready, (void)start, (void)end;
    return 0;
}
void tb_grad_sync_dev_stats(tb_grad_sync_dev *g, int slot, void *ref_event, tb_grad_sync_step *st) {
    (void)g, (void)slot, (void)ref_event, (void)st;
}
