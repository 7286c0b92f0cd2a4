/* cuda_sgd.cu - one fused SGD kernel over the flat parameter buffer, and
 * the loss scaler's bookkeeping (the counterpart of cpu/cpu_sgd.c).
 *
 * torch.optim.SGD, dampening 0, per segment of the flat float32 buffers
 * (each with its weight decay), element by element in float32 with the
 * CPU's order of operations and no fused multiply-add (_rn intrinsics), so
 * the update is bit-identical to the CPU backend's:
 *   g = grad * (1 / loss_scale) + wd * p;  buf = momentum * buf + g
 *   step = nesterov ? g + momentum * buf : buf;  p -= lr * step
 * lr and loss_scale are read from the step scalars on the device; with
 * skip_nonfinite and found_inf set, every thread returns at once (the
 * overflowed step is skipped). With momentum 0 the buffer is not touched.
 * The kernel walks the concatenation of the segments; each element finds
 * its segment by binary search of the table (a few hundred entries at most).
 */
#include "model/cuda/cuda_kernels.cuh"

__global__ void sgd_k(const cu_sgd_seg *segs, int nseg, size_t total, float mom, int nesterov,
                      int skip, const tb_step_scalars *sc, float *p, const float *g, float *buf) {
    if (skip && sc->found_inf) return;
    const float lr = sc->lr, gs = __fdiv_rn(1.0f, sc->loss_scale);
    CU_FOR(v, total) {
        const cu_sgd_seg s = segs[cu_sgd_find(segs, nseg, v)]; /* the last with start <= v */
        const size_t i = s.offset + (v - s.start);
        const float wd = s.weight_decay;
        float gi = __fadd_rn(__fmul_rn(g[i], gs), __fmul_rn(wd, p[i]));
        if (mom == 0.0f) {
            p[i] = __fsub_rn(p[i], __fmul_rn(lr, gi));
        } else {
            float bi = __fadd_rn(__fmul_rn(mom, buf[i]), gi);
            buf[i] = bi;
            p[i] = __fsub_rn(p[i], __fmul_rn(lr, nesterov ? __fadd_rn(gi, __fmul_rn(mom, bi)) : bi));
        }
    }
}

__global__ void loss_scale_update_k(tb_step_scalars *sc, int growth_interval) {
    if (sc->found_inf) {
        sc->loss_scale = sc->loss_scale * 0.5f;
        sc->good_steps = 0;
        sc->skipped_steps++;
    } else if (++sc->good_steps >= growth_interval) {
        float grown = sc->loss_scale * 2.0f; /* kept only when finite, as GradScaler's update */
        if (isfinite(grown)) sc->loss_scale = grown;
        sc->good_steps = 0;
    }
    sc->found_inf = 0;
}

extern "C" void cu_sgd_update(tb_backend *be, const tb_sgd_op *a, const tb_sgd_segment *segs,
                              int nseg, tb_real *params, const tb_real *grads, tb_real *momentum) {
    if (nseg < 0 || (nseg > 0 && (!segs || !params || !grads)) || !a->sc)
        TB_FATAL("cuda sgd_update: NULL buffers, segments or step scalars (nseg %d)", nseg);
    if (a->momentum != 0.0 && !momentum)
        TB_FATAL("cuda sgd_update: momentum %g needs a momentum buffer", a->momentum);
    if (nseg == 0) return;
    size_t total = 0;
    const cu_sgd_seg *dsegs = cu_sgd_segments(be, segs, nseg, &total);
    if (!total) return;
    sgd_k<<<cu_blocks(total), CU_THREADS, 0, cu_stream(be)>>>(
        dsegs, nseg, total, (float)a->momentum, a->nesterov, a->skip_nonfinite, a->sc, params,
        grads, momentum);
    TB_CUDA_CHECK_LAUNCH("sgd_update");
}

extern "C" void cu_loss_scale_update(tb_backend *be, tb_step_scalars *sc, int growth_interval) {
    loss_scale_update_k<<<1, 1, 0, cu_stream(be)>>>(sc, growth_interval);
    TB_CUDA_CHECK_LAUNCH("loss_scale_update");
}
