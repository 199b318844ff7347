/* SPDX-License-Identifier: MIT */
/* bad_input.h - the table runner shared by the bad-input tests.
 *
 * A case calls one public function with one bad input and names the exact
 * status it must give and a word the context's message must contain (the
 * function or op name). For every case the runner checks
 *   - the status: the one returned, or, for tensor-producing calls, NULL
 *     plus the code recorded in the context;
 *   - the message (fc_ctx_error) contains the expected name;
 *   - the failed call had no side effect: no tensor handle was added, and
 *     the fixture's tensors kept their storage generation;
 *   - the context still works afterwards (a tiny op succeeds).
 * Every mismatch is printed; the test fails at the end with their count, so
 * one run lists them all.
 *
 * Fixture tensors are named by dtype and shape: f_23 is f32 [2, 3]. */
#ifndef FUCINA_TESTS_BAD_INPUT_H
#define FUCINA_TESTS_BAD_INPUT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fucina.h"

typedef struct fx {
    fc_ctx *ctx;
    fc_tensor *f_23, *f_3, *f_4, *f_32, *f_234, *f_1;
    fc_tensor *f_345;      /* f32 [3, 4, 5]: batch 3 against f_234's 2 */
    fc_tensor *d_23, *d_3; /* f64 */
    fc_tensor *h_23;       /* f16 */
    fc_tensor *i_23;       /* i32 */
    fc_tensor *i_23_zero;  /* i32 zeros (integer division by zero) */
    fc_tensor *b_23;       /* bool */
    fc_tensor *e8_23;      /* f8_e4m3 (storage only) */
    fc_tensor *q_232;      /* q8_0 [2, 32] (block) */
    fc_tensor *nc_32;      /* f32 [3, 2], a transposed (non-contiguous) view of f_23 */
    fc_tensor *ro_23;      /* f32 [2, 3], read-only borrowed storage */
    fc_tensor *p_23;       /* f32 [2, 3] parameter (requires grad) */
    fc_tensor *idx_2;      /* i64 [2] = {0, 1} */
    fc_tensor *idx_bad;    /* i64 [2] = {0, 7}: 7 is out of range everywhere here */
    fc_tensor *idx_neg;    /* i64 [2] = {-1, 0} */
    fc_tensor *t_2;        /* i64 [2] targets {0, 2} for [2, 3] logits */
    float ro_data[6];
    char eb[256];  /* fc_io_opts.errbuf of io_opts: byte-level io messages */
    fc_io_opts io; /* {.errbuf = eb} */
} fx;

/* One case: exactly one of tensor_fn / status_fn is set. */
typedef struct bad_case {
    const char *what;
    fc_tensor *(*tensor_fn)(fx *f);
    fc_status (*status_fn)(fx *f);
    fc_status want;
    const char *name; /* the message must contain it; NULL: the table's default
                       * name, and no check when that is NULL too */
} bad_case;

#define BAD_T(fn, want, name)                                                                      \
    { #fn, fn, NULL, want, name }
#define BAD_S(fn, want, name)                                                                      \
    { #fn, NULL, fn, want, name }

static inline fx *fx_new(void) {
    static fx f;
    memset(&f, 0, sizeof f);
    fc_ctx *c = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 5});
    f.ctx = c;
    const float v[6] = {0.5f, -1, 2, 0.25f, 3, -0.75f};
    memcpy(f.ro_data, v, sizeof v);
    f.f_23 = fc_tensor_from_data(c, FC_F32, (const int64_t[]){2, 3}, 2, v);
    f.f_3 = fc_ones(c, FC_F32, (const int64_t[]){3}, 1);
    f.f_4 = fc_ones(c, FC_F32, (const int64_t[]){4}, 1);
    f.f_32 = fc_ones(c, FC_F32, (const int64_t[]){3, 2}, 2);
    f.f_234 = fc_ones(c, FC_F32, (const int64_t[]){2, 3, 4}, 3);
    f.f_1 = fc_ones(c, FC_F32, (const int64_t[]){1}, 1);
    f.f_345 = fc_ones(c, FC_F32, (const int64_t[]){3, 4, 5}, 3);
    f.d_23 = fc_ones(c, FC_F64, (const int64_t[]){2, 3}, 2);
    f.d_3 = fc_ones(c, FC_F64, (const int64_t[]){3}, 1);
    f.h_23 = fc_ones(c, FC_F16, (const int64_t[]){2, 3}, 2);
    f.i_23 = fc_ones(c, FC_I32, (const int64_t[]){2, 3}, 2);
    f.i_23_zero = fc_zeros(c, FC_I32, (const int64_t[]){2, 3}, 2);
    f.b_23 = fc_ones(c, FC_BOOL, (const int64_t[]){2, 3}, 2);
    f.e8_23 = fc_to(c, f.f_23, FC_F8_E4M3);
    fc_tensor *ones = fc_ones(c, FC_F32, (const int64_t[]){2, 32}, 2);
    f.q_232 = fc_to(c, ones, FC_Q8_0);
    fc_release(ones);
    f.nc_32 = fc_transpose(c, f.f_23, 0, 1);
    f.ro_23 = fc_tensor_from_borrowed(c, FC_F32, (const int64_t[]){2, 3}, 2, f.ro_data, true);
    f.p_23 = fc_param_from_data(c, FC_F32, (const int64_t[]){2, 3}, 2, v);
    f.idx_2 = fc_tensor_from_data(c, FC_I64, (const int64_t[]){2}, 1, (const int64_t[]){0, 1});
    f.idx_bad = fc_tensor_from_data(c, FC_I64, (const int64_t[]){2}, 1, (const int64_t[]){0, 7});
    f.idx_neg = fc_tensor_from_data(c, FC_I64, (const int64_t[]){2}, 1, (const int64_t[]){-1, 0});
    f.t_2 = fc_tensor_from_data(c, FC_I64, (const int64_t[]){2}, 1, (const int64_t[]){0, 2});
    f.io = (fc_io_opts){.errbuf = f.eb, .errcap = sizeof f.eb};
    return &f;
}

/* the fixture's tensors, for the side-effect checks */
static inline int fx_tensors(fx *f, fc_tensor **out) {
    fc_tensor *all[] = {f->f_23,  f->f_3,     f->f_4,     f->f_32,  f->f_234, f->f_1,
                        f->f_345, f->d_23,    f->d_3,     f->h_23,  f->i_23,  f->i_23_zero,
                        f->b_23,  f->e8_23,   f->q_232,   f->nc_32, f->ro_23, f->p_23,
                        f->idx_2, f->idx_bad, f->idx_neg, f->t_2};
    int n = (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < n; i++)
        out[i] = all[i];
    return n;
}

/* Runs the table; returns the number of mismatches (each printed). The
 * message is the context's, or the io errbuf's when the context has none;
 * default_name (NULL allowed) stands in for cases without a name. */
static inline int bad_run(fx *f, const bad_case *cases, size_t n, const char *default_name) {
    int bad = 0;
    fc_tensor *ts[32];
    int nt = fx_tensors(f, ts);
    uint32_t gen[32];
    for (size_t i = 0; i < n; i++) {
        const bad_case *k = &cases[i];
        const char *name = k->name ? k->name : default_name;
        fc_ctx_clear_error(f->ctx);
        f->eb[0] = '\0';
        for (int j = 0; j < nt; j++)
            gen[j] = fc_tensor_generation(ts[j]);
        fc_ctx_stats before, after;
        fc_ctx_get_stats(f->ctx, &before);
        fc_status got;
        if (k->tensor_fn) {
            fc_tensor *r = k->tensor_fn(f);
            got = fc_ctx_status(f->ctx);
            if (r) {
                printf("bad input: %s: returned a tensor (status %s)\n", k->what,
                       fc_status_name(got));
                fc_release(r);
                bad++;
                continue;
            }
        } else {
            got = k->status_fn(f);
        }
        const char *msg = fc_ctx_error(f->ctx);
        if (!*msg) msg = f->eb;
        fc_ctx_get_stats(f->ctx, &after);
        if (got != k->want) {
            printf("bad input: %s%s%s: %s, want %s (\"%s\")\n", default_name ? default_name : "",
                   default_name ? ": " : "", k->what, fc_status_name(got), fc_status_name(k->want),
                   msg);
            bad++;
        } else if (name && !strstr(msg, name)) {
            printf("bad input: %s: message \"%s\" does not name '%s'\n", k->what, msg, name);
            bad++;
        }
        if (after.tensors_live != before.tensors_live) {
            printf("bad input: %s: %lld tensor handles left behind\n", k->what,
                   (long long)(after.tensors_live - before.tensors_live));
            bad++;
        }
        for (int j = 0; j < nt; j++)
            if (fc_tensor_generation(ts[j]) != gen[j]) {
                printf("bad input: %s: fixture tensor %d was mutated\n", k->what, j);
                bad++;
            }
        fc_ctx_clear_error(f->ctx);
        fc_tensor *ok = fc_add(f->ctx, f->f_23, f->f_3);
        if (!ok) {
            printf("bad input: %s: the context no longer works: %s\n", k->what,
                   fc_ctx_error(f->ctx));
            bad++;
        }
        fc_release(ok);
    }
    return bad;
}

static inline void fx_free(fx *f) { fc_ctx_free(f->ctx); }

#endif /* FUCINA_TESTS_BAD_INPUT_H */
