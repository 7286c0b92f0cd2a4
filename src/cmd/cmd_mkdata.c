/* cmd_mkdata.c - `trainbench mkdata`: writes an ImageNet-like synthetic JPEG
 * set with learnable classes (data/mkdata.h) in the ImageFolder layout. */
#include <stdio.h>
#include <string.h>

#include "core/cli.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/mkdata.h"
#include "src/cmd/commands.h"

int tb_cmd_mkdata(int argc, char **argv) {
    char out[TB_OPT_STR_MAX] = "", like[TB_OPT_STR_MAX] = "plain";
    enum { MIN_SIDE = 300, MAX_SIDE = 600, QUALITY = 90 }; /* --like plain's defaults */
    int classes = 10, per_class = 100, seed = 1, threads = 0, min_side = MIN_SIDE, max_side = MAX_SIDE,
        quality = QUALITY;
    const tb_opt opts[] = {
        {.name = "out", .kind = TB_OPT_STRING, .dst = out, .help = "directory to create (must not exist)"},
        {.name = "classes", .kind = TB_OPT_INT, .dst = &classes, .min = 1, .max = 100000,
         .help = "number of classes"},
        {.name = "per-class", .kind = TB_OPT_INT, .dst = &per_class, .min = 1, .max = 100000000,
         .help = "images per class"},
        {.name = "seed", .kind = TB_OPT_INT, .dst = &seed, .max = 2147483647,
         .help = "the set is a function of the seed"},
        {.name = "threads", .kind = TB_OPT_INT, .dst = &threads, .max = 4096,
         .help = "writer threads (0: all cores)"},
        {.name = "min-side", .kind = TB_OPT_INT, .dst = &min_side, .min = 16, .max = 16384,
         .help = "smallest image side, pixels"},
        {.name = "max-side", .kind = TB_OPT_INT, .dst = &max_side, .min = 16, .max = 16384,
         .help = "largest image side, pixels"},
        {.name = "quality", .kind = TB_OPT_INT, .dst = &quality, .min = 1, .max = 100,
         .help = "JPEG quality"},
        {.name = "like", .kind = TB_OPT_CHOICE, .dst = like, .choices = "plain|imagenet",
         .help = "plain: the sides and quality above, 4:2:0; imagenet: ImageNet-1k's sizes and coding mix (long side "
                 "500 px mostly, quality 75-95, 4:2:0 / 4:4:4 / 4:2:2 / gray, some progressive; data/mkdata.h)"},
        {.name = NULL},
    };
    tb_cli_parse("mkdata", "trainbench mkdata --out DIR [--classes C] [--per-class N] [options]", argc, argv,
                 opts);
    tb_cli_require("mkdata", "out", out);
    int imagenet = strcmp(like, "imagenet") == 0;
    if (imagenet && (min_side != MIN_SIDE || max_side != MAX_SIDE || quality != QUALITY)) /* they would be ignored */
        tb_die("mkdata: --like imagenet draws its own sizes and qualities (long side 500 px mostly, quality 75-95); "
               "--min-side, --max-side and --quality are for --like plain: leave them out or drop --like imagenet");
    if (min_side > max_side) tb_die("mkdata: --min-side %d is above --max-side %d", min_side, max_side);
    tb_mkdata_opts o = {out,      classes,  per_class, (uint64_t)seed, threads,
                        min_side, max_side, quality,   imagenet ? TB_MKDATA_IMAGENET : TB_MKDATA_PLAIN};
    char err[1024];
    int64_t bytes = 0, pixels = 0;
    double t0 = tb_now();
    if (tb_mkdata_write(&o, &bytes, &pixels, err, sizeof err) != 0) tb_die("mkdata: %s", err);
    double dt = tb_now() - t0;
    long long n = (long long)classes * per_class;
    if (imagenet)
        printf("# mkdata: %lld images (%d classes x %d), ImageNet-like sizes and codings (--like imagenet), seed %d "
               "-> %s\n",
               n, classes, per_class, seed, out);
    else
        printf("# mkdata: %lld images (%d classes x %d), sides %d..%d px, 4:2:0 q%d, seed %d -> %s\n", n, classes,
               per_class, min_side, max_side, quality, seed, out);
    printf("# mkdata: %.1f MB in %.2f s (%.0f images/s); mean file %.1f KB, mean image %.0f pixels (%.2f bytes per "
           "pixel)\n",
           (double)bytes / 1e6, dt, (double)n / dt, (double)bytes / 1e3 / (double)n, (double)pixels / (double)n,
           pixels > 0 ? (double)bytes / (double)pixels : 0.0);
    return 0;
}
