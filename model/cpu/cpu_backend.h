/* cpu_backend.h - constructor of the CPU backend (float32, NCHW). */
#ifndef TB_CPU_BACKEND_H
#define TB_CPU_BACKEND_H

#include "model/backend.h"

/* Returns the CPU backend; opts->threads worker threads (0: all cores). */
tb_backend *tb_cpu_backend_create(const tb_backend_opts *opts);

#endif
