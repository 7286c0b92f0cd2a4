/* dataset_list.c - the sample index from a `PATH LABEL` list file (see
 * dataset.h): paths relative to the list file's directory, labels as given. */
#include <errno.h>
#include <string.h>

#include "data/dataset_internal.h"

int tb_ds_open_list(const char *path, tb_dataset *ds, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        tb_ds_set_err(err, errlen, "cannot open list file %s: %s", path, strerror(errno));
        return -1;
    }
    unsigned char magic[3] = {0, 0, 0};
    if (fread(magic, 1, 3, f) == 3 && magic[0] == 0xFF && magic[1] == 0xD8 && magic[2] == 0xFF) {
        tb_ds_set_err(err, errlen,
                      "%s is a JPEG image, not a data set: give a directory of class folders (DIR/CLASS/IMAGE.jpg, "
                      "as trainbench mkdata writes) or a list file of 'PATH LABEL' lines",
                      path);
        fclose(f);
        return -1;
    }
    /* a UTF-8 byte order mark (as Windows editors write) is not part of the first PATH */
    int bom = magic[0] == 0xEF && magic[1] == 0xBB && magic[2] == 0xBF;
    if (fseek(f, bom ? 3 : 0, SEEK_SET) != 0) rewind(f);
    int64_t cap = 1024, n = 0;
    size_t acap = 1 << 16, alen = 0;
    ds->labels = tb_ds_xmalloc((size_t)cap * sizeof *ds->labels);
    ds->path_off = tb_ds_xmalloc((size_t)cap * sizeof *ds->path_off);
    ds->paths = tb_ds_xmalloc(acap);
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    int64_t lineno = 0;
    int32_t maxlabel = -1;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                           line[len - 1] == '\t'))
            line[--len] = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '\0' || *s == '#') continue;
        char *sp = strrchr(s, ' '), *tab = strrchr(s, '\t');
        if (!sp || (tab && tab > sp)) sp = tab;
        char *end = NULL;
        long label = sp ? strtol(sp + 1, &end, 10) : -1;
        if (!sp || sp[1] == '\0' || *end != '\0' || label < 0) {
            tb_ds_set_err(err, errlen, "%s:%lld: expected 'PATH LABEL' with LABEL a non-negative integer",
                          path, (long long)lineno);
            free(line);
            fclose(f);
            return -1;
        }
        if (label >= TB_DATASET_MAX_CLASSES) { /* else a typo makes millions of empty classes (and a head to match) */
            tb_ds_set_err(err, errlen,
                          "%s:%lld: label %ld is above %d, the most classes a list file may have (a typo?)", path,
                          (long long)lineno, label, TB_DATASET_MAX_CLASSES - 1);
            free(line);
            fclose(f);
            return -1;
        }
        while (sp > s && (sp[-1] == ' ' || sp[-1] == '\t')) sp--;
        *sp = '\0';
        if (*s == '\0') {
            tb_ds_set_err(err, errlen, "%s:%lld: empty PATH", path, (long long)lineno);
            free(line);
            fclose(f);
            return -1;
        }
        size_t plen = strlen(s) + 1;
        if (alen + plen > acap) {
            acap = (alen + plen) * 2;
            ds->paths = tb_ds_xrealloc(ds->paths, acap);
        }
        if (n == cap) {
            cap *= 2;
            ds->labels = tb_ds_xrealloc(ds->labels, (size_t)cap * sizeof *ds->labels);
            ds->path_off = tb_ds_xrealloc(ds->path_off, (size_t)cap * sizeof *ds->path_off);
        }
        memcpy(ds->paths + alen, s, plen);
        ds->path_off[n] = (int64_t)alen;
        ds->labels[n] = (int32_t)label;
        if (label > maxlabel) maxlabel = (int32_t)label;
        alen += plen;
        n++;
    }
    free(line);
    fclose(f);
    if (n == 0) {
        tb_ds_set_err(err, errlen, "list file %s has no 'PATH LABEL' lines", path);
        return -1;
    }
    ds->n = n;
    ds->classes = maxlabel + 1;
    ds->class_names = tb_ds_xmalloc((size_t)ds->classes * sizeof *ds->class_names);
    ds->class_count = tb_ds_xmalloc((size_t)ds->classes * sizeof *ds->class_count);
    for (int c = 0; c < ds->classes; c++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%d", c);
        ds->class_names[c] = strdup(buf);
        if (!ds->class_names[c]) TB_FATAL("out of host memory while indexing the data set");
        ds->class_count[c] = 0;
    }
    for (int64_t i = 0; i < n; i++) ds->class_count[ds->labels[i]]++;
    return 0;
}
