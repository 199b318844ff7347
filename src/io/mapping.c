/* SPDX-License-Identifier: MIT */
/* mapping.c - the refcounted bytes of an open model file, and the small
 * helpers every reader and writer shares (error text, growable arrays).
 *
 * A mapping is created with one reference (the file handle's). Each tensor
 * buffer made by fc__io_map_buffer takes another and gives it back from its
 * release hook, after freeing its own header: the hook has full cleanup duty
 * (core/buffer.h), so the order is header first, then the mapping, whose
 * last release may munmap the bytes the header pointed at.
 *
 * Reading without mmap (FC_IO_NO_MMAP) copies the file into allocator
 * memory in a read() loop that tolerates short reads and EINTR, and refuses
 * a file that changes size while it is read. */
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- errors and growth ------------------------------------------------------ */

fc_status fc__io_fail(const fc_io_opts *o, fc_status st, const char *fmt, ...) {
    if (o && o->errbuf && o->errcap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(o->errbuf, o->errcap, fmt, ap);
        va_end(ap);
    }
    return st;
}

void fc__io_clear(const fc_io_opts *o) {
    if (o && o->errbuf && o->errcap > 0) o->errbuf[0] = '\0';
}

fc_status fc__io_grow(const fc_allocator *a, void **p, size_t *cap, size_t elem, size_t need) {
    if (need <= *cap) return FC_OK;
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) return FC_ERR_OVERFLOW;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / elem) return FC_ERR_OVERFLOW;
    void *q = fc__alloc(a, ncap * elem, 16);
    if (!q) return FC_ERR_OOM;
    if (*p) {
        memcpy(q, *p, *cap * elem);
        fc__free(a, *p, *cap * elem);
    }
    *p = q;
    *cap = ncap;
    return FC_OK;
}

/* ---- mapping ------------------------------------------------------------------ */

static fc_status new_map(const fc_io_opts *o, fc_io_map **out) {
    const fc_allocator *a = fc__io_alloc(o);
    if (!a) a = fc_default_allocator();
    fc_io_map *m = fc__alloc(a, sizeof *m, _Alignof(fc_io_map));
    if (!m) return FC_ERR_OOM;
    atomic_init(&m->refs, 1u);
    m->alloc = *a;
    m->kind = FC_IO_MAP_BORROWED;
    m->data = NULL;
    m->size = 0;
    m->fd = -1;
    *out = m;
    return FC_OK;
}

static fc_status read_all(const char *fn, const char *path, int fd, uint8_t *dst, size_t size,
                          const fc_io_opts *o) {
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, dst + got, size - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            return fc__io_fail(o, FC_ERR_IO, "%s: %s: read failed: %s", fn, path, strerror(errno));
        }
        if (r == 0)
            return fc__io_fail(o, FC_ERR_IO, "%s: %s: file shrank while reading (%zu of %zu bytes)",
                               fn, path, got, size);
        got += (size_t)r;
    }
    uint8_t extra;
    ssize_t r;
    do {
        r = read(fd, &extra, 1);
    } while (r < 0 && errno == EINTR);
    if (r > 0)
        return fc__io_fail(o, FC_ERR_IO, "%s: %s: file grew while reading (past %zu bytes)", fn,
                           path, size);
    return FC_OK;
}

fc_status fc__io_map_file(const char *fn, const char *path, const fc_io_opts *o, fc_io_map **out) {
    int fd;
    do {
        fd = open(path, O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return fc__io_fail(o, FC_ERR_IO, "%s: %s: cannot open: %s", fn, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        fc_status st =
            fc__io_fail(o, FC_ERR_IO, "%s: %s: cannot stat: %s", fn, path, strerror(errno));
        close(fd);
        return st;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return fc__io_fail(o, FC_ERR_IO, "%s: %s: not a regular file", fn, path);
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return fc__io_fail(o, FC_ERR_IO, "%s: %s: file too large to map", fn, path);
    }
    size_t size = (size_t)sb.st_size;
    fc_io_map *m;
    fc_status st = new_map(o, &m);
    if (st != FC_OK) {
        close(fd);
        return fc__io_fail(o, st, "%s: %s: out of memory", fn, path);
    }
    m->size = size;
    if (size == 0) {
        m->kind = FC_IO_MAP_HEAP; /* nothing to free: data stays NULL */
    } else if (o && (o->flags & FC_IO_NO_MMAP)) {
        uint8_t *bytes = fc__alloc(&m->alloc, size, 64);
        if (!bytes) {
            st = fc__io_fail(o, FC_ERR_OOM, "%s: %s: cannot allocate %zu bytes", fn, path, size);
        } else {
            st = read_all(fn, path, fd, bytes, size, o);
            if (st != FC_OK) fc__free(&m->alloc, bytes, size);
        }
        m->kind = FC_IO_MAP_HEAP;
        m->data = st == FC_OK ? bytes : NULL;
    } else {
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED)
            st = fc__io_fail(o, FC_ERR_IO, "%s: %s: mmap of %zu bytes failed: %s", fn, path, size,
                             strerror(errno));
        m->kind = FC_IO_MAP_MMAP;
        m->data = st == FC_OK ? p : NULL;
    }
    /* a mapping outlives its descriptor, but the copying loads read with
     * pread, which needs it: a mapped file keeps its descriptor open */
    if (st == FC_OK && m->kind == FC_IO_MAP_MMAP && m->data)
        m->fd = fd;
    else
        close(fd);
    if (st != FC_OK) {
        fc_allocator a = m->alloc;
        fc__free(&a, m, sizeof *m);
        return st;
    }
    *out = m;
    return FC_OK;
}

fc_status fc__io_map_memory(const void *data, size_t size, const fc_io_opts *o, fc_io_map **out) {
    fc_io_map *m;
    fc_status st = new_map(o, &m);
    if (st != FC_OK) return fc__io_fail(o, st, "open_memory: out of memory");
    m->kind = FC_IO_MAP_BORROWED;
    m->data = data;
    m->size = size;
    *out = m;
    return FC_OK;
}

void fc__io_map_retain(fc_io_map *m) {
    if (m) atomic_fetch_add_explicit(&m->refs, 1u, memory_order_relaxed);
}

void fc__io_map_release(fc_io_map *m) {
    if (!m) return;
    if (atomic_fetch_sub_explicit(&m->refs, 1u, memory_order_acq_rel) != 1u) return;
    if (m->data) {
        if (m->kind == FC_IO_MAP_MMAP)
            munmap((void *)m->data, m->size);
        else if (m->kind == FC_IO_MAP_HEAP)
            fc__free(&m->alloc, (void *)m->data, m->size);
    }
    if (m->fd >= 0) close(m->fd);
    fc_allocator a = m->alloc;
    fc__free(&a, m, sizeof *m);
}

fc_status fc__io_map_read(const fc_io_map *m, const void *src, size_t n, void *dst, char *err,
                          size_t errcap) {
    if (n == 0) return FC_OK;
    if (m->kind != FC_IO_MAP_MMAP || m->fd < 0) {
        memcpy(dst, src, n);
        return FC_OK;
    }
    /* src lies inside the mapping (the readers validated every range) */
    size_t at = (size_t)((const uint8_t *)src - m->data), got = 0;
    while (got < n) {
        ssize_t r = pread(m->fd, (uint8_t *)dst + got, n - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errcap, "read of %zu bytes at file offset %zu failed: %s", n, at,
                     strerror(errno));
            return FC_ERR_IO;
        }
        if (r == 0) {
            snprintf(err, errcap,
                     "the file shrank since it was opened: %zu of the %zu bytes at file offset "
                     "%zu are left (truncated by another program?)",
                     got, n, at);
            return FC_ERR_IO;
        }
        got += (size_t)r;
    }
    return FC_OK;
}

fc_status fc__io_map_check_range(const fc_io_map *m, const void *src, size_t n, char *err,
                                 size_t errcap) {
    if (m->kind != FC_IO_MAP_MMAP || m->fd < 0 || n == 0) return FC_OK;
    size_t end = (size_t)((const uint8_t *)src - m->data) + n;
    struct stat sb;
    if (fstat(m->fd, &sb) != 0) {
        snprintf(err, errcap, "cannot stat the file: %s", strerror(errno));
        return FC_ERR_IO;
    }
    if ((uint64_t)sb.st_size < (uint64_t)end) {
        snprintf(err, errcap,
                 "the file shrank since it was opened: it now has %lld bytes, the tensor ends at "
                 "byte %zu (its pages are gone: reading them would raise SIGBUS)",
                 (long long)sb.st_size, end);
        return FC_ERR_IO;
    }
    return FC_OK;
}

/* Release hook of a borrowed tensor buffer: its header first, then the
 * mapping reference (whose release may unmap the bytes). */
static void release_mapped(void *ctx, fc_buffer *buf) {
    fc_io_map *m = ctx;
    fc__buffer_destroy_header(buf);
    fc__io_map_release(m);
}

fc_status fc__io_map_buffer(fc_io_map *m, const fc_allocator *a, const void *data, size_t nbytes,
                            fc_buffer **out) {
    if (!m || !out || (!data && nbytes)) return FC_ERR_NULL_ARG;
    if (nbytes) {
        const uint8_t *p = data;
        if (!m->data || p < m->data || (size_t)(p - m->data) > m->size ||
            nbytes > m->size - (size_t)(p - m->data))
            return FC_ERR_INDEX;
    }
    /* A zero-byte tensor still needs a non-NULL address for the buffer. */
    void *addr = nbytes ? (void *)data : (void *)(m->data ? m->data : (const uint8_t *)m);
    fc__io_map_retain(m);
    fc_status st = fc__buffer_borrow(a, addr, nbytes, true, release_mapped, m, out);
    if (st != FC_OK) fc__io_map_release(m);
    return st;
}
