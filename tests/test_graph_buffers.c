/* test_graph_buffers.c - does every op read what the op before it wrote?
 *
 * Runs training steps of ResNet-50 on the CPU backend with every op of the
 * backend table wrapped, and checks two things about the buffers:
 *
 *  1. Lifetimes. The hash of every activation is taken right after the
 *     forward op that wrote it, of every gradient right after the backward
 *     op that wrote it, and of the BatchNorm saved statistics and the
 *     weights after forward. Right before each op, the activations, saved
 *     statistics, weights and gradients it reads (dy, and dx when it
 *     accumulates) are hashed again and must be unchanged; after backward,
 *     every activation and saved statistic must still be what forward wrote.
 *     The weights are read-only pages from the end of forward to the end of
 *     backward: a write to them ends the test with a line naming the op
 *     (a planted write checks that, once).
 *     A scratch buffer, workspace or gradient-arena slot shared by two live
 *     tensors shows up here, named by node.
 *  2. Fresh buffers. Every op is run a second time, on a second CPU backend
 *     whose scratch is filled with NaN, on private copies of its inputs
 *     taken before the real call (outputs it overwrites are NaN-filled,
 *     outputs it adds to are copies), and its outputs must equal the real
 *     call's bit for bit. An op that reads stale scratch, its own output
 *     through an alias, or anything not among its arguments differs here.
 *
 * Both checks run under several cuts of the work: 1, 2, 3 and 24 OpenMP
 * threads (more threads than cores: what a many-core machine picks; run as
 * many as named, threads_over_cpus, where the backend would cap them), a
 * scratch cap of 128 KiB (convs cut into many bands), and GEMM grouping
 * forced off and on (conv_min_cols 1 and 1<<20); with 2 and 24 threads two
 * steps, so the second reads scratch the first left behind. Geometries: the
 * golden tests' ResNet-50 cases (batch 2 at 64x48, batch 4 at 96x96), fused
 * and unfused.
 * Exit 0 when every check passes, 1 otherwise.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_graph_buffers.h"

tb_backend g_real;
tb_backend *g_fresh;
tb_model *g_m;
uint64_t *g_act_hash;
uint64_t *g_grad_hash;
unsigned char *g_grad_valid;
uint64_t g_params_hash;
char g_when[160];
int g_fwd_next;
int g_bwd_node;
int g_bwd_ops_left;
int g_lifetime_bad, g_fresh_bad, g_ops_checked;
const char *g_config;
int tb_test_failures, tb_test_checks; /* tb_test.h, shared with test_graph_buffers_wrap.c */
uint64_t *g_stats_hash;

/* ---- the weights, read-only through backward ------------------------------------- */

static unsigned char *g_w_lo, *g_w_hi; /* the whole pages inside the weights; lo == hi: none */
static struct sigaction g_old_segv;    /* the handler before ours (AddressSanitizer's, under it) */
static uint64_t g_w_edges;             /* hash of the bytes outside them */

static uint64_t edges_hash(void) {
    const unsigned char *p = (const unsigned char *)g_m->params;
    const unsigned char *end = p + g_m->pt.n_train * sizeof(tb_real);
    const unsigned char *lo = g_w_lo ? g_w_lo : end, *hi = g_w_lo ? g_w_hi : end;
    return hash_bytes(p, (size_t)(lo - p)) ^ (hash_bytes(hi, (size_t)(end - hi)) * 3);
}

/* SIGSEGV: a write to the locked pages is this test's failure, named; any
 * other fault is a crash, reported by the handler before ours (ASan's) */
static void weights_fault(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    unsigned char *a = si->si_addr;
    if (g_w_lo && a >= g_w_lo && a < g_w_hi) {
        static const char pre[] = "FAIL [", mid[] = "] the weights were written during ", post[] = "\n";
        if (write(1, pre, sizeof pre - 1) < 0 || write(1, g_config, strlen(g_config)) < 0 ||
            write(1, mid, sizeof mid - 1) < 0 || write(1, g_when, strlen(g_when)) < 0 ||
            write(1, post, sizeof post - 1) < 0) {
        }
        _exit(1);
    }
    sigaction(sig, &g_old_segv, NULL); /* returns into the fault: the handler before ours reports it */
}

void weights_lock(void) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t p = (uintptr_t)g_m->params, end = p + g_m->pt.n_train * sizeof(tb_real);
    uintptr_t lo = (p + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    uintptr_t hi = end / (uintptr_t)page * (uintptr_t)page;
    g_w_lo = g_w_hi = NULL;
    if (hi > lo) {
        TB_ASSERT(mprotect((void *)lo, hi - lo, PROT_READ) == 0);
        g_w_lo = (unsigned char *)lo, g_w_hi = (unsigned char *)hi;
    }
    snprintf(g_when, sizeof g_when, "the loss");
    g_w_edges = edges_hash();
}

void weights_unlock(void) {
    if (g_w_lo) TB_ASSERT(mprotect(g_w_lo, (size_t)(g_w_hi - g_w_lo), PROT_READ | PROT_WRITE) == 0);
    g_w_lo = g_w_hi = NULL;
}

int weights_edges_changed(void) { return edges_hash() != g_w_edges; }

/* Planted, once: a write into the locked pages (a child process) must end
 * with the line naming it and exit 1; one to the first weight must show in
 * the edges' hash where that byte lies outside the pages, else fault too. */
static void weights_lock_catches(void) {
    tb_real *w = g_m->params;
    size_t n = g_m->pt.n_train;
    int caught = 0;
    char line[512] = "";
    for (int where = 0; where < 2; where++) {
        int fd[2];
        TB_ASSERT(pipe(fd) == 0);
        fflush(stdout);
        pid_t pid = fork();
        TB_ASSERT(pid >= 0);
        if (pid == 0) {
            dup2(fd[1], 1);
            weights_lock();
            snprintf(g_when, sizeof g_when, "a planted write (%s)", where ? "the first weight" : "the middle");
            volatile tb_real *v = w;
            v[where ? 0 : n / 2] += 1;
            _exit(weights_edges_changed() ? 1 : 0);
        }
        close(fd[1]);
        size_t have = 0; /* the handler writes its line in pieces: read to the end */
        for (ssize_t got; have < sizeof line - 1 && (got = read(fd[0], line + have, sizeof line - 1 - have)) > 0;)
            have += (size_t)got;
        line[have] = 0;
        close(fd[0]);
        int st = 0;
        TB_ASSERT(waitpid(pid, &st, 0) == pid);
        caught += WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
                  (where || strstr(line, "the weights were written during a planted write (the middle)"));
    }
    TB_CHECK(caught == 2, "planted writes to the locked weights: %d of 2 caught", caught);
}

/* ---- one configuration -------------------------------------------------------- */

typedef struct {
    const char *name;
    int threads;
    size_t ws_cap_bytes;  /* 0: the backend's default */
    int conv_min_cols;    /* 0: the backend's default */
} cut;

static tuned_args g_tuned[128];
static int g_ntuned;

void tuned_record(tb_backend *be, const tb_bn_args *a, const tb_bn_grads *g) {
    (void)be;
    TB_ASSERT(g_ntuned < 128);
    tuned_args t = {a->x->data,      a->y->data,       a->z ? a->z->data : NULL,
                    g->dy->data,     g->dx->data,      g->dz ? g->dz->data : NULL,
                    a->plan,         a->reserve,       a->running_mean,
                    a->running_var,  a->save_mean,     a->save_invstd,
                    g->dgamma,       g->dbeta,         a->reserve_bytes,
                    a->x->n,         a->relu,          g->accumulate_dx || g->accumulate_dz,
                    0};
    g_tuned[g_ntuned++] = t;
}

void tuned_match(const tb_bn_args *a, const tb_bn_grads *g) {
    for (int i = 0; i < g_ntuned; i++) {
        tuned_args *t = &g_tuned[i];
        if (t->x != a->x->data) continue;
        /* what the step gives, and no accumulation in either (bn_tune's must not ask for it) */
        t->matched += t->y == a->y->data && t->z == (a->z ? a->z->data : NULL) && t->dy == g->dy->data &&
                      t->dx == g->dx->data && t->dz == (g->dz ? g->dz->data : NULL) && t->plan == a->plan &&
                      t->reserve == a->reserve && t->reserve_bytes == a->reserve_bytes && t->rm == a->running_mean &&
                      t->rv == a->running_var && t->sm == a->save_mean && t->si == a->save_invstd &&
                      t->dgamma == g->dgamma && t->dbeta == g->dbeta && t->n == a->x->n && t->relu == a->relu &&
                      !t->acc && !g->accumulate_dx && !(g->dz && g->accumulate_dz);
    }
}

static tb_backend *make_backend(const cut *c) {
    tb_backend_opts bo = {.threads = c->threads, .threads_over_cpus = 1}; /* 3 and 24 on a 2-core machine too */
    tb_backend *be = tb_cpu_backend_create(&bo);
    cpu_state *st = cpu_state_of(be);
    if (c->ws_cap_bytes) st->ws_cap_bytes = c->ws_cap_bytes;
    if (c->conv_min_cols) st->conv_min_cols = c->conv_min_cols;
    return be;
}

static void run_case(const cut *c, int n, int h, int w, int classes, int fuse, int steps) {
    char label[160];
    snprintf(label, sizeof label, "%s, resnet50 %dx3x%dx%d%s, %d step%s", c->name, n, h, w,
             fuse ? "" : " unfused", steps, steps > 1 ? "s" : "");
    g_config = label;
    tb_backend *be = make_backend(c);
    g_fresh = make_backend(c);
    tb_resnet_config cfg;
    TB_ASSERT(tb_resnet_config_init(&cfg, "resnet50", classes) == 0);
    tb_model_opts o = tb_model_default_opts();
    o.fuse = fuse;
    be->bn_tune = tuned_record;
    g_ntuned = 0;
    g_m = tb_model_create(&cfg, be, n, h, w, &o);
    tb_model_init(g_m, 24);
    /* the fresh backend's scratch: as large as the model's plans made the
     * real one, all NaN, so a read of stale scratch shows */
    cpu_state *rs = cpu_state_of(be), *fs = cpu_state_of(g_fresh);
    tb_real *ws = cpu_workspace(fs, rs->ws_stride);
    for (size_t i = 0; i < fs->ws_stride * (size_t)fs->threads; i++) ws[i] = NAN;
    wrap(be);

    size_t na = (size_t)g_m->g.nacts, nn = (size_t)g_m->g.nnodes;
    g_act_hash = calloc(na, sizeof *g_act_hash);
    g_grad_hash = calloc(na, sizeof *g_grad_hash);
    g_grad_valid = calloc(na, 1);
    g_stats_hash = calloc(nn, sizeof *g_stats_hash);
    TB_ASSERT(g_act_hash && g_grad_hash && g_grad_valid && g_stats_hash);

    tb_rng rng;
    tb_rng_seed(&rng, 7, 0);
    size_t ni = (size_t)n * 3 * h * w;
    float *img = malloc(ni * sizeof *img);
    int32_t *lab = malloc((size_t)n * sizeof *lab);
    TB_ASSERT(img && lab);
    int lifetime0 = g_lifetime_bad, fresh0 = g_fresh_bad, ops0 = g_ops_checked;
    for (int step = 0; step < steps; step++) {
        for (size_t i = 0; i < ni; i++) img[i] = (float)tb_rng_normal(&rng);
        for (int i = 0; i < n; i++) lab[i] = (int32_t)tb_rng_below(&rng, (uint64_t)classes);
        tb_model_set_batch(g_m, img, lab, n);
        g_act_hash[g_m->g.input] = act_hash(g_m->g.input);
        memset(g_grad_valid, 0, na);
        g_fwd_next = 0;
        tb_model_forward(g_m, 1);
        TB_ASSERT(g_fwd_next == g_m->g.nnodes);
        tb_model_loss(g_m, 0.1, 1.0);
        g_bwd_node = g_m->g.nnodes;
        g_bwd_ops_left = 0;
        tb_model_backward(g_m, NULL, NULL);
        weights_unlock();
        if (hash_bytes(g_m->params, g_m->pt.n_train * sizeof(tb_real)) != g_params_hash) {
            g_lifetime_bad++;
            printf("FAIL [%s] the weights changed between forward and the end of backward, step %d\n", g_config,
                   step);
        }
        for (int i = 0; i < g_m->g.nnodes; i++) {
            char when[160];
            snprintf(when, sizeof when, "after backward, step %d", step);
            expect_act(g_m->g.nodes[i].out, when);
            if (node_is_bn(i) && stats_hash(i) != g_stats_hash[i]) {
                g_lifetime_bad++;
                printf("FAIL [%s] saved batch statistics of %s changed (%s)\n", g_config,
                       g_m->g.nodes[i].name, when);
            }
        }
        tb_sgd_args sgd = {0.01, 0.9, 1, 1.0};
        tb_model_sgd_step(g_m, &sgd, 1e-4, 0);
    }
    if (c->threads == 1) weights_lock_catches();
    TB_CHECK(g_lifetime_bad == lifetime0, "[%s] %d tensors changed while still needed", label,
             g_lifetime_bad - lifetime0);
    TB_CHECK(g_fresh_bad == fresh0, "[%s] %d op outputs differ on fresh buffers", label,
             g_fresh_bad - fresh0);
    int nbn = 0, tuned_ok = 0;
    for (int i = 0; i < g_m->g.nnodes; i++) nbn += node_is_bn(i);
    for (int i = 0; i < g_ntuned; i++) tuned_ok += g_tuned[i].matched == steps;
    TB_CHECK(g_ntuned == nbn && tuned_ok == nbn,
             "[%s] bn_tune: %d calls for %d BatchNorms, %d given what each step's bn_backward was given", label,
             g_ntuned, nbn, tuned_ok);
    TB_CHECK(rs->threads == c->threads, "[%s] the backend ran %d threads, not the %d of the cut", label,
             rs->threads, c->threads);
    printf("%-64s %5d ops, %2d threads, scratch %6.1f MiB/thread: %s\n", label,
           g_ops_checked - ops0, rs->threads, (double)rs->ws_stride * sizeof(tb_real) / (1 << 20),
           g_lifetime_bad == lifetime0 && g_fresh_bad == fresh0 ? "PASS" : "FAIL");
    fflush(stdout);
    free(img), free(lab);
    free(g_act_hash), free(g_grad_hash), free(g_grad_valid), free(g_stats_hash);
    tb_model_destroy(g_m);
    g_m = NULL;
    be->destroy(be);
    g_fresh->destroy(g_fresh);
}

int main(void) {
    struct sigaction sa = {.sa_sigaction = weights_fault, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    TB_ASSERT(sigaction(SIGSEGV, &sa, &g_old_segv) == 0);
    static const cut cuts[] = {
        {"1 thread", 1, 0, 0},
        {"2 threads (golden tests)", 2, 0, 0},
        {"3 threads", 3, 0, 0},
        {"24 threads (many-core)", 24, 0, 0},
        {"2 threads, 128 KiB scratch cap", 2, (size_t)128 << 10, 0},
        {"3 threads, no grouping", 3, 0, 1},
        {"3 threads, grouping always", 3, 0, 1 << 20},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
        run_case(&cuts[i], 2, 64, 48, 7, 1, i == 1 || i == 3 ? 2 : 1);
    run_case(&cuts[1], 4, 96, 96, 23, 1, 1);
    run_case(&cuts[3], 4, 96, 96, 23, 1, 1);
    run_case(&cuts[2], 2, 64, 48, 7, 0, 1);
    return tb_test_exit("test_graph_buffers");
}
