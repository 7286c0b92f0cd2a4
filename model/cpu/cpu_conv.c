/* cpu_conv.c - convolution on the CPU: im2col + SGEMM.
 *
 * Per image n (P = Ho*Wo output pixels, CKK = Cin*K*K):
 *   forward          y[n]   [Cout,P]   = w [Cout,CKK] . col[n] [CKK,P]
 *   backward data    dcol   [CKK,P]    = w^T . dy[n] [Cout,P];  dx[n] (+)= col2im(dcol)
 *   backward filter  dw [Cout,CKK]    (+)= sum_n dy[n] . col[n]^T
 * where col[n] = im2col(x[n]). A 1x1, stride-1, unpadded conv has col = x.
 *
 * Parallelism: the work is cut into items and each OpenMP thread runs its
 * items end to end (im2col into its own scratch, then one single-threaded
 * SGEMM), so the im2col buffer is still in cache when the GEMM reads it.
 * Items are handed out one at a time, so a thread slowed by another process
 * does not hold the others back.
 * Images with few pixels are batched G to a GEMM ("groups") so the GEMM is
 * wide; then columns are image-major, [CKK, G*P], and the result is copied
 * out to NCHW. Items:
 *   forward          (group, band of output rows)
 *   backward data    (group, band of input channels)    -- col2im bands never overlap
 *   backward filter  band of input (or output) channels of dw, over all images;
 *                    or, when dw has too few channels to share out (the stem
 *                    conv), images, each thread summing into its own dw copy
 * Bands are only cut to keep every thread busy or the scratch bounded.
 * The strided row copies of im2col / col2im are the vector level's
 * (cpu_kern.h).
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "model/cpu/cpu_internal.h"
#include "model/cpu/cpu_kern.h"

typedef struct {
    int n, cin, h, w;   /* x [N,Cin,H,W] */
    int cout, ho, wo;   /* y [N,Cout,Ho,Wo] */
    int k, s, pad;      /* square kernel, stride, zero padding */
    int kk;             /* K*K */
    int ckk;            /* Cin*K*K: rows of col, columns of w */
    size_t P;           /* Ho*Wo: output pixels per image */
    int direct;         /* 1x1, stride 1, pad 0: col[n] is x[n] itself */
} conv_dims;

/* How one call is cut into per-thread items (see the top of the file). */
typedef struct {
    int G;              /* images per GEMM */
    int ngroups;        /* ceil(N / G) */
    int bands;          /* items per group (forward, backward data) or in all (filter) */
    int per_band;       /* rows or channels per band */
    int by_images;      /* backward filter: threads split the images instead */
    size_t ws;          /* scratch floats per thread */
} conv_split;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int gcd(int a, int b) {
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Checks x, (w), y against g and returns the sizes; x/y are the activation
 * shapes (dx/dy in the backward passes). w may be NULL (conv_plan). */
static conv_dims conv_dims_of(const char *op, const tb_conv_geom *g, const tb_tensor *x,
                              const tb_tensor *w, const tb_tensor *y) {
    cpu_check(x, op, "x");
    cpu_check(y, op, "y");
    if (w) cpu_check(w, op, "w");
    if (g->k < 1 || g->stride < 1 || g->pad < 0)
        TB_FATAL("cpu %s: bad geometry k=%d stride=%d pad=%d", op, g->k, g->stride, g->pad);
    conv_dims d;
    d.n = x->n;
    d.cin = x->c;
    d.h = x->h;
    d.w = x->w;
    d.cout = y->c;
    d.k = g->k;
    d.s = g->stride;
    d.pad = g->pad;
    d.ho = (d.h + 2 * d.pad - d.k) / d.s + 1;
    d.wo = (d.w + 2 * d.pad - d.k) / d.s + 1;
    if (d.h + 2 * d.pad < d.k || d.w + 2 * d.pad < d.k || x->c != g->cin || y->c != g->cout ||
        y->n != x->n || y->h != d.ho || y->w != d.wo || x->n < 1)
        TB_FATAL("cpu %s: x [%d,%d,%d,%d] and y [%d,%d,%d,%d] do not fit conv %d->%d k=%d "
                 "stride=%d pad=%d",
                 op, x->n, x->c, x->h, x->w, y->n, y->c, y->h, y->w, g->cin, g->cout, g->k,
                 g->stride, g->pad);
    if (w && (w->n != g->cout || w->c != g->cin || w->h != g->k || w->w != g->k))
        TB_FATAL("cpu %s: w is [%d,%d,%d,%d], expected [%d,%d,%d,%d]", op, w->n, w->c, w->h,
                 w->w, g->cout, g->cin, g->k, g->k);
    d.kk = d.k * d.k;
    d.ckk = d.cin * d.kk;
    d.P = (size_t)d.ho * (size_t)d.wo;
    d.direct = d.k == 1 && d.s == 1 && d.pad == 0;
    return d;
}

/* ---- im2col / col2im ---------------------------------------------------------- */

/* Output columns [*lo, *hi) of kernel column kw read inside the image row. */
static void valid_cols(const conv_dims *d, int kw, int *lo, int *hi) {
    int off = kw - d->pad; /* iw = ow*s + off */
    int l = off < 0 ? (-off + d->s - 1) / d->s : 0;
    int last = d->w - 1 - off; /* need ow*s <= last */
    int h = last >= 0 ? last / d->s + 1 : 0;
    if (h > d->wo) h = d->wo;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* col[(c-c0)*KK + kh*K + kw][(oh-oh0)*Wo + ow] = x[c][oh*s-pad+kh][ow*s-pad+kw]
 * (zero outside), for channels [c0,c1) and output rows [oh0,oh1); rows of
 * col are ld floats apart. x: one image [Cin,H,W]. */
static void im2col(const conv_dims *d, const tb_real *x, int c0, int c1, int oh0, int oh1,
                   tb_real *col, size_t ld) {
    const cpu_kern *k = cpu_kern_get();
    const int wo = d->wo;
    tb_real *row = col;
    for (int c = c0; c < c1; c++) {
        for (int kh = 0; kh < d->k; kh++) {
            for (int kw = 0; kw < d->k; kw++, row += ld) {
                int lo, hi;
                valid_cols(d, kw, &lo, &hi);
                const int off = kw - d->pad;
                tb_real *dst = row;
                for (int oh = oh0; oh < oh1; oh++, dst += wo) {
                    int ih = oh * d->s - d->pad + kh;
                    if (ih < 0 || ih >= d->h) {
                        memset(dst, 0, (size_t)wo * sizeof(tb_real));
                        continue;
                    }
                    const tb_real *src = x + ((size_t)c * d->h + ih) * d->w;
                    for (int ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
                    if (d->s == 1)
                        memcpy(dst + lo, src + lo + off, (size_t)(hi - lo) * sizeof(tb_real));
                    else if (hi > lo)
                        k->gather(dst + lo, src + (lo * d->s + off), hi - lo, d->s);
                    for (int ow = hi; ow < wo; ow++) dst[ow] = 0.0f;
                }
            }
        }
    }
}

/* The adjoint of im2col over all output rows: x[c][ih][iw] += col[...] for
 * channels [c0,c1). x: one image [Cin,H,W]. */
static void col2im_add(const conv_dims *d, const tb_real *col, size_t ld, int c0, int c1,
                       tb_real *x) {
    const cpu_kern *k = cpu_kern_get();
    const int wo = d->wo;
    const tb_real *row = col;
    for (int c = c0; c < c1; c++) {
        for (int kh = 0; kh < d->k; kh++) {
            for (int kw = 0; kw < d->k; kw++, row += ld) {
                int lo, hi;
                valid_cols(d, kw, &lo, &hi);
                const int off = kw - d->pad;
                const tb_real *src = row;
                for (int oh = 0; oh < d->ho; oh++, src += wo) {
                    int ih = oh * d->s - d->pad + kh;
                    if (ih < 0 || ih >= d->h) continue;
                    tb_real *dst = x + ((size_t)c * d->h + ih) * d->w;
                    if (hi <= lo) continue;
                    if (d->s == 1)
                        k->accumulate(dst + (off + lo), src + lo, (size_t)(hi - lo));
                    else
                        k->scatter_add(dst + (lo * d->s + off), src + lo, hi - lo, d->s);
                }
            }
        }
    }
}

/* buf[r][i*P + p] = t[n0+i][r0+r][p]: rows [r0,r0+nr) of gn images side by
 * side (t has C channels of P pixels). */
static void gather_images(const tb_real *t, int C, size_t P, int n0, int gn, int r0, int nr,
                          tb_real *buf) {
    size_t ld = (size_t)gn * P;
    for (int r = 0; r < nr; r++)
        for (int i = 0; i < gn; i++)
            memcpy(buf + r * ld + i * P, t + ((size_t)(n0 + i) * C + r0 + r) * P,
                   P * sizeof(tb_real));
}

/* ---- how to cut a call into items ---------------------------------------------- */

/* Images per GEMM for forward / backward data: 1 when one image is wide
 * enough, else enough to reach conv_min_cols columns, while every thread
 * still gets a group. */
static int group_size(const cpu_state *st, const conv_dims *d) {
    int per_thread = ceil_div(d->n, st->threads);
    size_t m = (size_t)per_thread * d->P / (size_t)st->conv_min_cols; /* groups per thread */
    if (m < 1) m = 1;
    if (m > (size_t)per_thread) m = (size_t)per_thread;
    return ceil_div(per_thread, (int)m);
}

static size_t cap_floats(const cpu_state *st) {
    return st->ws_cap_bytes / sizeof(tb_real) / (size_t)st->threads;
}

/* Scratch per thread (floats) of a G-image group with `per` rows/channels per band. */
typedef size_t (*ws_fn)(const conv_dims *d, int G, int per);

/* The largest group at most G whose scratch (bands of `per`) fits in cap. */
static int fit_group(const conv_dims *d, int G, int per, ws_fn ws, size_t cap) {
    while (G > 1 && ws(d, G, per) > cap) G--;
    return G;
}

/* The fewest bands, from `bands` up to dim, whose scratch fits in cap. */
static int fit_bands(const conv_dims *d, int G, int bands, int dim, ws_fn ws, size_t cap) {
    while (bands < dim && ws(d, G, ceil_div(dim, bands)) > cap) bands++;
    return bands > dim ? dim : bands;
}

/* Fills the band fields of p for dim cut into `bands`, and the scratch they need. */
static void set_bands(conv_split *p, const conv_dims *d, int dim, int bands, ws_fn ws) {
    p->per_band = ceil_div(dim, bands);
    p->bands = ceil_div(dim, p->per_band);
    p->ws = ws(d, p->G, p->per_band);
}

/* Scratch per thread: im2col of `rows` output rows of G images, plus the
 * GEMM result of a group before it is copied out. */
static size_t fwd_ws(const conv_dims *d, int G, int rows) {
    size_t col = d->direct && G == 1 ? 0 : (size_t)d->ckk * G * rows * d->wo;
    return col + (G > 1 ? (size_t)d->cout * G * d->P : 0);
}

/* Image groups for forward / backward data: as wide as group_size allows while a group's scratch
 * (bands of all dim rows/channels) fits; bands are set by the caller. */
static conv_split split_groups(const cpu_state *st, const conv_dims *d, int dim, ws_fn ws) {
    conv_split p;
    p.by_images = 0;
    p.G = fit_group(d, group_size(st, d), dim, ws, cap_floats(st));
    p.ngroups = ceil_div(d->n, p.G);
    return p;
}

static conv_split split_forward(const cpu_state *st, const conv_dims *d) {
    conv_split p = split_groups(st, d, d->ho, fwd_ws);
    int bands = 1;
    if (p.G == 1) /* rows bands: balance the threads, bound the scratch */
        bands = fit_bands(d, 1, st->threads / gcd(d->n, st->threads), d->ho, fwd_ws, cap_floats(st));
    set_bands(&p, d, d->ho, bands, fwd_ws);
    return p;
}

/* Scratch per thread: the group's dy side by side, plus dcol for `ch` input
 * channels. */
static size_t bwd_data_ws(const conv_dims *d, int G, int ch) {
    size_t dcol = d->direct && G == 1 ? 0 : (size_t)ch * d->kk * G * d->P;
    return dcol + (G > 1 ? (size_t)d->cout * G * d->P : 0);
}

static conv_split split_backward_data(const cpu_state *st, const conv_dims *d) {
    conv_split p = split_groups(st, d, d->cin, bwd_data_ws);
    int bands = st->threads / gcd(p.ngroups, st->threads);
    set_bands(&p, d, d->cin, fit_bands(d, p.G, bands, d->cin, bwd_data_ws, cap_floats(st)), bwd_data_ws);
    return p;
}

/* Backward filter cuts dw by output channels when that is the larger side of
 * a 1x1 conv (no im2col to repeat), else by input channels. */
static int filter_by_cout(const conv_dims *d) { return d->k == 1 && d->cout > d->cin; }

static size_t bwd_filter_ws(const conv_dims *d, int G, int per) {
    int by_cout = filter_by_cout(d);
    size_t col = d->direct && G == 1 ? 0 : (size_t)(by_cout ? d->cin : per) * d->kk * G * d->P;
    return col + (G > 1 ? (size_t)(by_cout ? per : d->cout) * G * d->P : 0);
}

/* Scratch per thread when splitting by images: a private dw, the group's
 * im2col and its dy side by side. */
static size_t filter_by_images_ws(const conv_dims *d, int G, int per) {
    (void)per; /* every thread takes whole images: no bands */
    size_t col = d->direct && G == 1 ? 0 : (size_t)d->ckk * G * d->P;
    return (size_t)d->cout * d->ckk + col + (G > 1 ? (size_t)d->cout * G * d->P : 0);
}

static conv_split split_backward_filter(const cpu_state *st, const conv_dims *d) {
    conv_split p;
    size_t cap = cap_floats(st);
    int dim = filter_by_cout(d) ? d->cout : d->cin;
    p.by_images = 0;
    if (dim < 4 * st->threads && st->threads > 1) { /* too few channels for bands */
        p.G = fit_group(d, group_size(st, d), 1, filter_by_images_ws, cap);
        if (filter_by_images_ws(d, p.G, 1) <= cap) {
            p.by_images = 1;
            p.ngroups = ceil_div(d->n, p.G);
            p.bands = p.per_band = 1;
            p.ws = filter_by_images_ws(d, p.G, 1);
            return p;
        }
    }
    int bands = st->threads < dim ? st->threads : dim;
    /* every thread walks all images, so groups may take the whole batch */
    size_t want = ((size_t)st->conv_min_cols + d->P - 1) / d->P;
    p.G = fit_group(d, want > (size_t)d->n ? d->n : (int)want, ceil_div(dim, bands),
                    bwd_filter_ws, cap);
    p.ngroups = ceil_div(d->n, p.G);
    set_bands(&p, d, dim, fit_bands(d, p.G, bands, dim, bwd_filter_ws, cap), bwd_filter_ws);
    return p;
}

/* ---- the table's entries ---------------------------------------------------------- */

void *cpu_conv_plan(tb_backend *be, const tb_conv_geom *g, const tb_tensor *x,
                    const tb_tensor *w, const tb_tensor *y, const tb_tensor *dx,
                    const tb_tensor *dw, const tb_tensor *dy) {
    /* No per-node state: size the shared scratch for the largest shapes now,
     * so no step allocates. (One algorithm for every shape: nothing to
     * measure on the buffers.) */
    (void)w, (void)dx, (void)dw, (void)dy;
    cpu_state *st = cpu_state_of(be);
    conv_dims d = conv_dims_of("conv_plan", g, x, NULL, y);
    size_t ws = split_forward(st, &d).ws;
    size_t b = split_backward_data(st, &d).ws;
    size_t f = split_backward_filter(st, &d).ws;
    if (b > ws) ws = b;
    if (f > ws) ws = f;
    cpu_workspace(st, ws);
    return NULL;
}

void cpu_conv_plan_free(tb_backend *be, void *plan) {
    (void)be;
    (void)plan; /* cpu_conv_plan returns NULL */
}

void cpu_conv_plan_describe(tb_backend *be, void *plan, char *buf, size_t len) {
    (void)be, (void)plan;
    snprintf(buf, len, "im2col + GEMM (every batch size)");
}

void cpu_conv_forward(tb_backend *be, void *plan, const tb_conv_geom *g, const tb_tensor *x,
                      const tb_tensor *w, const tb_tensor *y) {
    (void)plan;
    cpu_state *st = cpu_state_of(be);
    conv_dims d = conv_dims_of("conv_forward", g, x, w, y);
    conv_split p = split_forward(st, &d);
    tb_real *ws = cpu_workspace(st, p.ws);
    const tb_real *xd = x->data;   /* [N,Cin,H,W] */
    const tb_real *wd = w->data;   /* [Cout,Cin,K,K] = [Cout,CKK] */
    tb_real *yd = y->data;         /* [N,Cout,Ho,Wo] */
    const int items = p.ngroups * p.bands;

#pragma omp parallel for schedule(dynamic, 1) num_threads(st->threads)
    for (int it = 0; it < items; it++) {
        tb_real *col = ws + (size_t)omp_get_thread_num() * st->ws_stride;
        int grp = it / p.bands, band = it % p.bands;
        int n0 = grp * p.G, gn = d.n - n0 < p.G ? d.n - n0 : p.G;
        int oh0 = band * p.per_band, oh1 = oh0 + p.per_band < d.ho ? oh0 + p.per_band : d.ho;
        size_t cols = (size_t)(oh1 - oh0) * d.wo; /* per image */
        size_t ld = (size_t)gn * cols;

        /* B = col [CKK, gn*cols] */
        const tb_real *B;
        size_t ldb;
        if (d.direct && p.G == 1) {
            B = xd + (size_t)n0 * d.cin * d.P + (size_t)oh0 * d.wo;
            ldb = d.P;
        } else {
            for (int i = 0; i < gn; i++)
                im2col(&d, xd + (size_t)(n0 + i) * d.cin * d.h * d.w, 0, d.cin, oh0, oh1,
                       col + i * cols, ld);
            B = col;
            ldb = ld;
        }
        if (p.G == 1) { /* straight into y[n0] rows [oh0,oh1) */
            cpu_gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d.cout, (int)cols, d.ckk,
                        1.0f, wd, d.ckk, B, (int)ldb, 0.0f,
                        yd + (size_t)n0 * d.cout * d.P + (size_t)oh0 * d.wo, (int)d.P);
        } else {        /* out [Cout, gn*P], then to NCHW */
            tb_real *out = col + (size_t)d.ckk * p.G * d.P;
            cpu_gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d.cout, (int)ld, d.ckk, 1.0f,
                        wd, d.ckk, B, (int)ldb, 0.0f, out, (int)ld);
            for (int i = 0; i < gn; i++)
                for (int co = 0; co < d.cout; co++)
                    memcpy(yd + ((size_t)(n0 + i) * d.cout + co) * d.P, out + co * ld + i * d.P,
                           d.P * sizeof(tb_real));
        }
    }
}

void cpu_conv_backward_data(tb_backend *be, void *plan, const tb_conv_geom *g,
                            const tb_tensor *dy, const tb_tensor *w, const tb_tensor *dx,
                            int accumulate) {
    (void)plan;
    cpu_state *st = cpu_state_of(be);
    conv_dims d = conv_dims_of("conv_backward_data", g, dx, w, dy);
    conv_split p = split_backward_data(st, &d);
    tb_real *ws = cpu_workspace(st, p.ws);
    const tb_real *dyd = dy->data; /* [N,Cout,Ho,Wo] */
    const tb_real *wd = w->data;   /* [Cout,CKK] */
    tb_real *dxd = dx->data;       /* [N,Cin,H,W] */
    const size_t hw = (size_t)d.h * d.w;
    const int items = p.ngroups * p.bands;

#pragma omp parallel for schedule(dynamic, 1) num_threads(st->threads)
    for (int it = 0; it < items; it++) {
        tb_real *buf = ws + (size_t)omp_get_thread_num() * st->ws_stride;
        int grp = it / p.bands, band = it % p.bands;
        int n0 = grp * p.G, gn = d.n - n0 < p.G ? d.n - n0 : p.G;
        int c0 = band * p.per_band, c1 = c0 + p.per_band < d.cin ? c0 + p.per_band : d.cin;
        int rows = (c1 - c0) * d.kk;  /* rows of w^T / dcol in this band */
        size_t ld = (size_t)gn * d.P;

        /* B = dy of the group [Cout, gn*P] */
        const tb_real *B = dyd + (size_t)n0 * d.cout * d.P;
        tb_real *dcol = buf;
        if (p.G > 1) {
            tb_real *dyg = buf + (size_t)p.per_band * d.kk * p.G * d.P;
            gather_images(dyd, d.cout, d.P, n0, gn, 0, d.cout, dyg);
            B = dyg;
        }
        /* A = w^T rows [c0*KK, c1*KK): w's columns from c0*KK, lda = CKK */
        const tb_real *A = wd + (size_t)c0 * d.kk;
        if (d.direct && p.G == 1) { /* dx[n0] channels [c0,c1) directly */
            cpu_gemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, (int)d.P, d.cout, 1.0f, A,
                        d.ckk, B, (int)d.P, accumulate ? 1.0f : 0.0f,
                        dxd + ((size_t)n0 * d.cin + c0) * hw, (int)hw);
            continue;
        }
        cpu_gemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, (int)ld, d.cout, 1.0f, A,
                    d.ckk, B, (int)ld, 0.0f, dcol, (int)ld);
        for (int i = 0; i < gn; i++) {
            tb_real *dxi = dxd + (size_t)(n0 + i) * d.cin * hw;
            if (!accumulate) memset(dxi + (size_t)c0 * hw, 0, (size_t)(c1 - c0) * hw * sizeof(tb_real));
            col2im_add(&d, dcol + i * d.P, ld, c0, c1, dxi);
        }
    }
}

/* Backward filter with the images shared out: thread t sums dy . col^T of
 * its groups into its own dw copy [Cout,CKK] (static schedule, so the sums
 * do not depend on timing), then the copies are added into dw. */
static void filter_by_images(const cpu_state *st, const conv_dims *d, const conv_split *p,
                             tb_real *ws, const tb_real *xd, const tb_real *dyd, tb_real *dwd,
                             int accumulate) {
    const size_t nw = (size_t)d->cout * d->ckk;
#pragma omp parallel num_threads(st->threads)
    {
        const int nt = omp_get_num_threads();
        tb_real *mine = ws + (size_t)omp_get_thread_num() * st->ws_stride; /* [Cout,CKK] */
        tb_real *col = mine + nw;                                           /* [CKK, G*P] */
        tb_real *dyg = col + (d->direct && p->G == 1 ? 0 : (size_t)d->ckk * p->G * d->P);
        memset(mine, 0, nw * sizeof(tb_real));
#pragma omp for schedule(static)
        for (int grp = 0; grp < p->ngroups; grp++) {
            int n0 = grp * p->G, gn = d->n - n0 < p->G ? d->n - n0 : p->G;
            size_t ld = (size_t)gn * d->P;
            const tb_real *A = dyd + (size_t)n0 * d->cout * d->P; /* dy [Cout, gn*P] */
            if (p->G > 1) {
                gather_images(dyd, d->cout, d->P, n0, gn, 0, d->cout, dyg);
                A = dyg;
            }
            const tb_real *B = xd + (size_t)n0 * d->cin * d->P; /* col [CKK, gn*P] */
            if (!(d->direct && p->G == 1)) {
                for (int i = 0; i < gn; i++)
                    im2col(d, xd + (size_t)(n0 + i) * d->cin * d->h * d->w, 0, d->cin, 0, d->ho,
                           col + i * d->P, ld);
                B = col;
            }
            cpu_gemm(CblasRowMajor, CblasNoTrans, CblasTrans, d->cout, d->ckk, (int)ld, 1.0f,
                        A, (int)ld, B, (int)ld, 1.0f, mine, d->ckk);
        }
        /* (implicit barrier) dw (+)= sum of the copies, in thread order */
#pragma omp for schedule(static)
        for (size_t i = 0; i < nw; i++) {
            tb_real s = accumulate ? dwd[i] : 0.0f;
            for (int t = 0; t < nt; t++) s += ws[(size_t)t * st->ws_stride + i];
            dwd[i] = s;
        }
    }
}

void cpu_conv_backward_filter(tb_backend *be, void *plan, const tb_conv_geom *g,
                              const tb_tensor *x, const tb_tensor *dy, const tb_tensor *dw,
                              int accumulate) {
    (void)plan;
    cpu_state *st = cpu_state_of(be);
    conv_dims d = conv_dims_of("conv_backward_filter", g, x, dw, dy);
    conv_split p = split_backward_filter(st, &d);
    tb_real *ws = cpu_workspace(st, p.ws);
    const tb_real *xd = x->data;   /* [N,Cin,H,W] */
    const tb_real *dyd = dy->data; /* [N,Cout,Ho,Wo] */
    tb_real *dwd = dw->data;       /* [Cout,CKK] */
    if (p.by_images) {
        filter_by_images(st, &d, &p, ws, xd, dyd, dwd, accumulate);
        return;
    }
    const int by_cout = filter_by_cout(&d);
    const int dim = by_cout ? d.cout : d.cin;

#pragma omp parallel for schedule(static) num_threads(st->threads)
    for (int band = 0; band < p.bands; band++) {
        tb_real *buf = ws + (size_t)omp_get_thread_num() * st->ws_stride;
        int b0 = band * p.per_band, b1 = b0 + p.per_band < dim ? b0 + p.per_band : dim;
        /* this band computes dw[co0:co1, c0*KK : c1*KK] */
        int co0 = by_cout ? b0 : 0, co1 = by_cout ? b1 : d.cout;
        int c0 = by_cout ? 0 : b0, c1 = by_cout ? d.cin : b1;
        int cols = (c1 - c0) * d.kk;
        tb_real *col = buf;
        tb_real *dyg = buf + (d.direct && p.G == 1 ? 0 : (size_t)cols * p.G * d.P);

        for (int grp = 0; grp < p.ngroups; grp++) {
            int n0 = grp * p.G, gn = d.n - n0 < p.G ? d.n - n0 : p.G;
            size_t ld = (size_t)gn * d.P;
            /* A = dy rows [co0,co1) of the group [co1-co0, gn*P] */
            const tb_real *A = dyd + ((size_t)n0 * d.cout + co0) * d.P;
            if (p.G > 1) {
                gather_images(dyd, d.cout, d.P, n0, gn, co0, co1 - co0, dyg);
                A = dyg;
            }
            /* B = col rows [c0*KK, c1*KK) of the group [cols, gn*P] */
            const tb_real *B;
            if (d.direct && p.G == 1) {
                B = xd + ((size_t)n0 * d.cin + c0) * d.P;
            } else {
                for (int i = 0; i < gn; i++)
                    im2col(&d, xd + (size_t)(n0 + i) * d.cin * d.h * d.w, c0, c1, 0, d.ho,
                           col + i * d.P, ld);
                B = col;
            }
            tb_real beta = grp == 0 && !accumulate ? 0.0f : 1.0f;
            cpu_gemm(CblasRowMajor, CblasNoTrans, CblasTrans, co1 - co0, cols, (int)ld, 1.0f,
                        A, (int)ld, B, (int)ld, beta, dwd + (size_t)co0 * d.ckk + (size_t)c0 * d.kk,
                        d.ckk);
        }
    }
}
