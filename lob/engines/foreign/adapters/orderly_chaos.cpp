// lob_engine.h over orderly-chaos 0.2.0 (PyPI, MIT, Copyright (c) 2026 Meet Mendapara;
// portions Copyright (c) 2019-2020 Christian Kauten; bundles tsl::robin_map, MIT,
// Copyright (c) 2017 Tessil). Nothing of orderly-chaos is in lob's repository: the build
// (lob/engines/foreign/adapters) fetches its sdist with pip, compiles this file against
// its headers and src/c_api.cpp, and keeps its LICENSE and notices beside the library.
//
// The book is orderly-chaos's; every command goes through its C API (orderly_chaos.h).
// What lob's semantics need and that API lacks is emulated here, exactly:
//   ids        lob's sequential ids are the ids orderly-chaos is given (it takes the
//              caller's); a rejected submit takes none.
//   sides      lob BUY = 0 / SELL = 1, orderly-chaos SELL = 0 / BUY = 1: oc_side(s) = 1 - s.
//   prices     lob's band starts at 1, so no price is orderly-chaos's reserved 0.
//   owners     orderly-chaos has none: owner[id] is kept here (mass cancel by owner,
//              lob_resting), with price[id], side and a live bit (set when it rests, cleared
//              by a cancel or by the trade callback when a maker is filled): cancels and mass
//              cancels ask these arrays, not orderly-chaos's hash index. Without owners there is no self-trade prevention: STP modes
//              other than NONE are refused at lob_create (and declared so).
//   LIMIT      oc_book_limit.            MARKET  oc_book_market.
//   POST_ONLY  the best opposite price first (cancelled WOULD_CROSS if it crosses), then
//              oc_book_limit (rests untouched).
//   IOC, FOK   the crossing quantity from the best level, then oc_book_depth pages; then
//              oc_book_market of exactly what may trade (FOK: all or nothing).
//   NOTIONAL   the levels walked the same way: floor(left / p) lots per level until a
//              level is too dear; then oc_book_market of that quantity (split at 2^32-1,
//              orderly-chaos's quantities are uint32).
//   MODIFY     down at the same price: oc_book_reduce (keeps priority); up at the same
//              price: cancel + re-add (to the tail); another price: cancel + oc_book_limit
//              with the same id (may trade).
//   MASS_CANCEL ALL: oc_book_clear; other scopes: this shim's list of ids that rested
//              (compacted as it goes), matched from the arrays by id, then oc_book_cancel.
//   fills      the trade callback (called after each operation, in match order) writes
//              lob's fill records: taker, maker id, maker price, quantity.
//   validation lob's reasons, before orderly-chaos is called (it never sees a bad command).
// Exceptions never cross this boundary: orderly-chaos's C API turns its own into status
// codes, and this file catches std::bad_alloc from its own containers (LOB_ERR_NOMEM).
#include "lob_engine.h"

#include "c_api.cpp"  // orderly-chaos's C API, compiled in this unit (inlined; lob_check)

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>
#include <vector>

static_assert(sizeof(lob_command) == 40, "lob_command must be 40 bytes");
static_assert(sizeof(lob_outcome) == 34, "lob_outcome must be 34 bytes");
static_assert(sizeof(lob_fill) == 32, "lob_fill must be 32 bytes");

namespace {

constexpr uint64_t OC_QTY_MAX = 0xFFFFFFFFull;  // orderly-chaos quantities are uint32
// oc_shim_stats counters: what the emulation asked of orderly-chaos beyond one call
enum { ST_WALKS, ST_DEPTH_PAGES, ST_DEPTH_LEVELS, ST_MARKET_PIECES, ST_READDS, ST_REDUCES,
       ST_LIVE_SCANNED, ST_COMPACTIONS };

}  // namespace

struct lob_book {
    oc_book *oc = nullptr;
    int64_t lo = 0, hi = 0;
    int64_t next_id = 0;             // the last id issued
    std::vector<int32_t> owner;      // owner[id] (index 0 unused)
    std::vector<uint64_t> stamp;     // stamp[id]: sequence of its last (re)insertion
    std::vector<int32_t> price;      // price[id] while it rests (<= LOB_MAX_PRICE < 2^31)
    std::vector<uint8_t> flags;      // flags[id]: LIVE | SELL
    uint64_t seq = 0;
    std::vector<int64_t> live;       // ids that rested, first-rest order (some now gone)
    std::vector<oc_level> levels;    // depth pages
    int64_t stats[8] = {0};          // emulation counters (oc_shim_stats), no clock reads
    // per replay call
    lob_fill *fills = nullptr;
    int64_t nf = 0, cap = 0;
    bool overflow = false;
    char err[256] = {0};
};

extern "C" {

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
    std::memset(out, 0, sizeof *out);
    out->stp_modes = LOB_CAP_BIT(LOB_STP_NONE);  // no owners in the book: no STP
    out->order_types = LOB_CAP_ALL_TYPES;        // emulated where the book lacks them
    out->kinds = LOB_CAP_ALL_KINDS;
    out->scopes = LOB_CAP_ALL_SCOPES;
    out->max_band_width = 0;                     // levels live in a std::map: any band
    return 0;
}

}  // extern "C"

static void on_trade(const oc_trade *t, void *user) {
    lob_book *b = static_cast<lob_book *>(user);
    if (t->maker_remaining == 0) b->flags[(size_t)t->maker_id] &= (uint8_t)~1u;  // filled
    if (b->nf >= b->cap) { b->overflow = true; return; }
    b->fills[b->nf++] = lob_fill{(int64_t)t->taker_id, (int64_t)t->maker_id,
                                 (int64_t)t->price, (int64_t)t->quantity};
}

static void say(char *err, int64_t cap, const char *msg) {
    if (err && cap > 0) std::snprintf(err, (size_t)cap, "%s", msg);
}

extern "C" lob_book *lob_create(const lob_config *cfg, char *err, int64_t err_cap) {
    static const char *STP[] = {"NONE", "CANCEL_MAKER", "CANCEL_TAKER", "CANCEL_BOTH"};
    if (!cfg || cfg->min_price < 1 || cfg->max_price < cfg->min_price ||
        cfg->max_price > LOB_MAX_PRICE || cfg->stp < 0 || cfg->stp > 3) {
        say(err, err_cap, "bad config: need 1 <= min_price <= max_price <= LOB_MAX_PRICE "
                          "and stp in 0..3");
        return nullptr;
    }
    if (cfg->stp != LOB_STP_NONE) {
        char msg[200];
        std::snprintf(msg, sizeof msg, "STP mode %s is not supported: orderly-chaos keeps no "
                      "owners, so it cannot prevent self-trades (only NONE)", STP[cfg->stp]);
        say(err, err_cap, msg);
        return nullptr;
    }
    lob_book *b = new (std::nothrow) lob_book();
    if (!b) { say(err, err_cap, "out of memory"); return nullptr; }
    b->oc = oc_book_new();
    if (!b->oc || oc_book_set_trade_callback(b->oc, on_trade, b) != OC_OK) {
        oc_book_free(b->oc);
        delete b;
        say(err, err_cap, "out of memory (oc_book_new)");
        return nullptr;
    }
    b->lo = cfg->min_price;
    b->hi = cfg->max_price;
    try {
        b->owner.push_back(0);
        b->stamp.push_back(0);
        b->price.push_back(0);
        b->flags.push_back(0);
    } catch (...) {
        oc_book_free(b->oc);
        delete b;
        say(err, err_cap, "out of memory");
        return nullptr;
    }
    return b;
}

extern "C" void lob_destroy(lob_book *b) {
    if (!b) return;
    oc_book_free(b->oc);
    delete b;
}

// ---- helpers --------------------------------------------------------------------------

namespace {

struct Failure {  // an orderly-chaos call failed: LOB_ERR_NOMEM or LOB_ERR_ENGINE
    int32_t rc;
};

inline oc_side oc_of(int lob_side) { return lob_side == LOB_BUY ? OC_SIDE_BUY : OC_SIDE_SELL; }

inline bool crosses(int lob_side, int64_t limit, uint64_t p) {  // p: a resting opposite price
    return lob_side == LOB_BUY ? (int64_t)p <= limit : (int64_t)p >= limit;
}

void ok(lob_book *b, oc_status st, const char *what) {
    if (st == OC_OK) return;
    std::snprintf(b->err, sizeof b->err, "orderly-chaos %s returned %s", what,
                  oc_status_string(st));
    throw Failure{st == OC_ERR_OUT_OF_MEMORY ? LOB_ERR_NOMEM : LOB_ERR_ENGINE};
}

inline void set_out(lob_outcome *o, int st, int reason, int64_t id, int64_t rem, int64_t filled,
                    int64_t nfills, int64_t removed) {
    o->status = (int8_t)st; o->reason = (int8_t)reason; o->id = id; o->remaining = rem;
    o->filled = filled; o->fills = (int32_t)nfills; o->removed = (int32_t)removed;
}

// Visit the opposite side's levels best first: f(price, volume) returns false to stop.
// The best level comes from oc_book_best_price / _volume (O(1)); deeper ones from
// oc_book_depth pages (each re-read from the top: orderly-chaos has no level cursor).
template <typename F>
void walk(lob_book *b, oc_side opp, F &&f) {
    b->stats[ST_WALKS]++;
    const uint64_t p = oc_book_best_price(b->oc, opp);
    if (p == 0 || !f(p, oc_book_best_volume(b->oc, opp))) return;
    size_t seen = 1, k = 16;
    for (;;) {
        if (b->levels.size() < k) b->levels.resize(k);
        const size_t n = oc_book_depth(b->oc, opp, b->levels.data(), k);
        b->stats[ST_DEPTH_PAGES]++;
        b->stats[ST_DEPTH_LEVELS] += (int64_t)n;
        for (size_t i = seen; i < n; i++)
            if (!f(b->levels[i].price, b->levels[i].volume)) return;
        if (n < k) return;
        seen = n;
        k *= 4;
    }
}

// crossing resting quantity for a priced taker, counted until it reaches `want`
uint64_t crossing(lob_book *b, int side, int64_t limit, uint64_t want) {
    uint64_t total = 0;
    walk(b, oc_of(1 - side), [&](uint64_t p, uint64_t v) {
        if (!crosses(side, limit, p)) return false;
        total += v;
        return total < want;
    });
    return total;
}

// oc_book_market of q (> 0) in uint32 pieces; returns the quantity filled
uint64_t market(lob_book *b, int side, int64_t id, uint64_t q) {
    uint64_t filled = 0;
    while (q > 0) {
        const uint32_t piece = (uint32_t)std::min(q, OC_QTY_MAX);
        uint32_t got = 0;
        b->stats[ST_MARKET_PIECES]++;
        ok(b, oc_book_market(b->oc, oc_of(side), (uint64_t)id, piece, &got), "oc_book_market");
        filled += got;
        q -= piece;
        if (got < piece) break;
    }
    return filled;
}

// Is id resting? Asked before oc_book_cancel / _get / _reduce: orderly-chaos reports an
// unknown id by throwing (an OrderBookError with a formatted message, caught by its C API),
// which costs ~1.5 us; most cancels of the C++ seed's stream name a dead id.
// (The live bit answers without a hash lookup; lob_check verifies it against oc_book_has.)
constexpr uint8_t LIVE = 1, SELL = 2;

inline bool resting(const lob_book *b, int64_t id) {
    return id > 0 && id <= b->next_id && (b->flags[(size_t)id] & LIVE);
}

void remember(lob_book *b, int64_t id, int side, int64_t price) {  // id rests (again)
    b->stamp[(size_t)id] = ++b->seq;
    b->price[(size_t)id] = (int32_t)price;
    b->flags[(size_t)id] = (uint8_t)(LIVE | (side == LOB_SELL ? SELL : 0));
}

void cancel(lob_book *b, int64_t id) {  // a resting id off the book
    ok(b, oc_book_cancel(b->oc, (uint64_t)id), "oc_book_cancel");
    b->flags[(size_t)id] &= (uint8_t)~LIVE;
}

void compact(lob_book *b) {  // drop ids that no longer rest
    b->stats[ST_COMPACTIONS]++;
    b->stats[ST_LIVE_SCANNED] += (int64_t)b->live.size();
    size_t k = 0;
    for (int64_t id : b->live)
        if (b->flags[(size_t)id] & LIVE) b->live[k++] = id;
    b->live.resize(k);
}

void add_live(lob_book *b, int64_t id, int side, int64_t price) {
    remember(b, id, side, price);
    if (b->live.size() >= 2 * oc_book_count(b->oc) + 1024) compact(b);
    b->live.push_back(id);
}

// a priced order through oc_book_limit; the outcome of a LIMIT (or a modify's re-entry)
void limit(lob_book *b, lob_outcome *o, int64_t id, int side, int64_t price, int64_t qty,
           bool is_new) {
    const int64_t nf0 = b->nf;
    uint32_t filled = 0;
    ok(b, oc_book_limit(b->oc, oc_of(side), (uint64_t)id, (uint32_t)qty, (uint64_t)price,
                        &filled), "oc_book_limit");
    const int64_t left = qty - (int64_t)filled;
    if (left == 0) { set_out(o, LOB_FILLED, 0, id, 0, filled, b->nf - nf0, 0); return; }
    if (is_new) add_live(b, id, side, price); else remember(b, id, side, price);
    set_out(o, filled ? LOB_PARTIALLY_FILLED : LOB_ACCEPTED, 0, id, left, filled,
            b->nf - nf0, 0);
}

void submit(lob_book *b, lob_outcome *o, int64_t id, int side, int otype, int64_t price,
            int64_t qty) {
    const oc_side opp = oc_of(1 - side);
    const int64_t nf0 = b->nf;
    switch (otype) {
    case LOB_LIMIT:
        limit(b, o, id, side, price, qty, true);
        return;
    case LOB_POST_ONLY: {
        const uint64_t best = oc_book_best_price(b->oc, opp);
        if (best && crosses(side, price, best)) {
            set_out(o, LOB_CANCELLED, LOB_REASON_WOULD_CROSS, id, qty, 0, 0, 0);
            return;
        }
        limit(b, o, id, side, price, qty, true);
        return;
    }
    case LOB_FOK:
    case LOB_IOC: {
        const uint64_t avail = crossing(b, side, price, (uint64_t)qty);
        if (otype == LOB_FOK && avail < (uint64_t)qty) {
            set_out(o, LOB_CANCELLED, LOB_REASON_FOK_UNFILLABLE, id, qty, 0, 0, 0);
            return;
        }
        const uint64_t take = std::min(avail, (uint64_t)qty);
        const uint64_t got = take ? market(b, side, id, take) : 0;
        if (got != take) {
            std::snprintf(b->err, sizeof b->err, "orderly-chaos filled %llu of the %llu a "
                          "depth walk found crossing", (unsigned long long)got,
                          (unsigned long long)take);
            throw Failure{LOB_ERR_ENGINE};
        }
        if (got == 0) set_out(o, LOB_CANCELLED, LOB_REASON_NO_LIQUIDITY, id, qty, 0, 0, 0);
        else set_out(o, (int64_t)got == qty ? LOB_FILLED : LOB_PARTIALLY_FILLED, 0, id,
                     qty - (int64_t)got, (int64_t)got, b->nf - nf0, 0);
        return;
    }
    case LOB_MARKET: {
        const int64_t got = (int64_t)market(b, side, id, (uint64_t)qty);
        if (got == 0) set_out(o, LOB_CANCELLED, LOB_REASON_NO_LIQUIDITY, id, qty, 0, 0, 0);
        else set_out(o, got == qty ? LOB_FILLED : LOB_PARTIALLY_FILLED, 0, id, qty - got, got,
                     b->nf - nf0, 0);
        return;
    }
    default: {  // NOTIONAL: qty is the amount
        int64_t left = qty;
        uint64_t take = 0;
        bool too_dear = false;
        walk(b, opp, [&](uint64_t p, uint64_t v) {
            if ((int64_t)p > left) { too_dear = true; return false; }
            const uint64_t t = std::min(v, (uint64_t)(left / (int64_t)p));
            take += t;
            left -= (int64_t)t * (int64_t)p;
            if (t < v) { too_dear = true; return false; }  // the level's rest is too dear
            return left > 0;
        });
        const uint64_t got = take ? market(b, side, id, take) : 0;
        if (got != take) {
            std::snprintf(b->err, sizeof b->err, "orderly-chaos filled %llu of the %llu a "
                          "notional depth walk found", (unsigned long long)got,
                          (unsigned long long)take);
            throw Failure{LOB_ERR_ENGINE};
        }
        if (got == 0) set_out(o, LOB_CANCELLED, LOB_REASON_NO_LIQUIDITY, id, qty, 0, 0, 0);
        else set_out(o, (too_dear || left == 0) ? LOB_FILLED : LOB_PARTIALLY_FILLED, 0, id,
                     left, (int64_t)got, b->nf - nf0, 0);
        return;
    }
    }
}

void modify(lob_book *b, lob_outcome *o, int64_t id, int64_t qty, int64_t price) {
    oc_order cur;
    if (!resting(b, id) || oc_book_get(b->oc, (uint64_t)id, &cur) != OC_OK) {
        set_out(o, LOB_NOT_FOUND, LOB_REASON_UNKNOWN_ID, id, 0, 0, 0, 0);
        return;
    }
    const int side = cur.side == OC_SIDE_BUY ? LOB_BUY : LOB_SELL;
    const int64_t at = (int64_t)cur.price;
    if (price == 0 || price == at) {
        if (qty < (int64_t)cur.quantity) {  // keeps its place
            b->stats[ST_REDUCES]++;
            ok(b, oc_book_reduce(b->oc, (uint64_t)id, cur.quantity - (uint32_t)qty),
               "oc_book_reduce");
        } else if (qty > (int64_t)cur.quantity) {  // to the tail of its level
            b->stats[ST_READDS]++;
            cancel(b, id);
            uint32_t filled = 0;
            ok(b, oc_book_limit(b->oc, cur.side, (uint64_t)id, (uint32_t)qty, cur.price,
                                &filled), "oc_book_limit");
            remember(b, id, side, at);
        }
        set_out(o, LOB_ACCEPTED, 0, id, qty, 0, 0, 0);
        return;
    }
    b->stats[ST_READDS]++;
    cancel(b, id);
    limit(b, o, id, side, price, qty, false);  // already in the live list
}

void mass_cancel(lob_book *b, lob_outcome *o, const lob_command *c) {
    int64_t removed = 0;
    if (c->otype == LOB_SCOPE_ALL) {
        removed = (int64_t)oc_book_count(b->oc);
        ok(b, oc_book_clear(b->oc), "oc_book_clear");
        for (int64_t id : b->live) b->flags[(size_t)id] &= (uint8_t)~LIVE;
        b->live.clear();
    } else {
        b->stats[ST_LIVE_SCANNED] += (int64_t)b->live.size();
        size_t k = 0;
        for (int64_t id : b->live) {
            const uint8_t f = b->flags[(size_t)id];
            if (!(f & LIVE)) continue;  // gone: drop
            const int64_t p = b->price[(size_t)id];
            const bool hit =
                c->otype == LOB_SCOPE_SIDE ? (f & SELL ? LOB_SELL : LOB_BUY) == c->side :
                c->otype == LOB_SCOPE_OWNER ? b->owner[(size_t)id] == c->owner :
                p >= c->price && p <= c->price_hi;
            if (hit) {
                cancel(b, id);
                removed++;
            } else {
                b->live[k++] = id;
            }
        }
        b->live.resize(k);
    }
    set_out(o, LOB_CANCELLED, 0, 0, 0, 0, 0, removed);
}

inline void rejected(lob_outcome *o, int reason) {
    set_out(o, LOB_REJECTED, reason, 0, 0, 0, 0, 0);
}

void exec(lob_book *b, const lob_command *c, lob_outcome *o) {
    const int otype = c->otype, side = c->side;
    switch (c->kind) {
    case LOB_SUBMIT:
        if (otype < LOB_LIMIT || otype > LOB_NOTIONAL) return rejected(o, LOB_REASON_BAD_TYPE);
        if (side != LOB_BUY && side != LOB_SELL) return rejected(o, LOB_REASON_BAD_SIDE);
        if (c->owner <= 0) return rejected(o, LOB_REASON_BAD_OWNER);
        if (c->qty <= 0 ||
            (c->qty > LOB_MAX_QTY && (otype != LOB_NOTIONAL || c->qty > LOB_MAX_NOTIONAL)))
            return rejected(o, LOB_REASON_BAD_QTY);
        if (otype < LOB_MARKET && (c->price < b->lo || c->price > b->hi))
            return rejected(o, LOB_REASON_BAD_PRICE);
        b->owner.push_back(c->owner);  // may throw bad_alloc: before the id is taken
        b->stamp.push_back(0);
        b->price.push_back(0);
        b->flags.push_back(0);
        b->next_id++;
        return submit(b, o, b->next_id, side, otype, c->price, c->qty);
    case LOB_CANCEL:
        if (resting(b, c->id)) {
            cancel(b, c->id);
            return set_out(o, LOB_CANCELLED, 0, c->id, 0, 0, 0, 1);
        }
        return set_out(o, LOB_NOT_FOUND, LOB_REASON_UNKNOWN_ID, c->id, 0, 0, 0, 0);
    case LOB_MODIFY:
        if (c->qty <= 0 || c->qty > LOB_MAX_QTY) return rejected(o, LOB_REASON_BAD_QTY);
        if (c->price != 0 && (c->price < b->lo || c->price > b->hi))
            return rejected(o, LOB_REASON_BAD_PRICE);
        return modify(b, o, c->id, c->qty, c->price);
    case LOB_MASS_CANCEL:
        if (otype < LOB_SCOPE_ALL || otype > LOB_SCOPE_PRICE_RANGE)
            return rejected(o, LOB_REASON_BAD_SCOPE);
        if (otype == LOB_SCOPE_SIDE && side != LOB_BUY && side != LOB_SELL)
            return rejected(o, LOB_REASON_BAD_SIDE);
        if (otype == LOB_SCOPE_OWNER && c->owner <= 0) return rejected(o, LOB_REASON_BAD_OWNER);
        if (otype == LOB_SCOPE_PRICE_RANGE && c->price > c->price_hi)
            return rejected(o, LOB_REASON_BAD_PRICE);
        return mass_cancel(b, o, c);
    default:
        return rejected(o, LOB_REASON_BAD_KIND);
    }
}

inline int64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int32_t replay_impl(lob_book *b, const lob_command *cmds, int64_t n, lob_outcome *out,
                    lob_fill *fills, int64_t fill_cap, int64_t *n_done, int64_t *n_fills,
                    int64_t *ns) {
    if (!b || (n > 0 && (!cmds || !out)) || n < 0 || fill_cap < 0 || !n_done || !n_fills ||
        (fill_cap > 0 && !fills))
        return LOB_ERR_ARG;
    b->fills = fills;
    b->cap = fill_cap;
    b->nf = 0;
    b->overflow = false;
    int32_t rc = LOB_OK;
    int64_t i = 0;
    try {
        for (; i < n; i++) {
            const lob_command *c = &cmds[i];
            // a command fills each resting maker at most once
            if ((c->kind == LOB_SUBMIT || c->kind == LOB_MODIFY) &&
                (uint64_t)(fill_cap - b->nf) < oc_book_count(b->oc)) {
                rc = LOB_NEED_FILL_SPACE;
                break;
            }
            if (ns && c->timed) {  // the whole command, this shim's work included
                const int64_t t0 = now_ns();
                exec(b, c, &out[i]);
                ns[i] = now_ns() - t0;
            } else {
                exec(b, c, &out[i]);
            }
            if (b->overflow) {
                std::snprintf(b->err, sizeof b->err, "more fills than resting orders at "
                              "command %lld", (long long)i);
                rc = LOB_ERR_ENGINE;
                break;
            }
        }
    } catch (const Failure &f) {
        rc = f.rc;
    } catch (const std::bad_alloc &) {
        std::snprintf(b->err, sizeof b->err, "out of memory in the shim's id tables");
        rc = LOB_ERR_NOMEM;
    } catch (...) {
        std::snprintf(b->err, sizeof b->err, "unexpected C++ exception in the shim");
        rc = LOB_ERR_ENGINE;
    }
    *n_done = i;
    *n_fills = b->nf;
    b->fills = nullptr;
    return rc;
}

}  // namespace

extern "C" {

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
        const int64_t t = now_ns();
        out[i] = t - prev;
        prev = t;
    }
}

int64_t lob_snapshot(const lob_book *b, int32_t side, int64_t depth, lob_level *out) {
    if (!b || (side != LOB_BUY && side != LOB_SELL) || depth <= 0 || !out) return 0;
    const oc_side s = oc_of(side);
    const uint64_t k = std::min<uint64_t>((uint64_t)depth, oc_book_side_count(b->oc, s));
    if (k == 0) return 0;
    try {
        std::vector<oc_level> lv((size_t)k);
        const size_t n = oc_book_depth(b->oc, s, lv.data(), (size_t)k);
        for (size_t i = 0; i < n; i++)
            out[i] = lob_level{(int64_t)lv[i].price, (int64_t)lv[i].volume,
                               (int64_t)lv[i].count};
        return (int64_t)n;
    } catch (...) {
        return 0;
    }
}

int64_t lob_resting(const lob_book *b, lob_order *out, int64_t cap) {
    if (!b) return 0;
    struct Row { int side; int64_t price; uint64_t stamp; lob_order o; };
    try {
        std::vector<Row> rows;
        for (int64_t id : b->live) {
            oc_order r;
            if (!resting(b, id) || oc_book_get(b->oc, (uint64_t)id, &r) != OC_OK) continue;
            const int side = r.side == OC_SIDE_BUY ? LOB_BUY : LOB_SELL;
            rows.push_back(Row{side, (int64_t)r.price, b->stamp[(size_t)id],
                               lob_order{id, b->owner[(size_t)id], side, (int64_t)r.price,
                                         (int64_t)r.quantity}});
        }
        std::sort(rows.begin(), rows.end(), [](const Row &x, const Row &y) {
            if (x.side != y.side) return x.side < y.side;  // bids first
            if (x.price != y.price) return x.side == LOB_BUY ? x.price > y.price
                                                             : x.price < y.price;
            return x.stamp < y.stamp;  // FIFO
        });
        if (out)
            for (size_t i = 0; i < rows.size() && (int64_t)i < cap; i++) out[i] = rows[i].o;
        return (int64_t)rows.size();
    } catch (...) {
        return 0;
    }
}

#define FAIL(...) do { std::snprintf(msg, (size_t)cap, __VA_ARGS__); return 1; } while (0)

int32_t lob_check(const lob_book *b, char *msg, int64_t cap) {
    if (!b || !msg || cap <= 0) return 1;
    try {
        b->oc->book.check_invariants();  // orderly-chaos's own O(N) check
    } catch (const std::exception &e) {
        FAIL("orderly-chaos: %s", e.what());
    }
    uint64_t resting = 0;
    for (int64_t id : b->live) {
        if (id <= 0 || id > b->next_id) FAIL("live list holds id %lld", (long long)id);
        const bool live = b->flags[(size_t)id] & LIVE;
        if (live != (oc_book_has(b->oc, (uint64_t)id) != 0))
            FAIL("the shim's live bit of id %lld is %d, orderly-chaos %s it", (long long)id,
                 (int)live, live ? "does not hold" : "holds");
        if (!live) continue;
        resting++;
        oc_order r;
        if (oc_book_get(b->oc, (uint64_t)id, &r) != OC_OK ||
            (int64_t)r.price != b->price[(size_t)id] ||
            (r.side == OC_SIDE_SELL) != ((b->flags[(size_t)id] & SELL) != 0))
            FAIL("the shim's price or side of order %lld differs from orderly-chaos's",
                 (long long)id);
        if (b->owner[(size_t)id] <= 0) FAIL("order %lld has no owner", (long long)id);
    }
    if (resting != oc_book_count(b->oc))
        FAIL("the shim's live list finds %llu resting orders, orderly-chaos holds %llu (an id "
             "missing or listed twice)", (unsigned long long)resting,
             (unsigned long long)oc_book_count(b->oc));
    if (b->owner.size() != (size_t)b->next_id + 1 || b->flags.size() != b->owner.size() ||
        b->price.size() != b->owner.size() || b->stamp.size() != b->owner.size())
        FAIL("id tables out of step with ids");
    return 0;
}

// Not part of lob_engine.h: what the emulation did since lob_create (walks of the opposite
// side, oc_book_depth pages and the levels they copied, oc_book_market pieces, modifies
// done as cancel + re-add, as reduce, live-list entries scanned, compactions).
int64_t oc_shim_stats(const lob_book *b, int64_t *out, int64_t cap) {
    if (!b || !out) return 0;
    const int64_t n = std::min<int64_t>(cap, 8);
    for (int64_t i = 0; i < n; i++) out[i] = b->stats[i];
    return n;
}

// Not part of lob_engine.h: orderly-chaos driven natively, without this shim, for the
// shim's cost. A fresh book; LIMIT, MARKET and CANCEL commands go straight to its C API as a
// native caller writes them (ids 1, 2, ... per submit, no validation, no owners, a trade
// callback that only counts); ns[i] = the call's duration (same clock as lob_replay_timed),
// -1 for a command orderly-chaos has no call for. Returns the trades; *n_native the
// commands run.
int64_t oc_raw_replay(const lob_command *cmds, int64_t n, int64_t *ns, int64_t *n_native) {
    oc_book *bk = oc_book_new();
    if (!bk || !cmds || !ns || !n_native) { oc_book_free(bk); return -1; }
    int64_t trades = 0, native = 0;
    oc_book_set_trade_callback(bk, [](const oc_trade *, void *u) { ++*(int64_t *)u; },
                               &trades);
    uint64_t id = 0;
    for (int64_t i = 0; i < n; i++) {
        const lob_command &c = cmds[i];
        const bool submit = c.kind == LOB_SUBMIT && (c.side == LOB_BUY || c.side == LOB_SELL);
        if (submit) id++;
        uint32_t filled = 0;
        const int64_t t0 = now_ns();
        if (submit && c.otype == LOB_LIMIT)
            oc_book_limit(bk, oc_of(c.side), id, (uint32_t)c.qty, (uint64_t)c.price, &filled);
        else if (submit && c.otype == LOB_MARKET)
            oc_book_market(bk, oc_of(c.side), id, (uint32_t)c.qty, &filled);
        else if (c.kind == LOB_CANCEL)
            oc_book_cancel(bk, (uint64_t)c.id);
        else { ns[i] = -1; continue; }
        ns[i] = now_ns() - t0;
        native++;
    }
    oc_book_free(bk);
    *n_native = native;
    return trades;
}

int64_t lob_last_error(const lob_book *b, char *msg, int64_t cap) {
    if (!b || !msg || cap <= 0) return 0;
    std::snprintf(msg, (size_t)cap, "%s", b->err);
    return (int64_t)std::strlen(b->err);
}

}  // extern "C"
