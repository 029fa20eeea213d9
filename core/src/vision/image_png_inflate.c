/* A PNG's image data inflated in one call (see vision_internal.h).
 *
 * libpng inflates through zlib a row at a time: for the 1,024 x 768 RGB
 * benchmark file, 3.9 ms of its 5 ms decode, Adler-32 included, where
 * libdeflate inflates the same stream whole in 1.6 ms. This path reads the
 * IDAT chunks that follow png_read_info itself, and stays exactly as strict
 * as libpng by declining whatever libpng might judge differently: the caller
 * then reads the rows through libpng from the same point, with libpng's
 * messages and tolerances. It declines on
 *
 *   - a chunk whose CRC does not match (libpng stops there with "CRC error"),
 *     or cut off by the end of the file, or longer than idat_limit;
 *   - a zlib header other than 0x78 (deflate, a 32 KiB window): with a
 *     smaller window zlib refuses distances beyond it, libdeflate does not;
 *   - any libdeflate failure: bad data, a wrong Adler-32, a stream that ends
 *     short of the image or runs past it;
 *   - compressed data left after the stream's end (libpng warns, or fails
 *     if more IDATs must be read to get there);
 *   - a filter type above 4 ("bad adaptive filter value");
 *   - no memory for the buffers.
 *
 * One difference remains: libdeflate decodes a few malformed deflate
 * streams that zlib refuses (it accepts, for instance, code length headers
 * counting 287 or 288 literal/length codes). Such a file decodes here when
 * every CRC and its Adler-32 hold, which takes a file crafted for it; damage
 * to a file is still caught by those checks. */
#include "vision_internal.h"

#include <libdeflate.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The IDAT chunks that follow each other from the first. */
typedef struct idat_run {
    const uint8_t *first; /* the first chunk's data */
    size_t total;         /* data bytes in all */
    size_t n_chunks;
} idat_run;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A length that libpng 1.6 takes for an IDAT chunk, whatever its build's
 * user limits: libpng allows the raw size (filter bytes included) plus 6,
 * plus 5 a row (rows counted as at most 32,566 bytes) and 5 more, up to
 * 2^31 - 1; counting the rows as 32,566 bytes, this allows less or as much.
 * The deflate of any image fits: 5 bytes a 65,535-byte stored block at
 * worst, 6 for the zlib header and Adler-32. */
static size_t idat_limit(size_t raw_len)
{
    size_t limit = raw_len + 6 + 5 * (raw_len / 32566 + 1);
    return limit < 0x7fffffff ? limit : 0x7fffffff;
}

/* Walks the run from `data` (the first chunk's data; its length is the 8
 * bytes before, which libpng has read) and checks each CRC. `limit` bounds
 * a chunk's length. */
static bool idat_walk(const uint8_t *data, size_t len, size_t limit, idat_run *run)
{
    static const uint8_t idat[4] = {'I', 'D', 'A', 'T'};
    const uint8_t *p = data;
    size_t left = len;
    uint32_t n = be32(data - 8);

    *run = (idat_run){.first = data};
    for (;;) {
        if (n > limit || left < (size_t)n + 4)
            return false;
        if (libdeflate_crc32(libdeflate_crc32(0, idat, 4), p, n) != be32(p + n))
            return false;
        run->total += n;
        run->n_chunks++;
        p += (size_t)n + 4;
        left -= (size_t)n + 4;
        if (left < 8 || memcmp(p + 4, idat, 4) != 0)
            return true;
        n = be32(p);
        p += 8;
        left -= 8;
    }
}

/* The run's data in one piece: in place for one chunk, else copied into
 * *joined (freed by the caller). NULL when out of memory. */
static const uint8_t *idat_join(const idat_run *run, uint8_t **joined)
{
    *joined = NULL;
    if (run->n_chunks == 1)
        return run->first;
    *joined = malloc(run->total ? run->total : 1);
    if (!*joined)
        return NULL;
    const uint8_t *p = run->first;
    size_t off = 0;
    for (size_t i = 0; i < run->n_chunks; i++) {
        uint32_t n = be32(p - 8);
        memcpy(*joined + off, p, n);
        off += n;
        p += (size_t)n + 4 + 8; /* CRC, then the next chunk's length and type */
    }
    return *joined;
}

/* Inflates the zlib stream into out, which must take exactly out_len bytes
 * and consume the whole input. */
static bool inflate_exact(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len)
{
    if (in_len < 2 || in[0] != 0x78)
        return false;
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (!d)
        return false;
    size_t in_used = 0, out_got = 0;
    enum libdeflate_result r = libdeflate_zlib_decompress_ex(d, in, in_len, out, out_len,
                                                             &in_used, &out_got);
    libdeflate_free_decompressor(d);
    return r == LIBDEFLATE_SUCCESS && in_used == in_len && out_got == out_len;
}

/* Paeth's predictor, branch-free: a (left) unless b (up) or c (up-left) is
 * strictly nearer to a + b - c, b before c on a tie. */
static void unfilter_paeth(uint8_t *row, const uint8_t *prev, size_t n, size_t bpp)
{
    for (size_t i = 0; i < bpp && i < n; i++)
        row[i] += prev[i]; /* a = c = 0: b always */
    for (size_t i = bpp; i < n; i++) {
        int a = row[i - bpp], b = prev[i], c = prev[i - bpp];
        int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c);
        int pred = pb < pa ? b : a, nearest = pb < pa ? pb : pa;
        row[i] += (uint8_t)(pc < nearest ? c : pred);
    }
}

/* Undoes one row's filter in place; prev is the row above, unfiltered, or
 * NULL on the first row (zeros). False for an unknown filter type. */
static bool unfilter_row(unsigned type, uint8_t *row, const uint8_t *prev, size_t n, size_t bpp)
{
    switch (type) {
    case 0:
        return true;
    case 1:
        for (size_t i = bpp; i < n; i++)
            row[i] += row[i - bpp];
        return true;
    case 2:
        for (size_t i = 0; prev && i < n; i++)
            row[i] += prev[i];
        return true;
    case 3:
        for (size_t i = 0; i < n; i++)
            row[i] += (uint8_t)(((i >= bpp ? row[i - bpp] : 0u) + (prev ? prev[i] : 0u)) >> 1);
        return true;
    case 4:
        if (prev)
            unfilter_paeth(row, prev, n, bpp);
        else /* with no row above, Paeth is Sub */
            for (size_t i = bpp; i < n; i++)
                row[i] += row[i - bpp];
        return true;
    default:
        return false;
    }
}

/* Each row unfiltered where it was inflated, then moved down over the
 * filter bytes before it, so that the rows end packed from buf's start. A
 * row's new place ends before the next row's data begins, and its old place
 * is not read again. */
static bool unfilter_rows(uint8_t *buf, uint32_t height, size_t rowbytes, size_t bpp)
{
    const uint8_t *prev = NULL;
    for (size_t y = 0; y < height; y++) {
        uint8_t *row = buf + y * (rowbytes + 1);
        if (!unfilter_row(row[0], row + 1, prev, rowbytes, bpp))
            return false;
        memmove(buf + y * rowbytes, row + 1, rowbytes);
        prev = buf + y * rowbytes;
    }
    return true;
}

uint8_t *vision_png_inflate(const uint8_t *data, size_t len, uint32_t height, size_t rowbytes,
                            size_t bpp)
{
    if (height == 0 || rowbytes >= SIZE_MAX / 4 / height)
        return NULL;
    size_t raw_len = (size_t)height * (rowbytes + 1);
    idat_run run;
    if (!idat_walk(data, len, idat_limit(raw_len), &run))
        return NULL;
    uint8_t *joined = NULL, *buf = vision_alloc(raw_len);
    const uint8_t *in = buf ? idat_join(&run, &joined) : NULL;
    bool ok = in && inflate_exact(in, run.total, buf, raw_len) &&
              unfilter_rows(buf, height, rowbytes, bpp);
    free(joined);
    if (!ok) {
        free(buf);
        return NULL;
    }
    return buf;
}
