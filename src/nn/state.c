/* SPDX-License-Identifier: MIT */
/* state.c - the registry's state dict as a safetensors file.
 *
 * Saving writes the registered tensors under their names in registration
 * order (fc_safetensors_write; FC_NN_SCALAR entries as shape [], the shape
 * torch gives num_batches_tracked). Loading is two passes so that a failed
 * load writes nothing: the first reads and checks every tensor the file and
 * the registry share (names, shapes, dtype conversion) into fresh copies,
 * the second copies them into the registered tensors. */
#include <stdio.h>
#include <string.h>

#include "fucina/nn.h"
#include "nn/nn_internal.h"

fc_status fc_nn_save(fc_nn *nn, const char *path) {
    if (!nn) return FC_ERR_NULL_ARG;
    if (!path) return fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "fc_nn_save: NULL path");
    int64_t n = nn->n;
    void *m1, *m2;
    fc_tensor *desc_mem = fc__nn_mem(nn->ctx, (size_t)n * sizeof(fc_io_tensor), &m1);
    fc_tensor *dense_mem =
        desc_mem ? fc__nn_mem(nn->ctx, (size_t)n * sizeof(fc_tensor *), &m2) : NULL;
    if (!dense_mem) {
        fc_release(desc_mem);
        return fc_ctx_status(nn->ctx);
    }
    fc_io_tensor *desc = m1;
    fc_tensor **dense = m2;
    fc_status st = FC_OK;
    for (int64_t i = 0; i < n && st == FC_OK; i++) {
        const nn_entry *e = &nn->e[i];
        dense[i] = fc_contiguous(nn->ctx, e->t);
        if (!dense[i]) {
            st = fc_ctx_status(nn->ctx);
            break;
        }
        fc_io_tensor *d = &desc[i];
        d->name = e->name;
        d->dtype = fc_tensor_dtype(dense[i]);
        d->data = fc_tensor_data(dense[i]);
        d->nbytes = fc_tensor_nbytes(dense[i]);
        if ((e->flags & FC_NN_SCALAR) && fc_tensor_numel(dense[i]) == 1) {
            d->rank = 0;
        } else {
            d->rank = fc_tensor_rank(dense[i]);
            for (int k = 0; k < d->rank; k++)
                d->shape[k] = fc_tensor_dim(dense[i], k);
        }
    }
    if (st == FC_OK) {
        st = fc_safetensors_write(path, desc, n, NULL, NULL, 0, NULL);
        if (st != FC_OK)
            fc_ctx_fail(nn->ctx, st, "fc_nn_save: writing %s: %s", path, fc_strerror(st));
    }
    for (int64_t i = 0; i < n; i++)
        fc_release(dense[i]);
    fc_release(desc_mem);
    fc_release(dense_mem);
    return st;
}

/* Appends name to a comma-separated list of cap bytes, ending it with
 * "..." once it no longer fits. */
static void list_add(char *list, size_t cap, const char *name) {
    size_t len = strlen(list);
    if (len >= 3 && strcmp(list + len - 3, "...") == 0) return;
    const char *sep = len ? ", " : "";
    if (len + strlen(sep) + strlen(name) + 4 < cap) {
        snprintf(list + len, cap - len, "%s%s", sep, name);
    } else if (len + strlen(sep) + 4 <= cap) {
        snprintf(list + len, cap - len, "%s...", sep);
    }
}

static void shape_str(char *buf, size_t cap, int rank, const int64_t *shape) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* Pass one for entry e: the file's tensor, checked and converted, in *out. */
static fc_status read_one(fc_nn *nn, const fc_st_file *f, int64_t idx, const nn_entry *e,
                          fc_tensor **out) {
    fc_io_tensor info;
    fc_status st = fc_safetensors_tensor_info(f, idx, &info);
    if (st != FC_OK) return fc_ctx_fail(nn->ctx, st, "fc_nn_load: reading \"%s\"", e->name);
    int rank = fc_tensor_rank(e->t);
    const int64_t *shape = fc_tensor_shape(e->t);
    bool same = info.rank == rank;
    for (int k = 0; same && k < rank; k++)
        same = info.shape[k] == shape[k];
    if (!same && (e->flags & FC_NN_SCALAR) && info.rank == 0 && fc_tensor_numel(e->t) == 1)
        same = true;
    if (!same) {
        char a[160], b[160];
        shape_str(a, sizeof a, info.rank, info.shape);
        shape_str(b, sizeof b, rank, shape);
        return fc_ctx_fail(nn->ctx, FC_ERR_SHAPE_MISMATCH,
                           "fc_nn_load: \"%s\" is %s in the file, %s in the model", e->name, a, b);
    }
    fc_tensor *t = fc_safetensors_load(nn->ctx, f, e->name, FC_IO_COPY);
    if (!t) return fc_ctx_status(nn->ctx);
    if (fc_tensor_dtype(t) != fc_tensor_dtype(e->t)) {
        fc_tensor *c = fc_to(nn->ctx, t, fc_tensor_dtype(e->t));
        fc_release(t);
        if (!c) return fc_ctx_status(nn->ctx);
        t = c;
    }
    if (fc_tensor_rank(t) != rank) { /* a scalar loads as [1]; the model's is [1] too */
        fc_tensor *v = fc_reshape(nn->ctx, t, shape, rank);
        fc_release(t);
        if (!v) return fc_ctx_status(nn->ctx);
        t = v;
    }
    *out = t;
    return FC_OK;
}

fc_status fc_nn_load(fc_nn *nn, const char *path, const fc_nn_load_opts *opts,
                     fc_nn_load_report *report) {
    fc_nn_load_report local;
    fc_nn_load_report *r = report ? report : &local;
    memset(r, 0, sizeof *r);
    if (!nn) return FC_ERR_NULL_ARG;
    if (!path) return fc_ctx_fail(nn->ctx, FC_ERR_NULL_ARG, "fc_nn_load: NULL path");
    bool strict = !(opts && opts->non_strict);
    fc_st_file *f = NULL;
    fc_status st = fc_safetensors_open(path, NULL, &f);
    if (st != FC_OK)
        return fc_ctx_fail(nn->ctx, st, "fc_nn_load: opening %s: %s", path, fc_strerror(st));
    void *mem;
    fc_tensor *got_mem = fc__nn_mem(nn->ctx, (size_t)nn->n * sizeof(fc_tensor *), &mem);
    if (!got_mem) {
        fc_safetensors_close(f);
        return fc_ctx_status(nn->ctx);
    }
    fc_tensor **got = mem;
    for (int64_t i = 0; i < nn->n; i++) {
        int64_t idx = fc_safetensors_find(f, nn->e[i].name);
        if (idx < 0) {
            r->missing++;
            list_add(r->missing_names, sizeof r->missing_names, nn->e[i].name);
        } else if (st == FC_OK) {
            st = read_one(nn, f, idx, &nn->e[i], &got[i]);
        }
    }
    int64_t nf = fc_safetensors_tensor_count(f);
    for (int64_t j = 0; j < nf; j++) {
        fc_io_tensor info;
        if (fc_safetensors_tensor_info(f, j, &info) != FC_OK) continue;
        if (fc__nn_index(nn, info.name) < 0) {
            r->unexpected++;
            list_add(r->unexpected_names, sizeof r->unexpected_names, info.name);
        }
    }
    if (st == FC_OK && strict && (r->missing || r->unexpected))
        st = fc_ctx_fail(nn->ctx, FC_ERR_INVALID_ARG,
                         "fc_nn_load: %s: %lld missing (%s), %lld unexpected (%s)", path,
                         (long long)r->missing, r->missing ? r->missing_names : "none",
                         (long long)r->unexpected, r->unexpected ? r->unexpected_names : "none");
    if (st == FC_OK) {
        fc_no_grad_begin(nn->ctx);
        for (int64_t i = 0; i < nn->n && st == FC_OK; i++) {
            if (!got[i]) continue;
            st = fc_copy_(nn->e[i].t, got[i]);
            if (st == FC_OK) r->loaded++;
        }
        fc_no_grad_end(nn->ctx);
    }
    for (int64_t i = 0; i < nn->n; i++)
        fc_release(got[i]);
    fc_release(got_mem);
    fc_safetensors_close(f);
    return st;
}
