/* cpu_sgd.c - SGD with momentum, Nesterov and weight decay on the CPU.
 *
 * torch.optim.SGD with dampening 0, applied per segment of the flat float32
 * buffers (each segment has its own weight decay):
 *   g = grad * (1 / loss_scale) + wd * p;  buf = momentum * buf + g
 *   step = nesterov ? g + momentum * buf : buf;  p -= lr * step
 * lr and loss_scale come from the step scalars; with skip_nonfinite and
 * found_inf set, nothing changes. With momentum 0 the buffer is not touched
 * (torch keeps none). Then the loss scaler's bookkeeping
 * (loss_scale_update), as torch.cuda.amp.GradScaler.update. The element
 * loop is the vector level's (cpu_kern.h).
 */
#include <math.h>
#include <omp.h>

#include "core/log.h"
#include "model/cpu/cpu_internal.h"
#include "model/cpu/cpu_kern.h"

void cpu_sgd_update(tb_backend *be, const tb_sgd_op *a, const tb_sgd_segment *segs,
                    int nseg, tb_real *params, const tb_real *grads, tb_real *momentum) {
    if (nseg < 0 || (nseg > 0 && (!segs || !params || !grads)) || !a->sc)
        TB_FATAL("cpu sgd_update: NULL buffers, segments or step scalars (nseg %d)", nseg);
    if (a->momentum != 0.0f && !momentum)
        TB_FATAL("cpu sgd_update: momentum %g needs a momentum buffer", (double)a->momentum);
    if (a->skip_nonfinite && a->sc->found_inf) return; /* overflow: the step is skipped */
    const tb_real lr = a->sc->lr, mom = (tb_real)a->momentum, gs = 1 / a->sc->loss_scale;
    const int nesterov = a->nesterov;
    const int threads = cpu_state_of(be)->threads;
    const cpu_kern *k = cpu_kern_get();

    for (int s = 0; s < nseg; s++) {
        tb_real *p = params + segs[s].offset;      /* [count] */
        const tb_real *g = grads + segs[s].offset; /* [count] */
        tb_real *buf = momentum ? momentum + segs[s].offset : NULL; /* [count] */
        const size_t count = segs[s].count;
        const tb_real wd = segs[s].weight_decay;
#pragma omp parallel num_threads(threads)
        {
            size_t lo, hi;
            cpu_kern_share(count, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
            if (hi > lo) k->sgd(p + lo, g + lo, buf ? buf + lo : NULL, hi - lo, lr, mom, gs, wd, nesterov);
        }
    }
}

void cpu_loss_scale_update(tb_backend *be, tb_step_scalars *sc, int growth_interval) {
    (void)be;
    if (sc->found_inf) {
        sc->loss_scale *= (tb_real)0.5;
        sc->good_steps = 0;
        sc->skipped_steps++;
    } else if (++sc->good_steps >= growth_interval) {
        tb_real grown = sc->loss_scale * 2; /* kept only when finite, as GradScaler's update */
        if (isfinite((double)grown)) sc->loss_scale = grown;
        sc->good_steps = 0;
    }
    sc->found_inf = 0;
}
