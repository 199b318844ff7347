/* SPDX-License-Identifier: MIT */
/* gradcheck.c - checking the gradient of your own composite function.
 *
 * Goals: show a research user the workflow for a new layer written from
 * fucina ops: write it as a function of its inputs, hand it to fc_gradcheck
 * with small f64 inputs, and read the report. fc_gradcheck compares the
 * gradient autograd computes with central finite differences of the same
 * function (in f64), for every element of every input.
 *
 * Three functions are checked:
 *   1. attention with a learned temperature, softmax(q k^T / tau) v: the
 *      gradient reaches q, k, v and the scalar tau through a broadcast divide;
 *   2. log-sum-exp with the max shift behind fc_detach: a stop-gradient
 *      that is legitimate, because the shift's gradient is zero in exact
 *      arithmetic; gradcheck confirms it;
 *   3. a hand-written layer norm whose mean is (wrongly) detached: the
 *      mean's gradient is not zero, so the analytic gradient is wrong and
 *      gradcheck reports the worst element. This one must FAIL.
 * The program exits 0 when 1 and 2 pass and 3 is caught.
 */
#include <math.h>
#include <stdio.h>

#include <fucina.h>

// ----------------------------------------------------------------------------
// the functions under test: each maps inputs to one tensor, with no side
// effects (gradcheck calls it 2 * numel + 1 times)

/* q (T,d), k (T,d), v (T,d), tau (1) -> (T,d) */
static fc_tensor *attention_tau(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    fc_tensor *scores = fc_div(ctx, fc_matmul(ctx, in[0], fc_transpose(ctx, in[1], 0, 1)), in[3]);
    return fc_matmul(ctx, fc_softmax(ctx, scores, -1), in[2]);
}

/* x (R,C) -> (R,1): log(sum(exp(x - m))) + m with m = detach(max(x)) */
static fc_tensor *logsumexp_detached(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    const int last[1] = {-1};
    fc_tensor *m = fc_detach(ctx, fc_max(ctx, in[0], last, 1, true)); /* (R,1), no gradient */
    fc_tensor *s = fc_sum(ctx, fc_exp(ctx, fc_sub(ctx, in[0], m)), last, 1, true);
    return fc_add(ctx, fc_log(ctx, s), m);
}

/* x (R,C) -> (R,C): (x - mean) / sqrt(var + eps), the BUG: mean detached */
static fc_tensor *layer_norm_buggy(fc_ctx *ctx, fc_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    const int last[1] = {-1};
    fc_tensor *mean = fc_detach(ctx, fc_mean(ctx, in[0], last, 1, true));
    fc_tensor *var = fc_var(ctx, in[0], last, 1, 0, true);
    return fc_mul(ctx, fc_sub(ctx, in[0], mean), fc_rsqrt(ctx, fc_add_scalar(ctx, var, 1e-5)));
}

// ----------------------------------------------------------------------------
// running a check and explaining the result

/* runs fc_gradcheck and prints the report; true when it passed */
static bool check(fc_ctx *ctx, const char *what, fc_gradcheck_fn fn, fc_tensor *const *in, int n) {
    fc_gradcheck_opts opts = {.check_all_f64 = true, .seed = 7}; /* default eps/atol/rtol */
    fc_gradcheck_report rep;
    fc_status st = fc_gradcheck(ctx, fn, NULL, in, n, &opts, &rep);
    printf("%-44s %s: %lld elements checked", what, st == FC_OK ? "passed" : "FAILED",
           (long long)rep.checked);
    if (rep.worst_input >= 0)
        printf("; worst: input %d, element %lld, analytic %.6g, numeric %.6g", rep.worst_input,
               (long long)rep.worst_index, rep.analytic, rep.numeric);
    printf("\n");
    if (st != FC_OK) {
        printf("    %s: %s\n", fc_status_name(st), fc_ctx_error(ctx));
        fc_ctx_clear_error(ctx);
    }
    return st == FC_OK;
}

int main(void) {
    fc_ctx *ctx = fc_ctx_new(&(fc_ctx_opts){.seed = 3});
    if (!ctx) {
        fprintf(stderr, "gradcheck_example: cannot create a context\n");
        return 1;
    }
    /* small f64 inputs: finite differences need the precision */
    fc_scope_begin(ctx);
    const int64_t td[2] = {5, 4}, rc[2] = {3, 6};
    fc_tensor *att_in[4] = {fc_randn(ctx, FC_F64, td, 2), fc_randn(ctx, FC_F64, td, 2),
                            fc_randn(ctx, FC_F64, td, 2), fc_scalar(ctx, FC_F64, 1.5)};
    fc_tensor *x = fc_randn(ctx, FC_F64, rc, 2);
    if (fc_ctx_status(ctx) != FC_OK) {
        fprintf(stderr, "gradcheck_example: %s\n", fc_ctx_error(ctx));
        fc_ctx_free(ctx);
        return 1;
    }
    bool a = check(ctx, "attention with a learned temperature", attention_tau, att_in, 4);
    bool b = check(ctx, "log-sum-exp with a detached max shift", logsumexp_detached, &x, 1);
    bool c = check(ctx, "layer norm with a detached mean (a bug)", layer_norm_buggy, &x, 1);
    fc_scope_end(ctx);
    fc_ctx_free(ctx);
    if (!c)
        printf("as expected, gradcheck caught the detached mean: its gradient "
               "-mean(dy)/sigma is missing from the analytic result\n");
    if (a && b && !c) return 0;
    fprintf(stderr, "gradcheck_example: unexpected outcome (%s, %s, %s)\n", a ? "pass" : "fail",
            b ? "pass" : "fail", c ? "pass" : "fail");
    return 1;
}
