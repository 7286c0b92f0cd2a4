/* feed_plan.c - the feed decided once, before the loader is made (feed_plan.h). */
#include "src/feed/feed_plan.h"

#include <string.h>

#include "core/log.h"
#include "src/feed/batch_upload.h" /* tb_upload_pinned_alloc / free */

int tb_decode_parse(const char *name, tb_decode_mode *out) {
    static const struct {
        const char *name;
        tb_decode_mode mode;
    } modes[] = {{"fast", TB_DECODE_FAST},
                 {"partial", TB_DECODE_PARTIAL},
                 {"full", TB_DECODE_FULL},
                 {"fast-all", TB_DECODE_FAST_ALL},
                 {"gpu", TB_DECODE_GPU}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(name, modes[i].name) == 0) {
            *out = modes[i].mode;
            return 0;
        }
    return -1;
}

static int choose(tb_feed_choice c, int dflt) { return c == TB_FEED_AUTO ? dflt : c == TB_FEED_ON; }

tb_feed_opts tb_feed_decide(const tb_backend *be, const tb_feed_ask *ask) {
    tb_feed_opts f = {ask->decode, 0, 0, 0};
    if (ask->host_read) { /* validation: the CPU decodes, float32 batches read on the host */
        if (f.decode == TB_DECODE_GPU) f.decode = TB_DECODE_FAST;
        return f;
    }
    int cuda = strcmp(be->name, "cuda") == 0;
    f.u8 = choose(ask->u8, cuda);
    f.pinned = choose(ask->pinned, cuda);
    f.resident = choose(ask->resident, cuda);
    return f;
}

void tb_feed_loader_opts(const tb_feed_opts *fo, tb_backend *be, tb_loader_opts *o) {
    TB_ASSERT(o->format == TB_OUT_F32_NCHW);
    o->decode = fo->decode;
    if (!fo->u8 && fo->decode == TB_DECODE_GPU)
        tb_die("--decode gpu decodes into device memory and needs the CUDA backend (this run uses %s)",
               be ? be->name : "none");
    if (!fo->u8) return;
    o->format = TB_OUT_U8_NHWC;
    o->gpu_flip = 1;
    if (fo->pinned) {
        TB_ASSERT(be);
        o->host_alloc = tb_upload_pinned_alloc;
        o->host_free = tb_upload_pinned_free;
        o->host_ctx = be;
    }
}
