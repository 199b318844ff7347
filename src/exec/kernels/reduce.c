/* SPDX-License-Identifier: MIT */
/* reduce.c - the reduction engine (see reduce.h for the design).
 *
 * State. Every op folds elements into one `rstate` per output: a running
 * value (sum, product, extremum, shifted moments, log-sum-exp pair), an
 * element count and an index. Elements are converted to a compute dtype
 * first (f32 for the 16-bit floats, f32 and the f8 floats; f64; i64 for
 * integers and bool), in place when the input already is one and the run
 * is contiguous, otherwise through a small stack buffer.
 *
 * Order. Within a chunk elements are folded in row-major order of the
 * reduced axes; chunks are merged in index order; ties of max/min keep the
 * earlier element, and a NaN wins over any number (NaN propagates, the
 * arg ops return the first NaN like PyTorch).
 *
 * var folds shifted sums (k = the chunk's first element, s1 = sum(x - k),
 * s2 = sum((x - k)^2)) and closes each chunk into (n, mean, M2), merged
 * with Chan et al.'s pairwise update. */
#include "exec/kernels/reduce.h"

#include "core/convert.h"
#include "exec/kernels/rowwise.h"

#define ROW_CHUNK 16384    /* reduced elements per item in row mode */
#define COL_CHUNK 65536    /* elements per item in column mode */
#define LANE_BLOCK 128     /* kept lanes per item in column mode */
#define DENSE_LANES 2048   /* ...for float sums (whole rows of most tensors) */
#define DENSE_CHUNK 262144 /* elements per item for float sums in column mode */
#define LOADN 512          /* elements converted per gather */

typedef struct rstate {
    double a, b, c;
    int64_t n, idx, i;
    uint64_t u;
} rstate;

typedef enum ctype { CT_F32, CT_F64, CT_I64 } ctype;

static ctype ctype_of(fc_dtype dt) {
    if (dt == FC_F64) return CT_F64;
    if (fc_dtype_is_float(dt) || fc_dtype_is_f8(dt)) return CT_F32;
    return CT_I64;
}

/* ---- element updates ---------------------------------------------------------------------- */

static void st_init(fc__red_op op, rstate *s) {
    memset(s, 0, sizeof *s);
    if (op == FC__RED_PROD || op == FC__RED_NZPROD) {
        s->a = 1;
        s->u = 1;
    } else if (op == FC__RED_ALL) {
        s->u = 1;
    } else if (op == FC__RED_LSE) {
        s->a = -INFINITY;
    }
}

/* (m, s): sum exp(x - m) = s. NaN and +inf decide the result outright. */
static inline void lse_add(rstate *s, double v) {
    if (s->a != s->a) return;
    if (v != v) {
        s->a = v;
        return;
    }
    if (s->a == INFINITY || v == -INFINITY) return;
    if (v == INFINITY) {
        s->a = v;
        s->b = 1;
    } else if (v > s->a) {
        s->b = s->b * exp(s->a - v) + 1.0;
        s->a = v;
    } else {
        s->b += exp(v - s->a);
    }
}

static inline bool beats_max(double v, const rstate *s) {
    return s->n == 0 || v > s->a || (v != v && s->a == s->a);
}
static inline bool beats_min(double v, const rstate *s) {
    return s->n == 0 || v < s->a || (v != v && s->a == s->a);
}

static inline void upd_f(fc__red_op op, rstate *s, double v, int64_t r) {
    switch (op) {
    case FC__RED_SUM:
        s->a += v;
        break;
    case FC__RED_PROD:
        s->a *= v;
        break;
    case FC__RED_MAX:
    case FC__RED_ARGMAX:
        if (beats_max(v, s)) {
            s->a = v;
            s->idx = r;
            s->n = 1;
        }
        break;
    case FC__RED_MIN:
    case FC__RED_ARGMIN:
        if (beats_min(v, s)) {
            s->a = v;
            s->idx = r;
            s->n = 1;
        }
        break;
    case FC__RED_ALL:
        s->u &= (uint64_t)(v != 0);
        break;
    case FC__RED_ANY:
        s->u |= (uint64_t)(v != 0);
        break;
    case FC__RED_VAR: {
        if (s->n == 0) s->a = v;
        double d = v - s->a;
        s->b += d;
        s->c += d * d;
        s->n++;
        break;
    }
    case FC__RED_LSE:
        lse_add(s, v);
        break;
    case FC__RED_NZPROD:
        if (v != 0) s->a *= v;
        break;
    case FC__RED_NZCOUNT:
        if (v == 0) s->a += 1;
        break;
    default:
        break;
    }
}

/* Integers wrap: sums and products run in uint64_t. */
static inline void upd_i(fc__red_op op, rstate *s, int64_t v, int64_t r) {
    switch (op) {
    case FC__RED_SUM:
        s->u += (uint64_t)v;
        break;
    case FC__RED_PROD:
        s->u *= (uint64_t)v;
        break;
    case FC__RED_MAX:
    case FC__RED_ARGMAX:
        if (s->n == 0 || v > s->i) {
            s->i = v;
            s->idx = r;
            s->n = 1;
        }
        break;
    case FC__RED_MIN:
    case FC__RED_ARGMIN:
        if (s->n == 0 || v < s->i) {
            s->i = v;
            s->idx = r;
            s->n = 1;
        }
        break;
    case FC__RED_ALL:
        s->u &= (uint64_t)(v != 0);
        break;
    case FC__RED_ANY:
        s->u |= (uint64_t)(v != 0);
        break;
    default:
        break;
    }
}

static void var_close(rstate *s) {
    if (s->n == 0) return;
    double n = (double)s->n, mean = s->a + s->b / n, m2 = s->c - s->b * s->b / n;
    s->a = mean;
    s->b = m2 < 0 ? 0 : m2;
    s->c = 0;
}

/* a := a (earlier elements) combined with b (later elements). */
static void st_merge(fc__red_op op, bool is_int, rstate *a, const rstate *b) {
    switch (op) {
    case FC__RED_SUM:
    case FC__RED_NZCOUNT:
        a->a += b->a;
        a->u += b->u;
        break;
    case FC__RED_PROD:
    case FC__RED_NZPROD:
        a->a *= b->a;
        a->u *= b->u;
        break;
    case FC__RED_MAX:
    case FC__RED_ARGMAX:
        if (b->n && (is_int ? (a->n == 0 || b->i > a->i) : beats_max(b->a, a))) *a = *b;
        break;
    case FC__RED_MIN:
    case FC__RED_ARGMIN:
        if (b->n && (is_int ? (a->n == 0 || b->i < a->i) : beats_min(b->a, a))) *a = *b;
        break;
    case FC__RED_ALL:
        a->u &= b->u;
        break;
    case FC__RED_ANY:
        a->u |= b->u;
        break;
    case FC__RED_VAR: {
        if (b->n == 0) break;
        if (a->n == 0) {
            *a = *b;
            break;
        }
        double na = (double)a->n, nb = (double)b->n, n = na + nb, delta = b->a - a->a;
        a->a += delta * (nb / n);
        a->b += b->b + delta * delta * (na * nb / n);
        a->n += b->n;
        break;
    }
    case FC__RED_LSE:
        if (a->a != a->a || a->a == INFINITY || b->a == -INFINITY) break;
        if (b->a != b->a || b->a == INFINITY || a->a == -INFINITY) {
            *a = *b;
            break;
        }
        {
            double m = a->a > b->a ? a->a : b->a;
            a->b = a->b * exp(a->a - m) + b->b * exp(b->a - m);
            a->a = m;
        }
        break;
    default:
        break;
    }
}

/* ---- runs: n contiguous compute values ---------------------------------------------------- */

static void run_f32(fc__red_op op, rstate *s, const float *v, int64_t n, int64_t r0) {
    bool nan = false;
    float m;
    switch (op) {
    case FC__RED_SUM:
        s->a += fc__rw_sum(v, n);
        return;
    case FC__RED_MAX:
        m = fc__rw_max(v, n, &nan);
        upd_f(op, s, nan ? (double)NAN : m, r0);
        return;
    case FC__RED_MIN:
        m = fc__rw_min(v, n, &nan);
        upd_f(op, s, nan ? (double)NAN : m, r0);
        return;
    case FC__RED_ARGMAX:
    case FC__RED_ARGMIN: {
        /* the extremum first (vectorized), then its first position: the
         * run is in cache, and the search usually stops early */
        m = op == FC__RED_ARGMAX ? fc__rw_max(v, n, &nan) : fc__rw_min(v, n, &nan);
        int64_t i = 0;
        if (nan)
            while (v[i] == v[i])
                i++;
        else
            while (v[i] != m)
                i++;
        upd_f(op, s, v[i], r0 + i);
        return;
    }
    case FC__RED_LSE:
        m = fc__rw_max(v, n, &nan);
        if (nan || m == INFINITY) {
            lse_add(s, nan ? (double)NAN : m);
            return;
        }
        if (s->a != s->a || s->a == INFINITY || m == -INFINITY) return;
        {
            /* the shift is a float, so the exps below use exactly it */
            float nm = s->a > (double)m ? (float)s->a : m;
            s->b = s->b * exp(s->a - (double)nm) + fc__rw_exp(v, NULL, n, nm);
            s->a = nm;
        }
        return;
    default:
        for (int64_t i = 0; i < n; i++)
            upd_f(op, s, v[i], r0 + i);
        return;
    }
}

static void run_f64(fc__red_op op, rstate *s, const double *v, int64_t n, int64_t r0) {
    if (op == FC__RED_SUM) {
        double acc[8] = {0};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++)
                acc[l] += v[i + l];
        double t = 0;
        for (; i < n; i++)
            t += v[i];
        for (int l = 0; l < 8; l++)
            t += acc[l];
        s->a += t;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        upd_f(op, s, v[i], r0 + i);
}

static void run_i64(fc__red_op op, rstate *s, const int64_t *v, int64_t n, int64_t r0) {
    if (op == FC__RED_SUM) {
        uint64_t acc = 0;
        for (int64_t i = 0; i < n; i++)
            acc += (uint64_t)v[i];
        s->u += acc;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        upd_i(op, s, v[i], r0 + i);
}

static void run_ct(ctype ct, fc__red_op op, rstate *s, const void *v, int64_t n, int64_t r0) {
    if (ct == CT_F32) {
        run_f32(op, s, v, n, r0);
    } else if (ct == CT_F64) {
        run_f64(op, s, v, n, r0);
    } else {
        run_i64(op, s, v, n, r0);
    }
}

/* One reduced index r across w kept lanes (column mode). */
static void cols_ct(ctype ct, fc__red_op op, rstate *s, const void *v, int64_t w, int64_t r) {
    if (ct == CT_F32) {
        const float *p = v;
        if (op == FC__RED_SUM)
            for (int64_t q = 0; q < w; q++)
                s[q].a += p[q];
        else
            for (int64_t q = 0; q < w; q++)
                upd_f(op, &s[q], p[q], r);
    } else if (ct == CT_F64) {
        const double *p = v;
        if (op == FC__RED_SUM)
            for (int64_t q = 0; q < w; q++)
                s[q].a += p[q];
        else
            for (int64_t q = 0; q < w; q++)
                upd_f(op, &s[q], p[q], r);
    } else {
        const int64_t *p = v;
        for (int64_t q = 0; q < w; q++)
            upd_i(op, &s[q], p[q], r);
    }
}

/* ---- the plan ------------------------------------------------------------------------------ */

typedef struct plan {
    int nk, nr;
    int64_t kshape[FC_MAX_RANK], kstr[FC_MAX_RANK]; /* kept axes, byte strides */
    int64_t rshape[FC_MAX_RANK], rstr[FC_MAX_RANK]; /* reduced axes, byte strides */
    int64_t nout, nred;
    bool cols;
} plan;

/* Size-1 axes vanish; neighbours within the kept (or the reduced) list merge
 * when they step as one, which keeps row-major order in each list. */
static void build_plan(const fc_raw *x, const bool *mask, plan *p) {
    int64_t es = (int64_t)fc_dtype_size(x->dtype);
    p->nk = p->nr = 0;
    for (int i = 0; i < x->rank; i++) {
        int64_t n = x->shape[i], st = x->strides[i] * es;
        if (n == 1) continue;
        int64_t *sh = mask[i] ? p->rshape : p->kshape, *sr = mask[i] ? p->rstr : p->kstr;
        int *cnt = mask[i] ? &p->nr : &p->nk;
        if (*cnt > 0 && sr[*cnt - 1] == st * n) {
            sh[*cnt - 1] *= n;
            sr[*cnt - 1] = st;
            continue;
        }
        sh[*cnt] = n;
        sr[*cnt] = st;
        (*cnt)++;
    }
    if (p->nr == 0) { /* every reduced axis has length 1 */
        p->rshape[0] = 1;
        p->rstr[0] = 0;
        p->nr = 1;
    }
    p->nout = fc__shape_product(p->kshape, p->nk);
    p->nred = fc__shape_product(p->rshape, p->nr);
    p->cols = false;
    if (p->nk > 0 && p->nred > 1) {
        int64_t rmin = INT64_MAX;
        for (int d = 0; d < p->nr; d++)
            if (p->rstr[d] < rmin) rmin = p->rstr[d];
        p->cols = p->kstr[p->nk - 1] < rmin;
    }
}

static int64_t offset_of(int64_t idx, const int64_t *shape, const int64_t *str, int n) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (idx % shape[d]) * str[d];
        idx /= shape[d];
    }
    return off;
}

/* ---- the job ------------------------------------------------------------------------------- */

typedef struct red_job {
    fc__red_op op;
    ctype ct;
    fc_dtype dt;
    int64_t es;
    bool native; /* x's dtype is the compute dtype */
    const char *x;
    plan p;
    int64_t chunk, nrc;                 /* per item: reduced elements (rows) / indices (cols) */
    int64_t lanes, lane_blocks, nouter; /* column mode */
    int64_t lane_block;                 /* lanes per item */
    bool dense;                         /* float SUM: dense_col_item */
    rstate *partial;                    /* [nout][nrc] when nrc > 1 */
    fc__red_params prm;
    fc_raw *out;
} red_job;

typedef union loadbuf {
    float f[LOADN];
    double d[LOADN];
    int64_t i[LOADN];
    uint8_t b1[LOADN * 8];
} loadbuf;

/* n (<= LOADN unless in place) elements from src with a byte stride, as
 * compute values. */
static const void *gather(const red_job *j, const char *src, int64_t stride, int64_t n,
                          loadbuf *buf, loadbuf *tmp) {
    if (stride == j->es) {
        if (j->native) return src;
    } else {
        /* raw elements into tmp (or straight into buf for native dtypes) */
        loadbuf *dst = j->native ? buf : tmp;
        switch (j->es) {
        case 1:
            for (int64_t q = 0; q < n; q++)
                dst->b1[q] = *(const uint8_t *)(src + q * stride);
            break;
        case 2:
            for (int64_t q = 0; q < n; q++)
                memcpy(dst->b1 + 2 * q, src + q * stride, 2);
            break;
        case 4:
            for (int64_t q = 0; q < n; q++)
                memcpy(dst->b1 + 4 * q, src + q * stride, 4);
            break;
        default:
            for (int64_t q = 0; q < n; q++)
                memcpy(dst->b1 + 8 * q, src + q * stride, 8);
            break;
        }
        if (j->native) return buf;
        src = (const char *)tmp->b1;
    }
    if (j->ct == CT_F32)
        fc__load_f32_row(j->dt, src, buf->f, (size_t)n);
    else if (j->ct == CT_F64)
        fc__load_f64_row(j->dt, src, buf->d, (size_t)n);
    else
        fc__load_i64_row(j->dt, src, buf->i, (size_t)n);
    return buf;
}

static void process_run(const red_job *j, rstate *s, const char *p, int64_t stride, int64_t n,
                        int64_t r) {
    if (j->native && stride == j->es) {
        run_ct(j->ct, j->op, s, p, n, r);
        return;
    }
    if (j->op == FC__RED_SUM && stride == 2 && (j->dt == FC_BF16 || j->dt == FC_F16)) {
        /* widened as loaded, not through buf: the same bits as the
         * converted LOADN pieces below (fc__rw_sum_half) */
        for (int64_t off = 0; off < n; off += LOADN) {
            int64_t k = n - off < LOADN ? n - off : LOADN;
            s->a += fc__rw_sum_half((const uint16_t *)(const void *)p + off, k, j->dt == FC_BF16);
        }
        return;
    }
    loadbuf buf, tmp;
    for (int64_t off = 0; off < n; off += LOADN) {
        int64_t k = n - off < LOADN ? n - off : LOADN;
        const void *v = gather(j, p + off * stride, stride, k, &buf, &tmp);
        run_ct(j->ct, j->op, s, v, k, r + off);
    }
}

/* Output o, reduced elements [c * chunk, ...) into *s. */
static void row_item(const red_job *j, int64_t o, int64_t c, rstate *s) {
    const plan *p = &j->p;
    int last = p->nr - 1;
    st_init(j->op, s);
    const char *ptr = j->x + offset_of(o, p->kshape, p->kstr, p->nk);
    int64_t r0 = c * j->chunk, r1 = r0 + j->chunk < p->nred ? r0 + j->chunk : p->nred;
    int64_t idx[FC_MAX_RANK], q = r0;
    for (int d = last; d >= 0; d--) {
        idx[d] = q % p->rshape[d];
        q /= p->rshape[d];
        ptr += idx[d] * p->rstr[d];
    }
    for (int64_t r = r0; r < r1;) {
        int64_t run = p->rshape[last] - idx[last];
        if (run > r1 - r) run = r1 - r;
        process_run(j, s, ptr, p->rstr[last], run, r);
        r += run;
        if (r >= r1) break;
        /* the run reached the end of the innermost axis: carry outward */
        ptr -= idx[last] * p->rstr[last];
        idx[last] = 0;
        for (int d = last - 1; d >= 0; d--) {
            ptr += p->rstr[d];
            if (++idx[d] < p->rshape[d]) break;
            ptr -= p->rshape[d] * p->rstr[d];
            idx[d] = 0;
        }
    }
    if (j->op == FC__RED_VAR) var_close(s);
}

static void add_lanes_f32(float *restrict part, const float *restrict v, int64_t w) {
    for (int64_t k = 0; k < w; k++)
        part[k] += v[k];
}
static void add_lanes_f64(double *restrict acc, const double *restrict v, int64_t w) {
    for (int64_t k = 0; k < w; k++)
        acc[k] += v[k];
}
static void flush_lanes(double *restrict acc, float *restrict part, int64_t w) {
    for (int64_t k = 0; k < w; k++) {
        acc[k] += part[k];
        part[k] = 0;
    }
}

/* Outer kept position oo, lanes [l0, l0 + w), reduced indices [c * chunk, ...). */
static void col_item(const red_job *j, int64_t oo, int64_t l0, int64_t w, int64_t c, rstate *s) {
    const plan *p = &j->p;
    int last = p->nr - 1;
    int64_t lstride = p->kstr[p->nk - 1];
    for (int64_t q = 0; q < w; q++)
        st_init(j->op, &s[q]);
    const char *ptr = j->x + offset_of(oo, p->kshape, p->kstr, p->nk - 1) + l0 * lstride;
    int64_t r0 = c * j->chunk, r1 = r0 + j->chunk < p->nred ? r0 + j->chunk : p->nred;
    int64_t idx[FC_MAX_RANK], q = r0;
    for (int d = last; d >= 0; d--) {
        idx[d] = q % p->rshape[d];
        q /= p->rshape[d];
        ptr += idx[d] * p->rstr[d];
    }
    loadbuf buf, tmp;
    for (int64_t r = r0; r < r1; r++) {
        cols_ct(j->ct, j->op, s, gather(j, ptr, lstride, w, &buf, &tmp), w, r);
        for (int d = last; d >= 0; d--) {
            ptr += p->rstr[d];
            if (++idx[d] < p->rshape[d]) break;
            ptr -= p->rshape[d] * p->rstr[d];
            idx[d] = 0;
        }
    }
    if (j->op == FC__RED_VAR)
        for (int64_t k = 0; k < w; k++)
            var_close(&s[k]);
}

/* ---- results ------------------------------------------------------------------------------- */

static double float_result(const red_job *j, const rstate *s) {
    switch (j->op) {
    case FC__RED_SUM:
        return j->prm.scale != 0 ? s->a * j->prm.scale : s->a;
    case FC__RED_VAR: {
        double den = (double)s->n - j->prm.correction;
        double v = s->b / (den > 0 ? den : 0.0);
        return j->prm.take_sqrt ? sqrt(v) : v;
    }
    case FC__RED_LSE:
        if (s->a != s->a || s->a == INFINITY || s->a == -INFINITY) return s->a;
        return s->a + log(s->b);
    default:
        return s->a;
    }
}

static void store_result(const red_job *j, int64_t o, const rstate *s) {
    char *dst = fc__raw_base(j->out) + o * (int64_t)fc_dtype_size(j->out->dtype);
    switch (j->out->dtype) {
    case FC_BOOL:
        *(uint8_t *)dst = s->u != 0;
        break;
    case FC_I64: {
        int64_t v;
        if (j->op == FC__RED_ARGMAX || j->op == FC__RED_ARGMIN)
            v = s->idx;
        else if (j->op == FC__RED_MAX || j->op == FC__RED_MIN)
            v = s->i;
        else
            memcpy(&v, &s->u, sizeof v); /* wrapped two's complement */
        memcpy(dst, &v, sizeof v);
        break;
    }
    case FC_F32:
        *(float *)dst = (float)float_result(j, s);
        break;
    case FC_F64:
        *(double *)dst = float_result(j, s);
        break;
    default:
        break;
    }
}

static void keep_state(const red_job *j, int64_t o, int64_t c, const rstate *s) {
    if (j->nrc == 1)
        store_result(j, o, s);
    else
        j->partial[o * j->nrc + c] = *s;
}

static void row_items(void *arg, int64_t b, int64_t e) {
    const red_job *j = arg;
    rstate s;
    for (int64_t it = b; it < e; it++) {
        int64_t o = it / j->nrc, c = it % j->nrc;
        row_item(j, o, c, &s);
        keep_state(j, o, c, &s);
    }
}

/* Column-mode float sums, the common case (a mean over the batch axis):
 * wide dense lane arrays, f32 partials of at most 32 rows flushed into
 * doubles (the accuracy of the row mode). */
static void dense_col_item(const red_job *j, int64_t oo, int64_t l0, int64_t w, int64_t c) {
    const plan *p = &j->p;
    int last = p->nr - 1;
    int64_t lstride = p->kstr[p->nk - 1];
    const char *ptr = j->x + offset_of(oo, p->kshape, p->kstr, p->nk - 1) + l0 * lstride;
    int64_t r0 = c * j->chunk, r1 = r0 + j->chunk < p->nred ? r0 + j->chunk : p->nred;
    int64_t idx[FC_MAX_RANK], q = r0;
    for (int d = last; d >= 0; d--) {
        idx[d] = q % p->rshape[d];
        q /= p->rshape[d];
        ptr += idx[d] * p->rstr[d];
    }
    float part[DENSE_LANES];
    double acc[DENSE_LANES];
    for (int64_t k = 0; k < w; k++)
        part[k] = 0, acc[k] = 0;
    loadbuf buf, tmp;
    int rows = 0;
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t k0 = 0; k0 < w; k0 += LOADN) { /* gather holds LOADN at a time */
            int64_t kw = w - k0 < LOADN ? w - k0 : LOADN;
            const void *v = gather(j, ptr + k0 * lstride, lstride, kw, &buf, &tmp);
            if (j->ct == CT_F64)
                add_lanes_f64(acc + k0, v, kw);
            else
                add_lanes_f32(part + k0, v, kw);
        }
        if (++rows == 32) {
            flush_lanes(acc, part, w);
            rows = 0;
        }
        for (int d = last; d >= 0; d--) {
            ptr += p->rstr[d];
            if (++idx[d] < p->rshape[d]) break;
            ptr -= p->rshape[d] * p->rstr[d];
            idx[d] = 0;
        }
    }
    flush_lanes(acc, part, w);
    for (int64_t k = 0; k < w; k++) {
        rstate s;
        st_init(j->op, &s);
        s.a = acc[k];
        keep_state(j, oo * j->lanes + l0 + k, c, &s);
    }
}

static void col_items(void *arg, int64_t b, int64_t e) {
    const red_job *j = arg;
    rstate s[LANE_BLOCK];
    for (int64_t it = b; it < e; it++) {
        int64_t c = it % j->nrc, t = it / j->nrc;
        int64_t lb = t % j->lane_blocks, oo = t / j->lane_blocks;
        int64_t l0 = lb * j->lane_block;
        int64_t w = j->lanes - l0 < j->lane_block ? j->lanes - l0 : j->lane_block;
        if (j->dense) {
            dense_col_item(j, oo, l0, w, c);
            continue;
        }
        col_item(j, oo, l0, w, c, s);
        for (int64_t q = 0; q < w; q++)
            keep_state(j, oo * j->lanes + l0 + q, c, &s[q]);
    }
}

static void merge_outputs(void *arg, int64_t b, int64_t e) {
    const red_job *j = arg;
    bool is_int = j->ct == CT_I64;
    for (int64_t o = b; o < e; o++) {
        rstate s = j->partial[o * j->nrc];
        for (int64_t c = 1; c < j->nrc; c++)
            st_merge(j->op, is_int, &s, &j->partial[o * j->nrc + c]);
        store_result(j, o, &s);
    }
}

fc_status fc__red_run(fc_ctx *ctx, const char *opname, fc__red_op op, const fc_raw *x,
                      const bool *mask, const fc__red_params *params, fc_raw *out) {
    red_job j = {.op = op, .dt = x->dtype, .x = fc__raw_base(x), .out = out};
    if (params) j.prm = *params;
    j.ct = ctype_of(x->dtype);
    j.es = (int64_t)fc_dtype_size(x->dtype);
    j.native = (j.ct == CT_F32 && x->dtype == FC_F32) || (j.ct == CT_F64 && x->dtype == FC_F64) ||
               (j.ct == CT_I64 && x->dtype == FC_I64);
    build_plan(x, mask, &j.p);
    int64_t items, per_item;
    if (j.p.cols) {
        j.dense = op == FC__RED_SUM && j.ct != CT_I64;
        j.lane_block = j.dense ? DENSE_LANES : LANE_BLOCK;
        j.lanes = j.p.kshape[j.p.nk - 1];
        j.nouter = j.p.nout / j.lanes;
        j.lane_blocks = (j.lanes + j.lane_block - 1) / j.lane_block;
        int64_t w = j.lanes < j.lane_block ? j.lanes : j.lane_block;
        j.chunk = (j.dense ? DENSE_CHUNK : COL_CHUNK) / w;
        j.chunk = j.chunk < 1 ? 1 : j.chunk;
        j.nrc = (j.p.nred + j.chunk - 1) / j.chunk;
        items = j.nouter * j.lane_blocks * j.nrc;
        per_item = w * (j.p.nred < j.chunk ? j.p.nred : j.chunk);
    } else {
        j.chunk = ROW_CHUNK;
        j.nrc = (j.p.nred + j.chunk - 1) / j.chunk;
        items = j.p.nout * j.nrc;
        per_item = j.p.nred < j.chunk ? j.p.nred : j.chunk;
    }
    fc_buffer *pbuf = NULL;
    if (j.nrc > 1) {
        size_t bytes = (size_t)(j.p.nout * j.nrc) * sizeof(rstate);
        pbuf = fc__ctx_buffer(ctx, bytes);
        if (!pbuf)
            return fc__fail(ctx, FC_ERR_OOM, "%s: out of memory for %zu bytes of partial results",
                            opname, bytes);
        j.partial = pbuf->data;
    }
    int64_t grain = 32768 / per_item;
    fc__parallel_for(ctx, items, grain < 1 ? 1 : grain, j.p.cols ? col_items : row_items, &j);
    if (pbuf) {
        fc__parallel_for(ctx, j.p.nout, 64, merge_outputs, &j);
        fc__buffer_release(pbuf);
    }
    return FC_OK;
}

/* ---- axes ---------------------------------------------------------------------------------- */

fc_status fc__red_axes(fc_ctx *ctx, const char *op, const fc_tensor *x, const int *axes, int naxes,
                       bool keepdim, bool *mask, int64_t *oshape, int *orank, int64_t *count) {
    int rank = x->raw.rank;
    char d[160];
    if (naxes < 0) return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: naxes %d is negative", op, naxes);
    if (naxes > rank)
        return fc__fail(ctx, FC_ERR_RANK, "%s: %d axes given for %s of rank %d", op, naxes,
                        fc__desc(x, d, (int)sizeof d), rank);
    if (naxes > 0 && !axes)
        return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: axes is NULL with naxes %d", op, naxes);
    for (int i = 0; i < rank; i++)
        mask[i] = naxes == 0;
    for (int k = 0; k < naxes; k++) {
        int a;
        if (fc__shape_norm_axis(axes[k], rank, &a) != FC_OK)
            return fc__fail(ctx, FC_ERR_AXIS, "%s: axis %d is out of range for %s", op, axes[k],
                            fc__desc(x, d, (int)sizeof d));
        if (mask[a])
            return fc__fail(ctx, FC_ERR_INVALID_ARG, "%s: axis %d is repeated in the axes of %s",
                            op, axes[k], fc__desc(x, d, (int)sizeof d));
        mask[a] = true;
    }
    int r = 0;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (mask[i]) n *= x->raw.shape[i];
        if (!mask[i] || keepdim) oshape[r++] = mask[i] ? 1 : x->raw.shape[i];
    }
    if (r == 0) oshape[r++] = 1;
    *orank = r;
    if (count) *count = n;
    return FC_OK;
}
