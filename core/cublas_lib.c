/* cublas_lib.c - cuBLAS and cuBLASLt through dlopen (see cublas_lib.h). */
#define _GNU_SOURCE /* dlinfo */
#include "core/cublas_lib.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>


#define TB_STR_(x) #x
#define TB_STR(x) TB_STR_(x) /* after expansion: "cublasCreate_v2" for cublasCreate */

tb_cublas_api tb_cublas;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char error_line[TB_CUBLAS_WHY_MAX];
static char lt_path[512];

/* dlopen of the library built against, by its soname; NULL with the line. */
static void *open_lib(const char *soname) {
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        snprintf(error_line, sizeof error_line,
                 "cannot load cuBLAS (%s); install CUDA %d's cuBLAS (nvidia-cublas wheel, CUDA toolkit) or "
                 "put its folder on LD_LIBRARY_PATH",
                 dlerror(), CUBLAS_VER_MAJOR);
    return h;
}

/* One symbol into its member; 0, or -1 with the line. */
static int find(void *h, const char *soname, const char *name, void *member) {
    void *p = dlsym(h, name);
    if (!p) {
        snprintf(error_line, sizeof error_line,
                 "%s has no %s: not the cuBLAS %d trainbench was built with; put CUDA %d's cuBLAS first on "
                 "LD_LIBRARY_PATH or rebuild against the one installed",
                 soname, name, CUBLAS_VER_MAJOR, CUBLAS_VER_MAJOR);
        return -1;
    }
    memcpy(member, &p, sizeof p);
    return 0;
}

static void load_once(void) {
    static const char lt_name[] = "libcublasLt.so." TB_STR(CUBLAS_VER_MAJOR);
    static const char blas_name[] = "libcublas.so." TB_STR(CUBLAS_VER_MAJOR);
    tb_cublas_api api;
    memset(&api, 0, sizeof api);
    void *lt = open_lib(lt_name);
    if (!lt) return;
    void *blas = open_lib(blas_name);
    if (!blas) return;
    int bad = 0;
#define TB_CUBLAS_FIND_LT_(f) bad = bad || find(lt, lt_name, TB_STR(f), &api.f);
#define TB_CUBLAS_FIND_(f) bad = bad || find(blas, blas_name, TB_STR(f), &api.f);
    TB_CUBLASLT_FUNCS(TB_CUBLAS_FIND_LT_)
    TB_CUBLAS_FUNCS(TB_CUBLAS_FIND_)
#undef TB_CUBLAS_FIND_LT_
#undef TB_CUBLAS_FIND_
    if (bad) return;
    struct link_map *lm = NULL;
    if (dlinfo(lt, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name)
        snprintf(lt_path, sizeof lt_path, "%s", lm->l_name);
    tb_cublas = api;
    loaded = 1;
}

int tb_cublas_load(char *why, size_t len) {
    pthread_once(&once, load_once);
    if (loaded) return 0;
    if (why && len) snprintf(why, len, "%s", error_line);
    return -1;
}

const char *tb_cublas_path(void) {
    return loaded ? lt_path : "";
}

const char *tb_cublas_status_string(cublasStatus_t s) {
    return loaded ? tb_cublas.cublasGetStatusString(s) : "?";
}
