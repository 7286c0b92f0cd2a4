/* test_graph_buffers_wrap.c - test_graph_buffers' wrappers: every op of
 * the CPU backend's table, checked for lifetimes before and after the real
 * call and run again on fresh buffers (see test_graph_buffers.c). */
#include "tests/test_graph_buffers.h"

/* ---- the wrappers ------------------------------------------------------------- */

static void w_conv_forward(tb_backend *be, void *plan, const tb_conv_geom *g, const tb_tensor *x,
                           const tb_tensor *w, const tb_tensor *y) {
    tb_tensor X = dup_t(x), W = dup_t(w), Y = out_t(y, 0);
    g_real.conv_forward(be, plan, g, x, w, y);
    g_real.conv_forward(g_fresh, NULL, g, &X, &W, &Y);
    same_t("conv_forward", "y", y, &Y);
    free_t(&X), free_t(&W), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_conv_backward_data(tb_backend *be, void *plan, const tb_conv_geom *g,
                                 const tb_tensor *dy, const tb_tensor *w, const tb_tensor *dx,
                                 int accumulate) {
    int node = backward_begin("conv_backward_data", accumulate, 0);
    tb_tensor DY = dup_t(dy), W = dup_t(w), DX = out_t(dx, accumulate);
    g_real.conv_backward_data(be, plan, g, dy, w, dx, accumulate);
    g_real.conv_backward_data(g_fresh, NULL, g, &DY, &W, &DX, accumulate);
    same_t("conv_backward_data", "dx", dx, &DX);
    free_t(&DY), free_t(&W), free_t(&DX);
    g_ops_checked++;
    backward_end(node, 1, 0);
}

static void w_conv_backward_filter(tb_backend *be, void *plan, const tb_conv_geom *g,
                                   const tb_tensor *x, const tb_tensor *dy, const tb_tensor *dw,
                                   int accumulate) {
    backward_begin("conv_backward_filter", 0, 0);
    tb_tensor X = dup_t(x), DY = dup_t(dy), DW = out_t(dw, accumulate);
    g_real.conv_backward_filter(be, plan, g, x, dy, dw, accumulate);
    g_real.conv_backward_filter(g_fresh, NULL, g, &X, &DY, &DW, accumulate);
    same_t("conv_backward_filter", "dw", dw, &DW);
    free_t(&X), free_t(&DY), free_t(&DW);
    g_ops_checked++;
}

static void w_bn_forward_train(tb_backend *be, const tb_bn_args *a) {
    size_t c = (size_t)a->x->c, cb = c * sizeof(tb_real);
    tb_tensor X = dup_t(a->x), Y = out_t(a->y, 0), Z;
    if (a->z) Z = dup_t(a->z);
    tb_bn_args f = *a;
    f.x = &X, f.y = &Y, f.z = a->z ? &Z : NULL;
    f.gamma = dup_bytes(a->gamma, cb), f.beta = dup_bytes(a->beta, cb);
    f.running_mean = dup_bytes(a->running_mean, cb), f.running_var = dup_bytes(a->running_var, cb);
    f.save_mean = nan_bytes(cb), f.save_invstd = nan_bytes(cb);
    g_real.bn_forward_train(be, a);
    g_real.bn_forward_train(g_fresh, &f);
    same_t("bn_forward_train", "y", a->y, &Y);
    same("bn_forward_train", "save_mean", a->save_mean, f.save_mean, c);
    same("bn_forward_train", "save_invstd", a->save_invstd, f.save_invstd, c);
    same("bn_forward_train", "running_mean", a->running_mean, f.running_mean, c);
    same("bn_forward_train", "running_var", a->running_var, f.running_var, c);
    free_t(&X), free_t(&Y);
    if (a->z) free_t(&Z);
    free((void *)f.gamma), free((void *)f.beta), free(f.running_mean), free(f.running_var);
    free(f.save_mean), free(f.save_invstd);
    g_ops_checked++;
    forward_done();
}

static void w_bn_backward(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g) {
    int node = backward_begin("bn_backward", g->accumulate_dx, g->dz && g->accumulate_dz);
    size_t c = (size_t)a->x->c, cb = c * sizeof(tb_real);
    tb_tensor X = dup_t(a->x), Y = dup_t(a->y), Z, DY = dup_t(g->dy);
    tb_tensor DX = out_t(g->dx, g->accumulate_dx), DZ;
    if (a->z) Z = dup_t(a->z);
    if (g->dz) DZ = out_t(g->dz, g->accumulate_dz);
    tb_bn_args f = *a;
    f.x = &X, f.y = &Y, f.z = a->z ? &Z : NULL;
    f.gamma = dup_bytes(a->gamma, cb), f.beta = dup_bytes(a->beta, cb);
    f.running_mean = dup_bytes(a->running_mean, cb), f.running_var = dup_bytes(a->running_var, cb);
    f.save_mean = dup_bytes(a->save_mean, cb), f.save_invstd = dup_bytes(a->save_invstd, cb);
    tb_bn_grads fg = *g;
    fg.dy = &DY, fg.dx = &DX, fg.dz = g->dz ? &DZ : NULL;
    fg.dgamma = nan_bytes(cb), fg.dbeta = nan_bytes(cb);
    tuned_match(a, g);
    g_real.bn_backward(be, a, g);
    g_real.bn_backward(g_fresh, &f, &fg);
    same_t("bn_backward", "dx", g->dx, &DX);
    if (g->dz) same_t("bn_backward", "dz", g->dz, &DZ);
    same("bn_backward", "dgamma", g->dgamma, fg.dgamma, c);
    same("bn_backward", "dbeta", g->dbeta, fg.dbeta, c);
    free_t(&X), free_t(&Y), free_t(&DY), free_t(&DX);
    if (a->z) free_t(&Z);
    if (g->dz) free_t(&DZ);
    free((void *)f.gamma), free((void *)f.beta), free(f.running_mean), free(f.running_var);
    free(f.save_mean), free(f.save_invstd), free(fg.dgamma), free(fg.dbeta);
    g_ops_checked++;
    backward_end(node, 1, g->dz != NULL);
}

static void w_relu_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y) {
    tb_tensor X = dup_t(x), Y = out_t(y, 0);
    g_real.relu_forward(be, x, y);
    g_real.relu_forward(g_fresh, &X, &Y);
    same_t("relu_forward", "y", y, &Y);
    free_t(&X), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_relu_backward(tb_backend *be, const tb_tensor *y, const tb_tensor *dy,
                            const tb_tensor *dx, int accumulate) {
    int node = backward_begin("relu_backward", accumulate, 0);
    tb_tensor Y = dup_t(y), DY = dup_t(dy), DX = out_t(dx, accumulate);
    g_real.relu_backward(be, y, dy, dx, accumulate);
    g_real.relu_backward(g_fresh, &Y, &DY, &DX, accumulate);
    same_t("relu_backward", "dx", dx, &DX);
    free_t(&Y), free_t(&DY), free_t(&DX);
    g_ops_checked++;
    backward_end(node, 1, 0);
}

static void w_add_forward(tb_backend *be, const tb_tensor *a, const tb_tensor *b,
                          const tb_tensor *y) {
    tb_tensor A = dup_t(a), B = dup_t(b), Y = out_t(y, 0);
    g_real.add_forward(be, a, b, y);
    g_real.add_forward(g_fresh, &A, &B, &Y);
    same_t("add_forward", "y", y, &Y);
    free_t(&A), free_t(&B), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_add_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *da, int acc_a,
                           const tb_tensor *db, int acc_b) {
    int node = backward_begin("add_backward", acc_a, acc_b);
    tb_tensor DY = dup_t(dy), DA = out_t(da, acc_a), DB = out_t(db, acc_b);
    g_real.add_backward(be, dy, da, acc_a, db, acc_b);
    g_real.add_backward(g_fresh, &DY, &DA, acc_a, &DB, acc_b);
    same_t("add_backward", "da", da, &DA);
    same_t("add_backward", "db", db, &DB);
    free_t(&DY), free_t(&DA), free_t(&DB);
    g_ops_checked++;
    backward_end(node, 1, 1);
}

static void w_maxpool_forward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                              const tb_tensor *y) {
    tb_tensor X = dup_t(x), Y = out_t(y, 0);
    g_real.maxpool_forward(be, g, x, y);
    g_real.maxpool_forward(g_fresh, g, &X, &Y);
    same_t("maxpool_forward", "y", y, &Y);
    free_t(&X), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_maxpool_backward(tb_backend *be, const tb_pool_geom *g, const tb_tensor *x,
                               const tb_tensor *y, const tb_tensor *dy, const tb_tensor *dx,
                               int accumulate) {
    int node = backward_begin("maxpool_backward", accumulate, 0);
    tb_tensor X = dup_t(x), Y = dup_t(y), DY = dup_t(dy), DX = out_t(dx, accumulate);
    g_real.maxpool_backward(be, g, x, y, dy, dx, accumulate);
    g_real.maxpool_backward(g_fresh, g, &X, &Y, &DY, &DX, accumulate);
    same_t("maxpool_backward", "dx", dx, &DX);
    free_t(&X), free_t(&Y), free_t(&DY), free_t(&DX);
    g_ops_checked++;
    backward_end(node, 1, 0);
}

static void w_avgpool_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *y) {
    tb_tensor X = dup_t(x), Y = out_t(y, 0);
    g_real.avgpool_forward(be, x, y);
    g_real.avgpool_forward(g_fresh, &X, &Y);
    same_t("avgpool_forward", "y", y, &Y);
    free_t(&X), free_t(&Y);
    g_ops_checked++;
    forward_done();
}

static void w_avgpool_backward(tb_backend *be, const tb_tensor *dy, const tb_tensor *dx,
                               int accumulate) {
    int node = backward_begin("avgpool_backward", accumulate, 0);
    tb_tensor DY = dup_t(dy), DX = out_t(dx, accumulate);
    g_real.avgpool_backward(be, dy, dx, accumulate);
    g_real.avgpool_backward(g_fresh, &DY, &DX, accumulate);
    same_t("avgpool_backward", "dx", dx, &DX);
    free_t(&DY), free_t(&DX);
    g_ops_checked++;
    backward_end(node, 1, 0);
}

static void w_linear_forward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                             const tb_real *b, const tb_tensor *y) {
    tb_tensor X = dup_t(x), W = dup_t(w), Y = out_t(y, 0);
    tb_real *B = dup_bytes(b, (size_t)w->n * sizeof(tb_real));
    g_real.linear_forward(be, x, w, b, y);
    g_real.linear_forward(g_fresh, &X, &W, B, &Y);
    same_t("linear_forward", "y", y, &Y);
    free_t(&X), free_t(&W), free_t(&Y), free(B);
    g_ops_checked++;
    forward_done();
}

static void w_linear_backward(tb_backend *be, const tb_tensor *x, const tb_tensor *w,
                              const tb_tensor *dy, const tb_tensor *dx, int accumulate_dx,
                              const tb_tensor *dw, tb_real *db) {
    int node = backward_begin("linear_backward", dx && accumulate_dx, 0);
    size_t m = (size_t)w->n;
    tb_tensor X = dup_t(x), W = dup_t(w), DY = dup_t(dy), DW = out_t(dw, 0), DX;
    if (dx) DX = out_t(dx, accumulate_dx);
    tb_real *DB = nan_bytes(m * sizeof(tb_real));
    g_real.linear_backward(be, x, w, dy, dx, accumulate_dx, dw, db);
    g_real.linear_backward(g_fresh, &X, &W, &DY, dx ? &DX : NULL, accumulate_dx, &DW, DB);
    if (dx) same_t("linear_backward", "dx", dx, &DX);
    same_t("linear_backward", "dw", dw, &DW);
    same("linear_backward", "db", db, DB, m);
    free_t(&X), free_t(&W), free_t(&DY), free_t(&DW), free(DB);
    if (dx) free_t(&DX);
    g_ops_checked++;
    backward_end(node, dx != NULL, 0);
}

static void w_softmax_xent(tb_backend *be, const tb_tensor *logits, const int32_t *labels,
                           double smoothing, tb_step_scalars *sc, const tb_tensor *dlogits) {
    /* forward is over: what backward will read is fixed from here on */
    g_params_hash = hash_bytes(g_m->params, g_m->pt.n_train * sizeof(tb_real));
    weights_lock();
    tb_tensor L = dup_t(logits), DL = out_t(dlogits, 0);
    tb_step_scalars fsc = *sc; /* the fresh run reads the same scalars (CPU: host memory) */
    fsc.loss = NAN;
    g_real.softmax_xent(be, logits, labels, smoothing, sc, dlogits);
    g_real.softmax_xent(g_fresh, &L, labels, smoothing, &fsc, &DL);
    same("softmax_xent", "loss", &sc->loss, &fsc.loss, 1);
    same_t("softmax_xent", "dlogits", dlogits, &DL);
    free_t(&L), free_t(&DL);
    g_ops_checked++;
    wrote_grad(g_m->g.output);
}

void wrap(tb_backend *be) {
    g_real = *be;
    be->conv_forward = w_conv_forward;
    be->conv_backward_data = w_conv_backward_data;
    be->conv_backward_filter = w_conv_backward_filter;
    be->bn_forward_train = w_bn_forward_train;
    be->bn_backward = w_bn_backward;
    be->relu_forward = w_relu_forward;
    be->relu_backward = w_relu_backward;
    be->add_forward = w_add_forward;
    be->add_backward = w_add_backward;
    be->maxpool_forward = w_maxpool_forward;
    be->maxpool_backward = w_maxpool_backward;
    be->avgpool_forward = w_avgpool_forward;
    be->avgpool_backward = w_avgpool_backward;
    be->linear_forward = w_linear_forward;
    be->linear_backward = w_linear_backward;
    be->softmax_xent = w_softmax_xent;
}
