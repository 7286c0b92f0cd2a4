/* model.c - tb_model: buffers, batch upload, loss, optimiser step and host
 * transfers around the graph (see model.h). */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "src/core/log.h"

tb_model_opts tb_model_default_opts(void) {
    tb_model_opts o = {TB_REAL_DTYPE, TB_NCHW, 1};
    return o;
}

/* float32 host values -> tb_real device memory (a plain copy unless tb_real
 * is double). */
static void upload_f32(tb_model *m, tb_real *dst, const float *src, size_t n) {
    if (sizeof(tb_real) == sizeof(float)) {
        m->be->copy_h2d(m->be, dst, src, n * sizeof(float));
        return;
    }
    tb_real *tmp = malloc(n * sizeof *tmp);
    if (!tmp) TB_FATAL("out of host memory");
    for (size_t i = 0; i < n; i++) tmp[i] = (tb_real)src[i];
    m->be->copy_h2d(m->be, dst, tmp, n * sizeof *tmp);
    m->be->sync(m->be);
    free(tmp);
}

/* tb_real device memory -> float32 host values (rounded to nearest). */
static void download_f32(tb_model *m, float *dst, const tb_real *src, size_t n) {
    if (sizeof(tb_real) == sizeof(float)) {
        m->be->copy_d2h(m->be, dst, src, n * sizeof(float));
        return;
    }
    tb_real *tmp = malloc(n * sizeof *tmp);
    if (!tmp) TB_FATAL("out of host memory");
    m->be->copy_d2h(m->be, tmp, src, n * sizeof *tmp);
    for (size_t i = 0; i < n; i++) dst[i] = (float)tmp[i];
    free(tmp);
}

tb_model *tb_model_create(const tb_resnet_config *cfg, tb_backend *be, int max_batch,
                          int height, int width, const tb_model_opts *opts) {
    tb_model_opts def = tb_model_default_opts();
    if (!opts) opts = &def;
    tb_backend_require(be, opts->dtype, opts->layout);
    TB_ASSERT(max_batch >= 1 && height >= 1 && width >= 1 && cfg->classes >= 1);

    tb_model *m = calloc(1, sizeof *m);
    if (!m) TB_FATAL("out of host memory");
    m->cfg = *cfg;
    m->be = be;
    m->max_batch = max_batch;
    m->height = height;
    m->width = width;
    m->g.max_batch = max_batch;
    m->g.dtype = opts->dtype;
    m->g.layout = opts->layout;
    tb_resnet_build(cfg, height, width, opts->fuse, &m->pt, &m->g);
    tb_graph_allocate(&m->g, be, &m->pt);

    size_t nt = m->pt.n_train * sizeof(tb_real);
    m->params = be->alloc(be, nt);
    m->grads = be->alloc(be, nt);
    m->momentum = be->alloc(be, nt);
    m->state = be->alloc(be, m->pt.n_state * sizeof(tb_real) + 1);
    m->loss = be->alloc(be, sizeof(tb_real));
    m->labels = be->alloc(be, (size_t)max_batch * sizeof(int32_t));
    be->zero(be, m->params, nt);
    be->zero(be, m->grads, nt);
    be->zero(be, m->momentum, nt);
    be->zero(be, m->state, m->pt.n_state * sizeof(tb_real));
    m->counters = calloc((size_t)m->pt.n_counters + 1, sizeof *m->counters);
    m->segs = calloc((size_t)m->pt.count + 1, sizeof *m->segs);
    if (!m->counters || !m->segs) TB_FATAL("out of host memory");
    return m;
}

void tb_model_destroy(tb_model *m) {
    if (!m) return;
    tb_backend *be = m->be;
    tb_graph_free(&m->g, be);
    be->release(be, m->params);
    be->release(be, m->grads);
    be->release(be, m->momentum);
    be->release(be, m->state);
    be->release(be, m->loss);
    be->release(be, m->labels);
    free(m->counters);
    free(m->segs);
    tb_params_free(&m->pt);
    free(m);
}

void tb_model_init(tb_model *m, uint64_t seed) {
    size_t nt = m->pt.n_train, ns = m->pt.n_state;
    tb_real *hp = malloc(nt * sizeof *hp), *hs = malloc((ns + 1) * sizeof *hs);
    if (!hp || !hs) TB_FATAL("out of host memory");
    tb_resnet_init(&m->cfg, &m->pt, seed, hp, hs, m->counters);
    m->be->copy_h2d(m->be, m->params, hp, nt * sizeof *hp);
    m->be->copy_h2d(m->be, m->state, hs, ns * sizeof *hs);
    m->be->zero(m->be, m->momentum, nt * sizeof(tb_real));
    m->be->sync(m->be);
    free(hp);
    free(hs);
}

const char *tb_model_degenerate_bn(const tb_model *m, int n) {
    for (int i = 0; i < m->g.nnodes; i++) {
        const tb_node *nd = &m->g.nodes[i];
        const tb_act *x = &m->g.acts[nd->in];
        if (nd->kind == TB_NODE_BN && (long)n * x->h * x->w <= 1) return nd->name;
    }
    return NULL;
}

void tb_model_set_batch(tb_model *m, const float *images, const int32_t *labels, int n) {
    TB_ASSERT(n >= 1 && n <= m->max_batch);
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= m->cfg.classes)
            tb_die("label %d of sample %d is outside [0, %d): the data's classes do not match "
                   "the model's --classes",
                   labels[i], i, m->cfg.classes);
    tb_tensor x = tb_graph_act(&m->g, m->g.input, n);
    upload_f32(m, x.data, images, tb_tensor_numel(&x));
    m->be->copy_h2d(m->be, m->labels, labels, (size_t)n * sizeof *labels);
    m->batch = n;
}

static tb_graph_params graph_params(tb_model *m) {
    tb_graph_params p = {&m->pt, m->params, m->grads, m->state, m->counters};
    return p;
}

void tb_model_forward(tb_model *m, int train) {
    tb_graph_params p = graph_params(m);
    tb_graph_forward(&m->g, m->be, &p, m->batch, train);
}

void tb_model_loss(tb_model *m, double label_smoothing, double grad_scale) {
    tb_tensor logits = tb_graph_act(&m->g, m->g.output, m->batch);
    tb_tensor dlogits = tb_graph_grad(&m->g, m->g.output, m->batch);
    m->be->softmax_xent(m->be, &logits, m->labels, label_smoothing, grad_scale, m->loss,
                         &dlogits);
}

void tb_model_backward(tb_model *m, tb_grad_ready_fn ready, void *ready_ctx) {
    tb_graph_params p = graph_params(m);
    tb_graph_backward(&m->g, m->be, &p, m->batch, ready, ready_ctx);
}

void tb_model_sgd_step(tb_model *m, const tb_sgd_args *a, double wd, int no_decay_bn_bias) {
    /* Consecutive tensors with the same decay form one segment. */
    int nseg = 0;
    for (int i = 0; i < m->pt.count; i++) {
        const tb_param *p = &m->pt.items[i];
        if (tb_param_store_of(p->role) != TB_STORE_TRAIN) continue;
        double d = (no_decay_bn_bias && tb_param_is_bn_or_bias(p->role)) ? 0.0 : wd;
        if (nseg > 0 && m->segs[nseg - 1].weight_decay == d &&
            m->segs[nseg - 1].offset + m->segs[nseg - 1].count == p->offset) {
            m->segs[nseg - 1].count += p->numel;
        } else {
            tb_sgd_segment s = {p->offset, p->numel, d};
            m->segs[nseg++] = s;
        }
    }
    m->be->sgd_update(m->be, a, m->segs, nseg, m->params, m->grads, m->momentum);
}

float tb_model_read_loss(tb_model *m) {
    float v;
    download_f32(m, &v, m->loss, 1);
    return v;
}

void tb_model_read_logits(tb_model *m, float *dst) {
    tb_tensor y = tb_graph_act(&m->g, m->g.output, m->batch);
    download_f32(m, dst, y.data, tb_tensor_numel(&y));
}

/* Device address of tensor i in its store. */
static tb_real *tensor_addr(tb_model *m, int i, tb_real *train_base) {
    const tb_param *p = &m->pt.items[i];
    switch (tb_param_store_of(p->role)) {
    case TB_STORE_TRAIN: return train_base + p->offset;
    case TB_STORE_STATE: return m->state + p->offset;
    default: return NULL;
    }
}

void tb_model_get_tensor(tb_model *m, int i, void *dst) {
    const tb_param *p = &m->pt.items[i];
    if (p->role == TB_ROLE_BN_COUNTER) {
        *(int64_t *)dst = m->counters[p->offset];
        return;
    }
    download_f32(m, dst, tensor_addr(m, i, m->params), p->numel);
}

void tb_model_set_tensor(tb_model *m, int i, const void *src) {
    const tb_param *p = &m->pt.items[i];
    if (p->role == TB_ROLE_BN_COUNTER) {
        m->counters[p->offset] = *(const int64_t *)src;
        return;
    }
    upload_f32(m, tensor_addr(m, i, m->params), src, p->numel);
    m->be->sync(m->be);
}

void tb_model_get_grad(tb_model *m, int i, float *dst) {
    const tb_param *p = &m->pt.items[i];
    TB_ASSERT(tb_param_store_of(p->role) == TB_STORE_TRAIN);
    download_f32(m, dst, m->grads + p->offset, p->numel);
}

void tb_model_get_momentum(tb_model *m, int i, float *dst) {
    const tb_param *p = &m->pt.items[i];
    TB_ASSERT(tb_param_store_of(p->role) == TB_STORE_TRAIN);
    download_f32(m, dst, m->momentum + p->offset, p->numel);
}

void tb_model_set_momentum(tb_model *m, int i, const float *src) {
    const tb_param *p = &m->pt.items[i];
    TB_ASSERT(tb_param_store_of(p->role) == TB_STORE_TRAIN);
    upload_f32(m, m->momentum + p->offset, src, p->numel);
    m->be->sync(m->be);
}
