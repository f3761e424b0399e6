/* lob_engine.h -- the C ABI of a foreign lob engine (ABI version 2).
 *
 * A foreign engine is a shared library exporting the functions below. lob loads it with
 * ctypes (lob/engines/foreign), checks the ABI version and the three record sizes, and
 * then drives it with batch calls only: one call replays a whole command array, so no
 * per-command crossing of the language boundary is ever inside a timed region.
 *
 * The records are byte for byte the numpy dtypes of lob/semantics.py (COMMAND_DTYPE,
 * OUTCOME_DTYPE, FILL_DTYPE): packed, little-endian, fields in the same order. The
 * semantics an engine must implement are the module docstring of lob/semantics.py; lob's
 * differential fuzz compares every outcome and every fill with the `reference` engine.
 *
 * Memory: lob owns every array passed in and never frees engine memory; the engine owns
 * its book and frees it in lob_destroy. An engine must never write outside the counts it
 * is given (lob puts a canary-filled guard region after each output buffer and reports
 * any write into it).
 *
 * Compared bit for bit with `reference` (an engine wrapping a book that does not report
 * them natively must compute them itself):
 *   - ids: every valid SUBMIT takes the next sequential id 1, 2, ... (a rejected one takes
 *     none); outcome.id is that id, the target id for CANCEL / MODIFY (echoed as given,
 *     even for NOT_FOUND, e.g. -5), 0 for MASS_CANCEL and REJECTED;
 *   - fills: taker and maker ids, the maker's price, in match order;
 *   - outcome.reason (LOB_REASON_*), remaining (leftover qty; unspent amount for NOTIONAL;
 *     0 for cancels), filled, fills, removed (orders taken off without a fill: cancels,
 *     mass cancels, STP maker cancels; not a MODIFY's own removal);
 *   - the final book (lob_snapshot) and, when exported, every resting order (lob_resting).
 * C++: never let an exception cross these functions (catch, return LOB_ERR_NOMEM or
 * LOB_ERR_ENGINE with a message for lob_last_error).
 *
 * What lob checks, so that a broken engine is named rather than measured:
 *   - after every replay call, before anything is kept: statuses and reasons in range,
 *     no negative count, outcome.fills summing to *n_fills, fill qty in 1..LOB_MAX_QTY,
 *     fill price inside the band, taker = the command's order id, maker >= 1 and not the
 *     taker, filled = the fills' quantities (an error names the engine and the command);
 *   - LOB_NEED_FILL_SPACE: lob grows the fill room up to the number of SUBMITs run on the
 *     book (no more orders can rest); asking again with that much room and no progress
 *     is an error;
 *   - each output buffer is followed by a 4 KiB canary and then address space that
 *     cannot be written: a write past the end faults at once;
 *   - a replay call that does not return within $LOB_FOREIGN_TIMEOUT_S (600 s by default),
 *     or within 2 s of Ctrl-C, ends the process with one line naming the engine and the
 *     command; a crash (signal, exit) is reported with the engine and the command when
 *     $LOB_CRASH_MARKER is set (lob bench and the experiment runner set it);
 *   - the library is loaded from a copy named by its content hash: rebuilding it in place
 *     and opening it again in the same process runs the new code.
 */
#ifndef LOB_ENGINE_H
#define LOB_ENGINE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOB_ABI_VERSION 2

/* bounds of lob/semantics.py (validation: a qty above them is REJECTED / BAD_QTY) */
#define LOB_MAX_QTY 1000000000LL                 /* submit and modify quantity */
#define LOB_MAX_NOTIONAL 1000000000000000000LL   /* amount of a NOTIONAL order */
#define LOB_MAX_PRICE 1000000000LL               /* largest band end (BookConfig) */

/* the enums of lob/semantics.py (values of the int8 record fields) */
enum { LOB_SUBMIT = 0, LOB_CANCEL = 1, LOB_MODIFY = 2, LOB_MASS_CANCEL = 3 };      /* Kind */
enum { LOB_BUY = 0, LOB_SELL = 1 };                                            /* Side */
enum { LOB_LIMIT = 0, LOB_IOC = 1, LOB_FOK = 2, LOB_POST_ONLY = 3, LOB_MARKET = 4,
       LOB_NOTIONAL = 5 };                                                     /* OrderType */
enum { LOB_SCOPE_ALL = 0, LOB_SCOPE_SIDE = 1, LOB_SCOPE_OWNER = 2,
       LOB_SCOPE_PRICE_RANGE = 3 };                                            /* Scope */
enum { LOB_FILLED = 0, LOB_PARTIALLY_FILLED = 1, LOB_ACCEPTED = 2, LOB_CANCELLED = 3,
       LOB_REJECTED = 4, LOB_NOT_FOUND = 5 };                                  /* Status */
enum { LOB_REASON_NONE = 0, LOB_REASON_BAD_KIND = 1, LOB_REASON_BAD_TYPE = 2,
       LOB_REASON_BAD_SIDE = 3, LOB_REASON_BAD_OWNER = 4, LOB_REASON_BAD_QTY = 5,
       LOB_REASON_BAD_PRICE = 6, LOB_REASON_BAD_SCOPE = 7, LOB_REASON_UNKNOWN_ID = 8,
       LOB_REASON_NO_LIQUIDITY = 9, LOB_REASON_FOK_UNFILLABLE = 10,
       LOB_REASON_WOULD_CROSS = 11, LOB_REASON_SELF_TRADE = 12,
       LOB_REASON_POOL_FULL = 13 };                                            /* Reason */
enum { LOB_STP_NONE = 0, LOB_STP_CANCEL_MAKER = 1, LOB_STP_CANCEL_TAKER = 2,
       LOB_STP_CANCEL_BOTH = 3 };                                              /* StpMode */

/* ---- records (packed; sizes checked by lob at load time via lob_struct_size) ---------- */
#pragma pack(push, 1)
typedef struct {
    int8_t kind;      /* 0 SUBMIT, 1 CANCEL, 2 MODIFY, 3 MASS_CANCEL */
    int8_t otype;     /* OrderType for SUBMIT (0 LIMIT, 1 IOC, 2 FOK, 3 POST_ONLY, 4 MARKET,
                         5 NOTIONAL); Scope for MASS_CANCEL (0 ALL, 1 SIDE, 2 OWNER,
                         3 PRICE_RANGE) */
    int8_t side;      /* 0 BUY, 1 SELL */
    uint8_t timed;    /* 1: lob_replay_timed measures this command */
    int32_t owner;
    int64_t price;
    int64_t qty;      /* quantity; quote amount for NOTIONAL */
    int64_t id;       /* target of CANCEL / MODIFY */
    int64_t price_hi; /* upper bound of a PRICE_RANGE mass cancel */
} lob_command;        /* 40 bytes */

typedef struct {
    int8_t status;    /* 0 FILLED, 1 PARTIALLY_FILLED, 2 ACCEPTED, 3 CANCELLED, 4 REJECTED,
                         5 NOT_FOUND */
    int8_t reason;    /* lob.semantics.Reason */
    int64_t id;
    int64_t remaining;
    int64_t filled;
    int32_t fills;
    int32_t removed;
} lob_outcome;        /* 34 bytes */

typedef struct {
    int64_t taker;
    int64_t maker;
    int64_t price;
    int64_t qty;
} lob_fill;           /* 32 bytes */

typedef struct {
    int64_t price;
    int64_t qty;
    int64_t count;
} lob_level;          /* 24 bytes: one L2 level of a snapshot */

typedef struct {
    int64_t id;
    int64_t owner;
    int64_t side;
    int64_t price;
    int64_t qty;
} lob_order;          /* 40 bytes: one resting order (lob_resting) */
#pragma pack(pop)

typedef struct {
    int64_t min_price; /* price band, inclusive (lob.BookConfig); 1 <= min <= max <= MAX_PRICE */
    int64_t max_price;
    int32_t stp;       /* 0 NONE, 1 CANCEL_MAKER, 2 CANCEL_TAKER, 3 CANCEL_BOTH */
    int32_t reserved;  /* 0 */
} lob_config;

/* What an engine can do (lob_capabilities). lob checks a book config against it before
 * lob_create, and a command array before lob_replay: a workload, fuzz case or experiment
 * that needs something an engine does not declare is refused (or skipped) naming it. */
typedef struct {
    uint32_t stp_modes;       /* bit m set: StpMode m supported (LOB_CAP_BIT(LOB_STP_NONE)...) */
    uint32_t order_types;     /* bit t: OrderType t may be submitted */
    uint32_t kinds;           /* bit k: Kind k (SUBMIT is required) */
    uint32_t scopes;          /* bit s: Scope s of a MASS_CANCEL */
    int64_t max_band_width;   /* widest band (max - min + 1) lob_create accepts; 0: any */
    int64_t reserved[4];      /* [0] lowest and [1] highest price a band may hold
                                 (min_price >= reserved[0], max_price <= reserved[1]); 0:
                                 no bound stated, as in engines built before these two
                                 (lob passes a zeroed record). e.g. a book of an array
                                 indexed by price 1..99: reserved[0] = 1, reserved[1] = 99,
                                 max_band_width = 99. [2], [3]: 0 */
} lob_caps;           /* 56 bytes */
#define LOB_CAP_BIT(x) (1u << (x))
#define LOB_CAP_ALL_STP 0xFu
#define LOB_CAP_ALL_TYPES 0x3Fu
#define LOB_CAP_ALL_KINDS 0xFu
#define LOB_CAP_ALL_SCOPES 0xFu

enum { LOB_STRUCT_COMMAND = 0, LOB_STRUCT_OUTCOME = 1, LOB_STRUCT_FILL = 2,
       LOB_STRUCT_LEVEL = 3, LOB_STRUCT_CONFIG = 4, LOB_STRUCT_ORDER = 5,
       LOB_STRUCT_CAPS = 6 };

/* return codes of lob_replay / lob_replay_timed */
#define LOB_OK 0              /* all n commands ran */
#define LOB_NEED_FILL_SPACE 1 /* stopped before command *n_done: the next command might
                                 produce more fills than the space left; call again from
                                 there with more fill space */
#define LOB_UNSUPPORTED 2     /* stopped before command *n_done: the engine cannot execute it
                                 (a case its capabilities do not rule out statically, e.g.
                                 a modify up); lob_last_error says which and why. Commands
                                 0..*n_done ran. */
#define LOB_ERR_ARG (-1)      /* a NULL pointer or negative count */
#define LOB_ERR_NOMEM (-2)    /* the engine could not grow its own memory */
#define LOB_ERR_ENGINE (-3)   /* the wrapped engine failed (an internal error, an exception
                                 caught at the boundary); lob_last_error says what */

typedef struct lob_book lob_book; /* opaque */

/* ---- required symbols ---------------------------------------------------------------- */

/* LOB_ABI_VERSION the library was built against. */
uint32_t lob_abi_version(void);

/* sizeof the record named by a LOB_STRUCT_* constant (-1 if unknown). */
int64_t lob_struct_size(int32_t which);

/* What this engine supports (see lob_caps); returns 0. lob calls it at load time. */
int32_t lob_capabilities(lob_caps *out);

/* A new empty book, or NULL with a one-line reason written into err (NUL-terminated,
 * at most err_cap bytes, err may be NULL): e.g. "STP mode CANCEL_MAKER is not supported:
 * the book has no owners", "band 1..10^9 is wider than 2^26 prices", "out of memory". */
lob_book *lob_create(const lob_config *config, char *err, int64_t err_cap);

void lob_destroy(lob_book *book);

/* Run cmds[0..n) in order on the book (no reset). outcomes[i] is written for every command
 * run; the fills they produce go to fills[0..fill_cap). On return *n_done is the number of
 * commands run and *n_fills the number of fills written.
 * Sizing fills: a command fills each resting maker at most once, so before a SUBMIT or
 * MODIFY check that fill_cap - fills written >= resting orders; if not, stop before it
 * and return LOB_NEED_FILL_SPACE (lob doubles the buffer and calls again from there). */
int32_t lob_replay(lob_book *book, const lob_command *cmds, int64_t n, lob_outcome *outcomes,
                   lob_fill *fills, int64_t fill_cap, int64_t *n_done, int64_t *n_fills);

/* Write up to depth levels of one side (0 bids, best first; 1 asks, best first); returns
 * the number written. */
int64_t lob_snapshot(const lob_book *book, int32_t side, int64_t depth, lob_level *out);

/* ---- optional symbols ---------------------------------------------------------------- */

/* lob_replay, plus ns[i] = duration of command i in ns, read with the engine's own clock
 * (CLOCK_MONOTONIC in the example engine), for each command whose timed flag is set;
 * ns[i] of untimed commands is left untouched. ns has n entries. With this symbol lob
 * reports clock = "engine". Time the whole command as this ABI sees it, from reading the
 * lob_command to writing its outcome and fills, any translation by a wrapper (shim)
 * included: lob_replay's throughput includes it, so percentiles must too. */
int32_t lob_replay_timed(lob_book *book, const lob_command *cmds, int64_t n,
                         lob_outcome *outcomes, lob_fill *fills, int64_t fill_cap,
                         int64_t *n_done, int64_t *n_fills, int64_t *ns);

/* n back-to-back reads of the engine's clock: out[i] = read(i+1) - read(i) in ns. */
void lob_clock_samples(int64_t *out, int64_t n);

/* Every resting order in priority order (bids best first, FIFO within a level, then asks
 * best first): writes the first min(cap, count) into out and returns count. lob first calls
 * it with out = NULL, cap = 0 to learn the count. */
int64_t lob_resting(const lob_book *book, lob_order *out, int64_t cap);

/* Check the book's invariants: 0 if they hold, else non-zero with a message in msg. lob
 * calls it after every whole replay (engine.replay, hence lob.replay and the fuzz) and from
 * engine.check(), never inside a timed region; a failure raises naming the message. */
int32_t lob_check(const lob_book *book, char *msg, int64_t msg_cap);

/* The message of the last LOB_UNSUPPORTED / LOB_ERR_ENGINE / LOB_ERR_NOMEM return of this
 * book (NUL-terminated, at most cap bytes); returns its length, 0 if none. */
int64_t lob_last_error(const lob_book *book, char *msg, int64_t cap);

#ifdef __cplusplus
}
#endif
#endif /* LOB_ENGINE_H */
