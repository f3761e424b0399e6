/* Start and stop callgrind's counting around one region of a process (lob.diagnose.callgrind).
   Valgrind client requests: a magic instruction sequence that does nothing when the process
   does not run under valgrind. */
#include <valgrind/callgrind.h>

void lob_cg_start(void) {
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_TOGGLE_COLLECT;
}

/* the counts of the region go to the first dump file, <out>.1 */
void lob_cg_stop(void) {
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS;
    CALLGRIND_STOP_INSTRUMENTATION;
}
