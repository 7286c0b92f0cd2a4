/* h5io_attr.c - HDF5 attributes: scalar strings and numbers written and read
 * back under the HDF5 lock (h5io.h). */
#include <stdlib.h>
#include <string.h>

#include "src/results/h5io.h"

/* ---- attributes ----------------------------------------------------------------------- */

static void write_attr(hid_t loc, const char *name, hid_t type, const void *value) {
    tb_h5_lock(NULL);
    hid_t space = H5_CHECK(H5Screate(H5S_SCALAR));
    if (H5Aexists(loc, name) > 0) H5_CHECK(H5Adelete(loc, name));
    hid_t a = H5_CHECK(H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
    H5_CHECK(H5Awrite(a, type, value));
    H5_CHECK(H5Aclose(a));
    H5_CHECK(H5Sclose(space));
    tb_h5_unlock();
}

void tb_h5_attr_write_str(hid_t loc, const char *name, const char *value) {
    /* variable-length UTF-8: h5py reads it as str */
    tb_h5_lock(NULL);
    hid_t t = H5_CHECK(H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(t, H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(t, H5T_CSET_UTF8));
    write_attr(loc, name, t, &value);
    H5_CHECK(H5Tclose(t));
    tb_h5_unlock();
}

void tb_h5_attr_write_i64(hid_t loc, const char *name, int64_t value) {
    write_attr(loc, name, H5T_NATIVE_INT64, &value);
}

void tb_h5_attr_write_f64(hid_t loc, const char *name, double value) {
    write_attr(loc, name, H5T_NATIVE_DOUBLE, &value);
}

/* 1 when attribute a holds one value (any shape of one element): H5Aread writes every element. */
static int attr_is_single(hid_t a) {
    hid_t space = H5_CHECK(H5Aget_space(a));
    hssize_t n = H5Sget_simple_extent_npoints(space);
    H5_CHECK(H5Sclose(space));
    return n == 1;
}

static int attr_read_str(hid_t loc, const char *name, char *buf, size_t len) {
    if (H5Aexists(loc, name) <= 0) return -1;
    hid_t a = H5_CHECK(H5Aopen(loc, name, H5P_DEFAULT));
    hid_t ft = H5_CHECK(H5Aget_type(a));
    int rc = -1;
    if (H5Tget_class(ft) == H5T_STRING && attr_is_single(a)) {
        if (H5Tis_variable_str(ft) > 0) {
            hid_t mt = H5_CHECK(H5Tcopy(H5T_C_S1));
            H5_CHECK(H5Tset_size(mt, H5T_VARIABLE));
            H5_CHECK(H5Tset_cset(mt, H5Tget_cset(ft)));
            char *s = NULL;
            if (H5Aread(a, mt, &s) >= 0 && s) {
                snprintf(buf, len, "%s", s);
                H5free_memory(s);
                rc = 0;
            }
            H5_CHECK(H5Tclose(mt));
        } else {
            size_t n = H5Tget_size(ft);
            char *tmp = calloc(n + 1, 1);
            hid_t mt = H5_CHECK(H5Tcopy(ft));
            if (tmp && H5Aread(a, mt, tmp) >= 0) {
                snprintf(buf, len, "%s", tmp);
                rc = 0;
            }
            free(tmp);
            H5_CHECK(H5Tclose(mt));
        }
    }
    H5_CHECK(H5Tclose(ft));
    H5_CHECK(H5Aclose(a));
    return rc;
}

int tb_h5_attr_read_str(hid_t loc, const char *name, char *buf, size_t len) {
    tb_h5_lock(NULL);
    int rc = attr_read_str(loc, name, buf, len);
    tb_h5_unlock();
    return rc;
}

/* A single-element integer attribute, or (as_float) a float or integer one (h5py: 65536), read as memtype. */
static int attr_read_num(hid_t loc, const char *name, int as_float, hid_t memtype, void *value) {
    tb_h5_lock(NULL);
    int rc = -1;
    if (H5Aexists(loc, name) > 0) {
        hid_t a = H5_CHECK(H5Aopen(loc, name, H5P_DEFAULT)), ft = H5_CHECK(H5Aget_type(a));
        int kind_ok = H5Tget_class(ft) == H5T_INTEGER || (as_float && H5Tget_class(ft) == H5T_FLOAT);
        if (kind_ok && attr_is_single(a) && H5Aread(a, memtype, value) >= 0) rc = 0;
        H5_CHECK(H5Tclose(ft));
        H5_CHECK(H5Aclose(a));
    }
    tb_h5_unlock();
    return rc;
}

int tb_h5_attr_read_i64(hid_t loc, const char *name, int64_t *v) {
    return attr_read_num(loc, name, 0, H5T_NATIVE_INT64, v);
}
int tb_h5_attr_read_f64(hid_t loc, const char *name, double *v) {
    return attr_read_num(loc, name, 1, H5T_NATIVE_DOUBLE, v);
}
