/* cpu_loss.c - mean softmax cross-entropy with label smoothing on the CPU.
 *
 * Per row n of logits l [N,M], in double: lse = log sum_c exp(l[c]) (shifted
 * by the row maximum), -log p[c] = lse - l[c],
 *   loss_n   = (1-eps) * (lse - l[y_n]) + eps * mean_c (lse - l[c])
 *   dl[n,c]  = (p[c] - q[c]) / N * gs,  q = (1-eps) onehot(y_n) + eps/M
 * with gs = sc->grad_scale * sc->loss_scale (in double), and sc->loss =
 * mean_n loss_n, summed in row order (independent of threads).
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "core/log.h"
#include "model/cpu/cpu_internal.h"

void cpu_softmax_xent(tb_backend *be, const tb_tensor *logits, const int32_t *labels,
                      double smoothing, tb_step_scalars *sc, const tb_tensor *dlogits) {
    const char *op = "softmax_xent";
    cpu_check(logits, op, "logits");
    const int N = logits->n, M = logits->c * logits->h * logits->w;
    if (N < 1 || M < 1) TB_FATAL("cpu %s: empty logits [%d,%d]", op, N, M);
    if (dlogits) {
        cpu_check(dlogits, op, "dlogits");
        cpu_check_same_shape(logits, dlogits, op, "logits", "dlogits");
    }
    if (!labels || !sc) TB_FATAL("cpu %s: labels or step scalars are NULL", op);
    for (int n = 0; n < N; n++)
        if (labels[n] < 0 || labels[n] >= M)
            TB_FATAL("cpu %s: label %d of row %d is outside [0, %d)", op, (int)labels[n], n, M);

    const tb_real *l = logits->data;                              /* [N,M] */
    tb_real *dl = dlogits ? (tb_real *)dlogits->data : NULL;        /* [N,M] or NULL */
    double *row_loss = cpu_aligned_alloc((size_t)N * sizeof(double), "softmax_xent rows");
    const double eps = smoothing, gs = (double)sc->grad_scale * (double)sc->loss_scale;

#pragma omp parallel for schedule(static) num_threads(cpu_state_of(be)->threads)
    for (int n = 0; n < N; n++) {
        const tb_real *ln = l + (size_t)n * M;
        double mx = ln[0];
        for (int c = 1; c < M; c++)
            if (ln[c] > mx) mx = ln[c];
        double se = 0.0, sl = 0.0;
        for (int c = 0; c < M; c++) {
            se += exp((double)ln[c] - mx);
            sl += ln[c];
        }
        const double lse = mx + log(se);
        const int y = labels[n];
        row_loss[n] = (1.0 - eps) * (lse - ln[y]) + eps * (lse - sl / M);
        if (dl) {
            tb_real *dn = dl + (size_t)n * M;
            for (int c = 0; c < M; c++) {
                double q = eps / M + (c == y ? 1.0 - eps : 0.0);
                dn[c] = (tb_real)((exp((double)ln[c] - lse) - q) / N * gs);
            }
        }
    }
    double total = 0.0;
    for (int n = 0; n < N; n++) total += row_loss[n];
    sc->loss = (tb_real)(total / N);
    free(row_loss);
}
