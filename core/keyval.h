/* keyval.h - one line of a "key = value" text file (fabric files, published
 * profiles): '#' starts a comment, blank lines are skipped, spaces around key
 * and value are not part of them. */
#ifndef TB_KEYVAL_H
#define TB_KEYVAL_H

#include <stddef.h>

/* s without leading and trailing white space (trailing cut in place). */
char *tb_keyval_trim(char *s);

/* Splits line (edited in place) into *key and *val: 1 for a pair, 0 for a
 * blank or comment line, -1 for a line without '=' (err says
 * "PATH:LINENO: expected 'key = value', got '...'"). */
int tb_keyval_line(char *line, const char *path, int lineno, char **key, char **val, char *err, size_t errlen);

/* *v = val as a finite number >= 0 with nothing after it but spaces: 0, or -1. */
int tb_keyval_number(const char *val, double *v);

#endif
