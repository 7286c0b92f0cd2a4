/* nccl_stub.c - a stand-in libnccl.so.2 for the host test of the GPU
 * bundle's library order (tests/gpu/test_bundle_env.sh): it exports the
 * NCCL calls trainbench makes, reports TB_STUB_NCCL_VERSION from
 * ncclGetVersion, and refuses everything else, so that a program that
 * loaded it says which NCCL the loader picked without a GPU. Never
 * installed or bundled. */
#include <nccl.h>

#ifndef TB_STUB_NCCL_VERSION
#error "define TB_STUB_NCCL_VERSION (e.g. 23007)"
#endif

static const char k_msg[] = "the stand-in libnccl of trainbench's tests (tests/gpu/nccl_stub.c) runs no collective";

ncclResult_t ncclGetVersion(int *version) {
    *version = TB_STUB_NCCL_VERSION;
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t result) { return result == ncclSuccess ? "no error" : k_msg; }
const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm;
    return k_msg;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    (void)id;
    return ncclInvalidUsage;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
    (void)comm, (void)nranks, (void)id, (void)rank, (void)config;
    return ncclInvalidUsage;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
    (void)comm, (void)color, (void)key, (void)newcomm, (void)config;
    return ncclInvalidUsage;
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    (void)comm;
    return ncclInvalidUsage;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    (void)comm;
    return ncclInvalidUsage;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    (void)comm;
    return ncclInvalidUsage;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
    (void)comm;
    *err = ncclInvalidUsage;
    return ncclInvalidUsage;
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    (void)send, (void)recv, (void)count, (void)t, (void)op, (void)comm, (void)stream;
    return ncclInvalidUsage;
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    (void)send, (void)recv, (void)count, (void)t, (void)root, (void)comm, (void)stream;
    return ncclInvalidUsage;
}
