/* SPDX-License-Identifier: MIT */
/* progress.c - progress bar, metrics CSV, gnuplot picture, clock, PRNG.
 *
 * The bar writes to stdout and flushes after each redraw; notes first wipe
 * the partial bar line (carriage return + clear-to-end) so they never mix
 * with it. Off a terminal nothing but whole lines is written. */
#define _POSIX_C_SOURCE 200809L

#include "progress.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double ex_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- progress bar ------------------------------------------------------------------ */

/* "m:ss" or "h:mm:ss" into buf */
static const char *fmt_time(double s, char *buf, size_t cap) {
    if (!(s >= 0) || s > 360000) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

/* "12.3k" style rates */
static const char *fmt_rate(double r, char *buf, size_t cap) {
    if (r >= 1e6)
        snprintf(buf, cap, "%.2fM", r / 1e6);
    else if (r >= 1e4)
        snprintf(buf, cap, "%.1fk", r / 1e3);
    else
        snprintf(buf, cap, "%.0f", r);
    return buf;
}

void ex_progress_start(ex_progress *p, int64_t total_steps, double budget_s, const char *unit,
                       int every) {
    memset(p, 0, sizeof *p);
    p->total_steps = total_steps > 0 ? total_steps : 1;
    p->budget_s = budget_s > 0 ? budget_s : 0;
    p->unit = unit ? unit : "it";
    p->every = every < 1 ? 1 : every;
    p->tty = isatty(fileno(stdout)) != 0;
    p->t_start = ex_now();
    p->t_last = 0;
    p->first_step = -1;
}

double ex_progress_elapsed(const ex_progress *p) { return ex_now() - p->t_start; }

double ex_progress_total(const ex_progress *p) { return p->before_s + ex_progress_elapsed(p); }

/* Seconds left: the step-based estimate, capped by the wall-clock budget. */
static double eta(const ex_progress *p, int64_t step, double elapsed) {
    int64_t done = step - p->first_step;
    double left = 0;
    if (done > 0) left = elapsed / (double)done * (double)(p->total_steps - step);
    if (p->budget_s > 0 && p->budget_s - elapsed < left) left = p->budget_s - elapsed;
    return left > 0 ? left : 0;
}

void ex_progress_update(ex_progress *p, int64_t step, double loss, double items_per_s) {
    double now = ex_now();
    double elapsed = now - p->t_start;
    if (p->first_step < 0) p->first_step = step - 1;
    char e1[32], e2[32], r[32];
    bool last = step >= p->total_steps;
    if (!p->tty) {
        if (step % p->every != 0 && !last) return;
        printf("step %6lld/%lld | loss %.4f | %s %s/s | elapsed %s | eta %s\n", (long long)step,
               (long long)p->total_steps, loss, fmt_rate(items_per_s, r, sizeof r), p->unit,
               fmt_time(elapsed, e1, sizeof e1), fmt_time(eta(p, step, elapsed), e2, sizeof e2));
        fflush(stdout);
        return;
    }
    if (now - p->t_last < 0.1 && !last) return;
    p->t_last = now;
    enum { WIDTH = 28 };
    char bar[WIDTH + 1];
    int fill = (int)((double)WIDTH * (double)step / (double)p->total_steps);
    if (fill > WIDTH) fill = WIDTH;
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    printf("\r[%s] %lld/%lld  loss %.4f  %s %s/s  %s < %s\033[K", bar, (long long)step,
           (long long)p->total_steps, loss, fmt_rate(items_per_s, r, sizeof r), p->unit,
           fmt_time(elapsed, e1, sizeof e1), fmt_time(eta(p, step, elapsed), e2, sizeof e2));
    fflush(stdout);
    p->bar_visible = true;
}

void ex_progress_note(ex_progress *p, const char *fmt, ...) {
    if (p && p->tty && p->bar_visible) {
        printf("\r\033[K");
        p->bar_visible = false;
        p->t_last = 0; /* redraw the bar at the next update */
    }
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void ex_progress_finish(ex_progress *p) {
    if (p->tty && p->bar_visible) putchar('\n');
    p->bar_visible = false;
    fflush(stdout);
}

/* ---- output directory ------------------------------------------------------------------ */

bool ex_mkdir_p(const char *dir) {
    char buf[4096];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof buf) {
        fprintf(stderr, "cannot create directory '%s': bad length\n", dir);
        return false;
    }
    memcpy(buf, dir, len + 1);
    /* every prefix ending before a '/', then the whole path */
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "cannot create directory %s: %s\n", buf, strerror(errno));
            return false;
        }
        buf[i] = c;
    }
    return true;
}

/* ---- metrics CSV ---------------------------------------------------------------------- */

FILE *ex_csv_open(const char *path, const char *header, bool append) {
    struct stat sb;
    bool exists = stat(path, &sb) == 0 && sb.st_size > 0;
    FILE *f = fopen(path, append ? "a" : "w");
    if (!f) {
        perror(path);
        return NULL;
    }
    if (!append || !exists) fprintf(f, "%s\n", header);
    fflush(f);
    return f;
}

FILE *ex_csv_resume(const char *path, const char *header, int64_t through, int64_t *last) {
    int64_t last_kept = -1;
    if (last) *last = -1;
    FILE *in = fopen(path, "r");
    if (!in) return ex_csv_open(path, header, false);
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "%s: the path is too long\n", path);
        fclose(in);
        return NULL;
    }
    FILE *out = fopen(tmp, "w");
    if (!out) {
        perror(tmp);
        fclose(in);
        return NULL;
    }
    /* line by line; a line longer than the buffer continues a kept (or
     * dropped) row, so only the first piece of a line decides */
    char line[1024];
    bool first = true, at_start = true, keep = true, wrote_header = false;
    while (fgets(line, sizeof line, in)) {
        if (at_start) {
            if (first) {
                keep = true; /* the header */
                wrote_header = true;
            } else {
                char *end = NULL;
                long long step = strtoll(line, &end, 10);
                keep = end != line && *end == ',' && step <= through;
                if (keep) last_kept = step;
            }
            first = false;
        }
        size_t len = strlen(line);
        at_start = len > 0 && line[len - 1] == '\n';
        if (keep && fputs(line, out) < 0) break;
    }
    if (!wrote_header) fprintf(out, "%s\n", header);
    bool ok = !ferror(in) && !ferror(out);
    fclose(in);
    ok = fclose(out) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "%s: cannot rewrite it for the resumed run: %s\n", path, strerror(errno));
        remove(tmp);
        return NULL;
    }
    if (last) *last = last_kept;
    return ex_csv_open(path, header, true);
}

/* ---- plot ------------------------------------------------------------------------------- */

/* true when an executable named name is in a directory of PATH */
static bool on_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path) return false;
    char buf[4096];
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && len + strlen(name) + 2 < sizeof buf) {
            memcpy(buf, path, len);
            buf[len] = '/';
            strcpy(buf + len + 1, name);
            if (access(buf, X_OK) == 0) return true;
        }
        if (!end) break;
        path = end + 1;
    }
    return false;
}

bool ex_plot_png(const char *csv, const char *png, const char *title, const char *xlabel,
                 const char *ylabel, int xcol, const ex_curve *curves, int ncurves) {
    if (!on_path("gnuplot")) {
        fprintf(stderr,
                "note: gnuplot is not on PATH, so no %s (install gnuplot-nox to get "
                "the picture; the numbers are in %s)\n",
                png, csv);
        return false;
    }
    /* gnuplot strings are single-quoted here; refuse names that would break them */
    const char *strs[] = {csv, png, title, xlabel, ylabel};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        if (strchr(strs[i], '\'')) {
            fprintf(stderr, "note: not plotting: \"%s\" contains a quote\n", strs[i]);
            return false;
        }
    }
    for (int i = 0; i < ncurves; i++) {
        if (strchr(curves[i].title, '\'')) {
            fprintf(stderr, "note: not plotting: \"%s\" contains a quote\n", curves[i].title);
            return false;
        }
    }
    remove(png); /* so a stale picture never passes for a new one */
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        perror("note: cannot run gnuplot");
        return false;
    }
    fprintf(g, "set terminal png noenhanced size 1000,600\n");
    fprintf(g, "set output '%s'\n", png);
    fprintf(g, "set datafile separator ','\n");
    fprintf(g, "set key top right\nset grid\n");
    fprintf(g, "set title '%s'\nset xlabel '%s'\nset ylabel '%s'\n", title, xlabel, ylabel);
    fprintf(g, "plot ");
    for (int i = 0; i < ncurves; i++) {
        /* gnuplot skips empty fields, so a sparse column (validation) draws as
         * points joined across the steps that have none; `every ::1` skips
         * the header line */
        fprintf(g, "%s'%s' every ::1 using %d:%d with %s title '%s'", i ? ", " : "", csv, xcol,
                curves[i].ycol, curves[i].sparse ? "linespoints pt 7 ps 1 lw 2" : "lines",
                curves[i].title);
    }
    fprintf(g, "\n");
    int rc = pclose(g);
    struct stat sb;
    if (rc != 0 || stat(png, &sb) != 0 || sb.st_size == 0) {
        fprintf(stderr, "note: gnuplot failed (status %d); %s was not written\n", rc, png);
        return false;
    }
    return true;
}

/* ---- PRNG ---------------------------------------------------------------------------------- */

uint64_t ex_rand_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double ex_rand_unit(uint64_t *state) { return (double)(ex_rand_u64(state) >> 11) * 0x1.0p-53; }

uint64_t ex_rand_below(uint64_t *state, uint64_t n) {
    if (n <= 1) return 0;
    /* reject the top sliver so every residue is equally likely */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = ex_rand_u64(state);
    while (x >= limit);
    return x % n;
}
