/* cli.c - flag parsing and validation (see cli.h). */
#include "core/cli.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

/* One entry of an alias list ("b=minbytes,warmup_iters=warmup"): the alias (len chars) and the option it
 * stands for (tlen chars). */
typedef struct {
    const char *alias, *target;
    size_t len, tlen;
} alias_entry;

/* Reads the entry at *p into e and moves *p past it; 0 at the list's end. */
static int next_alias(const char **p, alias_entry *e) {
    const char *eq = *p ? strchr(*p, '=') : NULL;
    if (!eq) return 0;
    const char *comma = strchr(eq, ',');
    e->alias = *p;
    e->len = (size_t)(eq - *p);
    e->target = eq + 1;
    e->tlen = comma ? (size_t)(comma - e->target) : strlen(e->target);
    *p = comma ? comma + 1 : NULL;
    return 1;
}

static int alias_names(const alias_entry *e, const char *name) {
    return strlen(name) == e->tlen && strncmp(e->target, name, e->tlen) == 0;
}

/* The one-letter alias of option `name` in "b=minbytes,e=maxbytes", or 0. */
static char alias_of(const char *aliases, const char *name) {
    alias_entry e;
    for (const char *p = aliases; next_alias(&p, &e);)
        if (e.len == 1 && alias_names(&e, name)) return e.alias[0];
    return 0;
}

/* The option that --NAME (len chars) stands for by a long alias ("warmup_iters=warmup": another spelling, as
 * another tool's), or NULL. */
static const tb_opt *long_alias(const char *aliases, const tb_opt *opts, const char *name, size_t len) {
    alias_entry e;
    for (const char *p = aliases; next_alias(&p, &e);)
        if (e.len == len && len > 1 && strncmp(e.alias, name, len) == 0)
            for (const tb_opt *o = opts; o->name; o++)
                if (alias_names(&e, o->name)) return o;
    return NULL;
}

static void print_help(const char *usage, const tb_opt *opts, const char *aliases) {
    printf("usage: %s\n\noptions:\n", usage);
    for (const tb_opt *o = opts; o->name; o++) {
        char lhs[64], def[96] = "";
        const char *arg = o->kind == TB_OPT_FLAG     ? ""
                          : o->kind == TB_OPT_SIZE   ? " BYTES"
                          : o->kind == TB_OPT_INT    ? " N"
                          : o->kind == TB_OPT_FACTOR ? " FACTOR"
                          : o->kind == TB_OPT_DOUBLE ? " X"
                          : o->kind == TB_OPT_CHOICE ? " WHICH"
                                                     : " VALUE";
        char al = alias_of(aliases, o->name);
        if (al)
            snprintf(lhs, sizeof lhs, "-%c, --%s%s", al, o->name, arg);
        else
            snprintf(lhs, sizeof lhs, "--%s%s", o->name, arg);
        switch (o->kind) {
        case TB_OPT_INT:
        case TB_OPT_FACTOR: snprintf(def, sizeof def, " (default %d)", *(int *)o->dst); break;
        case TB_OPT_DOUBLE: snprintf(def, sizeof def, " (default %g)", *(double *)o->dst); break;
        case TB_OPT_SIZE: snprintf(def, sizeof def, " (default %zu)", *(size_t *)o->dst); break;
        case TB_OPT_STRING:
        case TB_OPT_CHOICE:
            if (*(char *)o->dst) snprintf(def, sizeof def, " (default %s)", (char *)o->dst);
            break;
        default: break;
        }
        if (strstr(o->help, "(default")) def[0] = '\0'; /* the help says its own default in words */
        printf("  %-26s %s%s\n", lhs, o->help, def);
        alias_entry e;
        for (const char *p = aliases; next_alias(&p, &e);) /* its other spellings */
            if (e.len > 1 && alias_names(&e, o->name)) printf("  %-26s also --%.*s\n", "", (int)e.len, e.alias);
        if (o->kind == TB_OPT_CHOICE) printf("  %-26s one of: %s\n", "", o->choices);
    }
    printf("  %-26s %s\n", "--help", "this text");
}

static int in_choices(const char *v, const char *choices) {
    size_t n = strlen(v);
    const char *s = choices;
    while (*s) {
        const char *bar = strchr(s, '|');
        size_t len = bar ? (size_t)(bar - s) : strlen(s);
        if (len == n && strncmp(s, v, n) == 0) return 1;
        if (!bar) break;
        s = bar + 1;
    }
    return 0;
}

/* Sets o from v; empty_default: o's value before any flag was parsed was "" (a string option). */
static void set_value(const char *cmd, const tb_opt *o, const char *v, int empty_default) {
    char *end = NULL;
    errno = 0;
    switch (o->kind) {
    case TB_OPT_INT: {
        long x = strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || errno || x < o->min || x > o->max)
            tb_die("%s: --%s expects an integer in [%.0f, %.0f], got '%s'", cmd,
                   o->name, o->min, o->max, v);
        *(int *)o->dst = (int)x;
        break;
    }
    case TB_OPT_FACTOR: {
        long x = strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || errno || x < o->min || x > o->max)
            tb_die("%s: --%s expects a multiplier, a whole number in [%.0f, %.0f] (not a byte count), got '%s'",
                   cmd, o->name, o->min, o->max, v);
        *(int *)o->dst = (int)x;
        break;
    }
    case TB_OPT_DOUBLE: {
        double x = strtod(v, &end);
        if (*v != '\0' && *end == '\0' && errno == ERANGE && fabs(x) <= DBL_MIN) /* 1e-400: below any double */
            tb_die("%s: --%s '%s' is too small for a double (it underflows to %g); give 0 or a number in [%g, %g]",
                   cmd, o->name, v, x, o->min, o->max);
        if (*v == '\0' || *end != '\0' || errno || !isfinite(x) || x < o->min || x > o->max)
            tb_die("%s: --%s expects a number in [%g, %g], got '%s'", cmd, o->name,
                   o->min, o->max, v);
        *(double *)o->dst = x;
        break;
    }
    case TB_OPT_SIZE: {
        double x = strtod(v, &end);
        double mult = 1;
        if (end && *end) {
            switch (*end) {
            case 'K': case 'k': mult = 1024.0; break;
            case 'M': case 'm': mult = 1024.0 * 1024; break;
            case 'G': case 'g': mult = 1024.0 * 1024 * 1024; break;
            default: mult = -1;
            }
            if (end[1] != '\0' && !(end[1] == 'B' && end[2] == '\0')) mult = -1;
        }
        x *= mult;
        if (*v == '\0' || errno || mult < 0 || !(x >= o->min) || x > o->max || x != (double)(size_t)x)
            tb_die("%s: --%s expects a byte count like 4096, 64K or 128M in [%.0f, %.0f], got '%s'",
                   cmd, o->name, o->min, o->max, v);
        *(size_t *)o->dst = (size_t)x;
        break;
    }
    case TB_OPT_CHOICE:
        if (!in_choices(v, o->choices))
            tb_die("%s: --%s expects one of %s, got '%s'", cmd, o->name, o->choices, v);
        /* fall through */
    case TB_OPT_STRING:
        if (strlen(v) >= TB_OPT_STR_MAX)
            tb_die("%s: --%s value is too long", cmd, o->name);
        /* empty where the default is empty would silently be the flag left out: --data "$DATA" with $DATA unset
         * trained on synthetic data. Where the default is a value (train's --results), empty means none. */
        if (!v[0] && empty_default)
            tb_die("%s: --%s is given an empty value; give it one, or leave --%s out (an unset variable in a job "
                   "script?)",
                   cmd, o->name, o->name);
        snprintf((char *)o->dst, TB_OPT_STR_MAX, "%s", v);
        break;
    case TB_OPT_FLAG: break;
    }
}

void tb_cli_parse(const char *cmd, const char *usage, int argc, char **argv, const tb_opt *opts) {
    tb_cli_parse_aliased(cmd, usage, argc, argv, opts, NULL);
}

void tb_cli_parse_aliased(const char *cmd, const char *usage, int argc, char **argv,
                          const tb_opt *opts, const char *aliases) {
    tb_log_usage_errors(1); /* what is wrong here is wrong on every rank: rank 0 says it */
    unsigned char empty_default[256] = {0}; /* the defaults, before a repeated flag changes them */
    int nopts = 0;
    for (const tb_opt *o = opts; o->name; o++, nopts++) {
        if (nopts == (int)sizeof empty_default) TB_FATAL("%s: more than %d options", cmd, nopts);
        empty_default[nopts] = (o->kind == TB_OPT_STRING || o->kind == TB_OPT_CHOICE) && !*(const char *)o->dst;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help(usage, opts, aliases);
            exit(0);
        }
        const tb_opt *o = opts;
        const char *eq = NULL;
        size_t len = 0;
        const char *attached = NULL; /* -b8: the value of -b, as getopt takes it */
        if (a[0] == '-' && a[1] != '-' && a[1] != '\0') { /* -x, -xVALUE */
            for (; o->name; o++)
                if (alias_of(aliases, o->name) == a[1]) break;
            len = 1;
            if (a[2] != '\0') {
                if (!o->name) /* not a one-letter flag: "-batch-size", "-5" */
                    tb_die("%s: unexpected argument '%s'; flags start with --, see 'trainbench %s --help'", cmd, a,
                           cmd);
                if (o->kind == TB_OPT_FLAG)
                    tb_die("%s: -%c (--%s) takes no value, got '%s'; give -%c alone", cmd, a[1], o->name, a, a[1]);
                attached = a + 2;
            }
        } else if (strncmp(a, "--", 2) == 0) {
            const char *name = a + 2;
            eq = strchr(name, '=');
            len = eq ? (size_t)(eq - name) : strlen(name);
            for (; o->name; o++)
                if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) break;
            const tb_opt *al = o->name ? NULL : long_alias(aliases, opts, name, len);
            if (al) o = al;
        } else {
            tb_die("%s: unexpected argument '%s'; flags start with --, see "
                   "'trainbench %s --help'",
                   cmd, a, cmd);
        }
        if (!o->name)
            tb_die("%s: unknown option '%.*s'; see 'trainbench %s --help'", cmd,
                   (int)len + (a[1] == '-' ? 2 : 1), a, cmd);
        if (o->kind == TB_OPT_FLAG) {
            if (eq) tb_die("%s: --%s takes no value", cmd, o->name);
            *(int *)o->dst = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : attached;
        if (!v) {
            if (i + 1 >= argc)
                tb_die("%s: --%s needs a value; see 'trainbench %s --help'", cmd,
                       o->name, cmd);
            v = argv[++i];
        }
        set_value(cmd, o, v, empty_default[o - opts]);
    }
    tb_log_usage_errors(0);
}

void tb_cli_require(const char *cmd, const char *flag, const char *value) {
    if (!value || !*value)
        tb_die("%s: --%s is required; see 'trainbench %s --help'", cmd, flag, cmd);
}

void tb_cli_split(int argc, char **argv, const tb_opt *opts, tb_cli_args *out) {
    out->flags = calloc((size_t)argc + 1, sizeof *out->flags);
    out->words = calloc((size_t)argc + 2, sizeof *out->words); /* words[0..1] exist even when empty */
    out->nflags = out->nwords = 0;
    if (!out->flags || !out->words) TB_FATAL("out of host memory");
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (s[0] == '-' && s[1] != '\0') {
            out->flags[out->nflags++] = argv[i];
            if (strncmp(s, "--", 2) == 0 && !strchr(s, '=') && i + 1 < argc)
                for (const tb_opt *o = opts; o->name; o++)
                    if (strcmp(o->name, s + 2) == 0 && o->kind != TB_OPT_FLAG) out->flags[out->nflags++] = argv[++i];
            continue;
        }
        out->words[out->nwords++] = argv[i];
    }
}

void tb_cli_args_free(tb_cli_args *a) {
    free(a->flags);
    free(a->words);
    a->flags = a->words = NULL;
}
