/* SPDX-License-Identifier: MIT */
/* test_io_truncated.c - model files that shrink while open.
 *
 * A file is opened (mapped, the default), then another program truncates
 * it in place (ftruncate here), then tensors are loaded. Before pread, the
 * copying load (FC_IO_COPY) read the lost pages through the mapping and
 * the process died of SIGBUS; now it is FC_ERR_IO naming the tensor. An
 * aliasing load checks the file still covers the tensor (FC_ERR_IO when it
 * does not). A file opened with FC_IO_NO_MMAP (the copy-on-open mode) does
 * not depend on the file after open at all: its tensors load and read
 * back intact, aliasing or copied.
 *
 * Each case runs in a child process, so the failure before the fix (a
 * signal) is reported as such instead of taking the test program down. */
#include "io_testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "fucina.h"

#define N_ELEMS 8192 /* 32 KiB per tensor: many pages past the header's */

typedef enum fmt { FMT_ST, FMT_GGUF } fmt;

typedef struct tfile {
    fmt kind;
    fc_st_file *st;
    fc_gguf_file *gg;
} tfile;

static char g_dir[512];

/* Writes a file with tensors "a" (values i) and "b" (values -i), both f32
 * [N_ELEMS], and returns its path in out. */
static void write_file(fmt kind, char *out, size_t cap) {
    static float a[N_ELEMS], b[N_ELEMS];
    for (int i = 0; i < N_ELEMS; i++)
        a[i] = (float)i, b[i] = -(float)i;
    fc_io_tensor t[2] = {
        {.name = "a",
         .dtype = FC_F32,
         .rank = 1,
         .shape = {N_ELEMS},
         .data = a,
         .nbytes = sizeof a},
        {.name = "b",
         .dtype = FC_F32,
         .rank = 1,
         .shape = {N_ELEMS},
         .data = b,
         .nbytes = sizeof b},
    };
    io_path(out, cap, g_dir, kind == FMT_ST ? "t.safetensors" : "t.gguf");
    fc_status st = kind == FMT_ST ? fc_safetensors_write(out, t, 2, NULL, NULL, 0, NULL)
                                  : fc_gguf_write(out, NULL, 0, t, 2, NULL);
    assert_int_equal(st, FC_OK);
}

static fc_status open_file(fmt kind, const char *path, unsigned flags, tfile *f) {
    fc_io_opts o = {.flags = flags};
    *f = (tfile){.kind = kind};
    return kind == FMT_ST ? fc_safetensors_open(path, &o, &f->st) : fc_gguf_open(path, &o, &f->gg);
}
static fc_tensor *load(fc_ctx *c, const tfile *f, const char *name, unsigned flags) {
    return f->kind == FMT_ST ? fc_safetensors_load(c, f->st, name, flags)
                             : fc_gguf_load(c, f->gg, name, flags);
}
static uint64_t offset_of(const tfile *f, const char *name) {
    fc_io_tensor info;
    if (f->kind == FMT_ST)
        fc_safetensors_tensor_info(f->st, fc_safetensors_find(f->st, name), &info);
    else
        fc_gguf_tensor_info(f->gg, fc_gguf_find(f->gg, name), &info);
    return info.offset;
}
static void close_file(tfile *f) {
    fc_safetensors_close(f->st);
    fc_gguf_close(f->gg);
}

/* t holds sign * i at i. */
static bool values_ok(fc_tensor *t, float sign) {
    if (!t || fc_tensor_numel(t) != N_ELEMS) return false;
    const float *p = fc_tensor_data(t);
    for (int i = 0; i < N_ELEMS; i++)
        if (p[i] != sign * (float)i) return false;
    return true;
}

static void truncate_to(const char *path, uint64_t size) {
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    close(fd);
}

/* Runs body(kind) in a child; it exits 0 when every check held, else 1
 * after printing the failed check. */
typedef int (*child_fn)(fmt kind);
static void in_child(child_fn body, fmt kind) {
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(body(kind));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("%s: killed by signal %d (%s)", kind == FMT_ST ? "safetensors" : "gguf",
                 WTERMSIG(status), WTERMSIG(status) == SIGBUS ? "SIGBUS: read a lost page" : "?");
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0)
        fail_msg("%s: a check failed (see above)", kind == FMT_ST ? "safetensors" : "gguf");
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "line %d: failed: %s (%s)\n", __LINE__, #cond, fc_ctx_error(c));       \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* Open mapped, truncate to the start of the tensor stored second: the
 * first still loads (both ways), the second is FC_ERR_IO for the copying
 * and the aliasing load; then truncate to 0: the first is FC_ERR_IO too. */
static int child_mapped(fmt kind) {
    char path[600];
    write_file(kind, path, sizeof path);
    tfile f;
    if (open_file(kind, path, 0, &f) != FC_OK) return 2;
    fc_ctx *c = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    const char *op = kind == FMT_ST ? "fc_safetensors_load" : "fc_gguf_load";
    bool a_first = offset_of(&f, "a") < offset_of(&f, "b");
    const char *first = a_first ? "a" : "b", *second = a_first ? "b" : "a";
    float sign = a_first ? 1 : -1;
    char named[16];
    snprintf(named, sizeof named, "tensor '%s'", second);
    truncate_to(path, offset_of(&f, second));
    fc_tensor *t = load(c, &f, first, FC_IO_COPY);
    CHECK(values_ok(t, sign));
    fc_tensor *t_alias = load(c, &f, first, 0);
    CHECK(values_ok(t_alias, sign));
    CHECK(load(c, &f, second, FC_IO_COPY) == NULL);
    CHECK(fc_ctx_status(c) == FC_ERR_IO);
    CHECK(strstr(fc_ctx_error(c), op) && strstr(fc_ctx_error(c), named) &&
          strstr(fc_ctx_error(c), "shrank"));
    fc_ctx_clear_error(c);
    CHECK(load(c, &f, second, 0) == NULL);
    CHECK(fc_ctx_status(c) == FC_ERR_IO);
    CHECK(strstr(fc_ctx_error(c), named) && strstr(fc_ctx_error(c), "shrank"));
    fc_ctx_clear_error(c);
    fc_release(t_alias); /* read only while the file still covered it */
    truncate_to(path, 0);
    CHECK(load(c, &f, first, FC_IO_COPY) == NULL);
    CHECK(fc_ctx_status(c) == FC_ERR_IO);
    fc_ctx_clear_error(c);
    CHECK(load(c, &f, first, 0) == NULL);
    CHECK(fc_ctx_status(c) == FC_ERR_IO);
    fc_ctx_clear_error(c);
    /* the copy is independent of the file, and nothing was left behind */
    CHECK(values_ok(t, sign));
    fc_ctx_stats s;
    fc_ctx_get_stats(c, &s);
    CHECK(s.tensors_live == 1);
    fc_release(t);
    close_file(&f);
    fc_ctx_free(c);
    return 0;
}

/* FC_IO_NO_MMAP: after open nothing depends on the file; truncating it
 * to 0 changes no loaded byte, aliasing or copied. */
static int child_no_mmap(fmt kind) {
    char path[600];
    write_file(kind, path, sizeof path);
    tfile f;
    if (open_file(kind, path, FC_IO_NO_MMAP, &f) != FC_OK) return 2;
    fc_ctx *c = fc_ctx_new(&(fc_ctx_opts){.threads = 1});
    truncate_to(path, 0);
    fc_tensor *b = load(c, &f, "b", 0), *bc = load(c, &f, "b", FC_IO_COPY);
    CHECK(values_ok(b, -1));
    CHECK(values_ok(bc, -1));
    close_file(&f);
    CHECK(values_ok(b, -1)); /* outlives the handle */
    fc_release(b);
    fc_release(bc);
    fc_ctx_free(c);
    return 0;
}

static void test_io_truncated_mapped_safetensors(void **state) {
    (void)state;
    in_child(child_mapped, FMT_ST);
}
static void test_io_truncated_mapped_gguf(void **state) {
    (void)state;
    in_child(child_mapped, FMT_GGUF);
}
static void test_io_truncated_no_mmap_safetensors(void **state) {
    (void)state;
    in_child(child_no_mmap, FMT_ST);
}
static void test_io_truncated_no_mmap_gguf(void **state) {
    (void)state;
    in_child(child_no_mmap, FMT_GGUF);
}

static int group_setup(void **state) {
    (void)state;
    io_scratch_dir(g_dir, sizeof g_dir, "truncated");
    return 0;
}
static int group_teardown(void **state) {
    (void)state;
    io_rm_rf(g_dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_truncated_mapped_safetensors),
        cmocka_unit_test(test_io_truncated_mapped_gguf),
        cmocka_unit_test(test_io_truncated_no_mmap_safetensors),
        cmocka_unit_test(test_io_truncated_no_mmap_gguf),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
