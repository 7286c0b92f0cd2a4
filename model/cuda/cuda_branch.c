/* cuda_branch.c - the weight gradient beside the data gradient
 * (TB_WGRAD_STREAM=on; backend.h: branch_begin, branch_end, branch_join).
 *
 * A conv's filter gradient (and, with a grad-ready hook, its conversion
 * into the flat float32 gradients; without one the conversions wait for
 * the end of backward, graph.c) goes on a second non-blocking stream that
 * first waits for the compute stream (the fork event); the conv's data
 * gradient goes on the compute stream meanwhile; at the join the compute
 * stream waits for the second one (the join event). Inside a CUDA graph capture the same two
 * events make the two branches of the captured graph. MLPerf's ResNet-50
 * (MXNet) runs its wgrads beside its dgrads the same way: a late layer's
 * wgrad (1x1, 512 -> 2048 at 7x7) is a small matrix with a long reduction
 * that leaves most SMs idle.
 *
 * While a branch is open, what every op queues on is the second stream:
 * be->compute_stream, the cuDNN handle's stream (legacy calls and
 * cudnnBackendExecute take it from the handle) and the shared workspace
 * (st->ws, swapped with the second stream's own), so the two convolutions
 * never share a workspace. Under --fuse graph a conv with a folded BN
 * branches too; where its filter gradient runs as the composition
 * (fused_ops.c), the relu(x * scale + bias) it reads goes to the second
 * stream's own buffer (side_xp), since the data gradient's composition
 * writes the shared one beside it. The two workspaces grow together
 * (cu_workspace, whichever is swapped in), so a plan made with either
 * stream's fits the other's. A capture abandoned inside a branch (a failure
 * the trainer's trap caught) would leave it open, and the second stream
 * forked into the capture but never joined back (cudaStreamEndCapture then
 * fails with cudaErrorStreamCaptureUnjoined): the trainer calls
 * capture_unwind (cu_branch_unwind) first, which joins it back, queued;
 * the backend's sync still closes a branch left open otherwise before the
 * step runs again eagerly.
 */
#include <stdlib.h>
#include <string.h>

#include "core/faults.h"
#include "core/log.h"
#include "model/cuda/cuda_internal.h"

/* TB_WGRAD_STREAM: off (unset or empty) or on. */
int cu_branch_from_env(void) {
    return cu_env_on_off("TB_WGRAD_STREAM", 0,
                         "whether the convolutions' weight gradients run on a second stream beside their data "
                         "gradients");
}

void cu_branch_init(cu_state *st, int on) {
    st->branch_on = on;
    if (!on) return;
    TB_CUDA_CHECK(cudaStreamCreateWithFlags(&st->side, cudaStreamNonBlocking));
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&st->fork_ev, cudaEventDisableTiming));
    TB_CUDA_CHECK(cudaEventCreateWithFlags(&st->join_ev, cudaEventDisableTiming));
}

void cu_branch_free(cu_state *st) {
    if (!st->side) return;
    TB_CUDA_CHECK(cudaStreamSynchronize(st->side));
    cu_free(st, st->side_ws);
    st->side_ws = NULL;
    st->side_ws_bytes = 0;
    cu_free(st, st->side_xp);
    st->side_xp = NULL;
    st->side_xp_bytes = 0;
    TB_CUDA_CHECK(cudaEventDestroy(st->fork_ev));
    TB_CUDA_CHECK(cudaEventDestroy(st->join_ev));
    TB_CUDA_CHECK(cudaStreamDestroy(st->side));
    st->side = NULL;
}

void cu_branch_xp_reserve(cu_state *st, size_t bytes) {
    if (!st->side || bytes <= st->side_xp_bytes) return;
    TB_CUDA_CHECK(cudaStreamSynchronize(st->side));
    cu_free(st, st->side_xp);
    st->side_xp = cu_malloc(st, bytes, "the second stream's copy of a folded BatchNorm's output");
    st->side_xp_bytes = bytes;
}

static void swap_ws(cu_state *st) {
    void *p = st->ws;
    size_t b = st->ws_bytes;
    st->ws = st->side_ws, st->ws_bytes = st->side_ws_bytes;
    st->side_ws = p, st->side_ws_bytes = b;
}

/* Ops queue on the compute stream again, with its cuDNN stream and workspace. */
static void back_to_main(tb_backend *be, cu_state *st) {
    swap_ws(st);
    TB_CUDNN_CHECK(cudnnSetStream(st->cudnn, st->stream));
    be->compute_stream = st->stream;
}

/* Puts the compute stream, the cuDNN handle's stream and the workspaces
 * back as they are outside a branch, when a branch was left open (a
 * capture abandoned inside it) or ended without its join; waits for both
 * streams. */
void cu_branch_close(tb_backend *be) {
    cu_state *st = cu_state_of(be);
    if (!st->in_branch && !st->join_pending) return;
    if (st->in_branch) back_to_main(be, st);
    st->in_branch = st->join_pending = 0;
    TB_CUDA_CHECK(cudaStreamSynchronize(st->side));
    TB_CUDA_CHECK(cudaStreamSynchronize(st->stream));
    tb_warn("cuda: the weight gradient's second stream was left open (by an abandoned CUDA graph capture); "
            "closed, and both streams waited for");
}

int cu_branch_begin(tb_backend *be) {
    cu_state *st = cu_state_of(be);
    if (!st->branch_on) return 0;
    if (st->in_branch || st->join_pending) TB_FATAL("cuda branch_begin: the last branch was not joined");
    if (st->side_ws_bytes != st->ws_bytes)
        TB_FATAL("cuda branch_begin: the second stream's workspace (%zu bytes) is not the shared one's size (%zu)",
                 st->side_ws_bytes, st->ws_bytes);
    TB_CUDA_CHECK(cudaEventRecord(st->fork_ev, st->stream));
    TB_CUDA_CHECK(cudaStreamWaitEvent(st->side, st->fork_ev, 0));
    be->compute_stream = st->side;
    TB_CUDNN_CHECK(cudnnSetStream(st->cudnn, st->side));
    swap_ws(st);
    st->in_branch = 1;
    static int fault_fired;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (!fault_fired && tb_fault("fatal-in-branch", tb_fault_rank(), -1) &&
        cudaStreamIsCapturing(st->stream, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusActive) {
        fault_fired = 1;
        TB_FATAL("test fault fatal-in-branch: a failure inside a weight-gradient branch of the capture");
    }
    return 1;
}

void cu_branch_end(tb_backend *be) {
    cu_state *st = cu_state_of(be);
    if (!st->in_branch) TB_FATAL("cuda branch_end: no branch is open");
    TB_CUDA_CHECK(cudaEventRecord(st->join_ev, st->side));
    back_to_main(be, st);
    st->in_branch = 0;
    st->join_pending = 1;
}

void cu_branch_join(tb_backend *be) {
    cu_state *st = cu_state_of(be);
    if (!st->join_pending) TB_FATAL("cuda branch_join: no branch has ended");
    TB_CUDA_CHECK(cudaStreamWaitEvent(st->stream, st->join_ev, 0));
    st->join_pending = 0;
}

/* backend.h capture_unwind: a branch still open (or ended, not joined) when
 * a capture is abandoned joins the compute stream now, queued; the errors
 * of an invalidated capture are ignored (the capture is being ended). */
void cu_branch_unwind(tb_backend *be) {
    cu_state *st = cu_state_of(be);
    if (!st->side || (!st->in_branch && !st->join_pending)) return;
    cudaError_t rec = st->in_branch ? cudaEventRecord(st->join_ev, st->side) : cudaSuccess;
    cudaError_t join = cudaStreamWaitEvent(st->stream, st->join_ev, 0);
    (void)cudaGetLastError();
    if (st->in_branch) back_to_main(be, st);
    st->in_branch = st->join_pending = 0;
    if (rec == cudaSuccess && join == cudaSuccess)
        tb_warn("cuda: the weight gradient's second stream was open when the capture was abandoned; joined back");
    else
        tb_warn("cuda: the weight gradient's second stream was open when the capture was abandoned and could not "
                "be joined back (%s)",
                cudaGetErrorString(rec != cudaSuccess ? rec : join));
}
