/* SPDX-License-Identifier: MIT */
/* test_atomic_write.c - no data lost on save.
 *
 * Each writer is run with a fault plan that makes write() fail after N
 * bytes, for every N up to the file's size, and with a failure at each
 * later step (fsync, close, rename, directory fsync). After every failure
 * the status is FC_ERR_IO with the path and the system's reason, no
 * temporary file is left, and the previous file still loads and is
 * byte-identical to what was there before. */
#include "io_testutil.h"

#include <errno.h>

#include "io/io.h"

typedef enum { W_SAFETENSORS, W_GGUF } which_writer;

static float OLD_DATA[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static float NEW_DATA[64];

/* Writes `data` (n floats) with the chosen writer under a fault plan. */
static fc_status write_with(which_writer w, const char *path, const float *data, int n,
                            const fc_io_fault *fault, fc_io_opts *o) {
    fc_io_tensor t = {.name = "w",
                      .dtype = FC_F32,
                      .rank = 1,
                      .shape = {n},
                      .data = data,
                      .nbytes = (uint64_t)n * 4};
    if (w == W_SAFETENSORS) {
        const char *k[1] = {"kind"}, *v[1] = {"test"};
        return fc__safetensors_write_faulty(path, &t, 1, k, v, 1, o, fault);
    }
    const char *arch = "test";
    fc_gguf_kv kv = {"general.architecture", FC_GGUF_STRING, 0, 0, arch};
    return fc__gguf_write_faulty(path, &kv, 1, &t, 1, o, fault);
}

/* The file at path loads with the right reader and holds exactly `data`. */
static void assert_loads(which_writer w, const char *path, const float *data, int n) {
    fc_io_tensor t;
    if (w == W_SAFETENSORS) {
        fc_st_file *f;
        assert_int_equal(fc_safetensors_open(path, NULL, &f), FC_OK);
        assert_int_equal(fc_safetensors_tensor_info(f, 0, &t), FC_OK);
        assert_int_equal(t.nbytes, (uint64_t)n * 4);
        assert_memory_equal(t.data, data, (size_t)n * 4);
        fc_safetensors_close(f);
    } else {
        fc_gguf_file *f;
        assert_int_equal(fc_gguf_open(path, NULL, &f), FC_OK);
        assert_int_equal(fc_gguf_tensor_info(f, 0, &t), FC_OK);
        assert_int_equal(t.nbytes, (uint64_t)n * 4);
        assert_memory_equal(t.data, data, (size_t)n * 4);
        fc_gguf_close(f);
    }
}

static void run_fault_sweep(which_writer w, const char *tag) {
    char dir[512], path[600];
    io_scratch_dir(dir, sizeof dir, tag);
    io_path(path, sizeof path, dir, "model.bin");
    assert_int_equal(write_with(w, path, OLD_DATA, 8, NULL, NULL), FC_OK);
    size_t old_size;
    uint8_t *old_bytes = io_read_file(path, &old_size);
    assert_non_null(old_bytes);
    /* How long the new file is: write it once elsewhere. */
    char probe[600];
    io_path(probe, sizeof probe, dir, "probe.bin");
    assert_int_equal(write_with(w, probe, NEW_DATA, 64, NULL, NULL), FC_OK);
    size_t new_size;
    uint8_t *new_bytes = io_read_file(probe, &new_size);
    unlink(probe);
    assert_true(new_size > old_size);

    for (uint64_t n = 0; n < new_size; n++) {
        io_count c;
        io_count_init(&c);
        char err[512] = "";
        fc_io_opts o = {.allocator = &c.a, .errbuf = err, .errcap = sizeof err};
        fc_io_fault fault = {.step = FC_IO_FAULT_WRITE, .after_bytes = n, .errnum = ENOSPC};
        assert_int_equal(write_with(w, path, NEW_DATA, 64, &fault, &o), FC_ERR_IO);
        assert_non_null(strstr(err, dir));
        assert_non_null(strstr(err, strerror(ENOSPC)));
        io_count_assert_clean(&c);
        assert_int_equal(io_count_temps(dir), 0);
        size_t now_size;
        uint8_t *now = io_read_file(path, &now_size);
        assert_int_equal(now_size, old_size);
        assert_memory_equal(now, old_bytes, old_size);
        free(now);
        if (n % 97 == 0) assert_loads(w, path, OLD_DATA, 8);
    }
    static const fc_io_fault_step steps[] = {FC_IO_FAULT_OPEN, FC_IO_FAULT_FSYNC, FC_IO_FAULT_CLOSE,
                                             FC_IO_FAULT_RENAME};
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
        char err[512] = "";
        fc_io_opts o = {.errbuf = err, .errcap = sizeof err};
        fc_io_fault fault = {.step = steps[s], .errnum = EIO};
        assert_int_equal(write_with(w, path, NEW_DATA, 64, &fault, &o), FC_ERR_IO);
        assert_non_null(strstr(err, strerror(EIO)));
        assert_int_equal(io_count_temps(dir), 0);
        assert_loads(w, path, OLD_DATA, 8);
    }
    /* A failed directory fsync comes after the rename: the new file is in
     * place and complete, and the error says so. */
    char err[512] = "";
    fc_io_opts o = {.errbuf = err, .errcap = sizeof err};
    fc_io_fault fault = {.step = FC_IO_FAULT_DIRSYNC, .errnum = EIO};
    assert_int_equal(write_with(w, path, NEW_DATA, 64, &fault, &o), FC_ERR_IO);
    assert_non_null(strstr(err, "the new file is in place"));
    assert_int_equal(io_count_temps(dir), 0);
    assert_loads(w, path, NEW_DATA, 64);
    size_t final_size;
    uint8_t *final_bytes = io_read_file(path, &final_size);
    assert_int_equal(final_size, new_size);
    assert_memory_equal(final_bytes, new_bytes, new_size);
    free(final_bytes);
    free(old_bytes);
    free(new_bytes);
    io_rm_rf(dir);
}

static void test_atomic_write_safetensors_survives_every_failure(void **state) {
    (void)state;
    run_fault_sweep(W_SAFETENSORS, "aw-st");
}

static void test_atomic_write_gguf_survives_every_failure(void **state) {
    (void)state;
    run_fault_sweep(W_GGUF, "aw-gguf");
}

/* Large payloads go around the 64 KiB buffer; a fault in the middle of one
 * still leaves nothing behind, and a clean run is byte-exact. */
static void test_atomic_write_large_and_chunked(void **state) {
    (void)state;
    char dir[512], path[600];
    io_scratch_dir(dir, sizeof dir, "aw-big");
    io_path(path, sizeof path, dir, "big.bin");
    size_t total = 300000;
    uint8_t *src = malloc(total);
    for (size_t i = 0; i < total; i++)
        src[i] = (uint8_t)(i * 2654435761u >> 13);
    static const size_t chunks[] = {1, 7, 65536, 3, 100000, 65535, 2};
    for (int pass = 0; pass < 2; pass++) {
        io_count c;
        io_count_init(&c);
        fc_io_opts o = {.allocator = &c.a};
        fc_io_fault fault = {.step = FC_IO_FAULT_WRITE, .after_bytes = 150001};
        fc_io_out w;
        assert_int_equal(fc__io_out_open(&w, "test", path, &o, pass ? NULL : &fault), FC_OK);
        size_t off = 0;
        for (size_t k = 0; off < total; k++) {
            size_t n = chunks[k % 7];
            if (n > total - off) n = total - off;
            fc__io_out_write(&w, src + off, n);
            off += n;
        }
        fc_status st = fc__io_out_commit(&w);
        io_count_assert_clean(&c);
        assert_int_equal(io_count_temps(dir), 0);
        if (pass == 0) {
            assert_int_equal(st, FC_ERR_IO);
            assert_int_equal(access(path, F_OK), -1);
        } else {
            assert_int_equal(st, FC_OK);
            size_t got_size;
            uint8_t *got = io_read_file(path, &got_size);
            assert_int_equal(got_size, total);
            assert_memory_equal(got, src, total);
            free(got);
        }
    }
    /* Abandoning a writer removes its temporary. */
    fc_io_out w;
    assert_int_equal(fc__io_out_open(&w, "test", path, NULL, NULL), FC_OK);
    fc__io_out_fill(&w, 'x', 1000);
    fc__io_out_abort(&w);
    assert_int_equal(io_count_temps(dir), 0);
    free(src);
    io_rm_rf(dir);
}

static void test_atomic_write_reports_system_errors(void **state) {
    (void)state;
    char dir[512], path[600], err[512] = "";
    fc_io_opts o = {.errbuf = err, .errcap = sizeof err};
    io_scratch_dir(dir, sizeof dir, "aw-err");
    /* The target is a directory: the rename fails, the temporary goes. */
    io_path(path, sizeof path, dir, "adir");
    assert_int_equal(mkdir(path, 0777), 0);
    assert_int_equal(write_with(W_SAFETENSORS, path, OLD_DATA, 8, NULL, &o), FC_ERR_IO);
    assert_non_null(strstr(err, "rename"));
    assert_non_null(strstr(err, path));
    assert_int_equal(io_count_temps(dir), 0);
    /* A missing directory: creating the temporary fails. */
    snprintf(path, sizeof path, "%s/missing/x.bin", dir);
    assert_int_equal(write_with(W_GGUF, path, OLD_DATA, 8, NULL, &o), FC_ERR_IO);
    assert_non_null(strstr(err, strerror(ENOENT)));
    /* A relative path writes in the current directory. */
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(write_with(W_SAFETENSORS, "rel.safetensors", OLD_DATA, 8, NULL, NULL), FC_OK);
    assert_loads(W_SAFETENSORS, "rel.safetensors", OLD_DATA, 8);
    /* New files get 0666 filtered by the umask, like any new file. */
    mode_t mask = umask(022);
    umask(mask);
    struct stat sb;
    assert_int_equal(stat("rel.safetensors", &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0666 & ~mask);
    assert_int_equal(chdir(cwd), 0);
    io_rm_rf(dir);
}

int main(void) {
    for (int i = 0; i < 64; i++)
        NEW_DATA[i] = (float)i * -0.25f;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_write_safetensors_survives_every_failure),
        cmocka_unit_test(test_atomic_write_gguf_survives_every_failure),
        cmocka_unit_test(test_atomic_write_large_and_chunked),
        cmocka_unit_test(test_atomic_write_reports_system_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
