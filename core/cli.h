/* cli.h - a small table-driven parser for each subcommand's flags.
 *
 * Accepts --name VALUE, --name=VALUE, and -x VALUE or -xVALUE (as getopt
 * takes it: -b8) for options with a one-letter alias; every value is checked against its
 * type and range, and anything wrong ends the run with one line that names
 * the flag and says what is expected. --help prints the table. */
#ifndef TB_CLI_H
#define TB_CLI_H

#include <stddef.h>

typedef enum {
    TB_OPT_FLAG,    /* int set to 1 when present */
    TB_OPT_INT,     /* int within [min, max] */
    TB_OPT_DOUBLE,  /* double within [min, max] */
    TB_OPT_STRING,  /* char[TB_OPT_STR_MAX] */
    TB_OPT_CHOICE,  /* string, one of `choices` ("a|b|c") */
    TB_OPT_SIZE,    /* size_t byte count: 4096, 64K, 128M, 2G (powers of 1024) */
    TB_OPT_FACTOR,  /* int multiplier within [min, max] (a step factor: 2, 4) */
} tb_opt_kind;

#define TB_OPT_STR_MAX 4096

typedef struct {
    const char *name;     /* without the dashes: "batch-size" */
    tb_opt_kind kind;
    void *dst;
    double min, max;      /* INT/DOUBLE: allowed range */
    const char *choices;  /* CHOICE: "cpu|cuda|auto" */
    const char *help;     /* one line; the default is printed from dst, unless the line
                             says its own "(default ...)" */
} tb_opt;

/* Parses argv[0..argc) (argv[0] is the first flag, not the program) into
 * the table, which ends with an entry whose name is NULL. `cmd` is the
 * subcommand name for messages; `usage` the synopsis printed by --help. */
void tb_cli_parse(const char *cmd, const char *usage, int argc, char **argv, const tb_opt *opts);
/* The same, with one-letter aliases "b=minbytes,e=maxbytes" (-b VALUE, -bVALUE) and other long
 * spellings "warmup_iters=warmup" (--warmup_iters VALUE: another tool's name for --warmup). */
void tb_cli_parse_aliased(const char *cmd, const char *usage, int argc, char **argv,
                          const tb_opt *opts, const char *aliases);

/* argv split for subcommands that take file names among their flags: the flags with the values
 * of the non-flag options that follow them (for tb_cli_parse), and the positional words, both in
 * argv order and pointing into argv. */
typedef struct {
    char **flags;
    int nflags;
    char **words;
    int nwords;
} tb_cli_args;

/* Splits argv[0..argc) by opts into out; tb_cli_args_free releases the two lists. */
void tb_cli_split(int argc, char **argv, const tb_opt *opts, tb_cli_args *out);
void tb_cli_args_free(tb_cli_args *a);

/* Dies naming the flag when a required string flag was left empty. */
void tb_cli_require(const char *cmd, const char *flag, const char *value);

#endif
