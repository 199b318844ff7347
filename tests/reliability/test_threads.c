/* SPDX-License-Identifier: MIT */
/* test_threads.c - the concurrency contract of include/fucina/tensor.h, one
 * test per claim. Every concurrent run is compared bit for bit with the
 * same work done first on one thread, so cross-talk between threads (a
 * shared scratch buffer, a racy cache, an RNG touched by two contexts)
 * shows up as a different number, and ThreadSanitizer (the TSan build of
 * .ci/run) sees the memory accesses themselves.
 *
 * Claims:
 *   1. Several contexts train concurrently, one per thread, on one shared
 *      allocator, with their own OpenMP teams and matmul providers.
 *   2. One read-only weight array is read by several threads at once, each
 *      through its own context (fc_tensor_from_borrowed, read-only); an
 *      in-place op on it is refused, and the bytes never change.
 *   3. One buffer is shared by tensors of several contexts: its refcount
 *      is atomic, and when the last reference goes in another thread the
 *      buffer goes back to its owner's pool (under the pool's lock).
 *   4. One open model file is read from several threads (zero-copy loads
 *      into their own contexts); the mapping outlives the handle, which
 *      the main thread closes while the workers still hold tensors.
 *   5. A context may move between threads (one at a time): training
 *      continued on another thread gives the same result.
 * What the contract excludes (two threads in one context at once) is not
 * tested: it is undefined, as documented. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/raw.h"
#include "counting_alloc.h"
#include "exec/tensor.h"
#include "rel_models.h"

#define NTHREADS 4
#define STEPS 12

static bool provider_built(fc_backend be) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    bool ok = ctx && fc_ctx_set_backend(ctx, be) == FC_OK;
    fc_ctx_free(ctx);
    return ok;
}

/* The providers to spread over the threads: ref always, blas and onednn
 * when built. */
static int providers(fc_backend *out) {
    int n = 0;
    const fc_backend all[3] = {FC_BACKEND_REF, FC_BACKEND_BLAS, FC_BACKEND_ONEDNN};
    for (int i = 0; i < 3; i++)
        if (provider_built(all[i])) out[n++] = all[i];
    return n;
}

/* ---- 1. independent training ------------------------------------------------------------ */

typedef struct train_job {
    uint64_t seed;
    fc_backend backend;
    int ctx_threads;
    const fc_allocator *alloc;
    float losses[STEPS];
    fc_status st;
    char err[256];
} train_job;

/* STEPS Adam steps of a small MLP on data drawn from the context RNG. */
static fc_status train_steps(fc_ctx *ctx, rel_mlp *m, fc_optim *opt, fc_tensor *x, fc_tensor *t,
                             float *losses, int from, int to) {
    for (int s = from; s < to; s++) {
        fc_scope_begin(ctx);
        fc_optim_zero_grad(opt);
        fc_tensor *loss = fc_cross_entropy(ctx, rel_mlp_logits(ctx, m, x), t, NULL);
        fc_status st = loss ? fc_backward(ctx, loss) : fc_ctx_status(ctx);
        if (st == FC_OK) st = fc_optim_step(opt);
        double v = 0;
        if (st == FC_OK) st = fc_tensor_item(loss, &v);
        losses[s] = (float)v;
        fc_scope_end(ctx);
        if (st != FC_OK) return st;
    }
    return FC_OK;
}

typedef struct mlp_run {
    fc_ctx *ctx;
    rel_mlp m;
    fc_optim *opt;
    fc_tensor *x, *t;
} mlp_run;

static fc_status mlp_run_new(mlp_run *r, const train_job *j) {
    memset(r, 0, sizeof *r);
    r->ctx = fc_ctx_new(&(fc_ctx_opts){
        .threads = j->ctx_threads, .seed = j->seed, .allocator = j->alloc, .backend = j->backend});
    if (!r->ctx) return FC_ERR_OOM;
    rel_mlp_init(r->ctx, &r->m, 16, 24, 4);
    int64_t tv[32];
    for (int i = 0; i < 32; i++)
        tv[i] = (i * 7 + (int)j->seed) % 4;
    r->x = fc_randn(r->ctx, FC_F32, (const int64_t[]){32, 16}, 2);
    r->t = fc_tensor_from_data(r->ctx, FC_I64, (const int64_t[]){32}, 1, tv);
    if (fc_ctx_status(r->ctx) == FC_OK)
        r->opt = fc_optim_new(r->ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAM, .lr = 0.01}, r->m.p,
                              REL_MLP_NP);
    return fc_ctx_status(r->ctx);
}

static void mlp_run_free(mlp_run *r) {
    fc_optim_free(r->opt);
    rel_release_all(r->m.p, REL_MLP_NP);
    fc_release(r->x);
    fc_release(r->t);
    fc_ctx_free(r->ctx);
}

static void *train_thread(void *p) {
    train_job *j = p;
    mlp_run r;
    j->st = mlp_run_new(&r, j);
    if (j->st == FC_OK) j->st = train_steps(r.ctx, &r.m, r.opt, r.x, r.t, j->losses, 0, STEPS);
    if (j->st != FC_OK) snprintf(j->err, sizeof j->err, "%s", fc_ctx_error(r.ctx));
    mlp_run_free(&r);
    return NULL;
}

static void test_threads_contexts_train_concurrently(void **state) {
    (void)state;
    fc_backend be[3];
    int nbe = providers(be);
    fct_counting c;
    fct_counting_init(&c);
    train_job ref[NTHREADS], par[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        ref[i] = (train_job){.seed = 100 + (uint64_t)i,
                             .backend = be[i % nbe],
                             .ctx_threads = 1 + i % 2,
                             .alloc = &c.alloc};
        par[i] = ref[i];
        train_thread(&ref[i]); /* one at a time, on this thread */
        assert_int_equal(ref[i].st, FC_OK);
        assert_true(ref[i].losses[STEPS - 1] < ref[i].losses[0]); /* it learns */
    }
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, train_thread, &par[i]), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++) {
        if (par[i].st != FC_OK) fail_msg("thread %d: %s", i, par[i].err);
        assert_memory_equal(par[i].losses, ref[i].losses, sizeof ref[i].losses);
    }
    assert_true(fct_counting_clean(&c)); /* one allocator served all of them */
}

/* ---- 2. one read-only weight array, many readers --------------------------------------- */

#define WK 48
#define WN 40
static float shared_w[WK * WN];

typedef struct read_job {
    uint64_t seed;
    fc_backend backend;
    float out[8 * WN];
    fc_status st, inplace;
} read_job;

static void *read_thread(void *p) {
    read_job *j = p;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = j->seed, .backend = j->backend});
    fc_tensor *w =
        fc_tensor_from_borrowed(ctx, FC_F32, (const int64_t[]){WK, WN}, 2, shared_w, true);
    fc_tensor *acc = fc_zeros(ctx, FC_F32, (const int64_t[]){8, WN}, 2);
    for (int it = 0; it < 10 && acc; it++) {
        fc_scope_begin(ctx);
        fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){8, WK}, 2);
        fc_tensor *y =
            fc_add(ctx, fc_matmul(ctx, x, w), fc_linear(ctx, x, fc_transpose(ctx, w, 0, 1), NULL));
        if (y) fc_add_(acc, y);
        fc_scope_end(ctx);
    }
    j->inplace = w ? fc_mul_scalar_(w, 2.0) : FC_ERR_NULL_ARG; /* refused: read-only */
    fc_ctx_clear_error(ctx);
    j->st = acc ? fc_tensor_copy_out(j->out, sizeof j->out, acc) : fc_ctx_status(ctx);
    fc_release(acc);
    fc_release(w);
    fc_ctx_free(ctx);
    return NULL;
}

static void test_threads_read_only_weight_shared(void **state) {
    (void)state;
    for (int i = 0; i < WK * WN; i++)
        shared_w[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    float before[WK * WN];
    memcpy(before, shared_w, sizeof before);
    fc_backend be[3];
    int nbe = providers(be);
    read_job ref[NTHREADS], par[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        ref[i] = (read_job){.seed = 7 + (uint64_t)i, .backend = be[i % nbe]};
        par[i] = ref[i];
        read_thread(&ref[i]);
        assert_int_equal(ref[i].st, FC_OK);
    }
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, read_thread, &par[i]), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(par[i].st, FC_OK);
        assert_int_equal(par[i].inplace, FC_ERR_READ_ONLY);
        assert_memory_equal(par[i].out, ref[i].out, sizeof ref[i].out);
    }
    assert_memory_equal(shared_w, before, sizeof before);
}

/* ---- 3. one buffer, several contexts ------------------------------------------------------ */

typedef struct share_job {
    fc_tensor *src;             /* owned by the main context; only read here */
    pthread_barrier_t *wrapped; /* every worker holds its reference */
    pthread_barrier_t *dropped; /* the main thread dropped its handle */
    double sum;
    fc_status st;
} share_job;

static void *share_thread(void *p) {
    share_job *j = p;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    fc_raw r;
    fc_status st = fc__raw_view(&j->src->raw, &r); /* retains the buffer (atomic) */
    fc_tensor *w = st == FC_OK ? fc__tensor_wrap(ctx, "share", &r) : NULL;
    pthread_barrier_wait(j->wrapped);
    pthread_barrier_wait(j->dropped);
    /* many retain/release pairs on the shared buffer, racing the others */
    for (int i = 0; i < 200 && w; i++) {
        fc_scope_begin(ctx);
        fc_tensor *v = fc_transpose(ctx, w, 0, 1);
        if (i % 50 == 0) fc_sum(ctx, fc_matmul(ctx, v, w), NULL, 0, false);
        fc_scope_end(ctx);
    }
    fc_tensor *s = fc_sum(ctx, w, NULL, 0, false);
    j->st = s ? fc_tensor_item(s, &j->sum) : fc_ctx_status(ctx);
    fc_release(s);
    fc_release(w); /* the last of these runs the owner's pool hook */
    fc_ctx_free(ctx);
    return NULL;
}

static void test_threads_buffer_shared_across_contexts(void **state) {
    (void)state;
    fc_ctx *owner = fc_ctx_new(&(fc_ctx_opts){.threads = 1, .seed = 3});
    fc_tensor *w = fc_randn(owner, FC_F32, (const int64_t[]){16, 12}, 2);
    assert_non_null(w);
    double want;
    fc_tensor *s = fc_sum(owner, w, NULL, 0, false);
    assert_int_equal(fc_tensor_item(s, &want), FC_OK);
    fc_release(s);
    fc_ctx_pool_trim(owner);
    pthread_barrier_t wrapped, dropped;
    pthread_barrier_init(&wrapped, NULL, NTHREADS + 1);
    pthread_barrier_init(&dropped, NULL, NTHREADS + 1);
    share_job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (share_job){.src = w, .wrapped = &wrapped, .dropped = &dropped};
        assert_int_equal(pthread_create(&th[i], NULL, share_thread, &jobs[i]), 0);
    }
    pthread_barrier_wait(&wrapped);
    fc_release(w); /* the buffer lives on in the workers */
    pthread_barrier_wait(&dropped);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(jobs[i].st, FC_OK);
        assert_true(jobs[i].sum == want);
    }
    /* the buffer went back to its owner's pool, exactly once */
    fc_ctx_stats st;
    fc_ctx_get_stats(owner, &st);
    assert_int_equal(st.tensors_live, 0);
    assert_true(st.pool_bytes >= 16 * 12 * 4);
    pthread_barrier_destroy(&wrapped);
    pthread_barrier_destroy(&dropped);
    fc_ctx_free(owner);
}

/* ---- 4. one model file, several readers -------------------------------------------------- */

#define ST_REF FUCINA_TEST_DATA_DIR "/io/st_reference.safetensors"

typedef struct file_job {
    const fc_st_file *f;
    pthread_barrier_t *loaded, *closed;
    double sum;
    fc_status st;
} file_job;

static void *file_thread(void *p) {
    file_job *j = p;
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    fc_tensor *a = fc_safetensors_load(ctx, j->f, "f32", 0); /* zero-copy */
    fc_tensor *b = fc_safetensors_load(ctx, j->f, "bf16", 0);
    pthread_barrier_wait(j->loaded);
    pthread_barrier_wait(j->closed); /* the handle is gone; the mapping is not */
    fc_tensor *s = fc_add(ctx, fc_sum(ctx, a, NULL, 0, false), fc_sum(ctx, b, NULL, 0, false));
    j->st = s ? fc_tensor_item(s, &j->sum) : fc_ctx_status(ctx);
    fc_release(s);
    fc_release(a);
    fc_release(b); /* the last release unmaps */
    fc_ctx_free(ctx);
    return NULL;
}

static void test_threads_model_file_read_concurrently(void **state) {
    (void)state;
    fc_st_file *f;
    assert_int_equal(fc_safetensors_open(ST_REF, NULL, &f), FC_OK);
    pthread_barrier_t loaded, closed;
    pthread_barrier_init(&loaded, NULL, NTHREADS + 1);
    pthread_barrier_init(&closed, NULL, NTHREADS + 1);
    file_job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (file_job){.f = f, .loaded = &loaded, .closed = &closed};
        assert_int_equal(pthread_create(&th[i], NULL, file_thread, &jobs[i]), 0);
    }
    pthread_barrier_wait(&loaded);
    fc_safetensors_close(f);
    pthread_barrier_wait(&closed);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(jobs[i].st, FC_OK);
        assert_true(jobs[i].sum == jobs[0].sum);
    }
    pthread_barrier_destroy(&loaded);
    pthread_barrier_destroy(&closed);
}

/* ---- 5. a context handed from thread to thread ------------------------------------------- */

typedef struct handoff {
    mlp_run *r;
    float *losses;
    int from, to;
    fc_status st;
} handoff;

static void *handoff_thread(void *p) {
    handoff *h = p;
    h->st =
        train_steps(h->r->ctx, &h->r->m, h->r->opt, h->r->x, h->r->t, h->losses, h->from, h->to);
    return NULL;
}

static void test_threads_context_moves_between_threads(void **state) {
    (void)state;
    train_job j = {.seed = 11, .backend = FC_BACKEND_AUTO, .ctx_threads = 2};
    train_thread(&j);
    assert_int_equal(j.st, FC_OK);
    mlp_run r;
    assert_int_equal(mlp_run_new(&r, &j), FC_OK);
    float losses[STEPS];
    /* steps [0, 4) here, [4, 8) on one thread, [8, STEPS) on another */
    assert_int_equal(train_steps(r.ctx, &r.m, r.opt, r.x, r.t, losses, 0, 4), FC_OK);
    for (int k = 0; k < 2; k++) {
        handoff h = {&r, losses, 4 + 4 * k, k ? STEPS : 8, FC_OK};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, handoff_thread, &h), 0);
        pthread_join(th, NULL); /* the join orders the handover */
        assert_int_equal(h.st, FC_OK);
    }
    assert_memory_equal(losses, j.losses, sizeof losses);
    mlp_run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_contexts_train_concurrently),
        cmocka_unit_test(test_threads_read_only_weight_shared),
        cmocka_unit_test(test_threads_buffer_shared_across_contexts),
        cmocka_unit_test(test_threads_model_file_read_concurrently),
        cmocka_unit_test(test_threads_context_moves_between_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
