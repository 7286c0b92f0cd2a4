/* nvtx.h - NVTX ranges around host work, so that Nsight Systems (nsys
 * profile) shows the loader's stages on each thread's row beside the CUDA
 * and nvJPEG calls. NVTX3 is header-only (nvtx3/nvToolsExt.h in the CUDA
 * toolkit): a range costs a few nanoseconds when no tool is attached, and
 * nothing at all in a build without the toolkit (TB_HAVE_NVTX undefined:
 * the calls compile to nothing). Ranges nest per thread: every push has
 * its pop on the same thread. */
#ifndef TB_NVTX_H
#define TB_NVTX_H

#include <stdint.h>

#ifdef TB_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
long syscall(long number, ...); /* <unistd.h> declares it only with _DEFAULT_SOURCE */

/* Pushes a range named `name` (a string that outlives the call) with an
 * ARGB colour, so each stage keeps its colour on the timeline. */
static inline void tb_nvtx_push(const char *name, uint32_t argb) {
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = argb;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxRangePushEx(&a);
}
static inline void tb_nvtx_pop(void) { nvtxRangePop(); }
/* Names the calling thread's row ("loader worker 3"). */
static inline void tb_nvtx_name_thread(const char *name) { nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), name); }
static inline int tb_nvtx_built(void) { return 1; }
#else
static inline void tb_nvtx_push(const char *name, uint32_t argb) {
    (void)name;
    (void)argb;
}
static inline void tb_nvtx_pop(void) {}
static inline void tb_nvtx_name_thread(const char *name) { (void)name; }
static inline int tb_nvtx_built(void) { return 0; }
#endif

#endif
