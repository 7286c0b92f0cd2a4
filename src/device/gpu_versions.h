/* gpu_versions.h - the GPU libraries' versions, compiled against vs loaded,
 * and one verdict per library: the self-check of SEEDS.md section 3 ("driver
 * 12.2, framework built for 12.1: works, flagged as a mismatch"; library
 * mismatches that "look fine but are not").
 *
 * Version codes are the libraries' own encodings:
 *   CUDA runtime / driver  major*1000 + minor*10       (13000 = 13.0)
 *   cuDNN >= 9             major*10000 + minor*100 + patch (91900 = 9.19.0)
 *   cuBLAS                 major*10000 + minor*100 + patch (130100 = 13.1.0)
 *   NCCL >= 2.9            major*10000 + minor*100 + patch (22809 = 2.28.9)
 * 0 means absent (no driver, library not loaded). */
#ifndef TB_GPU_VERSIONS_H
#define TB_GPU_VERSIONS_H

typedef enum { TB_LIB_DRIVER, TB_LIB_CUDNN, TB_LIB_CUDNN_CUDART, TB_LIB_CUBLAS, TB_LIB_NCCL } tb_lib_kind;

typedef enum {
    TB_VER_MATCH,      /* compiled == loaded */
    TB_VER_DIFFERS_OK, /* differs in a way the library supports (newer driver) */
    TB_VER_WARN,       /* runs, but features or performance may be missing */
    TB_VER_ERROR,      /* will fail, or fails already */
    TB_VER_ABSENT,     /* not loaded / no driver */
} tb_ver_verdict;

typedef struct {
    const char *what;            /* "CUDA driver vs runtime", "cuDNN", ... */
    int compiled, loaded;        /* codes as above (driver: loaded = driver's CUDA version) */
    char compiled_s[24], loaded_s[24];
    tb_ver_verdict verdict;
    char note[1024];             /* one line: what it means and what to do (room for tb_cublas_load's) */
} tb_lib_check;

/* "13.0" / "9.19.0" for a code of that kind; "none" for 0. */
void tb_lib_version_string(tb_lib_kind kind, int code, char *buf, int len);
/* The verdict for one library: compiled is what trainbench was built
 * against (for the driver: the CUDA runtime's version), loaded what runs. */
void tb_version_judge(tb_lib_kind kind, int compiled, int loaded, tb_lib_check *out);
const char *tb_verdict_name(tb_ver_verdict v);

#endif
