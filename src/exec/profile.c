/* SPDX-License-Identifier: MIT */
/* exec/profile.c - the op profiler (fucina/profile.h): a fixed event
 * buffer filled by the hooks of exec/profile.h, and its two writers. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/profile.h"

#define PROFILE_DEFAULT_EVENTS 65536

typedef struct fc__profile {
    fc_profile_event *events; /* cap of them, allocated by fc_profile_begin */
    int64_t cap, len, dropped;
    int64_t origin_ns;     /* CLOCK_MONOTONIC at fc_profile_begin */
    int64_t pending_flops; /* noted by the running op or rule, taken by its event */
    int rule_depth;        /* backward rules running (nested: a checkpoint's recompute) */
} fc__profile;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t fc__profile_now(const fc_ctx *ctx) {
    int64_t t = mono_ns() - ctx->profile->origin_ns;
    return t > 0 ? t : 1;
}

int64_t fc__profile_stamp(const fc_ctx *ctx) {
    return ctx->profile->rule_depth > 0 ? 0 : fc__profile_now(ctx);
}

static void push(fc__profile *p, const char *op, fc_profile_phase phase, int64_t start,
                 int64_t end, int64_t bytes) {
    int64_t flops = p->pending_flops;
    p->pending_flops = 0;
    if (p->len == p->cap) {
        p->dropped++;
        return;
    }
    fc_profile_event *e = &p->events[p->len++];
    /* copied: an op may name itself from a buffer that dies with the call */
    size_t n = strlen(op);
    if (n > sizeof e->name - 1) n = sizeof e->name - 1;
    memcpy(e->name, op, n);
    e->name[n] = '\0';
    e->phase = phase;
    e->start_ns = start;
    e->dur_ns = end > start ? end - start : 0;
    e->flops = flops;
    e->bytes = bytes;
}

void fc__profile_forward(fc_ctx *ctx, const char *op, int64_t start_ns, int64_t bytes) {
    fc__profile *p = ctx->profile;
    if (p->rule_depth > 0) return; /* part of the rule's event; its FLOPs stay pending */
    push(p, op, FC_PROFILE_FORWARD, start_ns, fc__profile_now(ctx), bytes);
}

void fc__profile_flops(fc_ctx *ctx, int64_t flops) {
    if (ctx->profiling) ctx->profile->pending_flops += flops;
}

int64_t fc__profile_rule_enter(fc_ctx *ctx) {
    fc__profile *p = ctx->profile;
    if (p->rule_depth++ == 0) p->pending_flops = 0;
    return fc__profile_now(ctx);
}

void fc__profile_rule_leave(fc_ctx *ctx, const char *op, int64_t start_ns) {
    fc__profile *p = ctx->profile;
    if (p->rule_depth > 0 && --p->rule_depth == 0)
        push(p, op, FC_PROFILE_BACKWARD, start_ns, fc__profile_now(ctx), 0);
}

static void drop(fc_ctx *ctx) {
    fc__profile *p = ctx->profile;
    if (!p) return;
    fc__ctx_free(ctx, p->events, (size_t)p->cap * sizeof *p->events);
    fc__ctx_free(ctx, p, sizeof *p);
    ctx->profile = NULL;
}

void fc__profile_free(fc_ctx *ctx) {
    ctx->profiling = false;
    drop(ctx);
}

/* ---- the public calls ------------------------------------------------------------------- */

fc_status fc_profile_begin(fc_ctx *ctx, const fc_profile_opts *opts) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (ctx->profiling)
        return fc__fail(ctx, FC_ERR_STATE,
                        "fc_profile_begin: a recording is already running (call fc_profile_end)");
    int64_t cap = opts && opts->max_events ? opts->max_events : PROFILE_DEFAULT_EVENTS;
    if (cap < 0)
        return fc__fail(ctx, FC_ERR_INVALID_ARG, "fc_profile_begin: max_events is %lld, must be >= 0",
                        (long long)cap);
    if ((uint64_t)cap > SIZE_MAX / sizeof(fc_profile_event))
        return fc__fail(ctx, FC_ERR_OVERFLOW, "fc_profile_begin: max_events %lld is too large",
                        (long long)cap);
    drop(ctx);
    fc__profile *p = fc__ctx_alloc(ctx, sizeof *p);
    fc_profile_event *ev = p ? fc__ctx_alloc(ctx, (size_t)cap * sizeof *ev) : NULL;
    if (!ev) {
        if (p) fc__ctx_free(ctx, p, sizeof *p);
        return fc__fail(ctx, FC_ERR_OOM, "fc_profile_begin: cannot allocate %lld events",
                        (long long)cap);
    }
    memset(p, 0, sizeof *p);
    p->events = ev;
    p->cap = cap;
    p->origin_ns = mono_ns();
    ctx->profile = p;
    ctx->profiling = true;
    return FC_OK;
}

fc_status fc_profile_end(fc_ctx *ctx) {
    if (!ctx) return FC_ERR_NULL_ARG;
    if (!ctx->profiling)
        return fc__fail(ctx, FC_ERR_STATE, "fc_profile_end: no recording is running");
    ctx->profiling = false;
    return FC_OK;
}

bool fc_profile_running(const fc_ctx *ctx) { return ctx && ctx->profiling; }

int64_t fc_profile_event_count(const fc_ctx *ctx) {
    return ctx && ctx->profile ? ctx->profile->len : 0;
}

int64_t fc_profile_dropped_count(const fc_ctx *ctx) {
    return ctx && ctx->profile ? ctx->profile->dropped : 0;
}

fc_status fc_profile_get_event(const fc_ctx *ctx, int64_t i, fc_profile_event *out) {
    if (!ctx || !out) return FC_ERR_NULL_ARG;
    int64_t n = fc_profile_event_count(ctx);
    if (i < 0 || i >= n)
        /* the error is the context's to record, as every getter's failure */
        return fc__fail((fc_ctx *)ctx, FC_ERR_INDEX,
                        "fc_profile_get_event: index %lld outside [0, %lld)", (long long)i,
                        (long long)n);
    *out = ctx->profile->events[i];
    return FC_OK;
}

static const char *phase_name(fc_profile_phase ph) {
    return ph == FC_PROFILE_BACKWARD ? "backward" : "forward";
}

/* name as a JSON string body: quotes, backslashes and control bytes escaped */
static void json_str(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

static fc_status writer_check(fc_ctx *ctx, const char *fn, const void *dst) {
    if (!dst) return fc__fail(ctx, FC_ERR_NULL_ARG, "%s: the destination is NULL", fn);
    if (!ctx->profile)
        return fc__fail(ctx, FC_ERR_STATE, "%s: nothing was recorded (call fc_profile_begin)", fn);
    return FC_OK;
}

fc_status fc_profile_write_trace(fc_ctx *ctx, const char *path) {
    if (!ctx) return FC_ERR_NULL_ARG;
    fc_status st = writer_check(ctx, "fc_profile_write_trace", path);
    if (st != FC_OK) return st;
    FILE *f = fopen(path, "w");
    if (!f)
        return fc__fail(ctx, FC_ERR_IO, "fc_profile_write_trace: cannot open %s: %s", path,
                        strerror(errno));
    const fc__profile *p = ctx->profile;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    for (int64_t i = 0; i < p->len; i++) {
        const fc_profile_event *e = &p->events[i];
        fprintf(f, "%s\n{\"name\":\"", i ? "," : "");
        json_str(f, e->name);
        fprintf(f,
                "\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%" PRId64 ".%03d,\"dur\":%" PRId64
                ".%03d,\"pid\":1,\"tid\":1,\"args\":{\"flops\":%" PRId64 ",\"bytes\":%" PRId64
                "}}",
                phase_name(e->phase), e->start_ns / 1000, (int)(e->start_ns % 1000),
                e->dur_ns / 1000, (int)(e->dur_ns % 1000), e->flops, e->bytes);
    }
    fprintf(f, "\n]}\n");
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    if (bad) return fc__fail(ctx, FC_ERR_IO, "fc_profile_write_trace: cannot write %s", path);
    return FC_OK;
}

typedef struct row {
    const char *name;
    int64_t calls, fwd_ns, bwd_ns, flops, flops_ns;
} row;

static int row_cmp(const void *a, const void *b) {
    const row *x = a, *y = b;
    int64_t tx = x->fwd_ns + x->bwd_ns, ty = y->fwd_ns + y->bwd_ns;
    if (tx != ty) return tx > ty ? -1 : 1;
    return strcmp(x->name, y->name);
}

fc_status fc_profile_write_table(fc_ctx *ctx, FILE *out) {
    if (!ctx) return FC_ERR_NULL_ARG;
    fc_status st = writer_check(ctx, "fc_profile_write_table", out);
    if (st != FC_OK) return st;
    const fc__profile *p = ctx->profile;
    size_t bytes = (size_t)(p->len ? p->len : 1) * sizeof(row);
    row *rows = fc__ctx_alloc(ctx, bytes);
    if (!rows)
        return fc__fail(ctx, FC_ERR_OOM, "fc_profile_write_table: cannot allocate %zu bytes",
                        bytes);
    /* a linear search per event: a model has tens of op names, not thousands */
    int64_t n = 0, total = 0;
    for (int64_t i = 0; i < p->len; i++) {
        const fc_profile_event *e = &p->events[i];
        int64_t r = 0;
        while (r < n && strcmp(rows[r].name, e->name) != 0) r++;
        if (r == n) rows[n++] = (row){.name = e->name};
        rows[r].calls++;
        *(e->phase == FC_PROFILE_BACKWARD ? &rows[r].bwd_ns : &rows[r].fwd_ns) += e->dur_ns;
        if (e->flops > 0) {
            rows[r].flops += e->flops;
            rows[r].flops_ns += e->dur_ns;
        }
        total += e->dur_ns;
    }
    qsort(rows, (size_t)n, sizeof *rows, row_cmp);
    fprintf(out, "%-28s %8s %11s %11s %7s %11s %11s %9s\n", "op", "calls", "total ms", "mean us",
            "share %", "forward ms", "backward ms", "GFLOP/s");
    for (int64_t r = 0; r < n; r++) {
        const row *w = &rows[r];
        int64_t t = w->fwd_ns + w->bwd_ns;
        fprintf(out, "%-28s %8" PRId64 " %11.3f %11.2f %7.1f %11.3f %11.3f ", w->name, w->calls,
                (double)t / 1e6, (double)t / 1e3 / (double)w->calls,
                total > 0 ? 100.0 * (double)t / (double)total : 0.0, (double)w->fwd_ns / 1e6,
                (double)w->bwd_ns / 1e6);
        if (w->flops > 0 && w->flops_ns > 0)
            fprintf(out, "%9.2f\n", (double)w->flops / (double)w->flops_ns);
        else
            fprintf(out, "%9s\n", "-");
    }
    fprintf(out, "%" PRId64 " events, %.3f ms in all", p->len, (double)total / 1e6);
    if (p->dropped) fprintf(out, ", %" PRId64 " dropped (raise max_events)", p->dropped);
    fprintf(out, "\n");
    fc__ctx_free(ctx, rows, bytes);
    return ferror(out) ? fc__fail(ctx, FC_ERR_IO, "fc_profile_write_table: write failed") : FC_OK;
}
