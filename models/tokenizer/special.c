/* SPDX-License-Identifier: MIT */
/* models/tokenizer/special.c - finding the special tokens of a text.
 *
 * encode takes the user-defined tokens (and, when asked, the control and
 * unknown ones) out of the text before the vocabulary's merges run. The
 * rule is llama.cpp's partition (tokenizer_st_partition): the tokens are
 * taken one after the other in rank order, longest first and lowest id
 * among equal lengths, each wherever it occurs, leftmost first, in the
 * text that earlier tokens left. Followed literally, that scans the text
 * once per token and splices a fragment list at every find: O(tokens *
 * text + finds^2), so a long text was a denial of service (issue 45).
 *
 * Here one Aho-Corasick scan finds, at every end position, the longest
 * allowed token ending there; the shorter ones ending there are the rest
 * of its chain of suffix links. Then passes decide the occurrences one
 * token length at a time, longest first, in rank order and positions
 * ascending: [p, p + l) is taken iff neither p nor p + l - 1 is covered by
 * a token taken before. That is the whole overlap test because every
 * token taken before is at least l long, and an interval of length >= l
 * that meets [p, p + l) without holding either end would lie strictly
 * inside it. It gives the literal rule's outcome: a token's finds,
 * leftmost first, in the fragments left, are exactly its occurrences that
 * overlap nothing taken before, its own earlier finds included, in
 * position order.
 *
 * Cost. An end position takes part in the passes while its chain has
 * tokens left and its last byte is uncovered (once covered, every token
 * ending there overlaps one taken); each pass is for the longest length
 * left among them, so there is one pass per length that some undecided
 * position has, and the work is O(text + positions x such lengths), the
 * lengths being at most the vocabulary's distinct special-token lengths.
 * Memory is one byte per text byte (the covered map) and a few words per
 * end position, never one entry per (position, token) occurrence, which a
 * run of spaces against Gemma's 30 space tokens would multiply by 30. The
 * automaton is built once, with the tokenizer: the goto edges live in one
 * hash table, the root's in a direct table. */
#include <string.h>

#include "tokenizer/internal.h"

/* ---- the automaton ------------------------------------------------------- */

static uint32_t edge_home(uint64_t key, uint32_t mask) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15u) >> 32) & mask;
}

/* The node reached from node by byte c, or 0 when there is no edge. */
static int32_t edge_find(const fc__tok_ac *ac, int32_t node, unsigned char c) {
    if (node == 0) return ac->root_next[c];
    uint64_t key = ((uint64_t)node << 8 | c) + 1;
    for (uint32_t k = edge_home(key, ac->edge_mask);; k = (k + 1) & ac->edge_mask) {
        if (ac->edge_key[k] == key) return ac->edge_to[k];
        if (ac->edge_key[k] == 0) return 0;
    }
}

static void edge_add(fc__tok_ac *ac, int32_t node, unsigned char c, int32_t to) {
    if (node == 0) {
        ac->root_next[c] = to;
        return;
    }
    uint64_t key = ((uint64_t)node << 8 | c) + 1;
    uint32_t k = edge_home(key, ac->edge_mask);
    while (ac->edge_key[k])
        k = (k + 1) & ac->edge_mask;
    ac->edge_key[k] = key;
    ac->edge_to[k] = to;
}

void fc__tok_ac_free(fc_tokenizer *t) {
    fc__tok_ac *ac = &t->ac;
    size_t nodes = (size_t)ac->nodes_cap, slots = ac->edge_key ? (size_t)ac->edge_mask + 1 : 0;
    fc__tok_free(&t->al, ac->fail, nodes * sizeof *ac->fail);
    fc__tok_free(&t->al, ac->out, nodes * sizeof *ac->out);
    fc__tok_free(&t->al, ac->first_all, nodes * sizeof *ac->first_all);
    fc__tok_free(&t->al, ac->first_user, nodes * sizeof *ac->first_user);
    fc__tok_free(&t->al, ac->edge_key, slots * sizeof *ac->edge_key);
    fc__tok_free(&t->al, ac->edge_to, slots * sizeof *ac->edge_to);
    memset(ac, 0, sizeof *ac);
}

/* The build's scratch, per node: the trie's child lists and the BFS queue. */
typedef struct build_tmp {
    int32_t *first_child, *next_sibling, *queue;
    unsigned char *byte;
} build_tmp;

static bool is_user(const fc_tokenizer *t, int32_t rank) {
    return rank >= 0 && t->type[t->special[rank]] == FC_TOKEN_USER_DEFINED;
}

fc_status fc__tok_ac_build(fc_tokenizer *t) {
    fc__tok_ac *ac = &t->ac;
    memset(ac, 0, sizeof *ac);
    size_t total = 0;
    for (int32_t r = 0, a = 0; r < t->n_special; r++) {
        total += t->len[t->special[r]];
        ac->n_user += is_user(t, r);
        if (t->len[t->special[r]] != t->len[t->special[a]]) a = r;
        if (r - a + 1 > ac->max_class) ac->max_class = r - a + 1;
    }
    /* node and edge indices are int32 and uint32: a file with 2^30 bytes
     * of special tokens gets no matcher rather than wrapped indices */
    if (total >= ((size_t)1 << 30)) return FC_ERR_OOM;
    size_t cap = total + 1;
    uint32_t slots = 16;
    while (slots < 2 * (uint64_t)total)
        slots <<= 1;
    ac->nodes_cap = (int32_t)cap;
    ac->edge_mask = slots - 1;
    const fc_allocator *al = &t->al;
    ac->fail = fc__tok_alloc(al, cap * sizeof *ac->fail);
    ac->out = fc__tok_alloc(al, cap * sizeof *ac->out);
    ac->first_all = fc__tok_alloc(al, cap * sizeof *ac->first_all);
    ac->first_user = fc__tok_alloc(al, cap * sizeof *ac->first_user);
    ac->edge_key = fc__tok_alloc(al, (size_t)slots * sizeof *ac->edge_key);
    ac->edge_to = fc__tok_alloc(al, (size_t)slots * sizeof *ac->edge_to);
    size_t tmp_size = cap * (3 * sizeof(int32_t) + 1);
    char *tmp_mem = fc__tok_alloc(al, tmp_size);
    if (!ac->fail || !ac->out || !ac->first_all || !ac->first_user || !ac->edge_key ||
        !ac->edge_to || !tmp_mem) {
        fc__tok_free(al, tmp_mem, tmp_size);
        fc__tok_ac_free(t);
        return FC_ERR_OOM;
    }
    build_tmp b = {(int32_t *)tmp_mem, (int32_t *)tmp_mem + cap, (int32_t *)tmp_mem + 2 * cap,
                   (unsigned char *)tmp_mem + 3 * cap * sizeof(int32_t)};
    memset(ac->edge_key, 0, (size_t)slots * sizeof *ac->edge_key);

    /* the trie: one node per distinct prefix, out[] where a token ends */
    int32_t n = 1;
    ac->out[0] = -1;
    b.first_child[0] = -1;
    for (int32_t r = 0; r < t->n_special; r++) {
        const unsigned char *s = (const unsigned char *)t->text[t->special[r]];
        int32_t node = 0;
        for (uint32_t i = 0; i < t->len[t->special[r]]; i++) {
            int32_t next = edge_find(ac, node, s[i]);
            if (!next) {
                next = n++;
                ac->out[next] = -1;
                b.byte[next] = s[i];
                b.first_child[next] = -1;
                b.next_sibling[next] = b.first_child[node];
                b.first_child[node] = next;
                edge_add(ac, node, s[i], next);
            }
            node = next;
        }
        if (node) ac->out[node] = r; /* texts are unique, so each end node has one */
    }

    /* suffix links breadth first: a node's link and those it falls back
     * on are shallower, so they are set when it is reached */
    ac->fail[0] = 0;
    ac->first_all[0] = ac->first_user[0] = -1;
    int32_t head = 0, tail = 0;
    b.queue[tail++] = 0;
    while (head < tail) {
        int32_t v = b.queue[head++];
        for (int32_t ch = b.first_child[v]; ch >= 0; ch = b.next_sibling[ch]) {
            int32_t f = 0;
            if (v) {
                for (int32_t u = ac->fail[v];; u = ac->fail[u]) {
                    f = edge_find(ac, u, b.byte[ch]);
                    if (f || u == 0) break;
                }
            }
            ac->fail[ch] = f;
            ac->first_all[ch] = ac->out[ch] >= 0 ? ch : ac->first_all[f];
            ac->first_user[ch] = is_user(t, ac->out[ch]) ? ch : ac->first_user[f];
            b.queue[tail++] = ch;
        }
    }
    fc__tok_free(al, tmp_mem, tmp_size);
    return FC_OK;
}

/* ---- matching a text ----------------------------------------------------- */

/* An end position where an allowed token ends: the node and length of
 * the longest such token not yet decided, and the token taken here. */
typedef struct live {
    size_t end;
    int32_t node;
    uint32_t len;
    int32_t taken; /* the id taken ending here, or -1 */
} live;

typedef struct find {
    const fc_tokenizer *t;
    const int32_t *first; /* first_all or first_user */
    live *lv;             /* every end position, in text order */
    size_t n_lv, lv_cap;
    size_t *act, n_act; /* the entries still undecided, in text order */
    size_t *order;      /* a pass's entries in rank order (n_lv allocated, as act) */
    size_t *cnt;        /* a pass's buckets, one per rank of the length (max_class) */
    uint8_t *covered;   /* per byte of the text: inside a token taken */
    uint32_t max_len;   /* the longest token of the entries undecided */
    size_t taken;
} find;

static uint32_t token_len(const find *fd, int32_t node) {
    return fd->t->len[fd->t->special[fd->t->ac.out[node]]];
}

/* One pass: the entries whose token is of ranks [a, b) (all of length l,
 * the longest left), in rank order and positions ascending, taken when
 * both ends are free; then the entries that can still take a token move
 * down their chains, and max_len becomes the longest left. */
static void pass(find *fd, int32_t a, int32_t b, uint32_t l) {
    const fc__tok_ac *ac = &fd->t->ac;
    size_t *cnt = fd->cnt; /* indexed by rank - a */
    for (int32_t r = a; r < b; r++)
        cnt[r - a] = 0;
    size_t m = 0;
    for (size_t k = 0; k < fd->n_act; k++) {
        const live *x = &fd->lv[fd->act[k]];
        if (x->len != l) continue;
        cnt[ac->out[x->node] - a]++;
        m++;
    }
    size_t s = 0;
    for (int32_t r = a; r < b; r++) {
        size_t c = cnt[r - a];
        cnt[r - a] = s;
        s += c;
    }
    for (size_t k = 0; k < fd->n_act; k++) {
        const live *x = &fd->lv[fd->act[k]];
        if (x->len == l) fd->order[cnt[ac->out[x->node] - a]++] = fd->act[k];
    }
    for (size_t j = 0; j < m; j++) {
        live *x = &fd->lv[fd->order[j]];
        size_t p = x->end - l;
        if (fd->covered[p] || fd->covered[x->end - 1]) continue;
        memset(fd->covered + p, 1, l);
        x->taken = fd->t->special[ac->out[x->node]];
        fd->taken++;
    }
    size_t w = 0;
    fd->max_len = 0;
    for (size_t k = 0; k < fd->n_act; k++) {
        live *x = &fd->lv[fd->act[k]];
        if (fd->covered[x->end - 1]) continue; /* every token ending here overlaps one taken */
        if (x->len == l) {
            x->node = fd->first[ac->fail[x->node]];
            if (x->node < 0) continue;
            x->len = token_len(fd, x->node);
        }
        if (x->len > fd->max_len) fd->max_len = x->len;
        fd->act[w++] = fd->act[k];
    }
    fd->n_act = w;
}

/* The scan: every end position where an allowed token ends. */
static fc_status scan(find *fd, const unsigned char *text, size_t len) {
    const fc__tok_ac *ac = &fd->t->ac;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        for (;;) {
            int32_t next = edge_find(ac, node, text[i]);
            if (next || node == 0) {
                node = next;
                break;
            }
            node = ac->fail[node];
        }
        int32_t v = fd->first[node];
        if (v < 0) continue;
        if (fd->n_lv == fd->lv_cap) {
            size_t cap = fd->lv_cap ? 2 * fd->lv_cap : 64;
            live *p = fc__tok_alloc(&fd->t->al, cap * sizeof *p);
            if (!p) return FC_ERR_OOM;
            if (fd->n_lv) memcpy(p, fd->lv, fd->n_lv * sizeof *p);
            fc__tok_free(&fd->t->al, fd->lv, fd->lv_cap * sizeof *p);
            fd->lv = p;
            fd->lv_cap = cap;
        }
        live x = {i + 1, v, token_len(fd, v), -1};
        if (x.len > fd->max_len) fd->max_len = x.len;
        fd->lv[fd->n_lv++] = x;
    }
    return FC_OK;
}

static fc_status find_run(find *fd, const char *text, size_t len, fc__tok_hit **hits, size_t *n) {
    const fc_tokenizer *t = fd->t;
    fc_status st = scan(fd, (const unsigned char *)text, len);
    if (st != FC_OK || fd->n_lv == 0) return st;
    fd->covered = fc__tok_alloc(&t->al, len);
    fd->act = fc__tok_alloc(&t->al, fd->n_lv * sizeof *fd->act);
    fd->order = fc__tok_alloc(&t->al, fd->n_lv * sizeof *fd->order);
    fd->cnt = fc__tok_alloc(&t->al, (size_t)t->ac.max_class * sizeof *fd->cnt);
    if (!fd->covered || !fd->act || !fd->order || !fd->cnt) return FC_ERR_OOM;
    memset(fd->covered, 0, len);
    for (size_t k = 0; k < fd->n_lv; k++)
        fd->act[k] = k;
    fd->n_act = fd->n_lv;
    /* one pass per length that some undecided entry has, longest first; the
     * ranks of a length are contiguous in special[] */
    for (int32_t a = 0, b; fd->n_act; a = b) {
        uint32_t l = fd->max_len;
        while (t->len[t->special[a]] > l)
            a++;
        b = a;
        while (b < t->n_special && t->len[t->special[b]] == l)
            b++;
        pass(fd, a, b, l);
    }
    if (!fd->taken) return FC_OK;
    fc__tok_hit *h = fc__tok_alloc(&t->al, fd->taken * sizeof *h);
    if (!h) return FC_ERR_OOM;
    size_t k = 0; /* taken tokens do not overlap: end order is text order */
    for (size_t i = 0; i < fd->n_lv; i++) {
        const live *x = &fd->lv[i];
        if (x->taken >= 0) h[k++] = (fc__tok_hit){x->end - t->len[x->taken], x->taken};
    }
    *hits = h;
    *n = k;
    return FC_OK;
}

fc_status fc__tok_find_special(const fc_tokenizer *t, const char *text, size_t len,
                               bool parse_special, fc__tok_hit **hits, size_t *n) {
    *hits = NULL;
    *n = 0;
    if (!len || t->ac.nodes_cap <= 1 || (!parse_special && t->ac.n_user == 0)) return FC_OK;
    find fd = {.t = t, .first = parse_special ? t->ac.first_all : t->ac.first_user};
    fc_status st = find_run(&fd, text, len, hits, n);
    fc__tok_free(&t->al, fd.lv, fd.lv_cap * sizeof *fd.lv);
    fc__tok_free(&t->al, fd.cnt, (size_t)t->ac.max_class * sizeof *fd.cnt);
    fc__tok_free(&t->al, fd.act, fd.n_lv * sizeof *fd.act);
    fc__tok_free(&t->al, fd.order, fd.n_lv * sizeof *fd.order);
    fc__tok_free(&t->al, fd.covered, len);
    return st;
}
