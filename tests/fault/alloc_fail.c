/* See alloc_fail.h. The real allocator is glibc's, reached through its
 * __libc_* entry points (no dlsym, which would itself allocate). Blocks of a
 * window live in a fixed open-addressing table, so that the bookkeeping never
 * allocates; a spin lock makes it safe for threads that the code under test
 * may start. */
#include "alloc_fail.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);

#define TABLE_BITS 17
#define TABLE_SIZE (1u << TABLE_BITS)
#define TOMBSTONE ((void *)1)

typedef struct block {
    void *ptr;        /* NULL: empty, TOMBSTONE: deleted */
    size_t size;
    void *caller;
    size_t serial;    /* allocation number in the window */
} block;

static block table[TABLE_SIZE];
static volatile int lock;
static bool tracking, counting;
static size_t fail_at, n_allocs, n_live, live_bytes;
static bool hit;
static void *hit_caller;

static void take(void)
{
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
        ;
}

static void give(void)
{
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}

static size_t slot_of(const void *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> (64 - TABLE_BITS));
}

/* Called with the lock held. */
static void track(void *p, size_t size, void *caller, size_t serial)
{
    for (size_t i = slot_of(p), probes = 0; probes < TABLE_SIZE; i = (i + 1) & (TABLE_SIZE - 1), probes++) {
        if (table[i].ptr == NULL || table[i].ptr == TOMBSTONE) {
            table[i] = (block){.ptr = p, .size = size, .caller = caller, .serial = serial};
            n_live++;
            live_bytes += size;
            return;
        }
    }
    fputs("alloc_fail: tracking table full\n", stderr);
}

/* Called with the lock held. */
static void untrack(void *p)
{
    for (size_t i = slot_of(p), probes = 0; probes < TABLE_SIZE; i = (i + 1) & (TABLE_SIZE - 1), probes++) {
        if (table[i].ptr == NULL)
            return;
        if (table[i].ptr == p) {
            n_live--;
            live_bytes -= table[i].size;
            table[i].ptr = TOMBSTONE;
            return;
        }
    }
}

/* Decides the fate of one allocation: false = make it fail. */
static bool admit(size_t *serial, void *caller)
{
    *serial = 0;
    if (!counting)
        return true;
    take();
    *serial = ++n_allocs;
    bool fail = *serial == fail_at;
    if (fail) {
        hit = true;
        hit_caller = caller;
    }
    give();
    if (fail)
        errno = ENOMEM;
    return !fail;
}

static void note_alloc(void *p, size_t size, void *caller, size_t serial)
{
    if (!p || !tracking)
        return;
    take();
    track(p, size, caller, serial);
    give();
}

static void note_free(void *p)
{
    if (!p || !tracking)
        return;
    take();
    untrack(p);
    give();
}

void *malloc(size_t size)
{
    size_t serial;
    if (!admit(&serial, __builtin_return_address(0)))
        return NULL;
    void *p = __libc_malloc(size);
    note_alloc(p, size, __builtin_return_address(0), serial);
    return p;
}

void *calloc(size_t n, size_t size)
{
    size_t serial;
    if (!admit(&serial, __builtin_return_address(0)))
        return NULL;
    void *p = __libc_calloc(n, size);
    note_alloc(p, n * size, __builtin_return_address(0), serial);
    return p;
}

void *realloc(void *old, size_t size)
{
    size_t serial;
    if (!admit(&serial, __builtin_return_address(0)))
        return NULL;
    void *p = __libc_realloc(old, size);
    if (p || size == 0)
        note_free(old);
    note_alloc(p, size, __builtin_return_address(0), serial);
    return p;
}

void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, total);
}

void free(void *p)
{
    note_free(p);
    __libc_free(p);
}

void *memalign(size_t align, size_t size)
{
    size_t serial;
    if (!admit(&serial, __builtin_return_address(0)))
        return NULL;
    void *p = __libc_memalign(align, size);
    note_alloc(p, size, __builtin_return_address(0), serial);
    return p;
}

void *aligned_alloc(size_t align, size_t size)
{
    return memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    size_t serial;
    if (!admit(&serial, __builtin_return_address(0)))
        return ENOMEM;
    void *p = __libc_memalign(align, size);
    if (!p)
        return ENOMEM;
    note_alloc(p, size, __builtin_return_address(0), serial);
    *out = p;
    return 0;
}

void alloc_window_begin(size_t fail)
{
    take();
    memset(table, 0, sizeof table);
    n_allocs = n_live = live_bytes = 0;
    hit = false;
    hit_caller = NULL;
    fail_at = fail;
    tracking = counting = true;
    give();
}

void alloc_window_pause(void)
{
    take();
    counting = false;
    give();
}

alloc_window_stats alloc_window_end(void)
{
    take();
    alloc_window_stats s = {
        .allocations = n_allocs, .failed = hit, .failed_caller = hit_caller, .live = n_live,
        .live_bytes = live_bytes,
    };
    size_t oldest = SIZE_MAX;
    for (size_t i = 0; i < TABLE_SIZE; i++) {
        if (table[i].ptr && table[i].ptr != TOMBSTONE && table[i].serial < oldest) {
            oldest = table[i].serial;
            s.first_live_caller = table[i].caller;
        }
    }
    tracking = counting = false;
    fail_at = 0;
    give();
    return s;
}

const char *alloc_describe(void *addr, char *buf, size_t cap)
{
    Dl_info info;
    if (addr && dladdr(addr, &info) && info.dli_fname) {
        const char *lib = strrchr(info.dli_fname, '/');
        lib = lib ? lib + 1 : info.dli_fname;
        if (info.dli_sname)
            snprintf(buf, cap, "%s+0x%lx (%s)", info.dli_sname,
                     (unsigned long)((char *)addr - (char *)info.dli_saddr), lib);
        else
            snprintf(buf, cap, "%s+0x%lx", lib,
                     (unsigned long)((char *)addr - (char *)info.dli_fbase));
    } else {
        snprintf(buf, cap, "%p", addr);
    }
    return buf;
}
