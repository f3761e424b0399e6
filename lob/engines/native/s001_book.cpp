// lob's own C++ build of the lineage of seed 001 (the C++ binary-market engine), written from
// the seed's description of its design (its benchmark notes), not from its code, behind lob's
// C ABI (lob_engine.h). One source, three compile-time toggles (-D flags), each a mechanism
// the seed names:
//
//   LOB_LEVELS_POOL   0: per side an array of 100 std::list<Order>, one heap node per order
//                        (the seed's v0);
//                     1: one pre-allocated node pool per book, intrusive doubly linked lists
//                        with int32 links, freed nodes recycled through a free list (v1);
//   LOB_BEST_BITMASK  0: the best price found by a linear scan over the 99 prices, re-run at
//                        every match step (v0);
//                     1: a two-word (128-bit) non-empty-level bitmask per side; the best bid
//                        by count-leading-zeros, the best ask by count-trailing-zeros (v1);
//   LOB_FOK_EARLY     0: a FOK's availability sums every crossing order of other owners (v0,
//                        v1); 1: it stops as soon as the sum reaches the FOK's quantity (v2).
//
// Both versions keep the cancel index of the seed: std::unordered_map from id to where the
// order rests. Sums (FOK availability, a level's quantity in a snapshot) are int64.
//
// Semantics: the seed's engine, which is a subset of lob/semantics.py: SUBMIT of LIMIT, IOC,
// FOK and POST_ONLY, CANCEL, self-trade prevention CANCEL_MAKER. Prices are array indices
// 1..99 (index 0 unused, as in an array of 100 lists): lob_capabilities declares that range
// and the band width 99; a book's band is any lo..hi inside it (prices outside the band are
// rejected like lob's). Every other command is validated as lob validates it (an invalid one
// is REJECTED with lob's reason); a valid one this engine cannot run (MODIFY, MASS_CANCEL,
// MARKET, NOTIONAL) stops the replay with LOB_UNSUPPORTED (lob refuses such arrays before the
// call, from the declaration).
#include "lob_engine.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <list>
#include <new>
#include <unordered_map>
#include <vector>

#ifndef LOB_LEVELS_POOL
#define LOB_LEVELS_POOL 0
#endif
#ifndef LOB_BEST_BITMASK
#define LOB_BEST_BITMASK 0
#endif
#ifndef LOB_FOK_EARLY
#define LOB_FOK_EARLY 0
#endif

static_assert(sizeof(lob_command) == 40, "lob_command must be 40 bytes");
static_assert(sizeof(lob_outcome) == 34, "lob_outcome must be 34 bytes");
static_assert(sizeof(lob_fill) == 32, "lob_fill must be 32 bytes");
static_assert(sizeof(lob_caps) == 56, "lob_caps must be 56 bytes");

namespace {

constexpr int64_t LO = 1, HI = 99;  // the prices the book can hold (array indices)
constexpr int NPRICES = 100;         // 100 levels per side, index 0 unused

struct Order {
    int64_t id;
    int64_t qty;
    int32_t owner;
};

#if LOB_LEVELS_POOL
struct Node {
    Order o;
    int32_t prev, next;
};
struct Level {
    int32_t head = -1, tail = -1;
};
using Handle = int32_t;
#else
using Level = std::list<Order>;
using Handle = std::list<Order>::iterator;
#endif

struct Loc {
    int32_t side;
    int32_t price;
    Handle h;
};

}  // namespace

struct lob_book {
    int64_t lo, hi;  // the book's band, inside LO..HI
    std::array<Level, NPRICES> lv[2];  // [side][price]: 0 bids, 1 asks
#if LOB_BEST_BITMASK
    uint64_t bits[2][2] = {{0, 0}, {0, 0}};  // [side][word]: bit p % 64 of word p / 64
#endif
#if LOB_LEVELS_POOL
    std::vector<Node> pool;
    int32_t free_head = -1;
#endif
    std::unordered_map<int64_t, Loc> index;  // resting id -> where it rests
    int64_t next_id = 0;
    int64_t live = 0;  // resting orders
    lob_fill *fills = nullptr;
    int64_t nf = 0;
    char err[256] = {0};
};

namespace {

enum { FILLED, PARTIAL, ACCEPTED, CANCELLED, REJECTED, NOT_FOUND };
enum { R_NONE, R_BAD_KIND, R_BAD_TYPE, R_BAD_SIDE, R_BAD_OWNER, R_BAD_QTY, R_BAD_PRICE,
       R_BAD_SCOPE, R_UNKNOWN_ID, R_NO_LIQUIDITY, R_FOK_UNFILLABLE, R_WOULD_CROSS };
constexpr int UNSUPPORTED_CMD = 2;  // exec's return: stop with LOB_UNSUPPORTED

// ---- one level: a std::list, or a list threaded through the node pool --------------------

#if LOB_LEVELS_POOL
constexpr int32_t POOL_START = 1 << 16;  // nodes allocated with the book

void grow_pool(lob_book *b) {
    size_t old = b->pool.size();
    size_t n = old ? 2 * old : POOL_START;
    if (n > INT32_MAX) throw std::bad_alloc();
    b->pool.resize(n);
    for (size_t i = old; i < n; i++)
        b->pool[i].next = i + 1 < n ? static_cast<int32_t>(i + 1) : b->free_head;
    b->free_head = static_cast<int32_t>(old);
}

inline bool level_empty(const lob_book *b, int s, int p) { return b->lv[s][p].head < 0; }
inline Order &order_at(lob_book *b, Handle h) { return b->pool[h].o; }
inline Handle level_front(const lob_book *b, int s, int p) { return b->lv[s][p].head; }

inline Handle level_push(lob_book *b, int s, int p, const Order &o) {
    if (b->free_head < 0) grow_pool(b);
    int32_t k = b->free_head;
    Node &n = b->pool[k];
    b->free_head = n.next;
    Level &l = b->lv[s][p];
    n.o = o;
    n.prev = l.tail;
    n.next = -1;
    if (l.tail >= 0) b->pool[l.tail].next = k; else l.head = k;
    l.tail = k;
    return k;
}

inline void level_erase(lob_book *b, int s, int p, Handle k) {
    Node &n = b->pool[k];
    Level &l = b->lv[s][p];
    if (n.prev >= 0) b->pool[n.prev].next = n.next; else l.head = n.next;
    if (n.next >= 0) b->pool[n.next].prev = n.prev; else l.tail = n.prev;
    n.next = b->free_head;
    b->free_head = k;
}

template <class F> inline bool level_each(const lob_book *b, int s, int p, F f) {
    for (int32_t k = b->lv[s][p].head; k >= 0; k = b->pool[k].next)
        if (!f(b->pool[k].o)) return false;
    return true;
}
#else
inline bool level_empty(const lob_book *b, int s, int p) { return b->lv[s][p].empty(); }
inline Order &order_at(lob_book *, Handle h) { return *h; }
inline Handle level_front(lob_book *b, int s, int p) { return b->lv[s][p].begin(); }

inline Handle level_push(lob_book *b, int s, int p, const Order &o) {
    Level &l = b->lv[s][p];
    l.push_back(o);  // one heap node per order
    return std::prev(l.end());
}

inline void level_erase(lob_book *b, int s, int p, Handle h) { b->lv[s][p].erase(h); }

template <class F> inline bool level_each(const lob_book *b, int s, int p, F f) {
    for (const Order &o : b->lv[s][p])
        if (!f(o)) return false;
    return true;
}
#endif

// ---- the best price ----------------------------------------------------------------------

#if LOB_BEST_BITMASK
inline void mark(lob_book *b, int s, int p) { b->bits[s][p >> 6] |= 1ULL << (p & 63); }
inline void unmark(lob_book *b, int s, int p) { b->bits[s][p >> 6] &= ~(1ULL << (p & 63)); }

inline int best(const lob_book *b, int s) {
    const uint64_t *w = b->bits[s];
    if (s == 0) {  // bids: the highest set bit
        if (w[1]) return 64 + 63 - __builtin_clzll(w[1]);
        if (w[0]) return 63 - __builtin_clzll(w[0]);
    } else {  // asks: the lowest set bit
        if (w[0]) return __builtin_ctzll(w[0]);
        if (w[1]) return 64 + __builtin_ctzll(w[1]);
    }
    return -1;
}
#else
inline void mark(lob_book *, int, int) {}
inline void unmark(lob_book *, int, int) {}

inline int best(const lob_book *b, int s) {  // a linear scan over the 99 prices
    if (s == 0) {
        for (int p = HI; p >= LO; p--)
            if (!level_empty(b, 0, p)) return p;
    } else {
        for (int p = LO; p <= HI; p++)
            if (!level_empty(b, 1, p)) return p;
    }
    return -1;
}
#endif

// ---- orders ------------------------------------------------------------------------------

inline void rest(lob_book *b, int s, int p, int64_t id, int32_t owner, int64_t qty) {
    bool was_empty = level_empty(b, s, p);
    Handle h = level_push(b, s, p, Order{id, qty, owner});
    b->index.emplace(id, Loc{s, p, h});
    if (was_empty) mark(b, s, p);
    b->live++;
}

inline void remove(lob_book *b, int s, int p, Handle h, int64_t id) {
    level_erase(b, s, p, h);
    b->index.erase(id);
    if (level_empty(b, s, p)) unmark(b, s, p);
    b->live--;
}

inline bool crosses(int side, int64_t limit, int p) {
    return side == 0 ? p <= limit : p >= limit;  // a buy meets asks <= limit
}

// quantity of the crossing orders of other owners (STP CANCEL_MAKER: own orders would be
// cancelled, not filled); v2 stops as soon as it reaches `want`
int64_t available(const lob_book *b, int side, int64_t limit, int32_t owner, int64_t want) {
    int opp = 1 - side;
    int64_t total = 0;
    (void)want;
    int step = opp == 0 ? -1 : 1;
    for (int p = opp == 0 ? HI : LO; p >= LO && p <= HI && crosses(side, limit, p); p += step) {
        bool more = level_each(b, opp, p, [&](const Order &o) {
            if (o.owner != owner) total += o.qty;
#if LOB_FOK_EARLY
            if (total >= want) return false;
#endif
            return true;
        });
        if (!more) return total;
    }
    return total;
}

inline void set_out(lob_outcome *o, int st, int reason, int64_t id, int64_t rem, int64_t filled,
                    int64_t nfills, int64_t removed) {
    o->status = static_cast<int8_t>(st);
    o->reason = static_cast<int8_t>(reason);
    o->id = id;
    o->remaining = rem;
    o->filled = filled;
    o->fills = static_cast<int32_t>(nfills);
    o->removed = static_cast<int32_t>(removed);
}

void submit(lob_book *b, lob_outcome *out, int64_t id, int32_t owner, int side, int otype,
            int64_t price, int64_t qty) {
    int opp = 1 - side;
    if (otype == LOB_POST_ONLY) {
        int bp = best(b, opp);
        if (bp >= 0 && crosses(side, price, bp)) {
            set_out(out, CANCELLED, R_WOULD_CROSS, id, qty, 0, 0, 0);
            return;
        }
    }
    if (otype == LOB_FOK && available(b, side, price, owner, qty) < qty) {
        set_out(out, CANCELLED, R_FOK_UNFILLABLE, id, qty, 0, 0, 0);
        return;
    }
    int64_t left = qty, filled = 0, nfills = 0, removed = 0;
    while (left > 0) {
        int bp = best(b, opp);  // v0: the scan, at every step
        if (bp < 0 || !crosses(side, price, bp)) break;
        Handle h = level_front(b, opp, bp);
        Order &m = order_at(b, h);
        if (m.owner == owner) {  // STP CANCEL_MAKER: the maker goes, matching goes on
            remove(b, opp, bp, h, m.id);
            removed++;
            continue;
        }
        int64_t take = m.qty < left ? m.qty : left;
        m.qty -= take;
        left -= take;
        filled += take;
        nfills++;
        b->fills[b->nf++] = lob_fill{id, m.id, bp, take};
        if (m.qty == 0) remove(b, opp, bp, h, m.id);
    }
    if (left == 0) {
        set_out(out, FILLED, R_NONE, id, 0, filled, nfills, removed);
    } else if (otype == LOB_LIMIT || otype == LOB_POST_ONLY) {
        rest(b, side, static_cast<int>(price), id, owner, left);
        set_out(out, filled ? PARTIAL : ACCEPTED, R_NONE, id, left, filled, nfills, removed);
    } else if (filled) {
        set_out(out, PARTIAL, R_NONE, id, left, filled, nfills, removed);
    } else {
        set_out(out, CANCELLED, R_NO_LIQUIDITY, id, left, 0, 0, removed);
    }
}

inline void rejected(lob_outcome *o, int reason) { set_out(o, REJECTED, reason, 0, 0, 0, 0, 0); }

// one command: 0, or UNSUPPORTED_CMD (nothing done) with the reason in b->err
int exec(lob_book *b, const lob_command *c, lob_outcome *o) {
    int otype = c->otype, side = c->side;
    switch (c->kind) {
    case LOB_SUBMIT:
        if (otype < 0 || otype > LOB_NOTIONAL) { rejected(o, R_BAD_TYPE); return 0; }
        if (side != 0 && side != 1) { rejected(o, R_BAD_SIDE); return 0; }
        if (c->owner <= 0) { rejected(o, R_BAD_OWNER); return 0; }
        if (c->qty <= 0 ||
            (c->qty > LOB_MAX_QTY && (otype != LOB_NOTIONAL || c->qty > LOB_MAX_NOTIONAL))) {
            rejected(o, R_BAD_QTY);
            return 0;
        }
        if (otype >= LOB_MARKET) {
            snprintf(b->err, sizeof b->err, "%s orders are not part of this engine (the "
                     "seed's engine has LIMIT, IOC, FOK and POST_ONLY)",
                     otype == LOB_MARKET ? "MARKET" : "NOTIONAL");
            return UNSUPPORTED_CMD;
        }
        if (c->price < b->lo || c->price > b->hi) { rejected(o, R_BAD_PRICE); return 0; }
        submit(b, o, ++b->next_id, c->owner, side, otype, c->price, c->qty);
        return 0;
    case LOB_CANCEL: {
        auto it = b->index.find(c->id);
        if (it == b->index.end()) {
            set_out(o, NOT_FOUND, R_UNKNOWN_ID, c->id, 0, 0, 0, 0);
        } else {
            Loc at = it->second;
            remove(b, at.side, at.price, at.h, c->id);
            set_out(o, CANCELLED, R_NONE, c->id, 0, 0, 0, 1);
        }
        return 0;
    }
    case LOB_MODIFY:
        if (c->qty <= 0 || c->qty > LOB_MAX_QTY) { rejected(o, R_BAD_QTY); return 0; }
        if (c->price != 0 && (c->price < b->lo || c->price > b->hi)) {
            rejected(o, R_BAD_PRICE);
            return 0;
        }
        snprintf(b->err, sizeof b->err, "MODIFY is not part of this engine");
        return UNSUPPORTED_CMD;
    case LOB_MASS_CANCEL:
        if (otype < 0 || otype > 3) { rejected(o, R_BAD_SCOPE); return 0; }
        if (otype == LOB_SCOPE_SIDE && side != 0 && side != 1) { rejected(o, R_BAD_SIDE); return 0; }
        if (otype == LOB_SCOPE_OWNER && c->owner <= 0) { rejected(o, R_BAD_OWNER); return 0; }
        if (otype == LOB_SCOPE_PRICE_RANGE && c->price > c->price_hi) {
            rejected(o, R_BAD_PRICE);
            return 0;
        }
        snprintf(b->err, sizeof b->err, "MASS_CANCEL is not part of this engine");
        return UNSUPPORTED_CMD;
    default:
        rejected(o, R_BAD_KIND);
        return 0;
    }
}

inline int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int32_t replay_impl(lob_book *b, const lob_command *cmds, int64_t n, lob_outcome *out,
                    lob_fill *fills, int64_t fill_cap, int64_t *n_done, int64_t *n_fills,
                    int64_t *ns) {
    if (!b || n < 0 || (n > 0 && (!cmds || !out)) || fill_cap < 0 || !n_done || !n_fills ||
        (fill_cap > 0 && !fills))
        return LOB_ERR_ARG;
    b->fills = fills;
    b->nf = 0;
    int32_t rc = LOB_OK;
    int64_t i = 0;
    try {
        for (; i < n; i++) {
            const lob_command *c = &cmds[i];
            if (c->kind == LOB_SUBMIT && fill_cap - b->nf < b->live) {  // each maker once
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
            if (r == UNSUPPORTED_CMD) {
                rc = LOB_UNSUPPORTED;
                break;
            }
        }
    } catch (const std::bad_alloc &) {
        snprintf(b->err, sizeof b->err, "out of memory (%lld resting orders)",
                 static_cast<long long>(b->live));
        rc = LOB_ERR_NOMEM;
    } catch (...) {
        snprintf(b->err, sizeof b->err, "internal error");
        rc = LOB_ERR_ENGINE;
    }
    *n_done = i;
    *n_fills = b->nf;
    b->fills = nullptr;
    return rc;
}

}  // namespace

extern "C" {

uint32_t lob_abi_version(void) { return LOB_ABI_VERSION; }

int64_t lob_struct_size(int32_t which) {
    switch (which) {
    case LOB_STRUCT_COMMAND: return sizeof(lob_command);
    case LOB_STRUCT_OUTCOME: return sizeof(lob_outcome);
    case LOB_STRUCT_FILL: return sizeof(lob_fill);
    case LOB_STRUCT_LEVEL: return sizeof(lob_level);
    case LOB_STRUCT_CONFIG: return sizeof(lob_config);
    case LOB_STRUCT_ORDER: return sizeof(lob_order);
    case LOB_STRUCT_CAPS: return sizeof(lob_caps);
    default: return -1;
    }
}

int32_t lob_capabilities(lob_caps *out) {
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    out->stp_modes = LOB_CAP_BIT(LOB_STP_CANCEL_MAKER);
    out->order_types = LOB_CAP_BIT(LOB_LIMIT) | LOB_CAP_BIT(LOB_IOC) | LOB_CAP_BIT(LOB_FOK) |
                       LOB_CAP_BIT(LOB_POST_ONLY);
    out->kinds = LOB_CAP_BIT(LOB_SUBMIT) | LOB_CAP_BIT(LOB_CANCEL);
    out->scopes = 0;
    out->max_band_width = HI - LO + 1;
    out->reserved[0] = LO;  // the prices the book can hold
    out->reserved[1] = HI;
    return 0;
}

lob_book *lob_create(const lob_config *cfg, char *err, int64_t err_cap) {
    auto say = [&](const char *m) { if (err && err_cap > 0) snprintf(err, err_cap, "%s", m); };
    if (!cfg || cfg->min_price < LO || cfg->max_price > HI || cfg->min_price > cfg->max_price) {
        say("the band must lie inside 1..99 (the engine's 100 price levels per side)");
        return nullptr;
    }
    if (cfg->stp != LOB_STP_CANCEL_MAKER) {
        say("STP mode must be CANCEL_MAKER (the seed's engine cancels the resting order)");
        return nullptr;
    }
    try {
        lob_book *b = new lob_book();
        b->lo = cfg->min_price;
        b->hi = cfg->max_price;
#if LOB_LEVELS_POOL
        grow_pool(b);  // pre-allocated
#endif
        return b;
    } catch (...) {
        say("out of memory");
        return nullptr;
    }
}

void lob_destroy(lob_book *b) { delete b; }

int32_t lob_replay(lob_book *b, const lob_command *cmds, int64_t n, lob_outcome *out,
                   lob_fill *fills, int64_t fill_cap, int64_t *n_done, int64_t *n_fills) {
    return replay_impl(b, cmds, n, out, fills, fill_cap, n_done, n_fills, nullptr);
}

int32_t lob_replay_timed(lob_book *b, const lob_command *cmds, int64_t n, lob_outcome *out,
                         lob_fill *fills, int64_t fill_cap, int64_t *n_done, int64_t *n_fills,
                         int64_t *ns) {
    if (!ns && n > 0) return LOB_ERR_ARG;
    return replay_impl(b, cmds, n, out, fills, fill_cap, n_done, n_fills, ns);
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
    int64_t k = 0;
    int step = side == 0 ? -1 : 1;
    for (int p = side == 0 ? HI : LO; p >= LO && p <= HI && k < depth; p += step) {
        int64_t qty = 0, count = 0;
        level_each(b, side, p, [&](const Order &o) { qty += o.qty; count++; return true; });
        if (count) out[k++] = lob_level{p, qty, count};
    }
    return k;
}

int64_t lob_resting(const lob_book *b, lob_order *out, int64_t cap) {
    if (!b) return 0;
    int64_t k = 0;
    for (int s = 0; s < 2; s++) {
        int step = s == 0 ? -1 : 1;
        for (int p = s == 0 ? HI : LO; p >= LO && p <= HI; p += step)
            level_each(b, s, p, [&](const Order &o) {
                if (out && k < cap) out[k] = lob_order{o.id, o.owner, s, p, o.qty};
                k++;
                return true;
            });
    }
    return k;
}

int64_t lob_last_error(const lob_book *b, char *msg, int64_t cap) {
    if (!b || !msg || cap <= 0) return 0;
    snprintf(msg, cap, "%s", b->err);
    return static_cast<int64_t>(strlen(b->err));
}

int32_t lob_check(const lob_book *b, char *msg, int64_t cap) {
    if (!b) return 1;
    auto fail = [&](const char *what, long long a, long long c) {
        if (msg && cap > 0) snprintf(msg, cap, what, a, c);
        return 1;
    };
    int64_t seen = 0;
    for (int s = 0; s < 2; s++) {
        for (int p = 0; p < NPRICES; p++) {
            int64_t count = 0;
            bool bad_order = false;
            int64_t bad_id = 0;
            level_each(b, s, p, [&](const Order &o) {
                auto it = b->index.find(o.id);
                if (o.qty <= 0 || it == b->index.end() || it->second.side != s ||
                    it->second.price != p || &order_at(const_cast<lob_book *>(b),
                                                        it->second.h) != &o) {
                    bad_order = true;
                    bad_id = o.id;
                    return false;
                }
                count++;
                return true;
            });
            if (bad_order) return fail("order %lld at price %lld: bad qty or index entry",
                                       bad_id, p);
            if (count && (p < b->lo || p > b->hi))
                return fail("side %lld rests orders at price %lld, outside the band", s, p);
#if LOB_BEST_BITMASK
            bool bit = (b->bits[s][p >> 6] >> (p & 63)) & 1;
            if (bit != (count > 0))
                return fail("side %lld: the bitmask disagrees with level %lld", s, p);
#endif
            seen += count;
        }
    }
    if (seen != b->live || seen != static_cast<int64_t>(b->index.size()))
        return fail("the book holds %lld orders, the index %lld", seen,
                    static_cast<long long>(b->index.size()));
    int bb = best(b, 0), ba = best(b, 1);
    if (bb >= 0 && ba >= 0 && bb >= ba) return fail("the book is crossed: bid %lld, ask %lld", bb, ba);
    return 0;
}

}  // extern "C"
