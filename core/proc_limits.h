/* proc_limits.h - the process's own limits raised where they are under
 * what trainbench's threads and MPI's start need: a soft limit moved
 * toward its hard one, as `ulimit -S` could. */
#ifndef TB_PROC_LIMITS_H
#define TB_PROC_LIMITS_H

/* The floors and the usual soft limits (Linux's): comm_mpi.c names a limit
 * still under its floor after tb_limits_raise. */
#define TB_STACK_FLOOR_BYTES ((unsigned long)256 << 10)
#define TB_STACK_USUAL_BYTES ((unsigned long)8 << 20)
#define TB_NOFILE_USUAL 1024

/* First thing in main. The stack: a soft `ulimit -s` under 256 KiB is
 * raised (to 8 MiB, or the hard limit under it) and the program runs itself
 * again (execv of /proc/self/exe with `argv`, which replaces any thread a
 * library started as it loaded), since threads take their stack size from
 * the limit the process started with; descriptors: a soft `ulimit -n` under
 * 1024 is raised to 1024, or the hard limit. Nothing is said; where the
 * exec fails, or the hard limit is under 256 KiB, the stack limit is left
 * as it was (comm_mpi.c names it before MPI starts). */
void tb_limits_raise(char **argv);

#endif
