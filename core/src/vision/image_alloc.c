/* Large image buffers on transparent huge pages (see vision_internal.h).
 *
 * Two ways, by size, for glibc's sake. malloc hands a large block out as a
 * fresh mapping at first, but once one has been freed its dynamic mmap
 * threshold grows and the next image's buffers come from the heap, reusing
 * pages that fault no more. aligned_alloc gets a fresh mapping every time.
 *
 *   - 2 to 8 MiB (the decoded pixels of a 1,024 x 768 image): 2 MiB-aligned
 *     and rounded up to whole huge pages. Advising only the huge pages that
 *     fall inside a malloc'd block would leave most of one this small on
 *     4 KiB pages; clearing a fresh 4 MiB costs less than those faults.
 *   - above (pixel_values, resized images): malloc'd, the huge pages inside
 *     advised. The 4 KiB ends are a small part, and a later image reuses
 *     the block. */
#include "vision_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)
#define WHOLE_MAX ((size_t)8 << 20)

/* Where THP is off the advice fails or is ignored: an ordinary buffer. */
static void advise_huge(void *start, size_t len)
{
#ifdef MADV_HUGEPAGE
    (void)madvise(start, len, MADV_HUGEPAGE);
#else
    (void)start;
    (void)len;
#endif
}

void *vision_alloc(size_t n)
{
    if (n < HUGE_PAGE)
        return malloc(n);
    if (n <= WHOLE_MAX) {
        size_t size = (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        void *p = aligned_alloc(HUGE_PAGE, size);
        if (p)
            advise_huge(p, size);
        return p;
    }
    void *p = malloc(n);
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + n) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (p && end > start)
        advise_huge((void *)start, end - start);
    return p;
}
