/* version.h - trainbench version and the git revision it was built from. */
#ifndef TB_VERSION_H
#define TB_VERSION_H

extern const char *tb_version_string; /* "0.1.0" */
extern const char *tb_git_revision;   /* "abc123def456" or "...-dirty" */

#endif
