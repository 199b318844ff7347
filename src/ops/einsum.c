/* SPDX-License-Identifier: MIT */
/* ops/einsum.c - fc_einsum: Einstein summation lowered to recorded ops.
 *
 * There is no einsum kernel and no einsum rule: the subscripts are parsed
 * and checked here, then every step is an existing differentiable op, so
 * the gradient (and any create_graph order) comes from those ops' rules:
 *   - a label repeated in one operand (a diagonal): the two axes are
 *     permuted to the end, merged by fc_reshape into one of n * n and
 *     fc_slice'd with step n + 1, which picks the n diagonal elements;
 *   - a label no other operand and not the output holds: fc_sum;
 *   - a label of size 1 against n elsewhere: fc_expand (broadcasting);
 *   - two operands, left to right: fc_permute each to [batch, free,
 *     contracted] / [batch, contracted, free], fc_reshape to 3-D and
 *     fc_matmul, then fc_reshape the [B, M, N] product back to its labels;
 *   - the last operand: fc_permute to the output order.
 *
 * Labels are ids: 'A'..'Z' 0..25 and 'a'..'z' 26..51 (so the implicit
 * output, in id order, lists upper case first, as PyTorch does), and the
 * ellipsis' dims 52.. aligned right over the operands (the broadcast rule
 * of the "..." dims). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "exec/ctx.h"
#include "exec/tensor.h"
#include "fucina.h"

#define EIN_LETTERS 52
#define EIN_LABELS (EIN_LETTERS + FC_MAX_RANK)
#define EIN_MAX_OPERANDS 64 /* a bound on n that keeps the tables on the stack */

/* One operand (or intermediate) and its labels, one per axis. A tensor
 * whose labels were all summed away has nlab 0 and shape [1] (there are no
 * rank-0 tensors). */
typedef struct ein_term {
    fc_tensor *t; /* owned reference */
    int nlab;
    int lab[FC_MAX_RANK];
} ein_term;

typedef struct ein_spec {
    int n;
    int nell;                 /* dims the ellipsis stands for (the most of any operand) */
    int nout;                 /* output labels */
    int out[EIN_LABELS];      /* the output's labels in order */
    int64_t size[EIN_LABELS]; /* each label's (broadcast) size; 0: unused */
    int uses[EIN_LABELS];     /* how many operands hold the label */
    bool in_out[EIN_LABELS];  /* the output holds it */
    int last_use[EIN_LABELS]; /* the last operand holding it */
} ein_spec;

static int label_id(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
    return -1;
}

/* The letter of a label id; 0 for an ellipsis dim. */
static char label_char(int id) {
    if (id < 26) return (char)('A' + id);
    if (id < EIN_LETTERS) return (char)('a' + id - 26);
    return 0;
}

/* "label 'i'" or "ellipsis dim 1", for messages */
static const char *label_name(int id, char *buf, size_t cap) {
    char c = label_char(id);
    if (c)
        snprintf(buf, cap, "label '%c'", c);
    else
        snprintf(buf, cap, "ellipsis dim %d", id - EIN_LETTERS);
    return buf;
}

/* ---- parsing ------------------------------------------------------------------------------- */

/* One term of the subscripts, from s[*pos] up to (not including) a ',',
 * "->" or the end: its letters (ids) in order and where "..." stands
 * (-1: none). Spaces are skipped. */
static fc_status parse_term(fc_ctx *ctx, const char *eq, size_t *pos, int *labs, size_t *at,
                            int *nlabs, int *ell_at, bool is_output) {
    *nlabs = 0;
    *ell_at = -1;
    size_t i = *pos;
    for (;;) {
        char c = eq[i];
        if (c == '\0' || c == ',' || (c == '-' && eq[i + 1] == '>')) break;
        if (c == ' ') {
            i++;
            continue;
        }
        if (c == '.') {
            if (eq[i + 1] != '.' || eq[i + 2] != '.')
                return fc__fail(ctx, FC_ERR_INVALID_ARG,
                                "einsum: \"%s\": position %zu: '.' that does not begin \"...\"", eq,
                                i);
            if (*ell_at >= 0)
                return fc__fail(ctx, FC_ERR_INVALID_ARG,
                                "einsum: \"%s\": position %zu: a second \"...\" in one %s", eq, i,
                                is_output ? "output" : "operand");
            *ell_at = *nlabs;
            i += 3;
            continue;
        }
        int id = label_id(c);
        if (id < 0)
            return fc__fail(ctx, FC_ERR_INVALID_ARG,
                            "einsum: \"%s\": position %zu: '%c' is not a subscript (letters "
                            "a-z, A-Z and \"...\")",
                            eq, i, c >= 32 && c < 127 ? c : '?');
        if (*nlabs >= FC_MAX_RANK)
            return fc__fail(ctx, FC_ERR_RANK,
                            "einsum: \"%s\": position %zu: more than %d subscripts in one term", eq,
                            i, FC_MAX_RANK);
        if (is_output)
            for (int k = 0; k < *nlabs; k++)
                if (labs[k] == id)
                    return fc__fail(ctx, FC_ERR_INVALID_ARG,
                                    "einsum: \"%s\": position %zu: output subscript '%c' appears "
                                    "more than once",
                                    eq, i, c);
        at[*nlabs] = i;
        labs[(*nlabs)++] = id;
        i++;
    }
    *pos = i;
    return FC_OK;
}

/* Parses eq against the n operands: fills spec and the terms (each with a
 * new reference to its operand). On failure nothing is owned. */
static fc_status parse(fc_ctx *ctx, const char *eq, fc_tensor *const *xs, int n, ein_spec *sp,
                       ein_term *terms) {
    memset(sp, 0, sizeof *sp);
    sp->n = n;
    int letters[EIN_MAX_OPERANDS][FC_MAX_RANK], nlet[EIN_MAX_OPERANDS], ell[EIN_MAX_OPERANDS];
    size_t pos = 0, start[EIN_MAX_OPERANDS], at[FC_MAX_RANK];
    int k = 0;
    for (;;) {
        if (k >= n) {
            /* count the rest of the terms for the message */
            int more = k;
            for (size_t i = pos; eq[i] && !(eq[i] == '-' && eq[i + 1] == '>'); i++)
                more += eq[i] == ',';
            return fc__fail(ctx, FC_ERR_INVALID_ARG,
                            "einsum: \"%s\": %d operand subscripts for %d operands", eq, more + 1,
                            n);
        }
        start[k] = pos;
        if (parse_term(ctx, eq, &pos, letters[k], at, &nlet[k], &ell[k], false) != FC_OK)
            return fc__failed(ctx);
        k++;
        if (eq[pos] != ',') break;
        pos++;
    }
    if (k != n)
        return fc__fail(ctx, FC_ERR_INVALID_ARG,
                        "einsum: \"%s\": %d operand subscripts for %d operands", eq, k, n);
    bool explicit_out = eq[pos] == '-';
    int olet[FC_MAX_RANK], nolet = 0, oell = -1;
    size_t oat[FC_MAX_RANK];
    if (explicit_out) {
        pos += 2;
        if (parse_term(ctx, eq, &pos, olet, oat, &nolet, &oell, true) != FC_OK)
            return fc__failed(ctx);
        if (eq[pos] != '\0')
            return fc__fail(ctx, FC_ERR_INVALID_ARG,
                            "einsum: \"%s\": position %zu: '%c' after the output subscripts", eq,
                            pos, eq[pos] == ',' ? ',' : '-');
    }
    /* ranks, the ellipsis' extent, sizes */
    for (k = 0; k < n; k++) {
        int r = xs[k]->raw.rank;
        int e = r - nlet[k];
        if (ell[k] < 0 ? e != 0 : e < 0)
            return fc__fail(ctx, FC_ERR_RANK,
                            "einsum: \"%s\": operand %d (subscripts at position %zu) has rank %d "
                            "but %d subscripts%s",
                            eq, k, start[k], r, nlet[k], ell[k] < 0 ? "" : " and \"...\"");
        if (e > sp->nell) sp->nell = e;
    }
    for (k = 0; k < n; k++) {
        ein_term *t = &terms[k];
        int e = xs[k]->raw.rank - nlet[k];
        t->nlab = 0;
        for (int j = 0; j <= nlet[k]; j++) {
            if (j == ell[k])
                for (int q = 0; q < e; q++)
                    t->lab[t->nlab++] = EIN_LETTERS + sp->nell - e + q;
            if (j < nlet[k]) t->lab[t->nlab++] = letters[k][j];
        }
        for (int a = 0; a < t->nlab; a++) {
            int id = t->lab[a];
            int64_t d = xs[k]->raw.shape[a];
            char nb[40];
            for (int b = 0; b < a; b++)
                if (t->lab[b] == id && xs[k]->raw.shape[b] != d)
                    return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                                    "einsum: \"%s\": %s is repeated in operand %d with sizes "
                                    "%lld (axis %d) and %lld (axis %d)",
                                    eq, label_name(id, nb, sizeof nb), k,
                                    (long long)xs[k]->raw.shape[b], b, (long long)d, a);
            int64_t have = sp->size[id];
            if (have > 1 && d > 1 && have != d)
                return fc__fail(ctx, FC_ERR_SHAPE_MISMATCH,
                                "einsum: \"%s\": %s has size %lld in operand %d (axis %d) but %lld "
                                "in an earlier operand (sizes must match or be 1)",
                                eq, label_name(id, nb, sizeof nb), (long long)d, k, a,
                                (long long)have);
            if (d > have) sp->size[id] = d;
            bool first = true;
            for (int b = 0; b < a; b++)
                first = first && t->lab[b] != id;
            if (first) {
                sp->uses[id]++;
                sp->last_use[id] = k;
            }
        }
    }
    /* the output */
    if (explicit_out) {
        for (int j = 0; j <= nolet; j++) {
            if (j == oell)
                for (int q = 0; q < sp->nell; q++)
                    sp->out[sp->nout++] = EIN_LETTERS + q;
            if (j == nolet) break;
            int id = olet[j];
            if (!sp->uses[id]) {
                return fc__fail(ctx, FC_ERR_INVALID_ARG,
                                "einsum: \"%s\": position %zu: output subscript '%c' is in no "
                                "operand",
                                eq, oat[j], label_char(id));
            }
            sp->out[sp->nout++] = id;
        }
    } else {
        for (int q = 0; q < sp->nell; q++)
            sp->out[sp->nout++] = EIN_LETTERS + q;
        /* once-appearing letters, counting repeats inside an operand */
        int count[EIN_LETTERS] = {0};
        for (k = 0; k < n; k++)
            for (int j = 0; j < nlet[k]; j++)
                count[letters[k][j]]++;
        for (int id = 0; id < EIN_LETTERS; id++)
            if (count[id] == 1) sp->out[sp->nout++] = id;
    }
    if (sp->nout > FC_MAX_RANK)
        return fc__fail(ctx, FC_ERR_RANK, "einsum: \"%s\": the output has %d axes; at most %d", eq,
                        sp->nout, FC_MAX_RANK);
    for (int j = 0; j < sp->nout; j++)
        sp->in_out[sp->out[j]] = true;
    for (k = 0; k < n; k++)
        terms[k].t = fc_retain(xs[k]);
    return FC_OK;
}

/* ---- lowering steps (each replaces t->t; NULL with the error recorded) ------------------------
 */

static bool replace(ein_term *t, fc_tensor *nt) {
    fc_release(t->t);
    t->t = nt;
    return nt != NULL;
}

/* Puts the axes in the order perm (of t's labels); nothing for the identity. */
static bool term_permute(fc_ctx *ctx, ein_term *t, const int *perm) {
    bool id = true;
    for (int a = 0; a < t->nlab; a++)
        id = id && perm[a] == a;
    if (id || t->nlab < 2) return true;
    int lab[FC_MAX_RANK];
    for (int a = 0; a < t->nlab; a++)
        lab[a] = t->lab[perm[a]];
    memcpy(t->lab, lab, sizeof lab);
    return replace(t, fc_permute(ctx, t->t, perm));
}

/* The diagonals of every label repeated in t. */
static bool term_diagonals(fc_ctx *ctx, ein_term *t) {
    for (;;) {
        int a = -1, b = -1;
        for (int i = 0; i < t->nlab && a < 0; i++)
            for (int j = i + 1; j < t->nlab; j++)
                if (t->lab[i] == t->lab[j]) {
                    a = i, b = j;
                    break;
                }
        if (a < 0) return true;
        int perm[FC_MAX_RANK], np = 0;
        for (int i = 0; i < t->nlab; i++)
            if (i != a && i != b) perm[np++] = i;
        perm[np++] = a;
        perm[np++] = b;
        int64_t d = t->t->raw.shape[a];
        if (!term_permute(ctx, t, perm)) return false;
        int64_t shape[FC_MAX_RANK];
        for (int i = 0; i < t->nlab - 2; i++)
            shape[i] = t->t->raw.shape[i];
        shape[t->nlab - 2] = d * d; /* d * d <= the element count */
        if (!replace(t, fc_reshape(ctx, t->t, shape, t->nlab - 1))) return false;
        if (!replace(t, fc_slice(ctx, t->t, t->nlab - 2, 0, d * d, d + 1))) return false;
        t->nlab--; /* the merged axis keeps the label */
    }
}

/* Sums the labels of t for which keep[] is false. */
static bool term_sum(fc_ctx *ctx, ein_term *t, const bool *keep) {
    int axes[FC_MAX_RANK], na = 0, nl = 0;
    int lab[FC_MAX_RANK];
    for (int a = 0; a < t->nlab; a++) {
        if (keep[t->lab[a]])
            lab[nl++] = t->lab[a];
        else
            axes[na++] = a;
    }
    if (!na) return true;
    if (!replace(t, fc_sum(ctx, t->t, axes, na, false))) return false;
    memcpy(t->lab, lab, sizeof lab);
    t->nlab = nl;
    if (nl == 0 && t->t->raw.rank != 1) {
        int64_t one = 1;
        return replace(t, fc_reshape(ctx, t->t, &one, 1));
    }
    return true;
}

static int find_label(const ein_term *t, int id) {
    for (int a = 0; a < t->nlab; a++)
        if (t->lab[a] == id) return a;
    return -1;
}

/* Grows t's size-1 axes whose label is larger in `other` (broadcasting). */
static bool term_broadcast(fc_ctx *ctx, ein_term *t, const ein_term *other) {
    int64_t shape[FC_MAX_RANK];
    bool grow = false;
    for (int a = 0; a < t->nlab; a++) {
        shape[a] = t->t->raw.shape[a];
        int b = find_label(other, t->lab[a]);
        if (b >= 0 && shape[a] == 1 && other->t->raw.shape[b] > 1) {
            shape[a] = other->t->raw.shape[b];
            grow = true;
        }
    }
    return !grow || replace(t, fc_expand(ctx, t->t, shape, t->nlab));
}

/* Reshapes t to shape unless it has it already. */
static bool term_reshape(fc_ctx *ctx, ein_term *t, const int64_t *shape, int rank) {
    if (t->t->raw.rank == rank && !memcmp(t->t->raw.shape, shape, sizeof(int64_t) * (size_t)rank))
        return true;
    return replace(t, fc_reshape(ctx, t->t, shape, rank));
}

/* l := l (x) r over their shared labels: those in keep[] stay as batch
 * labels, the others are contracted. Both have been summed and broadcast;
 * r is released. */
static bool contract(fc_ctx *ctx, const char *eq, ein_term *l, ein_term *r, const bool *keep) {
    int batch[FC_MAX_RANK], lf[FC_MAX_RANK], rf[FC_MAX_RANK], con[FC_MAX_RANK];
    int nb = 0, nlf = 0, nrf = 0, nc = 0;
    int64_t B = 1, M = 1, K = 1, N = 1;
    for (int a = 0; a < l->nlab; a++) {
        int id = l->lab[a];
        int64_t d = l->t->raw.shape[a];
        if (find_label(r, id) < 0)
            lf[nlf++] = id, M *= d;
        else if (keep[id])
            batch[nb++] = id, B *= d;
        else
            con[nc++] = id, K *= d;
    }
    for (int a = 0; a < r->nlab; a++)
        if (find_label(l, r->lab[a]) < 0) rf[nrf++] = r->lab[a], N *= r->t->raw.shape[a];
    int nres = nb + nlf + nrf;
    if (nres > FC_MAX_RANK) {
        fc__fail(ctx, FC_ERR_RANK,
                 "einsum: \"%s\": a pairwise product would have %d axes; at most %d", eq, nres,
                 FC_MAX_RANK);
        return false;
    }
    /* the result's labels and shape, before the sizes are lost to the 3-D forms */
    int rlab[FC_MAX_RANK];
    int64_t rshape[FC_MAX_RANK];
    int q = 0;
    for (int i = 0; i < nb; i++, q++)
        rlab[q] = batch[i], rshape[q] = l->t->raw.shape[find_label(l, batch[i])];
    for (int i = 0; i < nlf; i++, q++)
        rlab[q] = lf[i], rshape[q] = l->t->raw.shape[find_label(l, lf[i])];
    for (int i = 0; i < nrf; i++, q++)
        rlab[q] = rf[i], rshape[q] = r->t->raw.shape[find_label(r, rf[i])];
    int pl[FC_MAX_RANK], pr[FC_MAX_RANK], np = 0;
    for (int i = 0; i < nb; i++)
        pl[np++] = find_label(l, batch[i]);
    for (int i = 0; i < nlf; i++)
        pl[np++] = find_label(l, lf[i]);
    for (int i = 0; i < nc; i++)
        pl[np++] = find_label(l, con[i]);
    np = 0;
    for (int i = 0; i < nb; i++)
        pr[np++] = find_label(r, batch[i]);
    for (int i = 0; i < nc; i++)
        pr[np++] = find_label(r, con[i]);
    for (int i = 0; i < nrf; i++)
        pr[np++] = find_label(r, rf[i]);
    const int64_t ls[3] = {B, M, K}, rs[3] = {B, K, N};
    bool ok = (l->nlab == 0 || term_permute(ctx, l, pl)) && term_reshape(ctx, l, ls, 3) &&
              (r->nlab == 0 || term_permute(ctx, r, pr)) && term_reshape(ctx, r, rs, 3) &&
              replace(l, fc_matmul(ctx, l->t, r->t));
    fc_release(r->t);
    r->t = NULL;
    if (!ok) return false;
    int64_t one = 1;
    if (!term_reshape(ctx, l, nres ? rshape : &one, nres ? nres : 1)) return false;
    memcpy(l->lab, rlab, sizeof rlab);
    l->nlab = nres;
    return true;
}

fc_tensor *fc_einsum(fc_ctx *ctx, const char *equation, fc_tensor *const *xs, int n) {
    FC__CHECK_CTX(ctx);
    const char *op = "einsum";
    FC__CHECK_PTR(ctx, op, equation);
    FC__CHECK_PTR(ctx, op, xs);
    if (n < 1 || n > EIN_MAX_OPERANDS) {
        fc__fail(ctx, FC_ERR_INVALID_ARG, "einsum: \"%s\": n is %d; need 1 to %d operands",
                 equation, n, EIN_MAX_OPERANDS);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        if (!xs[k]) {
            fc__fail(ctx, FC_ERR_NULL_ARG, "einsum: operand %d is NULL", k);
            return NULL;
        }
        if (xs[k]->ctx != ctx) {
            fc__fail(ctx, FC_ERR_CONTEXT, "einsum: operand %d belongs to another context", k);
            return NULL;
        }
        fc_dtype dt = xs[k]->raw.dtype;
        if (!fc_dtype_is_float(dt) || fc_dtype_is_block(dt) || dt != xs[0]->raw.dtype) {
            char d0[160], dk[160];
            fc__fail(ctx, FC_ERR_DTYPE,
                     "einsum: \"%s\": operands need one float dtype (f16, bf16, f32, f64); "
                     "operand 0 is %s, operand %d is %s",
                     equation, fc__desc(xs[0], d0, (int)sizeof d0), k,
                     fc__desc(xs[k], dk, (int)sizeof dk));
            return NULL;
        }
    }
    ein_spec sp;
    ein_term terms[EIN_MAX_OPERANDS];
    if (parse(ctx, equation, xs, n, &sp, terms) != FC_OK) return NULL;
    bool ok = true;
    for (int k = 0; k < n && ok; k++) {
        ok = term_diagonals(ctx, &terms[k]);
        if (!ok) break;
        if (k == 0) {
            /* sum what no other operand and not the output holds */
            bool own[EIN_LABELS];
            for (int id = 0; id < EIN_LABELS; id++)
                own[id] = sp.in_out[id] || sp.uses[id] > 1;
            ok = term_sum(ctx, &terms[0], own);
            continue;
        }
        ein_term *l = &terms[0], *r = &terms[k];
        /* each side sums what neither the other side, a later operand nor
         * the output holds (the left side's labels all have a use at k or
         * later, so for it this is a no-op kept for symmetry) */
        bool keep[EIN_LABELS], rkeep[EIN_LABELS], lkeep[EIN_LABELS];
        for (int id = 0; id < EIN_LABELS; id++) {
            keep[id] = sp.in_out[id] || sp.last_use[id] > k;
            rkeep[id] = keep[id] || find_label(l, id) >= 0;
            lkeep[id] = keep[id] || find_label(r, id) >= 0;
        }
        ok = term_sum(ctx, r, rkeep) && term_sum(ctx, l, lkeep) && term_broadcast(ctx, l, r) &&
             term_broadcast(ctx, r, l) && contract(ctx, equation, l, r, keep);
    }
    ein_term *res = &terms[0];
    if (ok) ok = term_sum(ctx, res, sp.in_out);
    if (ok && sp.nout) {
        int perm[FC_MAX_RANK];
        for (int j = 0; j < sp.nout; j++)
            perm[j] = find_label(res, sp.out[j]);
        ok = term_permute(ctx, res, perm);
    }
    /* "ij->ij" and the like: a new view rather than the caller's own handle */
    if (ok && res->t == xs[0])
        ok = replace(res, fc_reshape(ctx, res->t, res->t->raw.shape, res->t->raw.rank));
    for (int k = 1; k < n; k++)
        fc_release(terms[k].t);
    if (!ok) {
        fc_release(res->t);
        return NULL;
    }
    return res->t;
}
