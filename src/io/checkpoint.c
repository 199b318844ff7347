/* SPDX-License-Identifier: MIT */
/* checkpoint.c - parameters + optimizer + RNG in one safetensors file.
 *
 * Everything that decides the next training step goes in: the parameter
 * bytes, the optimizer's moment tensors, its step count and every group's
 * hyper-parameters (printed with %.17g, which round-trips a double
 * exactly), and the RNG's (seed, offset). The writer is the atomic
 * safetensors writer, so a failed save leaves the previous checkpoint. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/copy.h"
#include "fucina/checkpoint.h"
#include "fucina/io.h"
#include "io/io.h"

#define NAME_CAP 224
#define VAL_CAP 40
#define MAX_NAME 200

/* each kind's state names, as fc_optim_state takes them (fucina/optim.h) */
static const char *const kind_states[FC_OPTIM_KIND_COUNT][3] = {
    [FC_OPTIM_SGD] = {"momentum_buffer"},
    [FC_OPTIM_ADAM] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    [FC_OPTIM_ADAMW] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    [FC_OPTIM_RMSPROP] = {"momentum_buffer", "square_avg", "grad_avg"},
    [FC_OPTIM_ADAGRAD] = {"sum"},
    [FC_OPTIM_LION] = {"exp_avg"},
    [FC_OPTIM_LAMB] = {"exp_avg", "exp_avg_sq"},
};

/* scratch: n_names fixed-size name slots and n_vals value slots */
typedef struct scratch {
    fc_ctx *ctx;
    char *names, *keys, *vals;
    int64_t nnames, nkv;
    size_t bytes;
} scratch;

static fc_status scratch_new(scratch *s, fc_ctx *ctx, int64_t nnames, int64_t nkv) {
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->bytes = (size_t)nnames * NAME_CAP + (size_t)nkv * (NAME_CAP + VAL_CAP);
    char *p = fc__ctx_alloc(ctx, s->bytes ? s->bytes : 1);
    if (!p) return fc__fail(ctx, FC_ERR_OOM, "fc_checkpoint: out of memory");
    s->names = p;
    s->keys = p + (size_t)nnames * NAME_CAP;
    s->vals = s->keys + (size_t)nkv * NAME_CAP;
    return FC_OK;
}
static void scratch_free(scratch *s) {
    if (s->names) fc__ctx_free(s->ctx, s->names, s->bytes ? s->bytes : 1);
}

static int opt_kind_states(const fc_optim *opt, const char **names) {
    fc_optim_opts o;
    fc_optim_group_opts(opt, 0, &o);
    int n = 0;
    while (n < 3 && kind_states[o.kind][n]) {
        names[n] = kind_states[o.kind][n];
        n++;
    }
    return n;
}

static bool reserved(const char *k) {
    return !strncmp(k, "fucina.", 7) || !strncmp(k, "optim.", 6) || !strncmp(k, "rng.", 4);
}

static fc_status check_names(fc_ctx *ctx, const char *fn, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        if (!names[i]) return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: name %d is NULL", fn, i);
        size_t len = strlen(names[i]);
        if (len == 0 || len > MAX_NAME)
            return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: name %d has %zu bytes (1..%d)", fn, i,
                            len, MAX_NAME);
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: name '%s' appears twice", fn,
                                names[i]);
    }
    return FC_OK;
}

static void put_kv(scratch *s, int64_t *k, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void put_kv(scratch *s, int64_t *k, const char *key, const char *fmt, ...) {
    snprintf(s->keys + (size_t)*k * NAME_CAP, NAME_CAP, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->vals + (size_t)*k * VAL_CAP, VAL_CAP, fmt, ap);
    va_end(ap);
    (*k)++;
}

fc_status fc__checkpoint_save_faulty(fc_ctx *ctx, const char *path, const char *const *names,
                                     fc_tensor *const *params, int n, const fc_optim *opt,
                                     const char *const *meta_keys, const char *const *meta_values,
                                     int n_meta, const void *fault);

fc_status fc_checkpoint_save(fc_ctx *ctx, const char *path, const char *const *names,
                             fc_tensor *const *params, int n, const fc_optim *opt,
                             const char *const *meta_keys, const char *const *meta_values,
                             int n_meta) {
    return fc__checkpoint_save_faulty(ctx, path, names, params, n, opt, meta_keys, meta_values,
                                      n_meta, NULL);
}

fc_status fc__checkpoint_save_faulty(fc_ctx *ctx, const char *path, const char *const *names,
                                     fc_tensor *const *params, int n, const fc_optim *opt,
                                     const char *const *meta_keys, const char *const *meta_values,
                                     int n_meta, const void *fault) {
    static const char *fn = "fc_checkpoint_save";
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!path || (n > 0 && (!names || !params)) || (n_meta > 0 && (!meta_keys || !meta_values)))
        return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: path, names, params or metadata is NULL", fn);
    if (n < 0 || n_meta < 0)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: n %d / n_meta %d < 0", fn, n, n_meta);
    fc_status st = check_names(ctx, fn, names, n);
    if (st != FC_OK) return st;
    for (int i = 0; i < n_meta; i++) {
        if (!meta_keys[i] || !meta_values[i])
            return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: metadata %d is NULL", fn, i);
        if (reserved(meta_keys[i]))
            return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: metadata key '%s' is reserved", fn,
                            meta_keys[i]);
    }
    for (int i = 0; i < n; i++) {
        if (!params[i])
            return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: param '%s' is NULL", fn, names[i]);
        if (params[i]->ctx != ctx)
            return fc__fail(ctx, FC_ERR_CONTEXT, "%s: param '%s' belongs to another context", fn,
                            names[i]);
        if (fc_dtype_is_block(params[i]->raw.dtype))
            return fc__fail(ctx, FC_ERR_DTYPE, "%s: param '%s' is %s (block-quantized)", fn,
                            names[i], fc_dtype_name(params[i]->raw.dtype));
    }
    int nopt = opt ? fc_optim_param_count(opt) : 0;
    int ngroups = opt ? fc_optim_group_count(opt) : 0;
    const char *sn[3];
    int nstates = opt ? opt_kind_states(opt, sn) : 0;
    int64_t max_t = n + (int64_t)nopt * nstates;
    int64_t max_kv = 8 + (int64_t)ngroups * 14 + 2 * (int64_t)nopt + n_meta; /* 13 per group */
    scratch s;
    if ((st = scratch_new(&s, ctx, max_t, max_kv)) != FC_OK) return st;
    fc_scope_begin(ctx);
    fc_tensor **ts = fc__ctx_alloc(ctx, sizeof(fc_tensor *) * (size_t)(max_t ? max_t : 1));
    const char **tn = fc__ctx_alloc(ctx, sizeof(char *) * (size_t)(max_t ? max_t : 1));
    const char **mk = fc__ctx_alloc(ctx, sizeof(char *) * (size_t)max_kv);
    const char **mv = fc__ctx_alloc(ctx, sizeof(char *) * (size_t)max_kv);
    int64_t nt = 0, nkv = 0, ncontig = 0;
    if (!ts || !tn || !mk || !mv) {
        st = fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        snprintf(s.names + (size_t)nt * NAME_CAP, NAME_CAP, "param.%s", names[i]);
        tn[nt] = s.names + (size_t)nt * NAME_CAP;
        ts[nt++] = params[i];
    }
    uint64_t seed, offset;
    fc_ctx_get_rng(ctx, &seed, &offset);
    put_kv(&s, &nkv, "fucina.checkpoint", "2");
    put_kv(&s, &nkv, "rng.seed", "%" PRIu64, seed);
    put_kv(&s, &nkv, "rng.offset", "%" PRIu64, offset);
    if (opt) {
        fc_optim_opts g0;
        fc_optim_group_opts(opt, 0, &g0);
        put_kv(&s, &nkv, "optim.kind", "%d", (int)g0.kind);
        put_kv(&s, &nkv, "optim.steps", "%" PRId64, fc_optim_step_count(opt));
        put_kv(&s, &nkv, "optim.params", "%d", nopt);
        put_kv(&s, &nkv, "optim.groups", "%d", ngroups);
        for (int g = 0; g < ngroups; g++) {
            fc_optim_opts o;
            fc_optim_group_opts(opt, g, &o);
            char key[64];
#define FC__PUT(field, fmt, val)                                                                   \
    snprintf(key, sizeof key, "optim.group.%d." field, g);                                         \
    put_kv(&s, &nkv, key, fmt, val)
            FC__PUT("lr", "%.17g", o.lr);
            FC__PUT("weight_decay", "%.17g", o.weight_decay);
            FC__PUT("momentum", "%.17g", o.momentum);
            FC__PUT("dampening", "%.17g", o.dampening);
            FC__PUT("nesterov", "%d", (int)o.nesterov);
            FC__PUT("beta1", "%.17g", o.beta1);
            FC__PUT("beta2", "%.17g", o.beta2);
            FC__PUT("eps", "%.17g", o.eps);
            FC__PUT("amsgrad", "%d", (int)o.amsgrad);
            if (o.kind >= FC_OPTIM_RMSPROP) { /* the older kinds' files stay as they were */
                FC__PUT("alpha", "%.17g", o.alpha);
                FC__PUT("centered", "%d", (int)o.centered);
                FC__PUT("lr_decay", "%.17g", o.lr_decay);
                FC__PUT("initial_accumulator_value", "%.17g", o.initial_accumulator_value);
            }
#undef FC__PUT
        }
        for (int i = 0; i < nopt; i++) {
            char key[64];
            snprintf(key, sizeof key, "optim.param.%d.group", i);
            put_kv(&s, &nkv, key, "%d", fc_optim_param_group(opt, i));
            unsigned bits = 0;
            for (int k = 0; k < nstates; k++) {
                fc_tensor *t = fc_optim_state((fc_optim *)opt, i, sn[k], false);
                if (!t) continue;
                bits |= 1u << k;
                snprintf(s.names + (size_t)nt * NAME_CAP, NAME_CAP, "optim.%d.%s", i, sn[k]);
                tn[nt] = s.names + (size_t)nt * NAME_CAP;
                ts[nt++] = t;
            }
            /* which states exist: the loader refuses a file missing one */
            snprintf(key, sizeof key, "optim.param.%d.states", i);
            put_kv(&s, &nkv, key, "%u", bits);
        }
    }
    for (int64_t k = 0; k < nkv; k++) {
        mk[k] = s.keys + (size_t)k * NAME_CAP;
        mv[k] = s.vals + (size_t)k * VAL_CAP;
    }
    for (int i = 0; i < n_meta; i++) {
        mk[nkv] = meta_keys[i];
        mv[nkv++] = meta_values[i];
    }
    /* descriptors over contiguous copies where needed */
    fc_io_tensor *d = fc__ctx_alloc(ctx, sizeof *d * (size_t)(nt ? nt : 1));
    if (!d) {
        st = fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
        goto out;
    }
    for (int64_t i = 0; i < nt && st == FC_OK; i++) {
        /* a new reference (ts[i] itself, retained, when already contiguous:
         * no scope records that one), released at `out` */
        fc_tensor *c = fc__copy_contiguous(ctx, fn, ts[i]);
        if (!c) {
            st = fc_ctx_status(ctx);
            break;
        }
        ts[i] = c;
        ncontig = i + 1;
        memset(&d[i], 0, sizeof d[i]);
        d[i].name = tn[i];
        d[i].dtype = c->raw.dtype;
        d[i].rank = c->raw.rank;
        memcpy(d[i].shape, c->raw.shape, sizeof(int64_t) * (size_t)c->raw.rank);
        d[i].data = fc__raw_base(&c->raw);
        d[i].nbytes = fc_tensor_nbytes(c);
    }
    if (st == FC_OK) {
        char msg[256] = "";
        fc_io_opts o = {.allocator = &ctx->alloc, .errbuf = msg, .errcap = sizeof msg};
        st = fc__safetensors_write_faulty(path, d, nt, mk, mv, nkv, &o, fault);
        if (st != FC_OK) fc__fail(ctx, st, "%s: %s", fn, msg);
    }
    fc__ctx_free(ctx, d, sizeof *d * (size_t)(nt ? nt : 1));
out:
    for (int64_t i = 0; i < ncontig; i++)
        fc_release(ts[i]);
    fc__ctx_free(ctx, ts, sizeof(fc_tensor *) * (size_t)(max_t ? max_t : 1));
    fc__ctx_free(ctx, tn, sizeof(char *) * (size_t)(max_t ? max_t : 1));
    fc__ctx_free(ctx, mk, sizeof(char *) * (size_t)max_kv);
    fc__ctx_free(ctx, mv, sizeof(char *) * (size_t)max_kv);
    fc_scope_end(ctx);
    scratch_free(&s);
    return st;
}

/* ---- loading ------------------------------------------------------------------------ */

/* Metadata numbers are refused, not converted, when they do not fit: a value
 * is read as text and checked before any cast (a cast of an out-of-range
 * double to an integer is undefined behaviour), and every message names the
 * key and the value. */

static fc_status meta_bad(fc_ctx *ctx, const char *path, const char *key, const char *v,
                          const char *why) {
    if (!v)
        return fc__fail(ctx, FC_ERR_FORMAT, "fc_checkpoint_load: %s: metadata '%s' is missing",
                        path, key);
    return fc__fail(ctx, FC_ERR_FORMAT, "fc_checkpoint_load: %s: metadata '%s' is '%.64s' (%s)",
                    path, key, v, why);
}

/* A finite number (hyper-parameters). */
static fc_status meta_num(fc_ctx *ctx, const fc_st_file *f, const char *key, double *out,
                          const char *path) {
    const char *v = fc_safetensors_meta_find(f, key);
    char *end = NULL;
    double d = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !isfinite(d))
        return meta_bad(ctx, path, key, v, "not a finite number");
    *out = d;
    return FC_OK;
}

/* An integer in [lo, hi]: parsed as a double, then checked finite, integral
 * and in range before the conversion. */
static fc_status meta_int(fc_ctx *ctx, const fc_st_file *f, const char *key, int lo, int hi,
                          int *out, const char *path) {
    const char *v = fc_safetensors_meta_find(f, key);
    char *end = NULL;
    double d = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !(d >= lo && d <= hi) || d != floor(d)) {
        char why[64];
        snprintf(why, sizeof why, "not an integer in %d..%d", lo, hi);
        return meta_bad(ctx, path, key, v, why);
    }
    *out = (int)d;
    return FC_OK;
}

/* A plain decimal unsigned integer of at most max: one or more digits and
 * nothing else (no sign, space, point or exponent), so every uint64_t the
 * saver printed reads back exactly and nothing else is accepted. */
static fc_status meta_u64(fc_ctx *ctx, const fc_st_file *f, const char *key, uint64_t max,
                          uint64_t *out, const char *path) {
    const char *v = fc_safetensors_meta_find(f, key);
    uint64_t x = 0;
    bool ok = v && *v;
    for (const char *c = v; ok && *c; c++) {
        unsigned dgt = (unsigned)(*c - '0');
        if (dgt > 9 || x > (max - dgt) / 10)
            ok = false;
        else
            x = x * 10 + dgt;
    }
    if (!ok) {
        char why[64];
        snprintf(why, sizeof why, "not a decimal integer in 0..%" PRIu64, max);
        return meta_bad(ctx, path, key, v, why);
    }
    *out = x;
    return FC_OK;
}

/* Loading validates everything before it writes anything, so a failed load
 * leaves the parameters, the optimizer and the RNG as they were:
 *   1. check: every tensor is in the file with the destination's dtype and
 *      shape, the destination is writable and contiguous; every metadata
 *      number parses and fits; the optimizer matches; the file's optimizer
 *      state is complete (see plan_states);
 *   2. apply the group options (undone if one is refused) and create the
 *      state tensors the file has (an allocation can fail here; the group
 *      options are then restored, and a state created zero is what the next
 *      step would have created anyway);
 *   3. copy the bytes, zero the states the file says did not exist yet, set
 *      the step count and the RNG: nothing fails.
 * The file is read into memory (FC_IO_NO_MMAP), not mapped: a trainer may
 * rewrite or truncate its checkpoint while another process loads it, and a
 * mapped file that shrinks under its reader raises SIGBUS. */

/* Finds tensor `name` in f and checks it fits a destination of dtype and
 * shape (dst NULL: a state tensor still to be created, of the parameter's
 * shape); fills *info. Writes nothing. */
static fc_status check_into(fc_ctx *ctx, const fc_st_file *f, const char *name,
                            const fc_tensor *dst, const fc_tensor *like, const char *path,
                            fc_io_tensor *info) {
    int64_t idx = fc_safetensors_find(f, name);
    if (idx < 0)
        return fc__fail(ctx, FC_ERR_INDEX, "fc_checkpoint_load: %s has no tensor '%s'", path, name);
    fc_safetensors_tensor_info(f, idx, info);
    /* a state yet to be created will have the optimizer's state dtype:
     * f64 for an f64 parameter, f32 otherwise (fucina/optim.h) */
    fc_dtype want = dst ? dst->raw.dtype : like->raw.dtype == FC_F64 ? FC_F64 : FC_F32;
    const fc_raw *geo = dst ? &dst->raw : &like->raw;
    if (info->dtype != want)
        return fc__fail(ctx, FC_ERR_DTYPE, "fc_checkpoint_load: '%s' is %s in %s, the tensor is %s",
                        name, fc_dtype_name(info->dtype), path, fc_dtype_name(want));
    int rank = info->rank == 0 ? 1 : info->rank;
    int64_t one = 1;
    const int64_t *shape = info->rank == 0 ? &one : info->shape;
    if (!fc__shape_equal(shape, rank, geo->shape, geo->rank)) {
        char a[160], b[160];
        return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                        "fc_checkpoint_load: '%s' has shape %s in %s, the tensor %s", name,
                        fc__shape_str(shape, rank, a, (int)sizeof a), path,
                        fc__shape_str(geo->shape, geo->rank, b, (int)sizeof b));
    }
    if (dst && fc__buffer_is_read_only(dst->raw.buf))
        return fc__fail(ctx, FC_ERR_READ_ONLY, "fc_checkpoint_load: cannot write '%s': %s", name,
                        fc_strerror(FC_ERR_READ_ONLY));
    if (dst && !fc__raw_is_contiguous(&dst->raw))
        return fc__fail(ctx, FC_ERR_UNSUPPORTED_VIEW,
                        "fc_checkpoint_load: cannot write '%s': the tensor is not contiguous",
                        name);
    return FC_OK;
}

/* Copies checked bytes (a mutation: bumps the generation). */
static void copy_into(fc_tensor *dst, const fc_io_tensor *info) {
    void *p = NULL;
    if (fc__raw_data_mut(&dst->raw, &p) == FC_OK) memcpy(p, info->data, (size_t)info->nbytes);
}
/* Resets an existing state tensor to the value a fresh one holds: 0, or
 * Adagrad's initial_accumulator_value for its "sum" (a mutation: bumps the
 * generation). State is f32 or f64 (fucina/optim.h). */
static void reset_state(fc_optim *opt, int i, const char *name) {
    fc_tensor *t = fc_optim_state(opt, i, name, false);
    void *p = NULL;
    if (!t || fc__raw_data_mut(&t->raw, &p) != FC_OK) return;
    fc_optim_opts o;
    fc_optim_group_opts(opt, fc_optim_param_group(opt, i), &o);
    double init = o.kind == FC_OPTIM_ADAGRAD ? o.initial_accumulator_value : 0;
    int64_t n = fc_tensor_numel(t);
    if (init == 0)
        memset(p, 0, (size_t)fc_tensor_nbytes(t));
    else if (fc_tensor_dtype(t) == FC_F64)
        for (int64_t k = 0; k < n; k++) ((double *)p)[k] = init;
    else
        for (int64_t k = 0; k < n; k++) ((float *)p)[k] = (float)init;
}

/* the last four are read for the kinds from RMSprop on only: files of the
 * kinds before lack them */
static const char *group_fields[13] = {"lr",       "weight_decay", "momentum", "dampening",
                                       "nesterov", "beta1",        "beta2",    "eps",
                                       "amsgrad",  "alpha",        "centered", "lr_decay",
                                       "initial_accumulator_value"};

/* Step 1 for the optimizer: its metadata, parsed into groups[ng] (which
 * starts as the current options) and *steps. */
static fc_status check_optim(fc_ctx *ctx, const fc_st_file *f, const fc_optim *opt,
                             const char *path, fc_optim_opts *groups, int64_t *steps) {
    static const char *fn = "fc_checkpoint_load";
    int kind = 0, np = 0, ng = 0;
    uint64_t st_u = 0;
    fc_status st;
    if ((st = meta_int(ctx, f, "optim.kind", 0, FC_OPTIM_KIND_COUNT - 1, &kind, path)) != FC_OK)
        return st;
    if ((st = meta_u64(ctx, f, "optim.steps", (uint64_t)INT64_MAX, &st_u, path)) != FC_OK)
        return st;
    if ((st = meta_int(ctx, f, "optim.params", 0, INT32_MAX, &np, path)) != FC_OK) return st;
    if ((st = meta_int(ctx, f, "optim.groups", 0, INT32_MAX, &ng, path)) != FC_OK) return st;
    fc_optim_opts g0;
    fc_optim_group_opts(opt, 0, &g0);
    if (kind != (int)g0.kind || np != fc_optim_param_count(opt) || ng != fc_optim_group_count(opt))
        return fc__fail(ctx, FC_ERR_FORMAT,
                        "%s: %s holds optimizer kind %d with %d params in %d groups; this "
                        "optimizer is kind %d with %d params in %d groups",
                        fn, path, kind, np, ng, (int)g0.kind, fc_optim_param_count(opt),
                        fc_optim_group_count(opt));
    *steps = (int64_t)st_u;
    for (int g = 0; g < ng; g++) {
        double v[13] = {0};
        int nfields = kind >= FC_OPTIM_RMSPROP ? 13 : 9;
        for (int k = 0; k < nfields; k++) {
            char key[64];
            snprintf(key, sizeof key, "optim.group.%d.%s", g, group_fields[k]);
            if (k == 4 || k == 8 || k == 10) { /* nesterov, amsgrad, centered: 0 or 1 */
                int b = 0;
                if ((st = meta_int(ctx, f, key, 0, 1, &b, path)) != FC_OK) return st;
                v[k] = b;
            } else if ((st = meta_num(ctx, f, key, &v[k], path)) != FC_OK) {
                return st;
            }
        }
        fc_optim_opts *go = &groups[g];
        go->lr = v[0], go->weight_decay = v[1], go->momentum = v[2], go->dampening = v[3];
        go->nesterov = v[4] != 0, go->beta1 = v[5], go->beta2 = v[6], go->eps = v[7];
        go->amsgrad = v[8] != 0;
        if (nfields == 13)
            go->alpha = v[9], go->centered = v[10] != 0, go->lr_decay = v[11],
            go->initial_accumulator_value = v[12];
    }
    for (int i = 0; i < np; i++) {
        char key[64];
        int g = 0;
        snprintf(key, sizeof key, "optim.param.%d.group", i);
        if ((st = meta_int(ctx, f, key, 0, ng - 1, &g, path)) != FC_OK) return st;
        if (g != fc_optim_param_group(opt, i))
            return fc__fail(ctx, FC_ERR_FORMAT,
                            "%s: %s puts optimizer parameter %d in group %d; this optimizer has "
                            "it in group %d",
                            fn, path, i, g, fc_optim_param_group(opt, i));
    }
    return FC_OK;
}

/* The state tensors of the file, in (param, state) order. */
typedef struct state_slot {
    int param;
    const char *name;
    fc_io_tensor info;
} state_slot;

/* Decides, for parameter i, which of its nstates states the file holds
 * (*have, bit k for sn[k]). The file's "optim.param.<i>.states" (version 2)
 * says which states existed when it was saved; each listed one must be in
 * the file, and none other may be. A version 1 file has no such list: what
 * it holds is taken as the list, except that after a step an Adam
 * parameter's state comes in pairs (exp_avg with exp_avg_sq) and at least
 * one parameter must have state. States the file does not list are reset
 * at load to the value a fresh state holds (zeros; Adagrad's sum:
 * initial_accumulator_value), which is what the optimizer creates on its
 * next step, so the result is the file's state exactly; with one exception
 * the public optimizer API cannot express: an SGD momentum buffer the live optimizer
 * already has, for a parameter the file had none for, after steps > 0 (the
 * optimizer would take it for a real buffer): refused with FC_ERR_STATE. */
static fc_status plan_states(fc_ctx *ctx, const fc_st_file *f, fc_optim *opt, int version, int i,
                             const char **sn, int nstates, int64_t steps, const char *path,
                             unsigned *have) {
    static const char *fn = "fc_checkpoint_load";
    char name[NAME_CAP], key[64];
    unsigned present = 0;
    for (int k = 0; k < nstates; k++) {
        snprintf(name, sizeof name, "optim.%d.%s", i, sn[k]);
        if (fc_safetensors_find(f, name) >= 0) present |= 1u << k;
    }
    unsigned listed = present;
    fc_status st;
    if (version >= 2) {
        int bits = 0;
        snprintf(key, sizeof key, "optim.param.%d.states", i);
        if ((st = meta_int(ctx, f, key, 0, (1 << nstates) - 1, &bits, path)) != FC_OK) return st;
        listed = (unsigned)bits;
    } else if (steps > 0 && nstates == 3 && !strcmp(sn[0], "exp_avg") &&
               ((present & 1u) != ((present >> 1) & 1u))) {
        listed = present | 3u; /* an Adam pair with one half gone */
    }
    for (int k = 0; k < nstates; k++) {
        snprintf(name, sizeof name, "optim.%d.%s", i, sn[k]);
        if ((listed >> k & 1u) && !(present >> k & 1u))
            return fc__fail(ctx, FC_ERR_FORMAT,
                            "%s: %s has no tensor '%s' although its optimizer had that state "
                            "(optim.steps %" PRId64 ")",
                            fn, path, name, steps);
        if (!(listed >> k & 1u) && (present >> k & 1u))
            return fc__fail(ctx, FC_ERR_FORMAT,
                            "%s: %s holds tensor '%s' that its metadata says did not exist", fn,
                            path, name);
    }
    if (nstates == 1 && !strcmp(sn[0], "momentum_buffer") && steps > 0 && !(listed & 1u) &&
        fc_optim_state(opt, i, sn[0], false))
        return fc__fail(ctx, FC_ERR_STATE,
                        "%s: %s has no momentum buffer for optimizer parameter %d after %" PRId64
                        " steps, and this optimizer already has one (it cannot be dropped): "
                        "load into a fresh optimizer",
                        fn, path, i, steps);
    *have = listed;
    return FC_OK;
}

/* A version 1 file after steps with no state tensor at all was stripped:
 * every optimizer step of Adam creates state, and of SGD with momentum. */
static fc_status check_v1_not_stripped(fc_ctx *ctx, const fc_optim *opt, const unsigned *have,
                                       int np, const char **sn, int64_t steps, const char *path) {
    if (steps == 0 || np == 0) return FC_OK;
    for (int i = 0; i < np; i++)
        if (have[i]) return FC_OK;
    fc_optim_opts o;
    fc_optim_group_opts(opt, 0, &o);
    if (o.kind == FC_OPTIM_SGD && o.momentum == 0) return FC_OK;
    return fc__fail(ctx, FC_ERR_FORMAT,
                    "fc_checkpoint_load: %s has no tensor 'optim.0.%s' (no optimizer state at "
                    "all) although optim.steps is %" PRId64,
                    path, sn[0], steps);
}

fc_status fc_checkpoint_load(fc_ctx *ctx, const char *path, const char *const *names,
                             fc_tensor *const *params, int n, fc_optim *opt) {
    static const char *fn = "fc_checkpoint_load";
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!path || (n > 0 && (!names || !params)))
        return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: path, names or params is NULL", fn);
    if (n < 0) return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: n %d < 0", fn, n);
    fc_status st = check_names(ctx, fn, names, n);
    if (st != FC_OK) return st;
    for (int i = 0; i < n; i++) {
        if (!params[i])
            return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: param '%s' is NULL", fn, names[i]);
        if (params[i]->ctx != ctx)
            return fc__fail(ctx, FC_ERR_CONTEXT, "%s: param '%s' belongs to another context", fn,
                            names[i]);
    }
    const bool had_error = fc_ctx_status(ctx) != FC_OK; /* the first error is kept */
    char msg[256] = "";
    fc_io_opts o = {
        .allocator = &ctx->alloc, .flags = FC_IO_NO_MMAP, .errbuf = msg, .errcap = sizeof msg};
    fc_st_file *f = NULL;
    st = fc_safetensors_open(path, &o, &f);
    if (st != FC_OK) return fc__fail(ctx, st, "%s: %s", fn, msg);
    int ng = opt ? fc_optim_group_count(opt) : 0, np = opt ? fc_optim_param_count(opt) : 0;
    const char *sn[3];
    int nstates = opt ? opt_kind_states(opt, sn) : 0;
    size_t nslots = (size_t)np * (size_t)nstates;
    /* work: the params' descriptors, the state slots, new and old group
     * options, each optimizer parameter's state bits */
    size_t bytes = sizeof(fc_io_tensor) * (size_t)n + sizeof(state_slot) * nslots +
                   2 * sizeof(fc_optim_opts) * (size_t)ng + sizeof(unsigned) * (size_t)np;
    char *work = fc__ctx_alloc(ctx, bytes ? bytes : 1);
    if (!work) {
        fc_safetensors_close(f);
        return fc__fail(ctx, FC_ERR_OOM, "%s: out of memory", fn);
    }
    fc_io_tensor *pinfo = (fc_io_tensor *)(void *)work;
    state_slot *slots = (state_slot *)(void *)(pinfo + n);
    fc_optim_opts *gnew = (fc_optim_opts *)(void *)(slots + nslots), *gold = gnew + ng;
    unsigned *have = (unsigned *)(void *)(gold + ng);
    int nfound = 0, applied = 0, version = 0;
    int64_t steps = 0;
    uint64_t seed = 0, offset = 0;
    char name[NAME_CAP];

    /* 1. check */
    if (!fc_safetensors_meta_find(f, "fucina.checkpoint"))
        st = fc__fail(ctx, FC_ERR_FORMAT, "%s: %s is not a fucina checkpoint", fn, path);
    else
        st = meta_int(ctx, f, "fucina.checkpoint", 1, 2, &version, path);
    for (int i = 0; i < n && st == FC_OK; i++) {
        snprintf(name, sizeof name, "param.%s", names[i]);
        st = check_into(ctx, f, name, params[i], NULL, path, &pinfo[i]);
    }
    if (st == FC_OK) st = meta_u64(ctx, f, "rng.seed", UINT64_MAX, &seed, path);
    if (st == FC_OK) st = meta_u64(ctx, f, "rng.offset", UINT64_MAX, &offset, path);
    for (int g = 0; g < ng; g++) {
        fc_optim_group_opts(opt, g, &gold[g]);
        gnew[g] = gold[g];
    }
    if (st == FC_OK && opt) st = check_optim(ctx, f, opt, path, gnew, &steps);
    for (int i = 0; i < np && st == FC_OK; i++)
        st = plan_states(ctx, f, opt, version, i, sn, nstates, steps, path, &have[i]);
    if (st == FC_OK && opt && version < 2)
        st = check_v1_not_stripped(ctx, opt, have, np, sn, steps, path);
    for (int i = 0; i < np && st == FC_OK; i++) {
        for (int k = 0; k < nstates && st == FC_OK; k++) {
            if (!(have[i] >> k & 1u)) continue;
            snprintf(name, sizeof name, "optim.%d.%s", i, sn[k]);
            state_slot *sl = &slots[nfound];
            sl->param = i;
            sl->name = sn[k];
            fc_tensor *t = fc_optim_state(opt, i, sn[k], false);
            st = check_into(ctx, f, name, t, fc_optim_param(opt, i), path, &sl->info);
            if (st == FC_OK) nfound++;
        }
    }
    /* 2. options and states */
    for (; applied < ng && st == FC_OK; applied++) {
        st = fc_optim_set_group_opts(opt, applied, &gnew[applied]);
        if (st != FC_OK && !had_error) {
            /* the file's options are what is wrong: report it as this
             * loader's refusal of the file, with the optimizer's reason */
            char why[200];
            snprintf(why, sizeof why, "%s", fc_ctx_error(ctx));
            fc_ctx_clear_error(ctx);
            st = fc__fail(ctx, FC_ERR_FORMAT,
                          "%s: %s: the options of optimizer group %d are refused (%s)", fn, path,
                          applied, why);
        }
    }
    for (int k = 0; k < nfound && st == FC_OK; k++)
        if (!fc_optim_state(opt, slots[k].param, slots[k].name, true)) st = fc_ctx_status(ctx);
    if (st != FC_OK) {
        for (int g = 0; g < applied; g++)
            fc_optim_set_group_opts(opt, g, &gold[g]);
    } else {
        /* 3. write */
        for (int i = 0; i < n; i++)
            copy_into(params[i], &pinfo[i]);
        for (int k = 0; k < nfound; k++)
            copy_into(fc_optim_state(opt, slots[k].param, slots[k].name, false), &slots[k].info);
        for (int i = 0; i < np; i++)
            for (int k = 0; k < nstates; k++)
                if (!(have[i] >> k & 1u)) reset_state(opt, i, sn[k]);
        /* the count last: for SGD it also decides which buffers count as set */
        if (opt) fc_optim_set_step_count(opt, steps);
        fc_ctx_set_rng(ctx, seed, offset);
    }
    fc__ctx_free(ctx, work, bytes ? bytes : 1);
    fc_safetensors_close(f);
    return st;
}
