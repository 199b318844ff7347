/* SPDX-License-Identifier: MIT */
/* io_testutil.h - helpers for the io tests: a counting allocator that can
 * fail the Nth allocation (SQLite's out-of-memory sweep), scratch
 * directories, and whole-file reads. Header-only and static so each test
 * binary gets its own copy. */
#ifndef FUCINA_TESTS_IO_TESTUTIL_H
#define FUCINA_TESTS_IO_TESTUTIL_H

/* popen, mkdir, umask: POSIX. Include this header first. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif

#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "fucina/io.h"

/* ---- counting allocator ------------------------------------------------------ */

typedef struct io_count {
    fc_allocator a;
    long live, allocs, bad_size;
    long fail_after; /* -1: never; N: the (N+1)th allocation and later fail */
    size_t live_bytes;
} io_count;

typedef struct io_hdr {
    size_t size;
    void *base;
} io_hdr;

static inline void *io_count_alloc(void *user, size_t size, size_t align) {
    io_count *c = user;
    if (c->fail_after >= 0 && c->allocs >= c->fail_after) return NULL;
    if (align < 16) align = 16;
    char *base = malloc(size + align + sizeof(io_hdr));
    if (!base) return NULL;
    uintptr_t p = ((uintptr_t)base + sizeof(io_hdr) + align - 1) & ~(uintptr_t)(align - 1);
    io_hdr h = {size, base};
    memcpy((char *)p - sizeof h, &h, sizeof h);
    c->allocs++;
    c->live++;
    c->live_bytes += size;
    return (void *)p;
}

static inline void io_count_free(void *user, void *ptr, size_t size) {
    io_count *c = user;
    io_hdr h;
    memcpy(&h, (char *)ptr - sizeof h, sizeof h);
    if (h.size != size) c->bad_size++;
    c->live--;
    c->live_bytes -= h.size;
    free(h.base);
}

static inline void io_count_init(io_count *c) {
    memset(c, 0, sizeof *c);
    c->a.alloc = io_count_alloc;
    c->a.free = io_count_free;
    c->a.user = c;
    c->fail_after = -1;
}

/* Every allocation freed, every free with the size asked for. */
static inline void io_count_assert_clean(const io_count *c) {
    assert_int_equal(c->live, 0);
    assert_int_equal(c->bad_size, 0);
    assert_int_equal((long)c->live_bytes, 0);
}

/* ---- files ---------------------------------------------------------------------- */

/* A fresh scratch directory under the build tree (or /tmp). */
static inline void io_scratch_dir(char *out, size_t cap, const char *tag) {
    snprintf(out, cap, "%s/io-scratch-%s-%ld", FUCINA_BINARY_DIR, tag, (long)getpid());
    mkdir(out, 0777);
}

static inline void io_path(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Whole file into malloc'ed memory (NULL when it cannot be read). */
static inline uint8_t *io_read_file(const char *path, size_t *size) {
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static inline void io_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (size) assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

/* Number of entries in dir whose name contains ".tmp-" (leftover temporaries). */
static inline int io_count_temps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, ".tmp-")) n++;
    closedir(d);
    return n;
}

/* Removes dir and everything under it (scratch trees only). */
static inline void io_rm_rf(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char sub[1024];
            size_t dl = strlen(dir), nl = strlen(e->d_name);
            if (dl + nl + 2 > sizeof sub) continue;
            memcpy(sub, dir, dl);
            sub[dl] = '/';
            memcpy(sub + dl + 1, e->d_name, nl + 1);
            struct stat sb;
            if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
                io_rm_rf(sub);
            else
                unlink(sub);
        }
        closedir(d);
    }
    rmdir(dir);
}

#endif /* FUCINA_TESTS_IO_TESTUTIL_H */
