/* SPDX-License-Identifier: MIT */
/* test_oom_io.c - out-of-memory sweep over the model-file readers and
 * writers and the checkpoints (see oom_sweep.h for what is checked at every
 * N). The byte-level calls take an fc_io_opts whose allocator is the
 * sweep's failing one (oom_sweep_allocator), the tensor-level calls use the
 * context's, so both paths are failed at every allocation.
 *
 * Files: the reference files of tests/data/io are read in every mode (mmap,
 * read into memory, caller memory; zero-copy and copied loads); the writers
 * write into a scratch directory, and after every run the directory must
 * hold only the files a successful write leaves: an atomic writer that
 * fails must remove its temporary. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "counting_alloc.h"
#include "oom_sweep.h"

#define ST_REF FUCINA_TEST_DATA_DIR "/io/st_reference.safetensors"
#define GGUF_REF FUCINA_TEST_DATA_DIR "/io/gguf_reference_v3.gguf"

static char scratch[256]; /* made by main, removed at the end */
static void *st_bytes, *gguf_bytes;
static size_t st_size, gguf_size;

static fc_status done(fc_ctx *ctx) { return fc_ctx_status(ctx); }

static fc_io_opts io_opts(unsigned flags) {
    return (fc_io_opts){.allocator = oom_sweep_allocator(), .flags = flags};
}

/* Records a byte-level status in the context (so the harness sees it). */
static fc_status note(fc_ctx *ctx, fc_status st, const char *what) {
    if (st != FC_OK) fc_ctx_fail(ctx, st, "%s failed", what);
    return st;
}

/* Every entry of the scratch directory is a file some scenario writes (a
 * temporary left behind would be anything else). */
static fc_status scratch_clean(fc_ctx *ctx) {
    static const char *const allowed[] = {"w.safetensors", "w.gguf", "ck.safetensors"};
    const int n = (int)(sizeof allowed / sizeof allowed[0]);
    DIR *d = opendir(scratch);
    if (!d) return fc_ctx_fail(ctx, FC_ERR_IO, "cannot list %s", scratch);
    fc_status st = FC_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && st == FC_OK) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        bool ok = false;
        for (int i = 0; i < n; i++)
            ok = ok || !strcmp(e->d_name, allowed[i]);
        if (!ok)
            st = fc_ctx_fail(ctx, FC_ERR_STATE, "stray file '%s' left in %s", e->d_name, scratch);
    }
    closedir(d);
    return st;
}

static void path_of(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", scratch, name);
}

/* ---- safetensors ---------------------------------------------------------------------- */

/* Loads every loadable tensor of f (zero-copy or copied) and reads it back. */
static fc_status st_load_all(fc_ctx *ctx, const fc_st_file *f, unsigned flags) {
    fc_scope_begin(ctx);
    for (int64_t i = 0; i < fc_safetensors_tensor_count(f); i++) {
        fc_io_tensor info;
        if (note(ctx, fc_safetensors_tensor_info(f, i, &info), "tensor_info") != FC_OK) break;
        bool empty = false;
        for (int k = 0; k < info.rank; k++)
            empty = empty || info.shape[k] == 0;
        if (empty) continue; /* descriptor only */
        fc_tensor *t = fc_safetensors_load(ctx, f, info.name, flags);
        /* a cast through the tensor API, so the bytes are read (f64 is
         * skipped: fc_to would return t itself, retained, outside the scope) */
        fc_dtype dt = fc_tensor_dtype(t);
        if (t && fc_dtype_is_float(dt) && dt != FC_F64) fc_to(ctx, t, FC_F64);
    }
    fc_scope_end(ctx);
    return done(ctx);
}

static fc_status sc_safetensors_read(fc_ctx *ctx) {
    const unsigned modes[2] = {0, FC_IO_NO_MMAP};
    for (int m = 0; m < 2 && done(ctx) == FC_OK; m++) {
        fc_io_opts o = io_opts(modes[m]);
        fc_st_file *f = NULL;
        if (note(ctx, fc_safetensors_open(ST_REF, &o, &f), "safetensors_open") != FC_OK) break;
        for (int64_t i = 0; i < fc_safetensors_meta_count(f); i++) {
            const char *k, *v;
            note(ctx, fc_safetensors_meta_at(f, i, &k, &v), "meta_at");
        }
        st_load_all(ctx, f, 0);
        st_load_all(ctx, f, FC_IO_COPY);
        fc_safetensors_close(f);
    }
    fc_io_opts o = io_opts(0);
    fc_st_file *f = NULL;
    if (done(ctx) == FC_OK &&
        note(ctx, fc_safetensors_open_memory(st_bytes, st_size, &o, &f), "open_memory") == FC_OK) {
        st_load_all(ctx, f, 0);
        fc_safetensors_close(f);
    }
    return done(ctx);
}

static fc_status sc_safetensors_write(fc_ctx *ctx) {
    char path[512];
    path_of(path, sizeof path, "w.safetensors");
    fc_scope_begin(ctx);
    /* byte-level writer */
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t h[3] = {0x3C00, 0x4000, 0x4200};
    fc_io_tensor ts[2] = {
        {.name = "a", .dtype = FC_F32, .rank = 2, .shape = {2, 3}, .data = a, .nbytes = 24},
        {.name = "h", .dtype = FC_F16, .rank = 1, .shape = {3}, .data = h, .nbytes = 6},
    };
    const char *mk[2] = {"format", "note"}, *mv[2] = {"pt", "h\xc3\xa9"};
    fc_io_opts o = io_opts(0);
    fc_status st = note(ctx, fc_safetensors_write(path, ts, 2, mk, mv, 2, &o), "safetensors_write");
    /* tensor-level save of any layout (a transposed view is copied first) */
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){3, 4}, 2);
    fc_tensor *xs[3] = {x, fc_transpose(ctx, x, 0, 1), fc_arange(ctx, FC_I64, 0, 5, 1)};
    const char *names[3] = {"x", "xt", "r"};
    if (st == FC_OK && done(ctx) == FC_OK)
        st = fc_safetensors_save(ctx, path, names, xs, 3, mk, mv, 1);
    fc_scope_end(ctx);
    fc_status clean = scratch_clean(ctx);
    return st != FC_OK ? st : clean != FC_OK ? clean : done(ctx);
}

/* ---- GGUF ---------------------------------------------------------------------------------- */

static void gguf_walk(const fc_gguf_value *v, int depth) {
    fc_gguf_type et;
    uint64_t n;
    if (depth > 8 || fc_gguf_value_type(v) != FC_GGUF_ARRAY) return;
    if (fc_gguf_array_info(v, &et, &n) != FC_OK) return;
    if (et == FC_GGUF_ARRAY || et == FC_GGUF_STRING)
        for (uint64_t i = 0; i < n; i++)
            gguf_walk(fc_gguf_array_item(v, i), depth + 1);
}

static fc_status gguf_load_all(fc_ctx *ctx, const fc_gguf_file *f, unsigned flags) {
    fc_scope_begin(ctx);
    for (int64_t i = 0; i < fc_gguf_tensor_count(f); i++) {
        fc_io_tensor info;
        if (note(ctx, fc_gguf_tensor_info(f, i, &info), "gguf_tensor_info") != FC_OK) break;
        fc_tensor *t = fc_gguf_load(ctx, f, info.name, flags);
        /* block tensors dequantize to f32 through fc_to; float ones cast */
        fc_dtype dt = fc_tensor_dtype(t);
        if (t && fc_dtype_is_block(dt))
            fc_to(ctx, t, FC_F32);
        else if (t && fc_dtype_is_float(dt) && dt != FC_F64)
            fc_to(ctx, t, FC_F64);
    }
    fc_scope_end(ctx);
    return done(ctx);
}

static fc_status sc_gguf_read(fc_ctx *ctx) {
    const unsigned modes[2] = {0, FC_IO_NO_MMAP};
    for (int m = 0; m < 2 && done(ctx) == FC_OK; m++) {
        fc_io_opts o = io_opts(modes[m]);
        fc_gguf_file *f = NULL;
        if (note(ctx, fc_gguf_open(GGUF_REF, &o, &f), "gguf_open") != FC_OK) break;
        for (int64_t i = 0; i < fc_gguf_kv_count(f); i++)
            gguf_walk(fc_gguf_kv_value(f, i), 0);
        gguf_load_all(ctx, f, 0);
        gguf_load_all(ctx, f, FC_IO_COPY);
        fc_gguf_close(f);
    }
    fc_io_opts o = io_opts(0);
    fc_gguf_file *f = NULL;
    if (done(ctx) == FC_OK && note(ctx, fc_gguf_open_memory(gguf_bytes, gguf_size, &o, &f),
                                   "gguf_open_memory") == FC_OK) {
        gguf_load_all(ctx, f, 0);
        fc_gguf_close(f);
    }
    return done(ctx);
}

static fc_status sc_gguf_write(fc_ctx *ctx) {
    char path[512];
    path_of(path, sizeof path, "w.gguf");
    const uint32_t al = 64;
    const char *strs[2] = {"x", "yz"};
    const int32_t ints[3] = {1, -2, 3};
    const fc_gguf_kv nested[2] = {
        {NULL, FC_GGUF_ARRAY, FC_GGUF_I32, 3, ints},
        {NULL, FC_GGUF_ARRAY, FC_GGUF_STRING, 2, strs},
    };
    const fc_gguf_kv kvs[4] = {
        {"general.architecture", FC_GGUF_STRING, 0, 0, "fucina-oom"},
        {"general.alignment", FC_GGUF_U32, 0, 0, &al},
        {"t.strs", FC_GGUF_ARRAY, FC_GGUF_STRING, 2, strs},
        {"t.nested", FC_GGUF_ARRAY, FC_GGUF_ARRAY, 2, nested},
    };
    float a[32];
    for (int i = 0; i < 32; i++)
        a[i] = (float)i - 16;
    fc_io_tensor ts[1] = {
        {.name = "a", .dtype = FC_F32, .rank = 2, .shape = {4, 8}, .data = a, .nbytes = 128}};
    fc_io_opts o = io_opts(0);
    fc_status st = note(ctx, fc_gguf_write(path, kvs, 4, ts, 1, &o), "gguf_write");
    fc_scope_begin(ctx);
    fc_tensor *x = fc_randn(ctx, FC_F32, (const int64_t[]){2, 64}, 2);
    fc_tensor *xs[2] = {fc_to(ctx, x, FC_Q8_0), fc_transpose(ctx, x, 0, 1)};
    const char *names[2] = {"q", "xt"};
    if (st == FC_OK && done(ctx) == FC_OK) st = fc_gguf_save(ctx, path, kvs, 2, names, xs, 2);
    fc_scope_end(ctx);
    fc_status clean = scratch_clean(ctx);
    return st != FC_OK ? st : clean != FC_OK ? clean : done(ctx);
}

/* ---- checkpoints ------------------------------------------------------------------------------
 */

static fc_status sc_checkpoint(fc_ctx *ctx) {
    char path[512];
    path_of(path, sizeof path, "ck.safetensors");
    fc_tensor *p[2] = {fc_param_randn(ctx, FC_F32, (const int64_t[]){3, 4}, 2, 1.0),
                       fc_param_randn(ctx, FC_BF16, (const int64_t[]){5}, 1, 1.0)};
    const char *names[2] = {"w", "b"};
    fc_status st = done(ctx);
    fc_optim *opt = NULL;
    if (st == FC_OK)
        opt = fc_optim_new(
            ctx, &(fc_optim_opts){.kind = FC_OPTIM_ADAMW, .lr = 0.01, .amsgrad = true}, p, 2);
    if (opt) { /* one step so the optimizer has state to save */
        fc_scope_begin(ctx);
        for (int k = 0; k < 2 && st == FC_OK; k++) {
            fc_tensor *g = fc_ones(ctx, FC_F32, fc_tensor_shape(p[k]), fc_tensor_rank(p[k]));
            st = g ? fc_backward_with(ctx, p[k], g, false) : done(ctx);
        }
        if (st == FC_OK) st = fc_optim_step(opt);
        fc_scope_end(ctx);
    }
    const char *mk[1] = {"epoch"}, *mv[1] = {"3"};
    if (st == FC_OK && opt) st = fc_checkpoint_save(ctx, path, names, p, 2, opt, mk, mv, 1);
    if (st == FC_OK) st = fc_checkpoint_load(ctx, path, names, p, 2, opt);
    fc_optim_free(opt);
    fc_release(p[0]);
    fc_release(p[1]);
    fc_status clean = scratch_clean(ctx);
    if (st == FC_OK) st = clean;
    return st != FC_OK ? st : done(ctx);
}

/* ---- driver -----------------------------------------------------------------------------------
 */

static const oom_scenario scenarios[] = {
    {"safetensors read", sc_safetensors_read},
    {"safetensors write", sc_safetensors_write},
    {"gguf read", sc_gguf_read},
    {"gguf write", sc_gguf_write},
    {"checkpoint save/load", sc_checkpoint},
};

static void test_oom_io_scenarios(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        oom_result r = oom_sweep(&scenarios[i]);
        printf("oom sweep: %-24s completed at N=%ld after %ld faulted runs\n", scenarios[i].name,
               r.largest_n, r.failures);
        assert_true(r.largest_n > 0);
    }
}

static void *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = n > 0 ? malloc((size_t)n) : NULL;
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *size = p ? (size_t)n : 0;
    return p;
}

static void remove_scratch(void) {
    DIR *d = opendir(scratch);
    if (!d) return;
    struct dirent *e;
    char p[600];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", scratch, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(scratch);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/fucina-oom-io-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(scratch)) {
        perror("mkdtemp");
        return 1;
    }
    st_bytes = slurp(ST_REF, &st_size);
    gguf_bytes = slurp(GGUF_REF, &gguf_size);
    if (!st_bytes || !gguf_bytes) {
        fprintf(stderr, "cannot read the reference files under %s\n", FUCINA_TEST_DATA_DIR);
        return 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_oom_io_scenarios)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(st_bytes);
    free(gguf_bytes);
    remove_scratch();
    return rc;
}
