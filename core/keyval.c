/* keyval.c - the "key = value" line splitter fabric files and published profiles share. */
#include "core/keyval.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tb_keyval_trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

int tb_keyval_line(char *line, const char *path, int lineno, char **key, char **val, char *err, size_t errlen) {
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *s = tb_keyval_trim(line);
    if (!*s) return 0;
    char *eq = strchr(s, '=');
    if (!eq) {
        snprintf(err, errlen, "%s:%d: expected 'key = value', got '%s'", path, lineno, s);
        return -1;
    }
    *eq = '\0';
    *key = tb_keyval_trim(s);
    *val = tb_keyval_trim(eq + 1);
    return 1;
}

int tb_keyval_number(const char *val, double *v) {
    char *end;
    errno = 0;
    *v = strtod(val, &end);
    return end == val || *tb_keyval_trim(end) || errno || !(*v >= 0) || !isfinite(*v) ? -1 : 0;
}
