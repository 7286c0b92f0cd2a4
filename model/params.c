/* params.c - building and querying the parameter table (see params.h). */
#include "model/params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

tb_param_store tb_param_store_of(tb_param_role role) {
    switch (role) {
    case TB_ROLE_BN_RUNNING_MEAN:
    case TB_ROLE_BN_RUNNING_VAR: return TB_STORE_STATE;
    case TB_ROLE_BN_COUNTER: return TB_STORE_COUNTER;
    default: return TB_STORE_TRAIN;
    }
}

int tb_param_is_bn_or_bias(tb_param_role role) {
    return role == TB_ROLE_BN_WEIGHT || role == TB_ROLE_BN_BIAS || role == TB_ROLE_FC_BIAS;
}

int tb_params_add(tb_param_table *t, const char *name, tb_param_role role, int ndim,
                  const int64_t *shape) {
    TB_ASSERT(ndim >= 0 && ndim <= 4);
    TB_ASSERT(strlen(name) < TB_PARAM_NAME_MAX);
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        t->items = realloc(t->items, (size_t)t->cap * sizeof *t->items);
        if (!t->items) TB_FATAL("out of host memory for the parameter table");
    }
    tb_param *p = &t->items[t->count];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->role = role;
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    switch (tb_param_store_of(role)) {
    case TB_STORE_TRAIN:
        p->offset = t->n_train;
        t->n_train += p->numel;
        break;
    case TB_STORE_STATE:
        p->offset = t->n_state;
        t->n_state += p->numel;
        break;
    case TB_STORE_COUNTER: p->offset = (size_t)t->n_counters++; break;
    }
    return t->count++;
}

int tb_params_find(const tb_param_table *t, const char *name) {
    for (int i = 0; i < t->count; i++)
        if (strcmp(t->items[i].name, name) == 0) return i;
    return -1;
}

void tb_params_free(tb_param_table *t) {
    free(t->items);
    memset(t, 0, sizeof *t);
}

void tb_params_shape_str(const tb_param *p, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < p->ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "",
                                 (long long)p->shape[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
}
