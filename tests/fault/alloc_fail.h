/* Allocation-failure injection for tests: this executable's own malloc,
 * calloc, realloc, free and the aligned allocators take precedence over
 * glibc's for every caller in the process (liborin, cJSON, glibc itself), so a
 * test can make the Nth allocation of a window fail and count what the window
 * left allocated.
 *
 * Not for sanitizer builds: ASan replaces the allocator itself. */
#ifndef ORIN_TEST_ALLOC_FAIL_H
#define ORIN_TEST_ALLOC_FAIL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct alloc_window_stats {
    size_t allocations;   /* counted in the window (the failed one included) */
    bool failed;          /* the armed allocation was reached and failed */
    void *failed_caller;  /* return address of its allocator call */
    size_t live;          /* blocks allocated in the window and not yet freed */
    size_t live_bytes;
    void *first_live_caller; /* return address of the oldest live block's allocator call */
} alloc_window_stats;

/* Starts a window: allocations are counted and tracked from now on; the
 * fail_at-th (1-based) returns NULL with ENOMEM, 0 = none fails. */
void alloc_window_begin(size_t fail_at);
/* Stops counting (blocks of the window stay tracked, so that frees after this
 * still match them). */
void alloc_window_pause(void);
/* Ends the window and reports; tracking stops and is cleared. */
alloc_window_stats alloc_window_end(void);

/* "symbol+0xoff (library)" for a code address, into buf. */
const char *alloc_describe(void *addr, char *buf, size_t cap);

#endif
