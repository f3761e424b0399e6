/* A plain price-level book in C behind lob's foreign-engine ABI (lob_engine.h).
 *
 * Full semantics of lob/semantics.py: LIMIT, IOC, FOK, POST_ONLY, MARKET, NOTIONAL, cancel,
 * modify, mass cancel of every scope, every STP mode, the same validation and reasons.
 * Limits of this engine (declared by lob_capabilities; lob_create returns NULL with the
 * reason, or a replay fails with LOB_ERR_NOMEM and lob_last_error says so): bands up to
 * 2**26 prices wide, up to 2**31 - 1 resting orders (lob's bound is 2**33).
 *
 * Layout: one array of levels per side over the whole price band (index = price - min);
 * each level is a FIFO doubly linked list of nodes from one growable node pool, with its
 * total quantity and order count. The best level of each side is cached and re-found by a
 * scan towards worse prices when it empties. Ids are sequential, so id -> node is an
 * array, with a live-id bitset in front of it. Fills are written into the caller's buffer; before a command that can trade the
 * engine makes sure the space left is at least the number of resting orders (a command
 * fills each maker at most once), otherwise it stops and asks for more (LOB_NEED_FILL_SPACE).
 */
#define _POSIX_C_SOURCE 199309L
#include "lob_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(sizeof(lob_command) == 40, "lob_command must be 40 bytes");
_Static_assert(sizeof(lob_outcome) == 34, "lob_outcome must be 34 bytes");
_Static_assert(sizeof(lob_fill) == 32, "lob_fill must be 32 bytes");

enum { FILLED, PARTIAL, ACCEPTED, CANCELLED, REJECTED, NOT_FOUND };
enum { R_NONE, R_BAD_KIND, R_BAD_TYPE, R_BAD_SIDE, R_BAD_OWNER, R_BAD_QTY, R_BAD_PRICE,
       R_BAD_SCOPE, R_UNKNOWN_ID, R_NO_LIQUIDITY, R_FOK_UNFILLABLE, R_WOULD_CROSS,
       R_SELF_TRADE };
enum { LIMIT, IOC, FOK, POST_ONLY, MARKET, NOTIONAL };
enum { STP_NONE, STP_CANCEL_MAKER, STP_CANCEL_TAKER, STP_CANCEL_BOTH };

#define MAX_WIDTH (1LL << 26) /* levels per side; wider bands are refused by lob_create */
/* the bounds of lob/semantics.py (LOB_MAX_QTY, LOB_MAX_NOTIONAL, LOB_MAX_PRICE) are in
 * lob_engine.h: above them a submit or modify is REJECTED / BAD_QTY */

typedef struct {
    int64_t id, qty;
    int32_t owner, next, prev, side;
    int64_t x; /* level index: price - min_price */
} node;

typedef struct {
    int32_t head, tail, count;
    int64_t qty;
} level;

struct lob_book {
    int64_t lo, hi, w;
    int32_t stp;
    level *lv[2];   /* bids, asks: w levels each */
    int64_t best[2]; /* index of the best non-empty level, -1 if the side is empty */
    int64_t live[2]; /* resting orders per side */
    node *pool;
    int32_t cap, free_head;
    int32_t *idx;   /* id -> node, -1 if not resting */
    uint64_t *live_ids; /* one bit per id, set while it rests: a cancel of a dead id (most
                           cancels of the C++ seed's stream) reads this small bitset only */
    int64_t idx_cap, next_id;
    /* per replay call */
    lob_fill *fills;
    int64_t nf;
    char err[160]; /* lob_last_error */
};

uint32_t lob_abi_version(void) { return LOB_ABI_VERSION; }

int64_t lob_struct_size(int32_t which) {
    switch (which) {
    case LOB_STRUCT_COMMAND: return (int64_t)sizeof(lob_command);
    case LOB_STRUCT_OUTCOME: return (int64_t)sizeof(lob_outcome);
    case LOB_STRUCT_FILL: return (int64_t)sizeof(lob_fill);
    case LOB_STRUCT_LEVEL: return (int64_t)sizeof(lob_level);
    case LOB_STRUCT_CONFIG: return (int64_t)sizeof(lob_config);
    case LOB_STRUCT_ORDER: return (int64_t)sizeof(lob_order);
    case LOB_STRUCT_CAPS: return (int64_t)sizeof(lob_caps);
    default: return -1;
    }
}

int32_t lob_capabilities(lob_caps *out) {
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    out->stp_modes = LOB_CAP_ALL_STP; /* the whole of lob/semantics.py */
    out->order_types = LOB_CAP_ALL_TYPES;
    out->kinds = LOB_CAP_ALL_KINDS;
    out->scopes = LOB_CAP_ALL_SCOPES;
    out->max_band_width = MAX_WIDTH;
    return 0;
}

static void say(char *err, int64_t cap, const char *msg) {
    if (err && cap > 0) snprintf(err, (size_t)cap, "%s", msg);
}

lob_book *lob_create(const lob_config *cfg, char *err, int64_t err_cap) {
    if (!cfg || cfg->min_price < 1 || cfg->max_price < cfg->min_price ||
        cfg->max_price > LOB_MAX_PRICE || cfg->stp < 0 || cfg->stp > 3) {
        say(err, err_cap, "bad config: need 1 <= min_price <= max_price <= LOB_MAX_PRICE "
                          "and stp in 0..3");
        return NULL;
    }
    int64_t w = cfg->max_price - cfg->min_price + 1;
    if (w <= 0 || w > MAX_WIDTH) {
        say(err, err_cap, "band wider than 2^26 prices (this engine keeps an array of levels "
                          "over the band)");
        return NULL;
    }
    lob_book *b = calloc(1, sizeof *b);
    if (!b) { say(err, err_cap, "out of memory"); return NULL; }
    b->lo = cfg->min_price;
    b->hi = cfg->max_price;
    b->w = w;
    b->stp = cfg->stp;
    b->best[0] = b->best[1] = -1;
    b->free_head = -1;
    for (int s = 0; s < 2; s++) {
        b->lv[s] = malloc((size_t)w * sizeof(level));
        if (!b->lv[s]) { lob_destroy(b); say(err, err_cap, "out of memory"); return NULL; }
        for (int64_t x = 0; x < w; x++) b->lv[s][x] = (level){-1, -1, 0, 0};
    }
    return b;
}

void lob_destroy(lob_book *b) {
    if (!b) return;
    free(b->lv[0]);
    free(b->lv[1]);
    free(b->pool);
    free(b->idx);
    free(b->live_ids);
    free(b);
}

/* ---- memory ------------------------------------------------------------------------- */
static int grow_pool(lob_book *b) {
    int64_t ncap = b->cap ? 2 * (int64_t)b->cap : 1024;
    if (ncap > INT32_MAX) return -1;
    node *p = realloc(b->pool, (size_t)ncap * sizeof(node));
    if (!p) return -1;
    for (int64_t i = b->cap; i < ncap; i++) p[i].next = (i + 1 < ncap) ? (int32_t)(i + 1) : -1;
    b->free_head = b->cap;
    b->pool = p;
    b->cap = (int32_t)ncap;
    return 0;
}

static int ensure_idx(lob_book *b, int64_t id) {
    if (id < b->idx_cap) return 0;
    int64_t ncap = b->idx_cap ? b->idx_cap : 1024;
    while (ncap <= id) ncap *= 2;
    int32_t *p = realloc(b->idx, (size_t)ncap * sizeof(int32_t));
    if (!p) return -1;
    b->idx = p;
    uint64_t *bits = realloc(b->live_ids, (size_t)(ncap / 64) * sizeof(uint64_t));
    if (!bits) return -1;
    b->live_ids = bits;
    for (int64_t i = b->idx_cap; i < ncap; i++) p[i] = -1;
    for (int64_t i = b->idx_cap / 64; i < ncap / 64; i++) bits[i] = 0;
    b->idx_cap = ncap;
    return 0;
}

/* ---- levels ------------------------------------------------------------------------- */
static inline int crosses(int side, int has_limit, int64_t limit, int64_t price) {
    return !has_limit || (side == 0 ? price <= limit : price >= limit);
}

static void refind_best(lob_book *b, int side) {
    level *lv = b->lv[side];
    if (b->live[side] == 0) { b->best[side] = -1; return; }
    int64_t x = b->best[side];
    if (side == 0) { while (x >= 0 && lv[x].count == 0) x--; }
    else { while (x < b->w && lv[x].count == 0) x++; }
    b->best[side] = (x >= 0 && x < b->w) ? x : -1;
}

/* take node k off its level (no fill); the caller frees it */
static void unlink_node(lob_book *b, int32_t k) {
    node *n = &b->pool[k];
    level *l = &b->lv[n->side][n->x];
    if (n->prev >= 0) b->pool[n->prev].next = n->next; else l->head = n->next;
    if (n->next >= 0) b->pool[n->next].prev = n->prev; else l->tail = n->prev;
    l->count--;
    l->qty -= n->qty;
    b->live[n->side]--;
    b->idx[n->id] = -1;
    b->live_ids[n->id >> 6] &= ~(1ULL << (n->id & 63));
    if (l->count == 0 && b->best[n->side] == n->x) refind_best(b, n->side);
}

static void free_node(lob_book *b, int32_t k) {
    b->pool[k].next = b->free_head;
    b->free_head = k;
}

static void remove_order(lob_book *b, int32_t k) {
    unlink_node(b, k);
    free_node(b, k);
}

static int rest(lob_book *b, int64_t oid, int32_t owner, int side, int64_t price, int64_t qty) {
    if (b->free_head < 0 && grow_pool(b)) return -1;
    int32_t k = b->free_head;
    node *n = &b->pool[k];
    b->free_head = n->next;
    int64_t x = price - b->lo;
    level *l = &b->lv[side][x];
    n->id = oid; n->qty = qty; n->owner = owner; n->side = side; n->x = x;
    n->next = -1; n->prev = l->tail;
    if (l->tail >= 0) b->pool[l->tail].next = k; else l->head = k;
    l->tail = k;
    l->count++;
    l->qty += qty;
    b->live[side]++;
    b->idx[oid] = k;
    b->live_ids[oid >> 6] |= 1ULL << (oid & 63);
    int64_t best = b->best[side];
    if (best < 0 || (side == 0 ? x > best : x < best)) b->best[side] = x;
    return 0;
}

/* ---- operations --------------------------------------------------------------------- */
static inline void set_out(lob_outcome *o, int st, int reason, int64_t id, int64_t rem,
                           int64_t filled, int64_t nfills, int64_t removed) {
    o->status = (int8_t)st; o->reason = (int8_t)reason; o->id = id; o->remaining = rem;
    o->filled = filled; o->fills = (int32_t)nfills; o->removed = (int32_t)removed;
}

/* quantity an incoming order could trade, honouring STP; stops early once >= want */
static int64_t available(lob_book *b, int side, int has_limit, int64_t limit, int32_t owner,
                         int64_t want) {
    int opp = 1 - side;
    level *lv = b->lv[opp];
    int64_t x = b->best[opp], total = 0;
    if (x < 0) return 0;
    int64_t step = opp == 0 ? -1 : 1;
    for (; x >= 0 && x < b->w; x += step) {
        if (lv[x].count == 0) continue;
        if (!crosses(side, has_limit, limit, b->lo + x)) break;
        if (b->stp == STP_NONE) {
            total += lv[x].qty;
        } else {
            for (int32_t k = lv[x].head; k >= 0; k = b->pool[k].next) {
                node *n = &b->pool[k];
                if (n->owner == owner) {
                    if (b->stp == STP_CANCEL_MAKER) continue;
                    return total;
                }
                total += n->qty;
            }
        }
        if (total >= want) return total;
    }
    return total;
}

static int match(lob_book *b, lob_outcome *o, int64_t oid, int32_t owner, int side, int otype,
                 int64_t price, int64_t qty) {
    int has_limit = otype < MARKET;
    int opp = 1 - side;
    level *lv = b->lv[opp];
    int64_t left = qty, filled = 0, nfills = 0, removed = 0;
    int taker_stopped = 0, too_dear = 0;
    while (left > 0 && b->best[opp] >= 0) {
        int64_t x = b->best[opp];
        int64_t p = b->lo + x;
        if (!crosses(side, has_limit, price, p)) break;
        if (otype == NOTIONAL && p > left) { too_dear = 1; break; }
        int32_t k = lv[x].head;
        node *n = &b->pool[k];
        if (n->owner == owner && b->stp != STP_NONE) {
            if (b->stp != STP_CANCEL_TAKER) { remove_order(b, k); removed++; }
            if (b->stp != STP_CANCEL_MAKER) { taker_stopped = 1; break; }
            continue;
        }
        int64_t cap = otype == NOTIONAL ? left / p : left;
        int64_t take = n->qty < cap ? n->qty : cap;
        n->qty -= take;
        lv[x].qty -= take;
        left -= otype == NOTIONAL ? take * p : take;
        filled += take;
        nfills++;
        b->fills[b->nf++] = (lob_fill){oid, n->id, p, take};
        if (n->qty == 0) remove_order(b, k);
    }
    int reason = taker_stopped ? R_SELF_TRADE : R_NONE;
    if (otype == NOTIONAL) {
        if (filled == 0)
            set_out(o, CANCELLED, reason ? reason : R_NO_LIQUIDITY, oid, left, 0, 0, removed);
        else
            set_out(o, ((too_dear || left == 0) && !taker_stopped) ? FILLED : PARTIAL, reason,
                    oid, left, filled, nfills, removed);
        return 0;
    }
    if (left == 0) { set_out(o, FILLED, R_NONE, oid, 0, filled, nfills, removed); return 0; }
    if ((otype == LIMIT || otype == POST_ONLY) && !taker_stopped) {
        if (rest(b, oid, owner, side, price, left)) return -1;
        set_out(o, filled ? PARTIAL : ACCEPTED, R_NONE, oid, left, filled, nfills, removed);
        return 0;
    }
    if (filled) set_out(o, PARTIAL, reason, oid, left, filled, nfills, removed);
    else set_out(o, CANCELLED, reason ? reason : R_NO_LIQUIDITY, oid, left, 0, 0, removed);
    return 0;
}

static int submit(lob_book *b, lob_outcome *o, int64_t oid, int32_t owner, int side, int otype,
                  int64_t price, int64_t qty) {
    int has_limit = otype < MARKET;
    int opp = 1 - side;
    if (otype == POST_ONLY && b->best[opp] >= 0 &&
        crosses(side, has_limit, price, b->lo + b->best[opp])) {
        set_out(o, CANCELLED, R_WOULD_CROSS, oid, qty, 0, 0, 0);
        return 0;
    }
    if (otype == FOK && available(b, side, has_limit, price, owner, qty) < qty) {
        set_out(o, CANCELLED, R_FOK_UNFILLABLE, oid, qty, 0, 0, 0);
        return 0;
    }
    return match(b, o, oid, owner, side, otype, price, qty);
}

static inline int32_t lookup(const lob_book *b, int64_t oid) {
    if (oid <= 0 || oid >= b->idx_cap || !((b->live_ids[oid >> 6] >> (oid & 63)) & 1)) return -1;
    return b->idx[oid];
}

static int modify(lob_book *b, lob_outcome *o, int64_t oid, int64_t qty, int64_t price) {
    int32_t k = lookup(b, oid);
    if (k < 0) { set_out(o, NOT_FOUND, R_UNKNOWN_ID, oid, 0, 0, 0, 0); return 0; }
    node *n = &b->pool[k];
    int64_t cur = b->lo + n->x;
    int32_t owner = n->owner;
    int side = n->side;
    if (price == 0 || price == cur) {
        if (qty <= n->qty) { /* keeps its place */
            b->lv[side][n->x].qty -= n->qty - qty;
            n->qty = qty;
        } else { /* to the tail of its level */
            remove_order(b, k);
            if (rest(b, oid, owner, side, cur, qty)) return -1;
        }
        set_out(o, ACCEPTED, R_NONE, oid, qty, 0, 0, 0);
        return 0;
    }
    remove_order(b, k);
    return match(b, o, oid, owner, side, LIMIT, price, qty);
}

static int64_t cancel_where(lob_book *b, int side, int64_t x0, int64_t x1, int by_owner,
                            int32_t owner) {
    int64_t removed = 0;
    level *lv = b->lv[side];
    for (int64_t x = x0; x <= x1 && b->live[side] > 0; x++) {
        int32_t k = lv[x].head;
        while (k >= 0) {
            int32_t nx = b->pool[k].next;
            if (!by_owner || b->pool[k].owner == owner) { remove_order(b, k); removed++; }
            k = nx;
        }
    }
    return removed;
}

static void mass_cancel(lob_book *b, lob_outcome *o, int scope, int side, int32_t owner,
                        int64_t plo, int64_t phi) {
    int64_t removed = 0;
    if (scope == 0 || scope == 2) {
        for (int s = 0; s < 2; s++) removed += cancel_where(b, s, 0, b->w - 1, scope == 2, owner);
    } else if (scope == 1) {
        removed = cancel_where(b, side, 0, b->w - 1, 0, 0);
    } else {
        if (plo <= b->hi && phi >= b->lo) { /* the range meets the band */
            int64_t x0 = plo < b->lo ? 0 : plo - b->lo;
            int64_t x1 = phi > b->hi ? b->w - 1 : phi - b->lo;
            for (int s = 0; s < 2; s++) removed += cancel_where(b, s, x0, x1, 0, 0);
        }
    }
    set_out(o, CANCELLED, R_NONE, 0, 0, 0, 0, removed);
}

static inline void rejected(lob_outcome *o, int reason) {
    set_out(o, REJECTED, reason, 0, 0, 0, 0, 0);
}

/* one command; -1 on out of memory (the book is unchanged in that case) */
static int exec(lob_book *b, const lob_command *c, lob_outcome *o) {
    int kind = c->kind, otype = c->otype, side = c->side;
    switch (kind) {
    case 0:
        if (otype < 0 || otype > NOTIONAL) { rejected(o, R_BAD_TYPE); return 0; }
        if (side != 0 && side != 1) { rejected(o, R_BAD_SIDE); return 0; }
        if (c->owner <= 0) { rejected(o, R_BAD_OWNER); return 0; }
        if (c->qty <= 0 ||
            (c->qty > LOB_MAX_QTY && (otype != NOTIONAL || c->qty > LOB_MAX_NOTIONAL))) {
            rejected(o, R_BAD_QTY);
            return 0;
        }
        if (otype < MARKET && (c->price < b->lo || c->price > b->hi)) {
            rejected(o, R_BAD_PRICE);
            return 0;
        }
        if (ensure_idx(b, b->next_id + 1)) return -1;
        if (b->free_head < 0 && grow_pool(b)) return -1;
        b->next_id++;
        return submit(b, o, b->next_id, c->owner, side, otype, c->price, c->qty);
    case 1: {
        int32_t k = lookup(b, c->id);
        if (k < 0) set_out(o, NOT_FOUND, R_UNKNOWN_ID, c->id, 0, 0, 0, 0);
        else { remove_order(b, k); set_out(o, CANCELLED, R_NONE, c->id, 0, 0, 0, 1); }
        return 0;
    }
    case 2:
        if (c->qty <= 0 || c->qty > LOB_MAX_QTY) { rejected(o, R_BAD_QTY); return 0; }
        if (c->price != 0 && (c->price < b->lo || c->price > b->hi)) {
            rejected(o, R_BAD_PRICE);
            return 0;
        }
        if (b->free_head < 0 && grow_pool(b)) return -1;
        return modify(b, o, c->id, c->qty, c->price);
    case 3:
        if (otype < 0 || otype > 3) { rejected(o, R_BAD_SCOPE); return 0; }
        if (otype == 1 && side != 0 && side != 1) { rejected(o, R_BAD_SIDE); return 0; }
        if (otype == 2 && c->owner <= 0) { rejected(o, R_BAD_OWNER); return 0; }
        if (otype == 3 && c->price > c->price_hi) { rejected(o, R_BAD_PRICE); return 0; }
        mass_cancel(b, o, otype, side, c->owner, c->price, c->price_hi);
        return 0;
    default:
        rejected(o, R_BAD_KIND);
        return 0;
    }
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int32_t replay_impl(lob_book *b, const lob_command *cmds, int64_t n,
                                  lob_outcome *out, lob_fill *fills, int64_t fill_cap,
                                  int64_t *n_done, int64_t *n_fills, int64_t *ns) {
    if (!b || (n > 0 && (!cmds || !out)) || n < 0 || fill_cap < 0 || !n_done || !n_fills ||
        (fill_cap > 0 && !fills))
        return LOB_ERR_ARG;
    b->fills = fills;
    b->nf = 0;
    int32_t rc = LOB_OK;
    int64_t i = 0;
    for (; i < n; i++) {
        const lob_command *c = &cmds[i];
        /* a submit or modify fills each resting maker at most once */
        if ((c->kind == 0 || c->kind == 2) && fill_cap - b->nf < b->live[0] + b->live[1]) {
            rc = LOB_NEED_FILL_SPACE;
            break;
        }
        int r;
        if (ns && c->timed) {
            int64_t t0 = now_ns();
            r = exec(b, c, &out[i]);
            ns[i] = now_ns() - t0;
        } else {
            r = exec(b, c, &out[i]);
        }
        if (r) {
            snprintf(b->err, sizeof b->err, "out of memory growing the order pool or id index "
                     "(%lld resting orders)", (long long)(b->live[0] + b->live[1]));
            rc = LOB_ERR_NOMEM;
            break;
        }
    }
    *n_done = i;
    *n_fills = b->nf;
    b->fills = NULL;
    return rc;
}

int32_t lob_replay(lob_book *b, const lob_command *cmds, int64_t n, lob_outcome *out,
                   lob_fill *fills, int64_t fill_cap, int64_t *n_done, int64_t *n_fills) {
    return replay_impl(b, cmds, n, out, fills, fill_cap, n_done, n_fills, NULL);
}

int32_t lob_replay_timed(lob_book *b, const lob_command *cmds, int64_t n, lob_outcome *out,
                         lob_fill *fills, int64_t fill_cap, int64_t *n_done, int64_t *n_fills,
                         int64_t *ns) {
    if (!ns && n > 0) return LOB_ERR_ARG;
    return replay_impl(b, cmds, n, out, fills, fill_cap, n_done, n_fills, ns);
}

int64_t lob_last_error(const lob_book *b, char *msg, int64_t cap) {
    if (!b || !msg || cap <= 0) return 0;
    snprintf(msg, (size_t)cap, "%s", b->err);
    return (int64_t)strlen(b->err);
}

void lob_clock_samples(int64_t *out, int64_t n) {
    int64_t prev = now_ns();
    for (int64_t i = 0; i < n; i++) {
        int64_t t = now_ns();
        out[i] = t - prev;
        prev = t;
    }
}

int64_t lob_snapshot(const lob_book *b, int32_t side, int64_t depth, lob_level *out) {
    if (!b || (side != 0 && side != 1) || depth <= 0 || !out) return 0;
    int64_t k = 0, step = side == 0 ? -1 : 1;
    const level *lv = b->lv[side];
    for (int64_t x = b->best[side]; x >= 0 && x < b->w && k < depth; x += step)
        if (lv[x].count) out[k++] = (lob_level){b->lo + x, lv[x].qty, lv[x].count};
    return k;
}

int64_t lob_resting(const lob_book *b, lob_order *out, int64_t cap) {
    if (!b) return 0;
    int64_t k = 0;
    for (int s = 0; s < 2; s++) {
        int64_t step = s == 0 ? -1 : 1;
        for (int64_t x = b->best[s]; x >= 0 && x < b->w; x += step)
            for (int32_t j = b->lv[s][x].head; j >= 0; j = b->pool[j].next, k++)
                if (out && k < cap)
                    out[k] = (lob_order){b->pool[j].id, b->pool[j].owner, s, b->lo + x,
                                         b->pool[j].qty};
    }
    return k;
}

#define FAIL(...) do { snprintf(msg, (size_t)cap, __VA_ARGS__); return 1; } while (0)

int32_t lob_check(const lob_book *b, char *msg, int64_t cap) {
    if (!b) return 1;
    int64_t seen = 0;
    for (int s = 0; s < 2; s++) {
        int64_t live = 0, best = -1;
        for (int64_t x = 0; x < b->w; x++) {
            const level *l = &b->lv[s][x];
            int64_t q = 0, c = 0;
            int32_t prev = -1;
            for (int32_t k = l->head; k >= 0; k = b->pool[k].next) {
                const node *n = &b->pool[k];
                if (n->prev != prev) FAIL("broken links at level %lld", (long long)(b->lo + x));
                if (n->qty <= 0) FAIL("order %lld rests with qty %lld", (long long)n->id,
                                      (long long)n->qty);
                if (n->side != s || n->x != x) FAIL("order %lld in the wrong level",
                                                    (long long)n->id);
                if (n->id <= 0 || n->id >= b->idx_cap || b->idx[n->id] != k)
                    FAIL("order %lld missing from the index", (long long)n->id);
                q += n->qty;
                c++;
                prev = k;
                if (c > b->cap) FAIL("cycle at level %lld", (long long)(b->lo + x));
            }
            if (l->tail != prev) FAIL("bad tail at level %lld", (long long)(b->lo + x));
            if (q != l->qty || c != l->count) FAIL("level %lld totals wrong", (long long)(b->lo + x));
            if (c && (s == 0 || best < 0)) best = x; /* bids: highest; asks: lowest */
            live += c;
        }
        if (live != b->live[s]) FAIL("side %d counts %lld orders, holds %lld", s,
                                     (long long)b->live[s], (long long)live);
        if (best != b->best[s]) FAIL("side %d best is %lld, cached %lld", s, (long long)best,
                                     (long long)b->best[s]);
        seen += live;
    }
    if (b->best[0] >= 0 && b->best[1] >= 0 && b->best[0] >= b->best[1]) FAIL("book is crossed");
    int64_t indexed = 0;
    for (int64_t i = 0; i < b->idx_cap; i++) {
        if ((b->idx[i] >= 0) != (int)((b->live_ids[i >> 6] >> (i & 63)) & 1))
            FAIL("live-id bit of id %lld disagrees with the index", (long long)i);
        indexed += b->idx[i] >= 0;
    }
    if (indexed != seen) FAIL("index holds %lld ids, book %lld orders", (long long)indexed,
                              (long long)seen);
    return 0;
}
