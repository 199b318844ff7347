/* SPDX-License-Identifier: MIT */
/* atomic_write.c - the one way fucina writes a file.
 *
 * The bytes go to a fresh temporary file next to the target
 * (".<name>.tmp-<pid>-<n>", created with O_EXCL so two writers never share
 * one, with mode 0666 filtered by the umask as any new file), then fsync,
 * close, rename over the target, and fsync of the directory so the rename
 * itself survives a crash. Until the rename the target is never touched;
 * every failure before it removes the temporary file. A failure of the
 * directory fsync comes after the rename: the target then already holds the
 * complete new file, and the error only says its durability is unknown.
 *
 * Writes are buffered (64 KiB) because the headers are made of many small
 * pieces; large payloads bypass the buffer. The first failure is sticky so a
 * writer can emit a whole file and check once at commit.
 *
 * A fault plan (fc_io_fault) makes any step fail on purpose, including a
 * write() that stops after N bytes, so tests can prove the old file
 * survives every possible interruption. */
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT_BUF_SIZE ((size_t)64 * 1024)

static atomic_uint tmp_counter;

static int fault_errno(const fc_io_fault *f) { return f->errnum ? f->errnum : EIO; }

static bool fault_at(const fc_io_out *w, fc_io_fault_step step) {
    return w->fault && w->fault->step == step;
}

static fc_status fail_errno(fc_io_out *w, const char *what, const char *path, int err) {
    w->st = fc__io_fail(w->o, FC_ERR_IO, "%s: %s: %s failed: %s", w->fn, path, what, strerror(err));
    return w->st;
}

static void release_out(fc_io_out *w) {
    const fc_allocator *a = fc__io_alloc(w->o);
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    fc__free(a, w->buf, OUT_BUF_SIZE);
    w->buf = NULL;
    fc__free(a, w->tmp, w->tmp_size);
    w->tmp = NULL;
}

fc_status fc__io_out_open(fc_io_out *w, const char *fn, const char *path, const fc_io_opts *o,
                          const fc_io_fault *fault) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->o = o;
    w->fault = fault;
    w->fn = fn;
    w->path = path;
    const fc_allocator *a = fc__io_alloc(o);
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dir_len;
    if (*base == '\0')
        return w->st = fc__io_fail(o, FC_ERR_INVALID_ARG, "%s: '%s' names a directory", fn, path);
    w->tmp_size = strlen(path) + 48;
    w->tmp = fc__alloc(a, w->tmp_size, 1);
    w->buf = fc__alloc(a, OUT_BUF_SIZE, 64);
    if (!w->tmp || !w->buf) {
        release_out(w);
        return w->st = fc__io_fail(o, FC_ERR_OOM, "%s: %s: out of memory", fn, path);
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned n = atomic_fetch_add_explicit(&tmp_counter, 1u, memory_order_relaxed);
        snprintf(w->tmp, w->tmp_size, "%.*s.%s.tmp-%ld-%u", (int)dir_len, path, base,
                 (long)getpid(), n);
        if (fault_at(w, FC_IO_FAULT_OPEN)) {
            errno = fault_errno(fault);
        } else {
            w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (w->fd >= 0) return FC_OK;
        }
        if (errno != EEXIST && errno != EINTR) break;
    }
    fc_status st = fail_errno(w, "creating a temporary file", w->tmp, errno);
    release_out(w);
    return st;
}

/* write() until done, honouring the fault plan. */
static fc_status raw_write(fc_io_out *w, const uint8_t *p, size_t n) {
    while (n > 0) {
        size_t chunk = n;
        bool fail_now = false;
        if (fault_at(w, FC_IO_FAULT_WRITE)) {
            uint64_t left =
                w->fault->after_bytes > w->written ? w->fault->after_bytes - w->written : 0;
            if (left == 0)
                fail_now = true;
            else if (chunk > left)
                chunk = (size_t)left;
        }
        ssize_t r;
        if (fail_now) {
            errno = fault_errno(w->fault);
            r = -1;
        } else {
            r = write(w->fd, p, chunk);
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            return fail_errno(w, "write", w->tmp, errno);
        }
        p += r;
        n -= (size_t)r;
        w->written += (uint64_t)r;
    }
    return FC_OK;
}

static fc_status flush_buf(fc_io_out *w) {
    if (w->buf_used == 0) return FC_OK;
    fc_status st = raw_write(w, w->buf, w->buf_used);
    w->buf_used = 0;
    return st;
}

fc_status fc__io_out_write(fc_io_out *w, const void *p, size_t n) {
    if (w->st != FC_OK) return w->st;
    if (n == 0) return FC_OK;
    if (w->buf_used + n <= OUT_BUF_SIZE) {
        memcpy(w->buf + w->buf_used, p, n);
        w->buf_used += n;
        return FC_OK;
    }
    fc_status st = flush_buf(w);
    if (st != FC_OK) return st;
    if (n < OUT_BUF_SIZE) {
        memcpy(w->buf, p, n);
        w->buf_used = n;
        return FC_OK;
    }
    return raw_write(w, p, n);
}

fc_status fc__io_out_fill(fc_io_out *w, uint8_t byte, size_t n) {
    uint8_t chunk[256];
    memset(chunk, byte, sizeof chunk);
    while (n > 0 && w->st == FC_OK) {
        size_t k = n < sizeof chunk ? n : sizeof chunk;
        fc__io_out_write(w, chunk, k);
        n -= k;
    }
    return w->st;
}

void fc__io_out_abort(fc_io_out *w) {
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->tmp) unlink(w->tmp);
    release_out(w);
}

/* fsync of the directory holding path, so the rename is durable. */
static int sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t len = slash == path ? 1 : (size_t)(slash - path);
        if (len >= sizeof dir) return ENAMETOOLONG;
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    int err = 0;
    if (fsync(fd) != 0 && errno != EINVAL) err = errno; /* EINVAL: fs cannot sync dirs */
    close(fd);
    return err;
}

fc_status fc__io_out_commit(fc_io_out *w) {
    if (w->st == FC_OK) flush_buf(w);
    if (w->st == FC_OK) {
        if (fault_at(w, FC_IO_FAULT_FSYNC))
            fail_errno(w, "fsync", w->tmp, fault_errno(w->fault));
        else if (fsync(w->fd) != 0)
            fail_errno(w, "fsync", w->tmp, errno);
    }
    if (w->st == FC_OK) {
        int r = close(w->fd);
        w->fd = -1;
        if (fault_at(w, FC_IO_FAULT_CLOSE))
            fail_errno(w, "close", w->tmp, fault_errno(w->fault));
        else if (r != 0)
            fail_errno(w, "close", w->tmp, errno);
    }
    if (w->st == FC_OK) {
        if (fault_at(w, FC_IO_FAULT_RENAME))
            fail_errno(w, "rename over the target", w->path, fault_errno(w->fault));
        else if (rename(w->tmp, w->path) != 0)
            fail_errno(w, "rename over the target", w->path, errno);
    }
    if (w->st != FC_OK) {
        fc_status st = w->st;
        fc__io_out_abort(w);
        return st;
    }
    /* Renamed: the temporary name no longer exists. */
    int err = fault_at(w, FC_IO_FAULT_DIRSYNC) ? fault_errno(w->fault) : sync_dir(w->path);
    if (err) fail_errno(w, "fsync of the directory (the new file is in place)", w->path, err);
    fc_status st = w->st;
    release_out(w);
    return st;
}
