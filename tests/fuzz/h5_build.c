/* h5_build.c - builds a valid HDF5 file from a fuzz program (h5_build.h).
 *
 * Ops (first byte of each, modulo 8; operands follow):
 *   0 ATTR     root attribute: name (vocabulary or "x"), type (variable or
 *              fixed string, int64/32, uint8/64, float64, compound),
 *              dataspace (scalar, 1-D of 1..40, null, 2-D), value (vocabulary
 *              string, raw bytes, small or raw 64-bit number)
 *   1 DATASET  in a group: a vocabulary tensor (or "extra.weight") with a
 *              shape (expected, one dimension off by -2..2, scalar, null, 1-D
 *              of 0..255, a trailing 1, one dimension 0..65535, one fewer
 *              dimension, 9 dimensions, extendible, all dimensions
 *              0..65535), a type (the expected one, float
 *              16/32/64 either byte order, int 8..64 signed or not, fixed
 *              and variable strings, compound, enum, bitfield, opaque,
 *              array, variable-length sequence) and a layout (contiguous,
 *              chunked with deflate + shuffle or fletcher32, compact;
 *              written or never written)
 *   2 FILL     every vocabulary tensor of a group with its expected shape
 *              and type, never written (integers written with a small value)
 *   3 GROUP    a group named like a tensor or group
 *   4 SOFT     a soft link to a tensor elsewhere, a group, or nowhere
 *   5 HARD     a hard link to the root, a group or a tensor (cycles included)
 *   6 EXTERNAL an external link into a file that does not exist
 *   7 DELETE   removes a tensor's link (a FILL with one tensor missing) */
#include "tests/fuzz/h5_build.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPS 64
#define MAX_WRITE_BYTES ((size_t)4 << 20) /* larger datasets are left unwritten */
#define MAX_TOTAL_BYTES ((size_t)16 << 20)

typedef struct {
    const uint8_t *p;
    size_t n, i;
    size_t written; /* bytes of dataset values written so far */
} reader;

static unsigned u8(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static unsigned u16(reader *r) {
    unsigned a = u8(r);
    return a | u8(r) << 8;
}
static uint64_t u64(reader *r) {
    uint64_t v = 0;
    for (int k = 0; k < 8; k++) v |= (uint64_t)u8(r) << (8 * k);
    return v;
}

/* Fills buf with the program's remaining bytes, repeated (a pattern when none). */
static void fill_bytes(reader *r, uint8_t *buf, size_t len) {
    size_t avail = r->n - r->i;
    for (size_t k = 0; k < len; k++) buf[k] = avail ? r->p[r->i + k % avail] : (uint8_t)(k * 37 + 11);
}

static void path_of(char *buf, size_t len, const char *group, const char *name) {
    if (group[0])
        snprintf(buf, len, "/%s/%s", group, name);
    else
        snprintf(buf, len, "/%s", name);
}

/* The group, created when missing; -1 when the name is taken by something else. */
static hid_t open_group(hid_t f, const char *group) {
    if (!group[0]) return H5Gopen2(f, "/", H5P_DEFAULT);
    char path[128];
    snprintf(path, sizeof path, "/%s", group);
    if (H5Lexists(f, path, H5P_DEFAULT) > 0) return H5Gopen2(f, path, H5P_DEFAULT);
    return H5Gcreate2(f, path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
}

/* ---- types ----------------------------------------------------------------------- */

static hid_t half_type(void) {
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0) return t;
    if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, 15) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static hid_t string_type(size_t size, int vlen, H5T_str_t pad) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return t;
    H5Tset_size(t, vlen ? H5T_VARIABLE : size);
    H5Tset_strpad(t, pad);
    H5Tset_cset(t, vlen ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
    return t;
}

static hid_t compound_type(void) {
    hid_t t = H5Tcreate(H5T_COMPOUND, 8);
    if (t < 0) return t;
    H5Tinsert(t, "a", 0, H5T_IEEE_F32LE);
    H5Tinsert(t, "b", 4, H5T_STD_I8LE);
    return t;
}

/* A dataset type; k = 0 is the expected one. */
static hid_t dataset_type(unsigned k, int integer) {
    switch (k % 20) {
    case 0: return H5Tcopy(integer ? H5T_STD_I64LE : H5T_IEEE_F32LE);
    case 1: return H5Tcopy(H5T_IEEE_F32LE);
    case 2: return H5Tcopy(H5T_IEEE_F64LE);
    case 3: return half_type();
    case 4: return H5Tcopy(H5T_IEEE_F32BE);
    case 5: return H5Tcopy(H5T_IEEE_F64BE);
    case 6: return H5Tcopy(H5T_STD_I64LE);
    case 7: return H5Tcopy(H5T_STD_I32LE);
    case 8: return H5Tcopy(H5T_STD_U8LE);
    case 9: return H5Tcopy(H5T_STD_U64LE);
    case 10: return H5Tcopy(H5T_STD_I16BE);
    case 11: return H5Tcopy(H5T_STD_I8LE);
    case 12: return string_type(4, 0, H5T_STR_NULLTERM);
    case 13: return string_type(0, 1, H5T_STR_NULLTERM);
    case 14: return compound_type();
    case 15: {
        hid_t t = H5Tenum_create(H5T_NATIVE_SCHAR);
        signed char a = 0, b = 1;
        H5Tenum_insert(t, "A", &a);
        H5Tenum_insert(t, "B", &b);
        return t;
    }
    case 16: return H5Tcopy(H5T_STD_B8LE);
    case 17: {
        hid_t t = H5Tcreate(H5T_OPAQUE, 3);
        H5Tset_tag(t, "fuzz");
        return t;
    }
    case 18: {
        hsize_t two = 2;
        return H5Tarray_create2(H5T_IEEE_F32LE, 1, &two);
    }
    default: return H5Tvlen_create(H5T_IEEE_F32LE);
    }
}

/* ---- datasets ---------------------------------------------------------------------- */

/* Dataspace for mode m of tensor t; dims and nd receive the simple extent. */
static hid_t dataspace(reader *r, unsigned m, const fz_h5_tensor *t, hsize_t *dims, int *nd) {
    int n = t->ndim;
    for (int k = 0; k < n; k++) dims[k] = (hsize_t)t->shape[k];
    switch (m % 11) {
    case 0: break;
    case 1:
        if (n > 0) {
            int k = (int)(u8(r) % (unsigned)n), d = (int)(u8(r) % 5) - 2;
            dims[k] = (hsize_t)((int64_t)dims[k] + d < 0 ? 0 : (int64_t)dims[k] + d);
        }
        break;
    case 2: n = 0; break;
    case 3: *nd = 0; return H5Screate(H5S_NULL);
    case 4:
        n = 1;
        dims[0] = u8(r);
        break;
    case 5: dims[n++] = 1; break;
    case 6:
        if (n > 0) dims[u8(r) % (unsigned)n] = u16(r);
        break;
    case 7:
        if (n > 0) n--;
        break;
    case 8:
        n = 9;
        for (int k = 0; k < n; k++) dims[k] = 1;
        break;
    case 9: /* extendible first dimension: create_dataset makes it chunked */
        if (n == 0) n = 1, dims[0] = 1;
        break;
    default: /* every dimension 0..65535 */
        if (n == 0) n = 1;
        for (int k = 0; k < n; k++) dims[k] = u16(r);
        break;
    }
    *nd = n;
    return n == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(n, dims, NULL);
}

/* Creates (and maybe writes) the dataset; space, type and dcpl are ready. */
static void create_dataset(hid_t g, reader *r, const char *name, hid_t space, int nd, const hsize_t *dims,
                           hid_t type, hid_t dcpl, unsigned layout, int unlimited) {
    hssize_t npoints = H5Sget_simple_extent_npoints(space);
    size_t tsize = H5Tget_size(type);
    int variable = H5Tdetect_class(type, H5T_VLEN) > 0 || H5Tis_variable_str(type) > 0;
    size_t bytes = npoints > 0 ? (size_t)npoints * tsize : 0;
    int write = layout != 0 && layout != 4 && !variable && npoints > 0 && bytes <= MAX_WRITE_BYTES &&
                r->written + bytes <= MAX_TOTAL_BYTES;
    int chunked = (layout == 2 || layout == 4 || layout == 5 || unlimited) && nd > 0;
    if (unlimited && nd > 0) { /* first dimension extendible: chunked only */
        hsize_t maxdims[9];
        for (int k = 0; k < nd; k++) maxdims[k] = k == 0 ? H5S_UNLIMITED : dims[k];
        H5Sset_extent_simple(space, nd, dims, maxdims);
    }
    if (chunked) {
        hsize_t chunk[9];
        for (int k = 0; k < nd; k++) chunk[k] = dims[k] == 0 ? 1 : dims[k] < 64 ? dims[k] : 64;
        H5Pset_chunk(dcpl, nd, chunk);
        if (layout == 2) {
            H5Pset_shuffle(dcpl);
            H5Pset_deflate(dcpl, 1 + u8(r) % 9);
        } else if (layout == 5) {
            H5Pset_fletcher32(dcpl);
        }
    } else if (layout == 3 && bytes < 60000) {
        H5Pset_layout(dcpl, H5D_COMPACT);
    }
    hid_t ds = H5Dcreate2(g, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds < 0) return;
    if (write) {
        uint8_t *buf = malloc(bytes);
        if (buf) {
            fill_bytes(r, buf, bytes);
            if (H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0) r->written += bytes;
            free(buf);
        }
    }
    H5Dclose(ds);
}

static void make_dataset(hid_t f, reader *r, const char *group, const char *name, const fz_h5_tensor *t,
                         unsigned shape_mode, unsigned type_mode, unsigned layout) {
    hid_t g = open_group(f, group);
    if (g < 0) return;
    hsize_t dims[9];
    int nd = 0;
    hid_t space = dataspace(r, shape_mode, t, dims, &nd);
    hid_t type = dataset_type(type_mode, t->integer);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (space >= 0 && type >= 0 && dcpl >= 0)
        create_dataset(g, r, name, space, nd, dims, type, dcpl, layout % 6, shape_mode % 11 == 9);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    H5Gclose(g);
}

static void fill_group(hid_t f, reader *r, const fz_h5_vocab *v, unsigned gi) {
    const char *group = v->groups[gi];
    hid_t g = open_group(f, group);
    if (g < 0) return;
    int64_t count = u8(r) % 4;
    for (int i = 0; i < v->n_tensors; i++) {
        const fz_h5_tensor *t = &v->tensors[i];
        if (!(t->groups & (1u << gi))) continue;
        hsize_t dims[4];
        for (int k = 0; k < t->ndim; k++) dims[k] = (hsize_t)t->shape[k];
        hid_t space = t->ndim ? H5Screate_simple(t->ndim, dims, NULL) : H5Screate(H5S_SCALAR);
        hid_t ds = H5Dcreate2(g, t->name, t->integer ? H5T_STD_I64LE : H5T_IEEE_F32LE, space, H5P_DEFAULT,
                              H5P_DEFAULT, H5P_DEFAULT);
        if (ds >= 0) {
            if (t->integer && t->ndim == 0) H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &count);
            H5Dclose(ds);
        }
        H5Sclose(space);
    }
    H5Gclose(g);
}

/* ---- attributes ------------------------------------------------------------------- */

static void make_attr(hid_t f, reader *r, const fz_h5_vocab *v) {
    unsigned ni = u8(r) % (unsigned)(v->n_attrs + 1);
    const char *name = ni < (unsigned)v->n_attrs ? v->attrs[ni] : "x";
    unsigned tk = u8(r) % 9, sk = u8(r) % 5;
    hsize_t dims[2] = {1, 1};
    hid_t space;
    switch (sk) {
    case 0: space = H5Screate(H5S_SCALAR); break;
    case 1: dims[0] = 1 + u8(r) % 40; space = H5Screate_simple(1, dims, NULL); break;
    case 2: space = H5Screate(H5S_NULL); break;
    case 3: dims[0] = 2, dims[1] = 1 + u8(r) % 4; space = H5Screate_simple(2, dims, NULL); break;
    default: space = H5Screate_simple(1, dims, NULL); break;
    }
    hssize_t np = H5Sget_simple_extent_npoints(space);
    size_t n = np > 0 ? (size_t)np : 1;

    char str[512] = "";
    if (tk <= 1 || tk == 8) { /* string value */
        unsigned si = u8(r) % (unsigned)(v->n_strings + 2);
        if (si < (unsigned)v->n_strings) {
            snprintf(str, sizeof str, "%s", v->strings[si]);
        } else if (si == (unsigned)v->n_strings) {
            unsigned len = u8(r) % 24;
            for (unsigned k = 0; k < 24; k++) { /* raw bytes: may hold a NUL, may not be UTF-8 */
                char c = (char)(k < len ? u8(r) : 0);
                str[k] = c;
            }
        } else {
            memset(str, 'x', 300);
            str[300] = '\0';
        }
    }
    int64_t num = 0;
    switch (u8(r) % 3) {
    case 0: num = (int8_t)u8(r); break;
    case 1: num = (int64_t)u64(r); break;
    default: num = u8(r) % 4; break;
    }

    hid_t type = -1;
    void *buf = NULL;
    hid_t memtype = -1;
    switch (tk) {
    case 0: { /* variable-length string */
        type = string_type(0, 1, H5T_STR_NULLTERM);
        char **p = malloc(n * sizeof *p);
        if (p)
            for (size_t k = 0; k < n; k++) p[k] = str;
        buf = p;
        memtype = type;
        break;
    }
    case 1:
    case 8: { /* fixed-length string, null-terminated or null-padded */
        size_t size = 1 + u8(r) % 24;
        type = string_type(size, 0, tk == 1 ? H5T_STR_NULLTERM : H5T_STR_NULLPAD);
        char *p = calloc(n, size);
        if (p)
            for (size_t k = 0; k < n; k++) memcpy(p + k * size, str, strlen(str) < size ? strlen(str) : size);
        buf = p;
        memtype = type;
        break;
    }
    case 6: { /* compound: raw bytes */
        type = compound_type();
        uint8_t *p = malloc(n * 8);
        if (p) fill_bytes(r, p, n * 8);
        buf = p;
        memtype = type;
        break;
    }
    default: { /* numbers, converted by HDF5 from int64 */
        type = H5Tcopy(tk == 2 ? H5T_STD_I64LE : tk == 3 ? H5T_STD_I32LE : tk == 4 ? H5T_STD_U8LE
                       : tk == 5 ? H5T_IEEE_F64LE : H5T_STD_U64LE);
        int64_t *p = malloc(n * sizeof *p);
        if (p)
            for (size_t k = 0; k < n; k++) p[k] = num;
        buf = p;
        memtype = H5T_NATIVE_INT64;
        break;
    }
    }
    if (type >= 0 && space >= 0 && buf) {
        if (H5Aexists(f, name) > 0) H5Adelete(f, name);
        hid_t a = H5Acreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) {
            H5Awrite(a, memtype, buf);
            H5Aclose(a);
        }
    }
    free(buf);
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
}

/* ---- links ---------------------------------------------------------------------------- */

static const char *tensor_name(reader *r, const fz_h5_vocab *v) {
    unsigned i = u16(r) % (unsigned)(v->n_tensors + v->n_groups);
    return i < (unsigned)v->n_tensors ? v->tensors[i].name : v->groups[i - v->n_tensors][0] ? v->groups[i - v->n_tensors] : "x";
}

static void make_link(hid_t f, reader *r, const fz_h5_vocab *v, unsigned op) {
    const char *group = v->groups[u8(r) % (unsigned)v->n_groups];
    const char *name = tensor_name(r, v);
    hid_t g = open_group(f, group);
    if (g < 0) return;
    char target[160];
    const char *tg = v->groups[u8(r) % (unsigned)v->n_groups];
    switch (op) {
    case 3: H5Gclose(H5Gcreate2(g, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)); break;
    case 4:
        switch (u8(r) % 3) {
        case 0: snprintf(target, sizeof target, "/nowhere/%s", name); break;
        case 1: path_of(target, sizeof target, tg, tensor_name(r, v)); break;
        default: path_of(target, sizeof target, "", tg); break;
        }
        H5Lcreate_soft(target, g, name, H5P_DEFAULT, H5P_DEFAULT);
        break;
    case 5:
        if (u8(r) % 2)
            path_of(target, sizeof target, tg, tensor_name(r, v));
        else
            snprintf(target, sizeof target, "/%s", tg);
        H5Lcreate_hard(f, target, g, name, H5P_DEFAULT, H5P_DEFAULT);
        break;
    case 6: H5Lcreate_external("tb-fuzz-no-such-file.h5", "/x", g, name, H5P_DEFAULT, H5P_DEFAULT); break;
    default:
        if (H5Lexists(g, name, H5P_DEFAULT) > 0) H5Ldelete(g, name, H5P_DEFAULT);
        break;
    }
    H5Gclose(g);
}

int fz_h5_build(const char *path, const uint8_t *prog, size_t len, const fz_h5_vocab *v) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    reader r = {prog, len, 0, 0};
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (u8(&r) & 1) H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) return -1;
    for (int ops = 0; ops < MAX_OPS && r.i < r.n; ops++) {
        unsigned op = u8(&r) % 8;
        if (op == 0) {
            make_attr(f, &r, v);
        } else if (op == 1) {
            unsigned gi = u8(&r) % (unsigned)v->n_groups, ti = u16(&r) % (unsigned)(v->n_tensors + 1);
            static const fz_h5_tensor extra = {"extra.weight", 1, {3, 0, 0, 0}, 0, 0};
            const fz_h5_tensor *t = ti < (unsigned)v->n_tensors ? &v->tensors[ti] : &extra;
            unsigned shape = u8(&r), type = u8(&r), layout = u8(&r);
            make_dataset(f, &r, v->groups[gi], t->name, t, shape, type, layout);
        } else if (op == 2) {
            fill_group(f, &r, v, u8(&r) % (unsigned)v->n_groups);
        } else {
            make_link(f, &r, v, op);
        }
    }
    H5Fclose(f);
    return 0;
}
