/* batch_upload.c - loader slots to the device through two staging buffers,
 * ordered by events (see batch_upload.h). */
#include "src/feed/batch_upload.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/timer.h"
#include "data/transform.h"

typedef enum {
    HELD_NONE,     /* the loader has the slot */
    HELD_AHEAD,    /* taken ahead (its copy queued), not handed out yet */
    HELD_HANDED,   /* the consumer's batch */
    HELD_DONE,     /* the consumer released it; back to the loader once its guard completed */
} held_state;

typedef struct {
    const tb_batch *b;
    held_state st;
    int guard_set;             /* guard[slot] stands for work this slot must outlive */
    int buf;                   /* staging buffer its copy went to */
} held_slot;

struct tb_upload {
    tb_model *m;
    tb_backend *be;
    tb_loader *ld;
    tb_upload_opts o;
    int S, max_batch, nslots;
    size_t img_bytes;          /* one staging buffer's images: max_batch * S * S * 3 */
    held_slot *held;           /* [nslots] */
    tb_event **guard;          /* [nslots] */
    uint8_t *dimg[2];          /* device [max_batch,S,S,3] */
    uint8_t *dflip[2];         /* device [max_batch] */
    tb_event *uploaded[2];     /* copy stream: the buffer's last copy is complete */
    tb_event *consumed[2];     /* compute stream: the buffer's last reader is complete */
    int consumed_set[2];
    tb_stream *copy;
    int next_buf;
    int ahead, handed;         /* slot taken ahead / handed out, or -1 */
    int64_t last_step;         /* last step taken from the loader */
    tb_upload_stats st;
};

void *tb_upload_pinned_alloc(void *backend, size_t bytes) {
    tb_backend *be = backend;
    return be->host_alloc(be, bytes);
}

void tb_upload_pinned_free(void *backend, void *p) {
    tb_backend *be = backend;
    be->host_free(be, p);
}

tb_upload *tb_upload_create(tb_model *m, tb_loader *ld, const tb_upload_opts *o) {
    tb_upload *u = calloc(1, sizeof *u);
    if (!u) TB_FATAL("out of host memory");
    u->m = m;
    u->be = m->be;
    u->ld = ld;
    u->o = *o;
    if (!u->o.pinned) u->o.lookahead = 0;
    TB_ASSERT(m->height == m->width);
    u->S = m->height;
    u->max_batch = m->max_batch;
    u->nslots = tb_loader_slots(ld);
    u->img_bytes = (size_t)u->max_batch * u->S * u->S * 3;
    u->held = calloc((size_t)u->nslots, sizeof *u->held);
    u->guard = calloc((size_t)u->nslots, sizeof *u->guard);
    if (!u->held || !u->guard) TB_FATAL("out of host memory");
    tb_backend *be = u->be;
    for (int i = 0; i < u->nslots; i++) u->guard[i] = be->event_create(be, 0);
    for (int k = 0; k < 2; k++) {
        u->dimg[k] = be->alloc(be, u->img_bytes + (size_t)u->max_batch);
        u->dflip[k] = u->dimg[k] + u->img_bytes;
        u->uploaded[k] = be->event_create(be, 0);
        u->consumed[k] = be->event_create(be, 0);
    }
    u->copy = be->stream_create(be);
    u->ahead = u->handed = -1;
    u->last_step = -1;
    return u;
}

tb_loader *tb_upload_loader(tb_upload *u) { return u->ld; }

void tb_upload_stats_get(const tb_upload *u, tb_upload_stats *st) { *st = u->st; }

/* Gives slot i back to the loader once its guard has completed; with
 * `force`, waits for it. Returns 1 when released. */
static int give_back(tb_upload *u, int i, int force) {
    held_slot *h = &u->held[i];
    TB_ASSERT(h->st == HELD_DONE);
    if (h->guard_set && !u->be->event_done(u->be, u->guard[i])) {
        if (!force) return 0;
        u->be->event_wait(u->be, u->guard[i]);
        u->st.slot_waits++;
    }
    if (h->guard_set && !u->be->event_done(u->be, u->guard[i])) u->st.released_pending++;
    tb_loader_release(u->ld, h->b);
    memset(h, 0, sizeof *h);
    u->st.released++;
    return 1;
}

/* Every released slot whose guard is complete goes back; none waits. */
static void reclaim(tb_upload *u) {
    for (int i = 0; i < u->nslots; i++)
        if (u->held[i].st == HELD_DONE) give_back(u, i, 0);
}

/* Queues batch b's copy (pinned) into the next staging buffer. */
static void take(tb_upload *u, const tb_batch *b, held_state st) {
    held_slot *h = &u->held[b->slot];
    if (h->st != HELD_NONE) TB_FATAL("batch upload: loader slot %d handed out twice", b->slot);
    h->b = b;
    h->st = st;
    h->buf = u->next_buf;
    u->next_buf ^= 1;
    u->last_step = b->step;
    int held = 0;
    for (int i = 0; i < u->nslots; i++) held += u->held[i].st != HELD_NONE;
    if (held > u->st.max_held) u->st.max_held = held;
    if (!u->o.pinned || b->n == 0) return; /* copied by tb_batch_upload_apply, or nothing to copy */
    tb_backend *be = u->be;
    int k = h->buf;
    if (u->consumed_set[k]) { /* the copy must not overwrite what the last input op still reads */
        be->stream_wait(be, u->copy, u->consumed[k]);
        u->st.buffer_waits++;
    }
    size_t bytes = (size_t)b->n * u->S * u->S * 3;
    if (!b->on_device) be->copy_h2d_async(be, u->dimg[k], b->images, bytes, u->copy);
    if (b->flip) be->copy_h2d_async(be, u->dflip[k], b->flip, (size_t)b->n, u->copy);
    be->event_record(be, u->uploaded[k], u->copy);
    be->event_record(be, u->guard[b->slot], u->copy);
    h->guard_set = 1;
}

static void fill(tb_upload *u, const tb_batch *lb, double wait_s, tb_source_batch *b) {
    memset(b, 0, sizeof *b);
    b->in.kind = lb->on_device ? TB_INPUT_U8_DEVICE : TB_INPUT_U8;
    b->in.u8.images = lb->images;
    b->in.u8.flip = lb->flip;
    b->in.u8.up = u;
    b->in.u8.buf = u->held[lb->slot].buf;
    b->in.u8.slot = lb->slot;
    b->labels = lb->labels;
    b->n = lb->n;
    b->step = lb->step;
    b->wait_s = wait_s;
}

int tb_upload_next(tb_upload *u, tb_source_batch *b) {
    if (u->handed >= 0) TB_FATAL("batch upload: the last batch was not released");
    reclaim(u);
    const tb_batch *lb;
    double wait_s = 0;
    if (u->ahead >= 0) {
        lb = u->held[u->ahead].b;
        u->ahead = -1;
        u->st.lookahead++;
    } else {
        double t0 = tb_now();
        /* the loader fills step s into slot s % nslots: that slot must be back */
        int need = (int)((u->last_step + 1) % u->nslots);
        if (u->held[need].st == HELD_DONE) give_back(u, need, 1);
        if (u->held[need].st != HELD_NONE)
            TB_FATAL("batch upload: loader slot %d is still held; raise --prefetch", need);
        lb = tb_loader_next(u->ld);
        if (!lb) return 0;
        take(u, lb, HELD_AHEAD);
        wait_s = tb_now() - t0;
    }
    u->held[lb->slot].st = HELD_HANDED;
    u->handed = lb->slot;
    u->st.batches++;
    fill(u, lb, wait_s, b);
    if (u->o.lookahead) { /* the next batch's copy overlaps this step */
        int need = (int)((u->last_step + 1) % u->nslots);
        const tb_batch *nb = NULL;
        if (u->held[need].st == HELD_NONE && tb_loader_try_next(u->ld, &nb) == 1) {
            take(u, nb, HELD_AHEAD);
            u->ahead = nb->slot;
        }
    }
    return 1;
}

void tb_upload_release(tb_upload *u) {
    if (u->handed < 0) return;
    u->held[u->handed].st = HELD_DONE;
    u->handed = -1;
    reclaim(u);
}

/* Every slot back to the loader, after the work that reads it. */
static void give_back_all(tb_upload *u) {
    if (u->handed >= 0) u->held[u->handed].st = HELD_DONE, u->handed = -1;
    if (u->ahead >= 0) u->held[u->ahead].st = HELD_DONE, u->ahead = -1;
    for (int i = 0; i < u->nslots; i++)
        if (u->held[i].st == HELD_DONE) give_back(u, i, 1);
}

void tb_upload_start_epoch(tb_upload *u, int64_t epoch, int64_t first_step) {
    give_back_all(u);
    tb_loader_start_epoch(u->ld, epoch, first_step);
    u->last_step = first_step - 1;
}

void tb_upload_destroy(tb_upload *u) {
    if (!u) return;
    tb_backend *be = u->be;
    give_back_all(u);
    be->sync(be); /* the last input ops read the staging buffers */
    be->event_wait(be, u->uploaded[0]);
    be->event_wait(be, u->uploaded[1]);
    tb_loader_destroy(u->ld);
    for (int k = 0; k < 2; k++) {
        be->release(be, u->dimg[k]);
        be->event_destroy(be, u->uploaded[k]);
        be->event_destroy(be, u->consumed[k]);
    }
    for (int i = 0; i < u->nslots; i++) be->event_destroy(be, u->guard[i]);
    be->stream_destroy(be, u->copy);
    free(u->guard);
    free(u->held);
    free(u);
}

static tb_input_norm imagenet_norm(void) {
    tb_input_norm nm;
    for (int c = 0; c < 3; c++) {
        nm.mean[c] = tb_imagenet_mean[c];
        nm.std[c] = tb_imagenet_std[c];
    }
    return nm;
}

/* A batch of an upload: the compute stream waits for its copy (or copies
 * it now, pageable slots), input_u8 normalises and flips it. */
static void apply_upload(tb_model *m, const tb_source_batch *b, const tb_input_norm *nm) {
    tb_upload *u = b->in.u8.up;
    const int on_device = b->in.kind == TB_INPUT_U8_DEVICE;
    const uint8_t *images = b->in.u8.images, *flip = b->in.u8.flip;
    TB_ASSERT(u->m == m && b->n >= 1 && b->n <= u->max_batch);
    tb_backend *be = u->be;
    const int k = b->in.u8.buf, slot = b->in.u8.slot;
    tb_model_set_labels(m, b->labels, b->n);
    const uint8_t *src = on_device ? images : u->dimg[k];
    tb_op_prof *prof = m->g.prof; /* --op-profile (NULL: off) */
    if (!u->o.pinned) { /* pageable slots: copied now, in order on the compute stream */
        if (!on_device) {
            tb_op_prof_begin(prof, "images", TB_OPP_INPUT, TB_OPK_UPLOAD);
            be->copy_h2d(be, u->dimg[k], images, (size_t)b->n * u->S * u->S * 3);
            tb_op_prof_end(prof);
        }
        if (flip) {
            tb_op_prof_begin(prof, "flips", TB_OPP_INPUT, TB_OPK_UPLOAD);
            be->copy_h2d(be, u->dflip[k], flip, (size_t)b->n);
            tb_op_prof_end(prof);
        }
    } else {
        /* the copy stream's upload: a wait before the input op, in no op's time */
        be->stream_wait(be, NULL, u->uploaded[k]);
    }
    /* a GPU-decoded batch: the compute stream waits for the GPU stage's
     * device work on it (its fence); the host does not */
    if (on_device) tb_loader_batch_order(u->ld, u->held[slot].b, be->native_stream(be, NULL));
    tb_tensor x = tb_graph_act(&m->g, m->g.input, b->n);
    tb_op_prof_begin(prof, "input", TB_OPP_INPUT, TB_OPK_INPUT);
    be->input_u8(be, src, flip ? u->dflip[k] : NULL, nm, &x);
    tb_op_prof_end(prof);
    be->event_record(be, u->consumed[k], NULL);
    u->consumed_set[k] = 1;
    if (on_device) { /* the loader slot itself was read: it waits for this op */
        be->event_record(be, u->guard[slot], NULL);
        u->held[slot].guard_set = 1;
    }
}

void tb_batch_upload_apply(tb_model *m, const tb_source_batch *b) {
    tb_input_norm nm = imagenet_norm();
    const tb_batch_input *in = &b->in;
    switch (in->kind) {
    case TB_INPUT_F32:
        tb_model_set_batch(m, in->f32, b->labels, b->n);
        return;
    case TB_INPUT_ROWS:
        tb_model_set_batch_rows(m, in->rows.pool, in->rows.pool_rows, in->rows.rows, b->labels, b->n);
        return;
    case TB_INPUT_U8:
        if (!in->u8.up) {
            tb_model_set_batch_u8(m, in->u8.images, in->u8.flip, b->labels, b->n, &nm);
            return;
        }
        apply_upload(m, b, &nm);
        return;
    case TB_INPUT_U8_DEVICE:
        TB_ASSERT(in->u8.up); /* device slots come through an upload */
        apply_upload(m, b, &nm);
        return;
    }
    TB_FATAL("batch input of unknown kind %d", (int)in->kind);
}
