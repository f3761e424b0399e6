/* orderbook-rs's mechanisms, one compile-time toggle each, behind lob's C ABI (lob_engine.h).
 *
 * Written by lob from the seed's description of orderbook-rs 0.12.0 (not from its code): one
 * heap allocation per order, price levels in a skip list of reference-counted level objects
 * (SkipMap<Price, Arc<PriceLevel>>) that are allocated when a level appears and dropped when
 * it empties, and an order index in a sharded map with a lock per shard (DashMap). Each
 * mechanism is a -D toggle over a plain base, so a table can add one at a time:
 *
 *   LOB_HEAP_ORDERS=1     orders: `new` on rest, `delete` on fill or cancel
 *                         (0: a node pool of fixed chunks with a free list)
 *   LOB_SKIPLIST=1        price levels: a skip list of pointers per side, ordered best first
 *                         (0: an array ladder over the band, the best index cached)
 *   LOB_LEVEL_OBJECTS=1   a level is an object `new`-ed when its price first gets an order and
 *                         deleted when it empties, reference-counted (an atomic count, like
 *                         Arc: the book holds one reference, a match holds one while it works
 *                         on the level) (0: levels live inside the ladder or the skip node)
 *   LOB_SHARDED_INDEX=1   order index: 64 shards, each an open-addressing hash map behind its
 *                         own lock (an atomic exchange spin lock), the shard chosen by the
 *                         id's hash (0: a flat array indexed by the sequential id)
 *
 * Skip-list nodes are recycled through a free list (the allocation per level appearance is
 * the LOB_LEVEL_OBJECTS step). The semantics are lob/semantics.py in full (every order type,
 * modify, mass cancel of every scope, every STP mode), in the same order of fills as lob's
 * example C engine; the differential fuzz compares them with `reference`. The ladder bounds
 * the band to 2**26 prices; a skip list takes any band.
 */
#include "lob_engine.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <vector>

#ifndef LOB_HEAP_ORDERS
#define LOB_HEAP_ORDERS 0
#endif
#ifndef LOB_SKIPLIST
#define LOB_SKIPLIST 0
#endif
#ifndef LOB_LEVEL_OBJECTS
#define LOB_LEVEL_OBJECTS 0
#endif
#ifndef LOB_SHARDED_INDEX
#define LOB_SHARDED_INDEX 0
#endif

static_assert(sizeof(lob_command) == 40, "lob_command must be 40 bytes");
static_assert(sizeof(lob_outcome) == 34, "lob_outcome must be 34 bytes");
static_assert(sizeof(lob_fill) == 32, "lob_fill must be 32 bytes");

namespace {

enum { FILLED, PARTIAL, ACCEPTED, CANCELLED, REJECTED, NOT_FOUND };
enum { R_NONE, R_BAD_KIND, R_BAD_TYPE, R_BAD_SIDE, R_BAD_OWNER, R_BAD_QTY, R_BAD_PRICE,
       R_BAD_SCOPE, R_UNKNOWN_ID, R_NO_LIQUIDITY, R_FOK_UNFILLABLE, R_WOULD_CROSS,
       R_SELF_TRADE };
enum { LIMIT, IOC, FOK, POST_ONLY, MARKET, NOTIONAL };
enum { STP_NONE, STP_CANCEL_MAKER, STP_CANCEL_TAKER, STP_CANCEL_BOTH };

constexpr int64_t LADDER_MAX_WIDTH = int64_t(1) << 26;

struct Level;

struct Order {
    int64_t id, qty, price;
    int32_t owner, side;
    Order *prev, *next;
    Level *level;
};

struct Level {
    int64_t price = 0, qty = 0;
    int64_t count = 0;
    Order *head = nullptr, *tail = nullptr;
    void *hook = nullptr; /* the skip node holding this level (skip list only) */
#if LOB_LEVEL_OBJECTS
    std::atomic<int32_t> refs{1};
#endif
};

#if LOB_LEVEL_OBJECTS
inline Level *ref(Level *l) { l->refs.fetch_add(1, std::memory_order_relaxed); return l; }
inline void unref(Level *l) {
    if (l->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete l;
}
inline Level *new_level(int64_t price) {
    Level *l = new (std::nothrow) Level;
    if (l) l->price = price;
    return l;
}
#else
inline Level *ref(Level *l) { return l; }
inline void unref(Level *) {}
#endif

/* ---- orders: a node pool, or one heap allocation each ---------------------------------- */
class OrderStore {
public:
#if LOB_HEAP_ORDERS
    Order *get() { return new (std::nothrow) Order; }
    void put(Order *o) { delete o; }
    bool reserve() { return true; }
    void release_all(const std::vector<Order *> &live) { for (Order *o : live) delete o; }
#else
    static constexpr int64_t CHUNK = 4096;
    Order *get() {
        if (!free_ && !grow()) return nullptr;
        Order *o = free_;
        free_ = o->next;
        return o;
    }
    void put(Order *o) { o->next = free_; free_ = o; }
    bool reserve() { return free_ || grow(); } /* a free node exists: resting cannot fail */
    void release_all(const std::vector<Order *> &) {
        for (Order *c : chunks_) std::free(c);
        chunks_.clear();
        free_ = nullptr;
    }
private:
    bool grow() {
        Order *c = static_cast<Order *>(std::malloc(CHUNK * sizeof(Order)));
        if (!c) return false;
        try { chunks_.push_back(c); } catch (...) { std::free(c); return false; }
        for (int64_t i = 0; i < CHUNK; i++) c[i].next = i + 1 < CHUNK ? &c[i + 1] : nullptr;
        free_ = c;
        return true;
    }
    std::vector<Order *> chunks_;
    Order *free_ = nullptr;
#endif
};

/* ---- price levels of one side: an array ladder, or a skip list ------------------------- */
#if LOB_SKIPLIST
constexpr int MAX_HEIGHT = 16;
struct SkipNode {
    int64_t key; /* price for asks, -price for bids: ascending key = best first */
    int height;
#if LOB_LEVEL_OBJECTS
    Level *level;
#else
    Level inline_level;
#endif
    SkipNode *next[MAX_HEIGHT];
};

class Levels {
public:
    bool init(int side, int64_t, int64_t) {
        side_ = side;
        head_.key = INT64_MIN;
        head_.height = MAX_HEIGHT;
        for (auto &n : head_.next) n = nullptr;
        return true;
    }
    ~Levels() {
        for (SkipNode *n = head_.next[0]; n;) {
            SkipNode *nx = n->next[0];
#if LOB_LEVEL_OBJECTS
            unref(n->level);
#endif
            n = nx;
        }
        for (SkipNode *c : chunks_) std::free(c);
    }
    Level *best() const { return head_.next[0] ? level_of(head_.next[0]) : nullptr; }
    Level *worse(const Level *l) const {
        SkipNode *n = static_cast<SkipNode *>(l->hook)->next[0];
        return n ? level_of(n) : nullptr;
    }
    /* the level at price, made when missing; nullptr when out of memory */
    Level *at(int64_t price) {
        int64_t key = side_ == 0 ? -price : price;
        SkipNode *update[MAX_HEIGHT];
        SkipNode *x = &head_;
        for (int h = MAX_HEIGHT - 1; h >= 0; h--) {
            while (x->next[h] && x->next[h]->key < key) x = x->next[h];
            update[h] = x;
        }
        SkipNode *n = x->next[0];
        if (n && n->key == key) return level_of(n);
        n = node();
        if (!n) return nullptr;
#if LOB_LEVEL_OBJECTS
        n->level = new_level(price);
        if (!n->level) { recycle(n); return nullptr; }
#else
        n->inline_level = Level();
        n->inline_level.price = price;
#endif
        n->key = key;
        n->height = random_height();
        level_of(n)->hook = n;
        for (int h = 0; h < n->height; h++) {
            n->next[h] = update[h]->next[h];
            update[h]->next[h] = n;
        }
        return level_of(n);
    }
    /* l has just emptied: unlink it (the book's reference to a level object is dropped) */
    void emptied(Level *l) {
        SkipNode *target = static_cast<SkipNode *>(l->hook);
        SkipNode *x = &head_;
        for (int h = MAX_HEIGHT - 1; h >= 0; h--) {
            while (x->next[h] && x->next[h]->key < target->key) x = x->next[h];
            if (x->next[h] == target) x->next[h] = target->next[h];
        }
#if LOB_LEVEL_OBJECTS
        unref(target->level);
#endif
        recycle(target);
    }
private:
    static Level *level_of(SkipNode *n) {
#if LOB_LEVEL_OBJECTS
        return n->level;
#else
        return &n->inline_level;
#endif
    }
    int random_height() { /* xorshift64, fixed seed: the same shape on every run */
        rng_ ^= rng_ << 13; rng_ ^= rng_ >> 7; rng_ ^= rng_ << 17;
        int h = 1;
        uint64_t r = rng_;
        while (h < MAX_HEIGHT && (r & 1)) { h++; r >>= 1; }
        return h;
    }
    SkipNode *node() {
        if (!free_) {
            constexpr int CHUNK = 256;
            SkipNode *c = static_cast<SkipNode *>(std::malloc(CHUNK * sizeof(SkipNode)));
            if (!c) return nullptr;
            try { chunks_.push_back(c); } catch (...) { std::free(c); return nullptr; }
            for (int i = 0; i < CHUNK; i++) c[i].next[0] = i + 1 < CHUNK ? &c[i + 1] : nullptr;
            free_ = c;
        }
        SkipNode *n = free_;
        free_ = n->next[0];
        return n;
    }
    void recycle(SkipNode *n) { n->next[0] = free_; free_ = n; }
    int side_ = 0;
    SkipNode head_;
    SkipNode *free_ = nullptr;
    std::vector<SkipNode *> chunks_;
    uint64_t rng_ = 0x9E3779B97F4A7C15ULL;
};
#else
class Levels {
public:
    bool init(int side, int64_t lo, int64_t w) {
        side_ = side; lo_ = lo; w_ = w;
#if LOB_LEVEL_OBJECTS
        slot_ = static_cast<Level **>(std::calloc(size_t(w), sizeof(Level *)));
        return slot_ != nullptr;
#else
        slot_ = static_cast<Level *>(std::malloc(size_t(w) * sizeof(Level)));
        if (!slot_) return false;
        for (int64_t x = 0; x < w; x++) new (&slot_[x]) Level(), slot_[x].price = lo + x;
        return true;
#endif
    }
    ~Levels() {
#if LOB_LEVEL_OBJECTS
        if (slot_) for (int64_t x = 0; x < w_; x++) if (slot_[x]) unref(slot_[x]);
#endif
        std::free(slot_);
    }
    Level *best() const { return best_ < 0 ? nullptr : get(best_); }
    Level *worse(const Level *l) const { return scan(l->price - lo_ + step()); }
    Level *at(int64_t price) {
        int64_t x = price - lo_;
#if LOB_LEVEL_OBJECTS
        if (!slot_[x]) {
            slot_[x] = new_level(price);
            if (!slot_[x]) return nullptr;
        }
        Level *l = slot_[x];
#else
        Level *l = &slot_[x];
#endif
        if (l->count == 0) nonempty_++;
        if (best_ < 0 || (side_ == 0 ? x > best_ : x < best_)) best_ = x;
        return l;
    }
    void emptied(Level *l) {
        int64_t x = l->price - lo_;
#if LOB_LEVEL_OBJECTS
        slot_[x] = nullptr;
        unref(l);
#endif
        if (--nonempty_ == 0) best_ = -1; /* the side is empty: no scan to the band's end */
        else if (x == best_) {
            Level *b = scan(x);
            best_ = b ? b->price - lo_ : -1;
        }
    }
private:
    int64_t step() const { return side_ == 0 ? -1 : 1; }
    Level *get(int64_t x) const {
#if LOB_LEVEL_OBJECTS
        return slot_[x];
#else
        return slot_[x].count ? &slot_[x] : nullptr;
#endif
    }
    Level *scan(int64_t x) const { /* the first non-empty level from x towards worse prices */
        for (int64_t s = step(); x >= 0 && x < w_; x += s)
            if (Level *l = get(x)) return l;
        return nullptr;
    }
    int side_ = 0;
    int64_t lo_ = 0, w_ = 0, best_ = -1, nonempty_ = 0;
#if LOB_LEVEL_OBJECTS
    Level **slot_ = nullptr;
#else
    Level *slot_ = nullptr;
#endif
};
#endif

/* ---- order index: a flat array by id, or a sharded hash map with a lock per shard ------ */
#if LOB_SHARDED_INDEX
class SpinLock {
public:
    void lock() { while (flag_.exchange(1, std::memory_order_acquire)) {} }
    void unlock() { flag_.store(0, std::memory_order_release); }
private:
    std::atomic<uint32_t> flag_{0};
};

class Index {
public:
    static constexpr int SHARD_BITS = 6; /* 64 shards */
    ~Index() { for (auto &s : shards_) { std::free(s.keys); std::free(s.vals); } }
    bool reserve(int64_t) { return true; }
    Order *find(int64_t id) {
        if (id <= 0) return nullptr;
        uint64_t h = hash(id);
        Shard &s = shards_[h >> (64 - SHARD_BITS)];
        s.lock.lock();
        Order *o = nullptr;
        if (s.cap) {
            for (uint64_t i = h & (s.cap - 1);; i = (i + 1) & (s.cap - 1)) {
                if (s.keys[i] == id) { o = s.vals[i]; break; }
                if (s.keys[i] == 0) break;
            }
        }
        s.lock.unlock();
        return o;
    }
    bool put(int64_t id, Order *o) {
        uint64_t h = hash(id);
        Shard &s = shards_[h >> (64 - SHARD_BITS)];
        s.lock.lock();
        bool ok = (s.n + 1) * 4 <= s.cap * 3 || grow(s);
        if (ok) {
            uint64_t i = h & (s.cap - 1);
            while (s.keys[i] != 0) i = (i + 1) & (s.cap - 1);
            s.keys[i] = id;
            s.vals[i] = o;
            s.n++;
        }
        s.lock.unlock();
        return ok;
    }
    void erase(int64_t id) { /* linear probing, backward-shift deletion (no tombstones) */
        uint64_t h = hash(id);
        Shard &s = shards_[h >> (64 - SHARD_BITS)];
        s.lock.lock();
        uint64_t m = s.cap - 1, i = h & m;
        while (s.keys[i] != id) i = (i + 1) & m;
        for (uint64_t j = (i + 1) & m; s.keys[j] != 0; j = (j + 1) & m) {
            uint64_t home = hash(s.keys[j]) & m;
            if (((j - home) & m) >= ((j - i) & m)) { /* j may move back into the hole at i */
                s.keys[i] = s.keys[j];
                s.vals[i] = s.vals[j];
                i = j;
            }
        }
        s.keys[i] = 0;
        s.n--;
        s.lock.unlock();
    }
    int64_t size() const {
        int64_t n = 0;
        for (auto &s : shards_) n += int64_t(s.n);
        return n;
    }
private:
    struct Shard {
        SpinLock lock;
        int64_t *keys = nullptr; /* 0: empty slot (ids are >= 1) */
        Order **vals = nullptr;
        uint64_t cap = 0, n = 0;
        char pad[16];
    };
    static uint64_t hash(int64_t id) {
        uint64_t z = uint64_t(id) * 0x9E3779B97F4A7C15ULL;
        return z ^ (z >> 29);
    }
    bool grow(Shard &s) {
        uint64_t ncap = s.cap ? 2 * s.cap : 16;
        int64_t *k = static_cast<int64_t *>(std::calloc(ncap, sizeof(int64_t)));
        Order **v = static_cast<Order **>(std::malloc(ncap * sizeof(Order *)));
        if (!k || !v) { std::free(k); std::free(v); return false; }
        for (uint64_t i = 0; i < s.cap; i++) {
            if (!s.keys[i]) continue;
            uint64_t j = hash(s.keys[i]) & (ncap - 1);
            while (k[j]) j = (j + 1) & (ncap - 1);
            k[j] = s.keys[i];
            v[j] = s.vals[i];
        }
        std::free(s.keys);
        std::free(s.vals);
        s.keys = k; s.vals = v; s.cap = ncap;
        return true;
    }
    Shard shards_[1 << SHARD_BITS];
};
#else
class Index {
public:
    ~Index() { std::free(slot_); }
    bool reserve(int64_t id) { /* room for ids up to id */
        if (id < cap_) return true;
        int64_t ncap = cap_ ? cap_ : 1024;
        while (ncap <= id) ncap *= 2;
        Order **p = static_cast<Order **>(std::realloc(slot_, size_t(ncap) * sizeof(Order *)));
        if (!p) return false;
        for (int64_t i = cap_; i < ncap; i++) p[i] = nullptr;
        slot_ = p;
        cap_ = ncap;
        return true;
    }
    Order *find(int64_t id) const { return id > 0 && id < cap_ ? slot_[id] : nullptr; }
    bool put(int64_t id, Order *o) { slot_[id] = o; n_++; return true; }
    void erase(int64_t id) { slot_[id] = nullptr; n_--; }
    int64_t size() const { return n_; }
private:
    Order **slot_ = nullptr;
    int64_t cap_ = 0, n_ = 0;
};
#endif

struct OutOfMemory {};

inline bool crosses(int side, bool has_limit, int64_t limit, int64_t price) {
    return !has_limit || (side == 0 ? price <= limit : price >= limit);
}

inline void set_out(lob_outcome *o, int st, int reason, int64_t id, int64_t rem, int64_t filled,
                    int64_t nfills, int64_t removed) {
    o->status = int8_t(st); o->reason = int8_t(reason); o->id = id; o->remaining = rem;
    o->filled = filled; o->fills = int32_t(nfills); o->removed = int32_t(removed);
}

}  // namespace

struct lob_book {
    int64_t lo = 0, hi = 0;
    int32_t stp = 0;
    Levels levels[2];
    int64_t live[2] = {0, 0};
    OrderStore orders;
    Index index;
    int64_t next_id = 0;
    lob_fill *fills = nullptr;
    int64_t nf = 0;
    char err[160] = {0};

    ~lob_book() {
        std::vector<Order *> all;
#if LOB_HEAP_ORDERS
        for (int s = 0; s < 2; s++)
            for (Level *l = levels[s].best(); l; l = levels[s].worse(l))
                for (Order *o = l->head; o; o = o->next) all.push_back(o);
#endif
        orders.release_all(all);
    }

    /* take o off its level (no fill) and free it; true when its level emptied */
    bool remove_order(Order *o) {
        Level *l = o->level;
        int side = o->side;
        if (o->prev) o->prev->next = o->next; else l->head = o->next;
        if (o->next) o->next->prev = o->prev; else l->tail = o->prev;
        l->count--;
        l->qty -= o->qty;
        live[side]--;
        index.erase(o->id);
        orders.put(o);
        if (l->count) return false;
        levels[side].emptied(l);
        return true;
    }

    void rest(int64_t oid, int32_t owner, int side, int64_t price, int64_t qty) {
        Order *o = orders.get();
        if (!o) throw OutOfMemory();
        Level *l = levels[side].at(price);
        if (!l) { orders.put(o); throw OutOfMemory(); }
        if (!index.put(oid, o)) {
            if (!l->count) levels[side].emptied(l);
            orders.put(o);
            throw OutOfMemory();
        }
        *o = Order{oid, qty, price, owner, side, l->tail, nullptr, l};
        if (l->tail) l->tail->next = o; else l->head = o;
        l->tail = o;
        l->count++;
        l->qty += qty;
        live[side]++;
    }

    /* quantity an incoming order could trade, honouring STP; stops early once >= want */
    int64_t available(int side, bool has_limit, int64_t limit, int32_t owner, int64_t want) {
        int64_t total = 0;
        for (Level *l = levels[1 - side].best(); l; l = levels[1 - side].worse(l)) {
            if (!crosses(side, has_limit, limit, l->price)) break;
            if (stp == STP_NONE) {
                total += l->qty;
            } else {
                for (Order *o = l->head; o; o = o->next) {
                    if (o->owner == owner) {
                        if (stp == STP_CANCEL_MAKER) continue;
                        return total;
                    }
                    total += o->qty;
                }
            }
            if (total >= want) return total;
        }
        return total;
    }

    void match(lob_outcome *out, int64_t oid, int32_t owner, int side, int otype, int64_t price,
               int64_t qty) {
        bool has_limit = otype < MARKET;
        int opp = 1 - side;
        int64_t left = qty, filled = 0, nfills = 0, removed = 0;
        bool taker_stopped = false, too_dear = false, done = false;
        while (left > 0 && !done) {
            Level *l = levels[opp].best();
            if (!l) break;
            int64_t p = l->price;
            if (!crosses(side, has_limit, price, p)) break;
            ref(l); /* a match holds the level while it works on it (Arc::clone) */
            bool emptied = false;
            while (left > 0 && !emptied) {
                if (otype == NOTIONAL && p > left) { too_dear = done = true; break; }
                Order *o = l->head;
                if (o->owner == owner && stp != STP_NONE) {
                    if (stp != STP_CANCEL_TAKER) { emptied = remove_order(o); removed++; }
                    if (stp != STP_CANCEL_MAKER) { taker_stopped = done = true; break; }
                    continue;
                }
                int64_t cap = otype == NOTIONAL ? left / p : left;
                int64_t take = o->qty < cap ? o->qty : cap;
                o->qty -= take;
                l->qty -= take;
                left -= otype == NOTIONAL ? take * p : take;
                filled += take;
                nfills++;
                fills[nf++] = lob_fill{oid, o->id, p, take};
                if (o->qty == 0) emptied = remove_order(o);
            }
            unref(l);
        }
        int reason = taker_stopped ? R_SELF_TRADE : R_NONE;
        if (otype == NOTIONAL) {
            if (filled == 0)
                set_out(out, CANCELLED, reason ? reason : R_NO_LIQUIDITY, oid, left, 0, 0,
                        removed);
            else
                set_out(out, ((too_dear || left == 0) && !taker_stopped) ? FILLED : PARTIAL,
                        reason, oid, left, filled, nfills, removed);
            return;
        }
        if (left == 0) { set_out(out, FILLED, R_NONE, oid, 0, filled, nfills, removed); return; }
        if ((otype == LIMIT || otype == POST_ONLY) && !taker_stopped) {
            rest(oid, owner, side, price, left);
            set_out(out, filled ? PARTIAL : ACCEPTED, R_NONE, oid, left, filled, nfills, removed);
            return;
        }
        if (filled) set_out(out, PARTIAL, reason, oid, left, filled, nfills, removed);
        else set_out(out, CANCELLED, reason ? reason : R_NO_LIQUIDITY, oid, left, 0, 0, removed);
    }

    void submit(lob_outcome *out, int64_t oid, int32_t owner, int side, int otype, int64_t price,
                int64_t qty) {
        bool has_limit = otype < MARKET;
        Level *ob = levels[1 - side].best();
        if (otype == POST_ONLY && ob && crosses(side, has_limit, price, ob->price)) {
            set_out(out, CANCELLED, R_WOULD_CROSS, oid, qty, 0, 0, 0);
            return;
        }
        if (otype == FOK && available(side, has_limit, price, owner, qty) < qty) {
            set_out(out, CANCELLED, R_FOK_UNFILLABLE, oid, qty, 0, 0, 0);
            return;
        }
        match(out, oid, owner, side, otype, price, qty);
    }

    void modify(lob_outcome *out, int64_t oid, int64_t qty, int64_t price) {
        Order *o = index.find(oid);
        if (!o) { set_out(out, NOT_FOUND, R_UNKNOWN_ID, oid, 0, 0, 0, 0); return; }
        int64_t cur = o->price;
        int32_t owner = o->owner;
        int side = o->side;
        if (price == 0 || price == cur) {
            if (qty <= o->qty) { /* keeps its place */
                o->level->qty -= o->qty - qty;
                o->qty = qty;
            } else { /* to the tail of its level */
                remove_order(o);
                rest(oid, owner, side, cur, qty);
            }
            set_out(out, ACCEPTED, R_NONE, oid, qty, 0, 0, 0);
            return;
        }
        remove_order(o);
        match(out, oid, owner, side, LIMIT, price, qty);
    }

    int64_t cancel_where(int side, int64_t plo, int64_t phi, bool by_owner, int32_t owner) {
        int64_t removed = 0;
        Level *l = levels[side].best();
        while (l) {
            Level *nxt = levels[side].worse(l); /* l may be gone after its last removal */
            if (l->price >= plo && l->price <= phi) {
                for (Order *o = l->head; o;) {
                    Order *on = o->next;
                    if (!by_owner || o->owner == owner) {
                        removed++;
                        if (remove_order(o)) break;
                    }
                    o = on;
                }
            }
            l = nxt;
        }
        return removed;
    }

    void mass_cancel(lob_outcome *out, int scope, int side, int32_t owner, int64_t plo,
                     int64_t phi) {
        int64_t removed = 0;
        if (scope == 0 || scope == 2) {
            for (int s = 0; s < 2; s++) removed += cancel_where(s, lo, hi, scope == 2, owner);
        } else if (scope == 1) {
            removed = cancel_where(side, lo, hi, false, 0);
        } else {
            for (int s = 0; s < 2; s++) removed += cancel_where(s, plo, phi, false, 0);
        }
        set_out(out, CANCELLED, R_NONE, 0, 0, 0, 0, removed);
    }

    void exec(const lob_command *c, lob_outcome *o) {
        int otype = c->otype, side = c->side;
        switch (c->kind) {
        case LOB_SUBMIT:
            if (otype < 0 || otype > NOTIONAL) return rejected(o, R_BAD_TYPE);
            if (side != 0 && side != 1) return rejected(o, R_BAD_SIDE);
            if (c->owner <= 0) return rejected(o, R_BAD_OWNER);
            if (c->qty <= 0 ||
                (c->qty > LOB_MAX_QTY && (otype != NOTIONAL || c->qty > LOB_MAX_NOTIONAL)))
                return rejected(o, R_BAD_QTY);
            if (otype < MARKET && (c->price < lo || c->price > hi))
                return rejected(o, R_BAD_PRICE);
            if (!index.reserve(next_id + 1) || !orders.reserve()) throw OutOfMemory();
            next_id++;
            return submit(o, next_id, c->owner, side, otype, c->price, c->qty);
        case LOB_CANCEL: {
            Order *k = index.find(c->id);
            if (!k) return set_out(o, NOT_FOUND, R_UNKNOWN_ID, c->id, 0, 0, 0, 0);
            remove_order(k);
            return set_out(o, CANCELLED, R_NONE, c->id, 0, 0, 0, 1);
        }
        case LOB_MODIFY:
            if (c->qty <= 0 || c->qty > LOB_MAX_QTY) return rejected(o, R_BAD_QTY);
            if (c->price != 0 && (c->price < lo || c->price > hi)) return rejected(o, R_BAD_PRICE);
            if (!orders.reserve()) throw OutOfMemory();
            return modify(o, c->id, c->qty, c->price);
        case LOB_MASS_CANCEL:
            if (otype < 0 || otype > 3) return rejected(o, R_BAD_SCOPE);
            if (otype == 1 && side != 0 && side != 1) return rejected(o, R_BAD_SIDE);
            if (otype == 2 && c->owner <= 0) return rejected(o, R_BAD_OWNER);
            if (otype == 3 && c->price > c->price_hi) return rejected(o, R_BAD_PRICE);
            return mass_cancel(o, otype, side, c->owner, c->price, c->price_hi);
        default:
            return rejected(o, R_BAD_KIND);
        }
    }

    static void rejected(lob_outcome *o, int reason) { set_out(o, REJECTED, reason, 0, 0, 0, 0, 0); }
};

static void say(char *err, int64_t cap, const char *msg) {
    if (err && cap > 0) std::snprintf(err, size_t(cap), "%s", msg);
}

static inline int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

extern "C" {

uint32_t lob_abi_version(void) { return LOB_ABI_VERSION; }

int64_t lob_struct_size(int32_t which) {
    switch (which) {
    case LOB_STRUCT_COMMAND: return int64_t(sizeof(lob_command));
    case LOB_STRUCT_OUTCOME: return int64_t(sizeof(lob_outcome));
    case LOB_STRUCT_FILL: return int64_t(sizeof(lob_fill));
    case LOB_STRUCT_LEVEL: return int64_t(sizeof(lob_level));
    case LOB_STRUCT_CONFIG: return int64_t(sizeof(lob_config));
    case LOB_STRUCT_ORDER: return int64_t(sizeof(lob_order));
    case LOB_STRUCT_CAPS: return int64_t(sizeof(lob_caps));
    default: return -1;
    }
}

int32_t lob_capabilities(lob_caps *out) {
    if (!out) return -1;
    std::memset(out, 0, sizeof *out);
    out->stp_modes = LOB_CAP_ALL_STP;
    out->order_types = LOB_CAP_ALL_TYPES;
    out->kinds = LOB_CAP_ALL_KINDS;
    out->scopes = LOB_CAP_ALL_SCOPES;
    out->max_band_width = LOB_SKIPLIST ? 0 : LADDER_MAX_WIDTH;
    return 0;
}

lob_book *lob_create(const lob_config *cfg, char *err, int64_t err_cap) {
    if (!cfg || cfg->min_price < 1 || cfg->max_price < cfg->min_price ||
        cfg->max_price > LOB_MAX_PRICE || cfg->stp < 0 || cfg->stp > 3) {
        say(err, err_cap, "bad config: need 1 <= min_price <= max_price <= LOB_MAX_PRICE "
                          "and stp in 0..3");
        return nullptr;
    }
    int64_t w = cfg->max_price - cfg->min_price + 1;
    if (!LOB_SKIPLIST && w > LADDER_MAX_WIDTH) {
        say(err, err_cap, "band wider than 2^26 prices (the ladder keeps an array of levels "
                          "over the band)");
        return nullptr;
    }
    lob_book *b = new (std::nothrow) lob_book;
    if (!b) { say(err, err_cap, "out of memory"); return nullptr; }
    b->lo = cfg->min_price;
    b->hi = cfg->max_price;
    b->stp = cfg->stp;
    for (int s = 0; s < 2; s++) {
        if (!b->levels[s].init(s, b->lo, w)) {
            delete b;
            say(err, err_cap, "out of memory");
            return nullptr;
        }
    }
    return b;
}

void lob_destroy(lob_book *b) { delete b; }

static int32_t replay_impl(lob_book *b, const lob_command *cmds, int64_t n, lob_outcome *out,
                           lob_fill *fills, int64_t fill_cap, int64_t *n_done, int64_t *n_fills,
                           int64_t *ns) {
    if (!b || (n > 0 && (!cmds || !out)) || n < 0 || fill_cap < 0 || !n_done || !n_fills ||
        (fill_cap > 0 && !fills))
        return LOB_ERR_ARG;
    b->fills = fills;
    b->nf = 0;
    int32_t rc = LOB_OK;
    int64_t i = 0;
    try {
        for (; i < n; i++) {
            const lob_command *c = &cmds[i];
            /* a submit or modify fills each resting maker at most once */
            if ((c->kind == LOB_SUBMIT || c->kind == LOB_MODIFY) &&
                fill_cap - b->nf < b->live[0] + b->live[1]) {
                rc = LOB_NEED_FILL_SPACE;
                break;
            }
            if (ns && c->timed) {
                int64_t t0 = now_ns();
                b->exec(c, &out[i]);
                ns[i] = now_ns() - t0;
            } else {
                b->exec(c, &out[i]);
            }
        }
    } catch (...) {
        std::snprintf(b->err, sizeof b->err, "out of memory (%lld resting orders)",
                      (long long)(b->live[0] + b->live[1]));
        rc = LOB_ERR_NOMEM;
    }
    *n_done = i;
    *n_fills = b->nf;
    b->fills = nullptr;
    return rc;
}

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

int64_t lob_last_error(const lob_book *b, char *msg, int64_t cap) {
    if (!b || !msg || cap <= 0) return 0;
    std::snprintf(msg, size_t(cap), "%s", b->err);
    return int64_t(std::strlen(b->err));
}

void lob_clock_samples(int64_t *out, int64_t n) {
    int64_t prev = now_ns();
    for (int64_t i = 0; i < n; i++) {
        int64_t t = now_ns();
        out[i] = t - prev;
        prev = t;
    }
}

int64_t lob_snapshot(const lob_book *cb, int32_t side, int64_t depth, lob_level *out) {
    if (!cb || (side != 0 && side != 1) || depth <= 0 || !out) return 0;
    lob_book *b = const_cast<lob_book *>(cb);
    int64_t k = 0;
    for (Level *l = b->levels[side].best(); l && k < depth; l = b->levels[side].worse(l))
        out[k++] = lob_level{l->price, l->qty, l->count};
    return k;
}

int64_t lob_resting(const lob_book *cb, lob_order *out, int64_t cap) {
    if (!cb) return 0;
    lob_book *b = const_cast<lob_book *>(cb);
    int64_t k = 0;
    for (int s = 0; s < 2; s++)
        for (Level *l = b->levels[s].best(); l; l = b->levels[s].worse(l))
            for (Order *o = l->head; o; o = o->next, k++)
                if (out && k < cap) out[k] = lob_order{o->id, o->owner, s, l->price, o->qty};
    return k;
}

#define FAIL(...) do { std::snprintf(msg, size_t(cap), __VA_ARGS__); return 1; } while (0)

int32_t lob_check(const lob_book *cb, char *msg, int64_t cap) {
    if (!cb) return 1;
    lob_book *b = const_cast<lob_book *>(cb);
    int64_t seen = 0;
    for (int s = 0; s < 2; s++) {
        int64_t live = 0, prev_price = 0;
        bool first = true;
        for (Level *l = b->levels[s].best(); l; l = b->levels[s].worse(l)) {
            if (l->price < b->lo || l->price > b->hi)
                FAIL("level %lld outside the band", (long long)l->price);
            if (!first && (s == 0 ? l->price >= prev_price : l->price <= prev_price))
                FAIL("side %d levels out of order at %lld", s, (long long)l->price);
            if (l->count == 0) FAIL("empty level %lld kept", (long long)l->price);
            first = false;
            prev_price = l->price;
            int64_t q = 0, c = 0;
            Order *prev = nullptr;
            for (Order *o = l->head; o; o = o->next) {
                if (o->prev != prev) FAIL("broken links at level %lld", (long long)l->price);
                if (o->qty <= 0) FAIL("order %lld rests with qty %lld", (long long)o->id,
                                      (long long)o->qty);
                if (o->side != s || o->level != l || o->price != l->price)
                    FAIL("order %lld in the wrong level", (long long)o->id);
                if (b->index.find(o->id) != o)
                    FAIL("order %lld missing from the index", (long long)o->id);
                if (o->id <= 0 || o->id > b->next_id)
                    FAIL("order id %lld never issued", (long long)o->id);
                q += o->qty;
                c++;
                prev = o;
                if (c > b->live[0] + b->live[1]) FAIL("cycle at level %lld", (long long)l->price);
            }
            if (l->tail != prev) FAIL("bad tail at level %lld", (long long)l->price);
            if (q != l->qty || c != l->count) FAIL("level %lld totals wrong", (long long)l->price);
#if LOB_LEVEL_OBJECTS
            if (l->refs.load() != 1) FAIL("level %lld held %d times at rest", (long long)l->price,
                                          (int)l->refs.load());
#endif
            live += c;
        }
        if (live != b->live[s]) FAIL("side %d counts %lld orders, holds %lld", s,
                                     (long long)b->live[s], (long long)live);
        seen += live;
    }
    Level *bb = b->levels[0].best(), *ba = b->levels[1].best();
    if (bb && ba && bb->price >= ba->price) FAIL("book is crossed");
    if (b->index.size() != seen) FAIL("index holds %lld ids, book %lld orders",
                                      (long long)b->index.size(), (long long)seen);
    return 0;
}

}  // extern "C"
