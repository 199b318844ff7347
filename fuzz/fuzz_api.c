/* SPDX-License-Identifier: MIT */
/* fuzz_api.c - libFuzzer target that drives random sequences of public API
 * calls, misuse included, from the fuzz input.
 *
 * The input is a program for a small machine with SLOTS tensor registers.
 * Each instruction is an opcode byte followed by argument bytes. The
 * arguments pick registers, dtypes, shapes, axes and values, and they are
 * not sanitised: wrong ranks, axes out of range, mixed dtypes, NULL
 * operands (an empty register), oversized shapes, backward on a
 * non-scalar, unbalanced scopes and grad modes all reach the library. The
 * properties checked, beyond the sanitizers' own (ASan, UBSan with
 * -fno-sanitize-recover, LeakSanitizer at exit):
 *  - a call that returns NULL or an error status has recorded an error in
 *    the context, and the message names something (is not empty);
 *  - a call that returns a tensor returns one whose shape is valid (rank
 *    1..FC_MAX_RANK, every dim >= 1) and whose first and last elements can
 *    be read;
 *  - a tensor of a second context, passed now and then as an operand, is
 *    refused and never linked: the second context sees no error and its
 *    leaf gets no gradient;
 *  - fc_autograd_grad's gradients, with create_graph and without, at up to
 *    third order, are the caller's (registers keep them across scope ends)
 *    and have their inputs' shapes; a plain walk's never require grad;
 *  - after the program, every register released and the contexts freed,
 *    nothing leaks.
 * Registers follow the ownership rules a careful user keeps: a tensor made
 * inside a scope is forgotten when the scope ends unless kept, and each
 * register holds exactly one reference.
 * Built by fuzz/run.sh (clang -fsanitize=fuzzer,address,undefined) over
 * the whole library without the OpenBLAS and oneDNN providers. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fucina.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SLOTS 8
#define MAX_DIM 6 /* dims 1..MAX_DIM keep every tensor tiny */
#define MAX_NUMEL 4096

typedef struct reader {
    const uint8_t *p;
    size_t n, at;
} reader;

static unsigned next(reader *r) { return r->at < r->n ? r->p[r->at++] : 0u; }
static bool done(const reader *r) { return r->at >= r->n; }

typedef struct machine {
    fc_ctx *ctx;
    fc_ctx *other;  /* a second context, whose tensors every call of ctx must refuse */
    fc_tensor *foreign;
    fc_tensor *reg[SLOTS];
    int depth[SLOTS]; /* scope depth the register's tensor belongs to; 0 = owned */
    int scope;        /* open scopes */
    int no_grad;      /* open no-grad brackets */
    fc_optim *opt;
} machine;

static const fc_dtype dtypes[] = {FC_F32, FC_F64, FC_F16, FC_BF16, FC_I32, FC_I64, FC_U8,
                                  FC_BOOL, FC_Q8_0, FC_F8_E4M3};

static fc_dtype pick_dtype(reader *r) {
    unsigned b = next(r);
    /* mostly f32, so that long programs reach deep graphs */
    return b < 128 ? FC_F32 : dtypes[b % (sizeof dtypes / sizeof dtypes[0])];
}

static int pick_shape(reader *r, int64_t *shape) {
    int rank = 1 + (int)(next(r) % 4);
    for (int i = 0; i < rank; i++)
        shape[i] = 1 + (int64_t)(next(r) % MAX_DIM);
    if (next(r) == 255) shape[0] = 0; /* misuse: an empty dim */
    return rank;
}

static int pick_axis(reader *r) { return (int)(next(r) % 11) - 5; }

/* A register, or now and then a tensor of the other context (misuse). */
static fc_tensor *operand(machine *m, reader *r) {
    unsigned b = next(r);
    return b == 0xEE ? m->foreign : m->reg[b % SLOTS];
}

/* The error contract: a failed call leaves a named error behind. */
static void expect_error(machine *m) {
    if (fc_ctx_status(m->ctx) == FC_OK) abort();
    const char *e = fc_ctx_error(m->ctx);
    if (!e || !e[0]) abort();
    fc_ctx_clear_error(m->ctx);
}

static void check_tensor(const fc_tensor *t) {
    int rank = fc_tensor_rank(t);
    if (rank < 1 || rank > FC_MAX_RANK) abort();
    const int64_t *shape = fc_tensor_shape(t);
    int64_t first[FC_MAX_RANK] = {0}, last[FC_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 1) abort();
        last[i] = shape[i] - 1;
    }
    if (fc_dtype_is_block(fc_tensor_dtype(t))) return;
    double v;
    if (fc_tensor_element(t, first, &v) != FC_OK || fc_tensor_element(t, last, &v) != FC_OK) abort();
}

/* Stores a call's result in register k (releasing what was there), or
 * checks the error it left. */
static void store(machine *m, unsigned k, fc_tensor *t) {
    k %= SLOTS;
    if (!t) {
        expect_error(m);
        return;
    }
    check_tensor(t);
    if (fc_tensor_numel(t) > MAX_NUMEL) { /* concat and matmul could double sizes forever */
        fc_release(t);
        return;
    }
    if (m->reg[k]) fc_release(m->reg[k]);
    m->reg[k] = t;
    m->depth[k] = m->scope;
}

static void status(machine *m, fc_status st) {
    if (st != FC_OK) expect_error(m);
}

static void make(machine *m, reader *r, unsigned op) {
    int64_t shape[FC_MAX_RANK];
    fc_dtype dt = pick_dtype(r);
    int rank = pick_shape(r, shape);
    unsigned k = next(r);
    switch (op % 4) {
    case 0: store(m, k, fc_randn(m->ctx, dt, shape, rank)); break;
    case 1: store(m, k, fc_full(m->ctx, dt, shape, rank, (double)(int8_t)next(r) / 8.0)); break;
    case 2: store(m, k, fc_param_randn(m->ctx, dt, shape, rank, 0.5)); break;
    default: store(m, k, fc_arange(m->ctx, dt, 0.0, (double)(next(r) % 40), 1.0)); break;
    }
}

static void binary(machine *m, reader *r, unsigned op) {
    fc_tensor *a = operand(m, r), *b = operand(m, r);
    fc_tensor *(*fns[])(fc_ctx *, fc_tensor *, fc_tensor *) = {
        fc_add, fc_sub, fc_mul, fc_div, fc_pow, fc_maximum, fc_minimum, fc_matmul, fc_eq, fc_lt};
    store(m, next(r), fns[op % (sizeof fns / sizeof fns[0])](m->ctx, a, b));
}

static void unary(machine *m, reader *r, unsigned op) {
    fc_tensor *x = operand(m, r);
    fc_tensor *(*fns[])(fc_ctx *, fc_tensor *) = {
        fc_neg, fc_abs, fc_exp, fc_log, fc_sqrt, fc_tanh, fc_sigmoid, fc_relu, fc_silu,
        fc_softplus, fc_square, fc_reciprocal, fc_contiguous, fc_clone};
    store(m, next(r), fns[op % (sizeof fns / sizeof fns[0])](m->ctx, x));
}

static void reduce(machine *m, reader *r, unsigned op) {
    fc_tensor *x = operand(m, r);
    int axes[3] = {pick_axis(r), pick_axis(r), pick_axis(r)};
    int naxes = (int)(next(r) % 4);
    bool keep = next(r) & 1;
    fc_tensor *y;
    switch (op % 6) {
    case 0: y = fc_sum(m->ctx, x, axes, naxes, keep); break;
    case 1: y = fc_mean(m->ctx, x, axes, naxes, keep); break;
    case 2: y = fc_max(m->ctx, x, axes, naxes, keep); break;
    case 3: y = fc_var(m->ctx, x, axes, naxes, 1, keep); break;
    case 4: y = fc_logsumexp(m->ctx, x, axes, naxes, keep); break;
    default: y = fc_argmax(m->ctx, x, axes[0], keep); break;
    }
    store(m, next(r), y);
}

static void layout(machine *m, reader *r, unsigned op) {
    fc_tensor *x = operand(m, r);
    int64_t shape[FC_MAX_RANK];
    fc_tensor *y;
    switch (op % 8) {
    case 0: {
        int rank = pick_shape(r, shape);
        if (next(r) & 1) shape[0] = -1;
        y = fc_reshape(m->ctx, x, shape, rank);
        break;
    }
    case 1: y = fc_transpose(m->ctx, x, pick_axis(r), pick_axis(r)); break;
    case 2: {
        int perm[FC_MAX_RANK];
        for (int i = 0; i < FC_MAX_RANK; i++)
            perm[i] = (int)(next(r) % 4);
        y = fc_permute(m->ctx, x, perm);
        break;
    }
    case 3:
        y = fc_slice(m->ctx, x, pick_axis(r), (int64_t)(int8_t)next(r), (int64_t)(int8_t)next(r),
                     (int64_t)(next(r) % 4));
        break;
    case 4:
        y = fc_narrow(m->ctx, x, pick_axis(r), (int64_t)(next(r) % 4), (int64_t)(next(r) % 4));
        break;
    case 5: {
        int rank = pick_shape(r, shape);
        y = fc_expand(m->ctx, x, shape, rank);
        break;
    }
    case 6: y = fc_unsqueeze(m->ctx, x, pick_axis(r)); break;
    default: y = fc_squeeze(m->ctx, x, pick_axis(r)); break;
    }
    store(m, next(r), y);
}

static void rows(machine *m, reader *r, unsigned op) {
    fc_tensor *x = operand(m, r), *w = operand(m, r), *b = operand(m, r);
    fc_tensor *y;
    switch (op % 6) {
    case 0: y = fc_softmax(m->ctx, x, pick_axis(r)); break;
    case 1: y = fc_log_softmax(m->ctx, x, pick_axis(r)); break;
    case 2: y = fc_layer_norm(m->ctx, x, (next(r) & 1) ? w : NULL, (next(r) & 1) ? b : NULL, 1e-5); break;
    case 3: y = fc_rms_norm(m->ctx, x, (next(r) & 1) ? w : NULL, 1e-6); break;
    case 4: y = fc_cross_entropy(m->ctx, x, w, NULL); break;
    default: y = fc_mse_loss(m->ctx, x, w, (fc_reduction)(next(r) % 4)); break;
    }
    store(m, next(r), y);
}

static void misc(machine *m, reader *r, unsigned op) {
    fc_tensor *x = operand(m, r), *y = operand(m, r);
    switch (op % 8) {
    case 0: store(m, next(r), fc_to(m->ctx, x, pick_dtype(r))); break;
    case 1: store(m, next(r), fc_concat(m->ctx, (fc_tensor *[]){x, y}, 2, pick_axis(r))); break;
    case 2: store(m, next(r), fc_index_select(m->ctx, x, pick_axis(r), y)); break;
    case 3: store(m, next(r), fc_where(m->ctx, x, y, operand(m, r))); break;
    case 4: store(m, next(r), fc_cumsum(m->ctx, x, pick_axis(r))); break;
    case 5: store(m, next(r), fc_dropout(m->ctx, x, (double)(next(r) % 8) / 8.0, true)); break;
    case 6: store(m, next(r), fc_detach(m->ctx, x)); break;
    default: {
        const fc_tensor *g = fc_grad(x); /* borrowed */
        if (g) store(m, next(r), fc_mul_scalar(m->ctx, (fc_tensor *)g, 2.0));
        break;
    }
    }
}

/* ---- fc_autograd_grad, create_graph included ------------------------------------------
 * Its gradients belong to the caller, not to the scope they were made in,
 * so a register holding one is owned (depth 0) whatever scope is open;
 * a scope's end that released them would show as a use after free, one
 * that should have and did not as a leak. Properties: a plain walk's
 * gradients never require grad; each has its input's shape. */
static void check_grad(const fc_tensor *g, const fc_tensor *input, bool create_graph) {
    if (!g) return; /* allow_unused: an unreached input */
    check_tensor(g);
    if (!create_graph && fc_tensor_requires_grad(g)) abort();
    if (fc_tensor_rank(g) != fc_tensor_rank(input) ||
        memcmp(fc_tensor_shape(g), fc_tensor_shape(input),
               sizeof(int64_t) * (size_t)fc_tensor_rank(g)))
        abort();
}

/* (Checked first: storing may release the register that held the input.) */
static void store_grad(machine *m, unsigned k, fc_tensor *g) {
    k %= SLOTS;
    if (!g) return;
    if (m->reg[k]) fc_release(m->reg[k]);
    m->reg[k] = g;
    m->depth[k] = 0;
}

/* One call: 1-2 outputs (grad_outputs NULL, or registers), 1-2 inputs,
 * random options. */
static void grad_call(machine *m, reader *r) {
    unsigned bits = next(r);
    int n_out = 1 + (int)(bits & 1), n_in = 1 + (int)((bits >> 1) & 1);
    fc_autograd_grad_opts o = {
        .retain_graph = bits & 4, .allow_unused = bits & 8, .create_graph = !(bits & 16)};
    fc_tensor *outs[2], *gouts[2], *ins[2], *g[2] = {0};
    for (int i = 0; i < n_out; i++) {
        outs[i] = operand(m, r);
        gouts[i] = (next(r) & 1) ? operand(m, r) : NULL;
    }
    for (int j = 0; j < n_in; j++)
        ins[j] = operand(m, r);
    fc_status st =
        fc_autograd_grad(m->ctx, outs, (bits & 32) ? gouts : NULL, n_out, ins, n_in, &o, g);
    if (st != FC_OK) {
        expect_error(m);
        if (g[0] || g[1]) abort(); /* every slot NULL on error */
        return;
    }
    for (int j = 0; j < n_in; j++)
        check_grad(g[j], ins[j], o.create_graph);
    for (int j = 0; j < n_in; j++)
        store_grad(m, next(r), g[j]);
}

/* Differentiating again: g1 = d sum(y)/dx with create_graph, then up to two
 * more orders, each of sum(g) or sum(g * g) with create_graph or not (the
 * last plain one ends the chain); the last gradient goes to a register. */
static void grad_chain(machine *m, reader *r) {
    fc_tensor *y = operand(m, r), *x = operand(m, r), *g = NULL;
    int orders = 1 + (int)(next(r) % 3);
    bool cg = true;
    fc_scope_begin(m->ctx); /* the sums are its; the gradients are not */
    fc_tensor *l = fc_sum(m->ctx, y, NULL, 0, false);
    for (int k = 0; k < orders && cg; k++) {
        unsigned b = next(r);
        fc_tensor *h = NULL;
        fc_autograd_grad_opts o = {.allow_unused = b & 1, .create_graph = k == 0 || (b & 2)};
        fc_status st = l ? fc_autograd_grad(m->ctx, &l, NULL, 1, &x, 1, &o, &h)
                         : fc_ctx_status(m->ctx);
        if (st != FC_OK) {
            expect_error(m);
            break;
        }
        if (h && !o.create_graph && fc_tensor_requires_grad(h)) abort();
        if (g) fc_release(g);
        g = h;
        cg = o.create_graph;
        /* a constant gradient (sum(x)'s ones) ends the chain: it has no
         * gradient to ask for */
        if (!g || !fc_tensor_requires_grad(g)) break;
        l = fc_sum(m->ctx, (b & 4) ? fc_mul(m->ctx, g, g) : g, NULL, 0, false);
    }
    fc_scope_end(m->ctx);
    if (fc_ctx_status(m->ctx) != FC_OK) expect_error(m); /* a sum's error */
    check_grad(g, x, true);
    store_grad(m, next(r), g);
}

static void inplace(machine *m, reader *r, unsigned op) {
    /* the destination is a register: a foreign one would record in the other context */
    fc_tensor *x = m->reg[next(r) % SLOTS], *y = operand(m, r);
    fc_status st;
    switch (op % 4) {
    case 0: st = fc_add_(x, y); break;
    case 1: st = fc_mul_scalar_(x, 0.5), y = NULL; break;
    case 2: st = fc_fill_(x, (double)(int8_t)next(r)), y = NULL; break;
    default: st = fc_copy_(x, y); break;
    }
    /* with no destination the error goes to the operand's context (none
     * without one either) */
    if (!x && y == m->foreign)
        fc_ctx_clear_error(m->other);
    else if (x || y)
        status(m, st);
}

static void drop(machine *m, unsigned k) {
    k %= SLOTS;
    if (m->reg[k]) fc_release(m->reg[k]);
    m->reg[k] = NULL;
}

static void control(machine *m, reader *r, unsigned op) {
    switch (op % 10) {
    case 0: fc_scope_begin(m->ctx), m->scope++; break;
    case 1:
        if (m->scope > 0) {
            for (int k = 0; k < SLOTS; k++)
                if (m->reg[k] && m->depth[k] == m->scope) m->reg[k] = NULL; /* the scope's */
            m->scope--;
        }
        fc_scope_end(m->ctx); /* unbalanced ends are ignored */
        break;
    case 2: {
        unsigned k = next(r) % SLOTS;
        if (m->reg[k] && m->depth[k] > 0) {
            fc_keep(m->reg[k]);
            m->depth[k] = 0;
        }
        break;
    }
    case 3: drop(m, next(r)); break;
    case 4: fc_no_grad_begin(m->ctx), m->no_grad++; break;
    case 5:
        if (m->no_grad > 0) fc_no_grad_end(m->ctx), m->no_grad--;
        break;
    case 6: status(m, fc_backward(m->ctx, operand(m, r))); break;
    case 7: {
        if (m->opt) break;
        fc_tensor *params[SLOTS];
        int n = 0;
        for (int k = 0; k < SLOTS; k++)
            if (m->reg[k] && fc_tensor_is_leaf(m->reg[k])) params[n++] = m->reg[k];
        fc_optim_opts o = {.kind = (fc_optim_kind)(next(r) % 4), .lr = (double)(next(r) % 4) / 100.0};
        m->opt = fc_optim_new(m->ctx, &o, params, n);
        if (!m->opt) expect_error(m);
        break;
    }
    case 8:
        if (m->opt) status(m, fc_optim_step(m->opt));
        break;
    default: status(m, fc_ctx_set_threads(m->ctx, (int)(next(r) % 4) - 1)); break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    machine m = {.ctx = fc_ctx_new(NULL), .other = fc_ctx_new(NULL)};
    if (!m.ctx || !m.other) {
        fc_ctx_free(m.ctx);
        fc_ctx_free(m.other);
        return 0;
    }
    m.foreign = fc_param_randn(m.other, FC_F32, (const int64_t[]){2, 3}, 2, 1.0);
    fc_ctx_set_seed(m.ctx, 1234);
    fc_ctx_set_threads(m.ctx, 1);
    reader r = {data, size, 0};
    for (int steps = 0; !done(&r) && steps < 256; steps++) {
        unsigned op = next(&r);
        switch (op >> 5) {
        case 0: make(&m, &r, op); break;
        case 1: binary(&m, &r, op); break;
        case 2: unary(&m, &r, op); break;
        case 3: reduce(&m, &r, op); break;
        case 4: layout(&m, &r, op); break;
        case 5: rows(&m, &r, op); break;
        case 6:
            if (op & 16)
                inplace(&m, &r, op);
            else if (op & 8) /* 200..207, once misc's second half */
                (op & 4) ? grad_chain(&m, &r) : grad_call(&m, &r);
            else
                misc(&m, &r, op);
            break;
        default: control(&m, &r, op); break;
        }
        /* every error is checked and cleared where it happens */
        if (fc_ctx_status(m.ctx) != FC_OK) abort();
    }
    fc_optim_free(m.opt);
    while (m.scope-- > 0) {
        for (int k = 0; k < SLOTS; k++)
            if (m.reg[k] && m.depth[k] == m.scope + 1) m.reg[k] = NULL;
        fc_scope_end(m.ctx);
    }
    for (int k = 0; k < SLOTS; k++)
        drop(&m, (unsigned)k);
    fc_ctx_free(m.ctx);
    /* the other context never saw an error or a link from ctx */
    if (fc_ctx_status(m.other) != FC_OK || fc_grad(m.foreign)) abort();
    fc_release(m.foreign);
    fc_ctx_free(m.other);
    return 0;
}
