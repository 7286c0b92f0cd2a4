/* model.c - tb_model: buffers, batch upload, loss, optimiser step and host
 * transfers around the graph (see model.h). */
#include "model/model.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/layout.h"

/* Host-set step scalars and labels go up through small rings of pinned
 * slots, each reused only once the copy that last read it has completed. */
#define TB_SCALAR_RING TB_MODEL_RING

static const struct {
    const char *name;
    tb_precision p;
} k_precisions[] = {
    {"fp32", TB_PREC_FP32}, {"tf32", TB_PREC_TF32}, {"bf16", TB_PREC_BF16}, {"fp16", TB_PREC_FP16},
};

int tb_precision_parse(const char *s, tb_precision *p) {
    for (size_t i = 0; i < sizeof k_precisions / sizeof k_precisions[0]; i++)
        if (strcmp(s, k_precisions[i].name) == 0) {
            *p = k_precisions[i].p;
            return 0;
        }
    if (TB_REAL_DTYPE == TB_F64 && strcmp(s, "fp64") == 0) {
        *p = TB_PREC_FP32; /* the fp64 build's tb_real path */
        return 0;
    }
    return -1;
}

const char *tb_precision_name(tb_precision p) {
    for (size_t i = 0; i < sizeof k_precisions / sizeof k_precisions[0]; i++)
        if (k_precisions[i].p == p) return k_precisions[i].name;
    return "?";
}

tb_precision tb_precision_default(const tb_backend *be) {
    return (be->caps & TB_CAP_BF16) && (be->caps & TB_CAP_NHWC) ? TB_PREC_BF16 : TB_PREC_FP32;
}

void tb_precision_backend_opts(tb_precision p, tb_backend_opts *bo) { bo->tf32 = p == TB_PREC_TF32; }

int tb_fuse_parse(const char *s, int *fuse) {
    static const char *names[] = {"off", "bn", "graph", "fastest"};
    if (strcmp(s, "auto") == 0) {
        *fuse = TB_FUSE_BN;
        return 0;
    }
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *fuse = i;
            return 0;
        }
    return -1;
}

const char *tb_fuse_name(int fuse) {
    return fuse == TB_FUSE_FASTEST ? "fastest" : fuse == TB_FUSE_GRAPH ? "graph" : fuse == TB_FUSE_BN ? "bn" : "off";
}

tb_model_opts tb_model_default_opts(void) {
    tb_model_opts o;
    memset(&o, 0, sizeof o);
    o.dtype = TB_REAL_DTYPE;
    o.layout = TB_NCHW;
    o.fuse = TB_FUSE_BN;
    return o;
}

int tb_loss_scale_check(double s, char *why, size_t len) {
    if (!(s > 0 && s < FLT_MIN)) return 0;
    snprintf(why, len, "--loss-scale %g is below the smallest normal float (%g): the scaled loss would underflow to "
             "0; give 0 (the precision's default) or a scale of at least %g",
             s, (double)FLT_MIN, (double)FLT_MIN);
    return -1;
}

tb_model_opts tb_model_opts_for(tb_precision p) {
    tb_model_opts o = tb_model_default_opts();
    if (p == TB_PREC_BF16 || p == TB_PREC_FP16) {
        o.dtype = p == TB_PREC_BF16 ? TB_BF16 : TB_F16;
        o.layout = TB_NHWC;
    }
    if (p == TB_PREC_FP16) {
        o.loss_scaling.init_scale = 65536.0;
        o.loss_scaling.growth_interval = 2000;
    }
    return o;
}

/* n consecutive values into device scalars at dst, queued on the compute
 * stream from a pinned slot (phase: for the op profile). */
static void upload_scalars(tb_model *m, tb_real *dst, const double *v, int n, tb_op_phase phase) {
    tb_backend *be = m->be;
    int k = m->sc_next;
    m->sc_next = (k + 1) % TB_SCALAR_RING;
    be->event_wait(be, m->sc_events[k]); /* the last copy out of slot k is done (RING uploads ago) */
    for (int i = 0; i < n; i++) m->sc_stage[2 * k + i] = (tb_real)v[i];
    tb_op_prof_begin(m->g.prof, "step_scalars", phase, TB_OPK_UPLOAD);
    be->copy_h2d_async(be, dst, &m->sc_stage[2 * k], (size_t)n * sizeof(tb_real), NULL);
    tb_op_prof_end(m->g.prof);
    be->event_record(be, m->sc_events[k], NULL);
}

static void upload_scalar(tb_model *m, tb_real *dst, double v, tb_op_phase phase) {
    upload_scalars(m, dst, &v, 1, phase);
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

    if (opts->loss_scaling.init_scale > 0 && opts->loss_scaling.growth_interval < 1)
        TB_FATAL("loss scaling needs a growth interval >= 1");

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
    m->g.fuse_graph = opts->fuse >= TB_FUSE_GRAPH;
    m->g.fuse_timed = opts->fuse == TB_FUSE_FASTEST;
    tb_resnet_build(cfg, height, width, opts->fuse != TB_FUSE_OFF, &m->pt, &m->g);

    /* parameters first: the graph's conv plans may run on the real buffers */
    size_t nt = m->pt.n_train * sizeof(tb_real);
    m->params = be->alloc(be, nt);
    m->grads = be->alloc(be, nt);
    m->momentum = be->alloc(be, nt);
    m->state = be->alloc(be, m->pt.n_state * sizeof(tb_real) + 1);
    m->labels = be->alloc(be, 2 * (size_t)max_batch * sizeof(int32_t)); /* labels, rows */
    be->zero(be, m->params, nt);
    be->zero(be, m->grads, nt);
    be->zero(be, m->momentum, nt);
    be->zero(be, m->state, m->pt.n_state * sizeof(tb_real));
    if (opts->dtype != TB_REAL_DTYPE || opts->layout != TB_NCHW || opts->op_copies) {
        size_t ob = m->pt.n_train * tb_dtype_size(opts->dtype);
        m->op_params = be->alloc(be, ob);
        m->op_grads = be->alloc(be, ob);
        be->zero(be, m->op_params, ob);
        be->zero(be, m->op_grads, ob);
        m->in_f32 = be->alloc(be, (size_t)max_batch * 3 * height * width * sizeof(float));
    }

    /* the step scalars: lr 0, grad scale 1, loss scale 1 or the initial scale */
    m->loss_scaling = opts->loss_scaling.init_scale > 0;
    m->growth_interval = opts->loss_scaling.growth_interval;
    tb_step_scalars sc0;
    memset(&sc0, 0, sizeof sc0);
    sc0.grad_scale = 1;
    sc0.loss_scale = m->loss_scaling ? (tb_real)opts->loss_scaling.init_scale : 1;
    m->sc = be->alloc(be, sizeof *m->sc);
    be->copy_h2d(be, m->sc, &sc0, sizeof sc0);
    m->loss = &m->sc->loss;
    m->sc_stage = be->host_alloc(be, 2 * TB_SCALAR_RING * sizeof *m->sc_stage);
    m->sc_events = calloc(TB_SCALAR_RING, sizeof *m->sc_events);
    m->label_stage = be->host_alloc(be, (size_t)TB_MODEL_RING * 2 * (size_t)max_batch * sizeof *m->label_stage);
    m->label_events = calloc(TB_MODEL_RING, sizeof *m->label_events);
    if (!m->sc_events || !m->label_events) TB_FATAL("out of host memory");
    for (int k = 0; k < TB_SCALAR_RING; k++) m->sc_events[k] = be->event_create(be, 0);
    for (int k = 0; k < TB_MODEL_RING; k++) m->label_events[k] = be->event_create(be, 0);

    m->counters = calloc((size_t)m->pt.n_counters + 1, sizeof *m->counters);
    m->segs = calloc((size_t)m->pt.count + 1, sizeof *m->segs);
    if (!m->counters || !m->segs) TB_FATAL("out of host memory");

    tb_graph_params gp = {&m->pt, m->params, m->grads, m->state, m->counters, m->op_params,
                          m->op_grads};
    tb_graph_allocate(&m->g, be, &gp);
    m->op_stale = m->op_params != NULL;
    be->sync(be);
    return m;
}

void tb_model_destroy(tb_model *m) {
    if (!m) return;
    tb_backend *be = m->be;
    be->sync(be);
    tb_graph_free(&m->g, be);
    be->release(be, m->params);
    be->release(be, m->grads);
    be->release(be, m->momentum);
    be->release(be, m->state);
    be->release(be, m->labels);
    be->release(be, m->sc);
    if (m->op_params) be->release(be, m->op_params);
    if (m->op_grads) be->release(be, m->op_grads);
    if (m->in_f32) be->release(be, m->in_f32);
    if (m->in_u8) be->release(be, m->in_u8);
    for (int k = 0; k < TB_SCALAR_RING; k++) be->event_destroy(be, m->sc_events[k]);
    for (int k = 0; k < TB_MODEL_RING; k++) be->event_destroy(be, m->label_events[k]);
    free(m->sc_events);
    free(m->label_events);
    be->host_free(be, m->sc_stage);
    be->host_free(be, m->label_stage);
    free(m->counters);
    free(m->segs);
    free(m->wc_src);
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
    m->op_stale = m->op_params != NULL;
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

/* Labels [n] (checked against the classes) and, for a resident batch,
 * pool rows [n] after them, into m->labels [2*max_batch] in one copy from
 * a pinned slot, asynchronously: no host wait in the step (a pageable copy
 * may wait for the stream). Returns the rows' device copy (NULL without). */
static const int32_t *upload_labels(tb_model *m, const int32_t *labels, const int32_t *rows, int n) {
    TB_ASSERT(n >= 1 && n <= m->max_batch);
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= m->cfg.classes)
            tb_die("label %d of sample %d is outside [0, %d): the data's classes do not match "
                   "the model's --classes",
                   labels[i], i, m->cfg.classes);
    tb_backend *be = m->be;
    int k = m->label_next;
    m->label_next = (k + 1) % TB_MODEL_RING;
    be->event_wait(be, m->label_events[k]); /* the copy out of slot k RING batches ago */
    int32_t *slot = m->label_stage + (size_t)k * 2 * (size_t)m->max_batch; /* [2*max_batch] */
    size_t count = rows ? 2 * (size_t)n : (size_t)n;
    memcpy(slot, labels, (size_t)n * sizeof *labels);
    if (rows) memcpy(slot + n, rows, (size_t)n * sizeof *rows);
    tb_op_prof_begin(m->g.prof, "labels", TB_OPP_INPUT, TB_OPK_UPLOAD); /* and the rows */
    be->copy_h2d_async(be, m->labels, slot, count * sizeof *slot, NULL);
    tb_op_prof_end(m->g.prof);
    be->event_record(be, m->label_events[k], NULL);
    m->batch = n;
    return rows ? m->labels + n : NULL;
}

void tb_model_set_labels(tb_model *m, const int32_t *labels, int n) { upload_labels(m, labels, NULL, n); }

void tb_model_set_batch(tb_model *m, const float *images, const int32_t *labels, int n) {
    tb_model_set_labels(m, labels, n);
    tb_tensor x = tb_graph_act(&m->g, m->g.input, n);
    tb_op_prof *prof = m->g.prof;
    if (!m->in_f32) { /* the input activation is tb_real NCHW: straight in */
        tb_op_prof_begin(prof, "images", TB_OPP_INPUT, TB_OPK_UPLOAD);
        upload_f32(m, x.data, images, tb_tensor_numel(&x));
        tb_op_prof_end(prof);
        return;
    }
    tb_tensor src = {m->in_f32, n, 3, m->height, m->width, TB_F32, TB_NCHW};
    tb_op_prof_begin(prof, "images", TB_OPP_INPUT, TB_OPK_UPLOAD);
    m->be->copy_h2d(m->be, m->in_f32, images, tb_tensor_numel(&src) * sizeof(float));
    tb_op_prof_end(prof);
    tb_op_prof_begin(prof, "input", TB_OPP_INPUT, TB_OPK_INPUT);
    m->be->convert(m->be, &src, &x, 0);
    tb_op_prof_end(prof);
}

void tb_model_set_batch_rows(tb_model *m, const float *pool, int64_t pool_rows, const int32_t *rows,
                             const int32_t *labels, int n) {
    TB_ASSERT(pool && rows && n >= 1 && n <= m->max_batch);
    for (int i = 0; i < n; i++) /* the gather on the device reads what it is told */
        if (rows[i] < 0 || rows[i] >= pool_rows)
            TB_FATAL("tb_model_set_batch_rows: sample %d names row %d of a pool of %lld rows", i, rows[i],
                     (long long)pool_rows);
    const int32_t *drows = upload_labels(m, labels, rows, n); /* [n] device, after the labels */
    tb_tensor x = tb_graph_act(&m->g, m->g.input, n);        /* [n,3,H,W] its dtype and layout */
    tb_op_prof_begin(m->g.prof, "input", TB_OPP_INPUT, TB_OPK_INPUT);
    m->be->input_rows(m->be, pool, drows, &x);
    tb_op_prof_end(m->g.prof);
}

uint8_t *tb_model_u8_staging(tb_model *m, uint8_t **flip) {
    if (!m->in_u8) {
        size_t bytes = (size_t)m->max_batch * m->height * m->width * 3;
        m->in_u8 = m->be->alloc(m->be, bytes + (size_t)m->max_batch);
        m->in_flip = m->in_u8 + bytes;
    }
    if (flip) *flip = m->in_flip;
    return m->in_u8;
}

void tb_model_input_from_u8(tb_model *m, int n, int use_flip, const tb_input_norm *norm) {
    TB_ASSERT(m->in_u8 && n >= 1 && n <= m->max_batch);
    tb_tensor x = tb_graph_act(&m->g, m->g.input, n);
    tb_op_prof_begin(m->g.prof, "input", TB_OPP_INPUT, TB_OPK_INPUT);
    m->be->input_u8(m->be, m->in_u8, use_flip ? m->in_flip : NULL, norm, &x);
    tb_op_prof_end(m->g.prof);
}

void tb_model_set_batch_u8(tb_model *m, const uint8_t *images, const uint8_t *flip,
                           const int32_t *labels, int n, const tb_input_norm *norm) {
    tb_model_set_labels(m, labels, n);
    uint8_t *dflip;
    uint8_t *dimg = tb_model_u8_staging(m, &dflip);
    tb_op_prof *prof = m->g.prof;
    tb_op_prof_begin(prof, "images", TB_OPP_INPUT, TB_OPK_UPLOAD);
    m->be->copy_h2d(m->be, dimg, images, (size_t)n * m->height * m->width * 3);
    tb_op_prof_end(prof);
    if (flip) {
        tb_op_prof_begin(prof, "flips", TB_OPP_INPUT, TB_OPK_UPLOAD);
        m->be->copy_h2d(m->be, dflip, flip, (size_t)n);
        tb_op_prof_end(prof);
    }
    tb_model_input_from_u8(m, n, flip != NULL, norm);
}

static tb_graph_params graph_params(tb_model *m) {
    tb_graph_params p = {&m->pt, m->params, m->grads, m->state, m->counters, m->op_params,
                         m->op_grads};
    return p;
}

/* The op copies of the conv and fc weights from the master weights, as one
 * convert_many (phase: for the op profile, which names it "weights"). The
 * pairs are listed at the first refresh and kept: every buffer they name is
 * the model's own, allocated once. */
static void refresh_op_weights(tb_model *m, tb_op_phase phase) {
    if (!m->wc_src) {
        tb_graph_params p = graph_params(m);
        m->wc_src = malloc(2 * (size_t)m->pt.count * sizeof *m->wc_src);
        if (!m->wc_src) TB_FATAL("out of host memory");
        m->wc_dst = m->wc_src + m->pt.count;
        for (int i = 0; i < m->pt.count; i++) {
            const tb_param *q = &m->pt.items[i];
            if (q->role != TB_ROLE_CONV_WEIGHT && q->role != TB_ROLE_FC_WEIGHT) continue;
            tb_tensor *dst = &m->wc_dst[m->wc_n], *src = &m->wc_src[m->wc_n++];
            *dst = tb_graph_weight(&m->g, &p, i);
            *src = *dst;
            src->data = m->params + q->offset;
            src->dtype = TB_REAL_DTYPE;
            src->layout = TB_NCHW;
        }
    }
    tb_op_prof_begin(m->g.prof, "weights", phase, TB_OPK_WEIGHT_CONVERT);
    m->be->convert_many(m->be, m->wc_src, m->wc_dst, m->wc_n, 0);
    tb_op_prof_end(m->g.prof);
    m->op_stale = 0;
}

void tb_model_preset_scalars(tb_model *m, double lr, double grad_scale) {
    /* lr and grad_scale are the block's first two fields (backend.h) */
    double v[2] = {lr, grad_scale};
    upload_scalars(m, &m->sc->lr, v, 2, TB_OPP_INPUT);
    m->preset = 1;
    m->preset_lr = lr;
    m->preset_grad_scale = grad_scale;
}

void tb_model_advance_counters(tb_model *m) {
    for (int i = 0; i < m->pt.n_counters; i++) m->counters[i] += 1;
}

void tb_model_set_nonfinite_skip(tb_model *m, int on) { m->skip_nonfinite = on; }

void tb_model_forward(tb_model *m, int train) {
    if (m->op_stale) refresh_op_weights(m, TB_OPP_FORWARD);
    tb_graph_params p = graph_params(m);
    tb_graph_forward(&m->g, m->be, &p, m->batch, train);
}

void tb_model_loss(tb_model *m, double label_smoothing, double grad_scale) {
    tb_tensor logits = tb_graph_act(&m->g, m->g.output, m->batch);
    tb_tensor dlogits = tb_graph_grad(&m->g, m->g.output, m->batch);
    if (m->preset) {
        if (grad_scale != m->preset_grad_scale)
            TB_FATAL("tb_model_loss: grad scale %g, but %g was preset for this step", grad_scale,
                     m->preset_grad_scale);
    } else {
        upload_scalar(m, &m->sc->grad_scale, grad_scale, TB_OPP_LOSS);
    }
    tb_op_prof_begin(m->g.prof, "loss", TB_OPP_LOSS, TB_OPK_LOSS);
    m->be->softmax_xent(m->be, &logits, m->labels, label_smoothing, m->sc, &dlogits);
    tb_op_prof_end(m->g.prof);
}

void tb_model_backward(tb_model *m, tb_grad_ready_fn ready, void *ready_ctx) {
    tb_graph_params p = graph_params(m);
    tb_graph_backward(&m->g, m->be, &p, m->batch, ready, ready_ctx);
}

void tb_model_sgd_step(tb_model *m, const tb_sgd_args *a, double wd, int no_decay_bn_bias) {
    if (a->grad_scale != 1.0)
        TB_FATAL("tb_model_sgd_step: grad_scale %g; gradients are unscaled by the loss scaler, "
                 "pass 1", a->grad_scale);
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
    tb_backend *be = m->be;
    if (m->preset) {
        if (a->lr != m->preset_lr)
            TB_FATAL("tb_model_sgd_step: lr %g, but %g was preset for this step", a->lr, m->preset_lr);
        m->preset = 0; /* the step's last reader */
    } else {
        upload_scalar(m, &m->sc->lr, a->lr, TB_OPP_UPDATE);
    }
    tb_op_prof *prof = m->g.prof;
    int check = m->loss_scaling || m->skip_nonfinite;
    if (check) {
        tb_op_prof_begin(prof, "gradients", TB_OPP_UPDATE, TB_OPK_NONFINITE_CHECK);
        be->check_nonfinite(be, m->grads, m->pt.n_train, m->sc);
        tb_op_prof_end(prof);
    }
    tb_sgd_op op = {a->momentum, a->nesterov, check, m->sc};
    tb_op_prof_begin(prof, "sgd", TB_OPP_UPDATE, TB_OPK_SGD);
    be->sgd_update(be, &op, m->segs, nseg, m->params, m->grads, m->momentum);
    tb_op_prof_end(prof);
    if (m->loss_scaling) {
        tb_op_prof_begin(prof, "loss_scale", TB_OPP_UPDATE, TB_OPK_LOSS_SCALE);
        be->loss_scale_update(be, m->sc, m->growth_interval);
        tb_op_prof_end(prof);
    }
    if (m->op_params) refresh_op_weights(m, TB_OPP_UPDATE);
}

void tb_model_set_op_profile(tb_model *m, tb_op_prof *p) { m->g.prof = p; }

int tb_model_op_profile_capacity(const tb_model *m) {
    /* forward: one op per node; backward: at most three per node (a conv's
     * weight gradient, its conversion, its input gradient); the op weight
     * refresh (one op) in the update and, when stale, before the forward;
     * uploads, input, loss, check, SGD and
     * the loss scale: a handful */
    return 6 * m->g.nnodes + 16;
}

void tb_model_read_scalars(tb_model *m, tb_step_scalars *out) {
    m->be->copy_d2h(m->be, out, m->sc, sizeof *out);
}

void tb_model_write_scalars(tb_model *m, const tb_step_scalars *in) {
    m->be->sync(m->be); /* no queued op reads or writes them meanwhile */
    m->be->copy_h2d(m->be, m->sc, in, sizeof *in);
}

float tb_model_read_loss(tb_model *m) {
    float v;
    download_f32(m, &v, m->loss, 1);
    return v;
}

void tb_model_read_logits(tb_model *m, float *dst) {
    tb_tensor y = tb_graph_act(&m->g, m->g.output, m->batch);
    size_t n = tb_tensor_numel(&y);
    if (y.dtype == TB_REAL_DTYPE) {
        download_f32(m, dst, y.data, n);
        return;
    }
    /* 16-bit activations (CUDA bf16/fp16): [N, classes, 1, 1], the same
     * bytes in either layout, widened on the host */
    size_t es = tb_dtype_size(y.dtype);
    void *tmp = malloc(n * es);
    if (!tmp) TB_FATAL("out of host memory");
    m->be->copy_d2h(m->be, tmp, y.data, n * es);
    for (size_t i = 0; i < n; i++) dst[i] = (float)tb_host_load(tmp, y.dtype, i);
    free(tmp);
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
    if (p->role == TB_ROLE_CONV_WEIGHT || p->role == TB_ROLE_FC_WEIGHT) m->op_stale = m->op_params != NULL;
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
