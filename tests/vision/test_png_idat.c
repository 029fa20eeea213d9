/* PNG image data (IDAT) through orin_image_decode_mem: the rows libdeflate
 * inflates whole (core/src/vision/image_png_inflate.c) and the files that
 * path hands back to libpng must decode exactly as libpng alone decoded them
 * (same pixels, same errors, same tolerances).
 *
 * Each file is built here, from pixels known in advance: the rows filtered
 * with every PNG filter type in turn, the zlib stream made of stored blocks
 * (so that no compressor is needed), then variations of the stream and of
 * its IDAT chunks. Files that succeed must give the pixels back; the others
 * must fail with libpng's message. */
#include "test_util.h"

#include "orin/error.h"
#include "orin/image.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define W 37
#define H 23

/* A growing byte buffer. */
typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *data, size_t n)
{
    if (n == 0)
        return;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void put32(bytes *b, uint32_t v)
{
    uint8_t be[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(b, be, 4);
}

static uint32_t crc32_of(const uint8_t *p, size_t n, uint32_t crc)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = crc >> 1 ^ (0xedb88320u & (0u - (crc & 1)));
    }
    return ~crc;
}

static uint32_t adler32_of(const uint8_t *p, size_t n)
{
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521;
        b = (b + a) % 65521;
    }
    return b << 16 | a;
}

static void put_chunk(bytes *b, const char *type, const uint8_t *data, size_t n)
{
    put32(b, (uint32_t)n);
    put(b, type, 4);
    put(b, data, n);
    put32(b, crc32_of(data, n, crc32_of((const uint8_t *)type, 4, 0)));
}

/* ---- the image ---- */

/* Byte k of sample c at (x, y): a gradient, noise, and noise of four levels
 * (where Paeth's distances often tie), so that every filter meets each. */
static uint8_t sample_at(int x, int y, int c, int k)
{
    uint32_t h = ((uint32_t)x * 73856093u ^ (uint32_t)y * 19349663u ^
                  (uint32_t)(c * 2 + k) * 83492791u) >> 13;
    if (x < W / 3)
        return (uint8_t)(x * 7 + y * 3 + c * 40 + k);
    return (uint8_t)(x < 2 * W / 3 ? h & 0xff : (h & 3) * 64);
}

typedef struct form {
    int color_type, bit_depth, channels;
    bool interlaced;
} form;

static size_t bpp_of(const form *f)
{
    return (size_t)f->channels * (size_t)(f->bit_depth / 8);
}

/* The rows as stored, unfiltered. */
static uint8_t *raw_rows(const form *f)
{
    size_t bpp = bpp_of(f), rowbytes = bpp * W;
    uint8_t *raw = malloc(rowbytes * H);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (size_t i = 0; i < bpp; i++)
                raw[y * rowbytes + x * bpp + i] =
                    sample_at(x, y, (int)(i / (size_t)(f->bit_depth / 8)),
                              (int)(i % (size_t)(f->bit_depth / 8)));
    return raw;
}

/* The RGB that orin_image_decode gives for those rows: grey repeated, the
 * high byte of 16-bit colour, 8-bit RGBA over white (PIL's rounding). */
static void expected_rgb(const form *f, const uint8_t *raw, uint8_t *rgb)
{
    size_t bpp = bpp_of(f), step = (size_t)f->bit_depth / 8;
    for (size_t p = 0; p < (size_t)W * H; p++) {
        for (int c = 0; c < 3; c++) {
            unsigned v = raw[p * bpp + (f->channels == 1 ? 0 : (size_t)c * step)];
            unsigned a = f->channels == 4 ? raw[p * bpp + 3] : 255;
            rgb[p * 3 + c] = (uint8_t)((v * a + 255 * (255 - a) + 127) / 255);
        }
    }
}

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* A row of n bytes filtered with `type` (an encoder's side), after its
 * filter byte; up is the row above, NULL on the first. */
static void filter_row(const uint8_t *row, const uint8_t *up, size_t n, size_t bpp, int type,
                       bytes *out)
{
    uint8_t t = (uint8_t)type;
    put(out, &t, 1);
    for (size_t i = 0; i < n; i++) {
        int a = i >= bpp ? row[i - bpp] : 0, b = up ? up[i] : 0;
        int c = up && i >= bpp ? up[i - bpp] : 0;
        int pred = type == 1 ? a : type == 2 ? b : type == 3 ? (a + b) / 2
                   : type == 4 ? paeth(a, b, c) : 0;
        uint8_t v = (uint8_t)(row[i] - pred);
        put(out, &v, 1);
    }
}

/* The filtered image data: row y with filter (y + shift) % 5. */
static bytes filtered(const form *f, const uint8_t *raw, int shift)
{
    size_t n = bpp_of(f) * W;
    bytes out = {0};
    for (int y = 0; y < H; y++)
        filter_row(raw + y * n, y ? raw + (y - 1) * n : NULL, n, bpp_of(f), (y + shift) % 5,
                   &out);
    return out;
}

/* The same, interlaced: Adam7's seven passes, each a small image of its own
 * (no row above a pass's first). */
static bytes filtered_adam7(const form *f, const uint8_t *raw, int shift)
{
    static const int pass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                   {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
    size_t bpp = bpp_of(f);
    uint8_t row[W * 8], up[W * 8];
    bytes out = {0};
    for (int p = 0; p < 7; p++) {
        int x0 = pass[p][0], y0 = pass[p][1], dx = pass[p][2], dy = pass[p][3];
        size_t n = (size_t)((W - x0 + dx - 1) / dx) * bpp;
        for (int y = y0, k = 0; y < H && n; y += dy, k++) {
            for (int x = x0, i = 0; x < W; x += dx, i++)
                memcpy(row + i * bpp, raw + ((size_t)y * W + x) * bpp, bpp);
            filter_row(row, k ? up : NULL, n, bpp, (y + p + shift) % 5, &out);
            memcpy(up, row, n);
        }
    }
    return out;
}

/* ---- the zlib stream ---- */

/* data as stored blocks of at most `block` bytes, after a zlib header
 * (cmf, flg), with its Adler-32 (plus `adler_xor`). */
static bytes zlib_stored(const uint8_t *data, size_t n, size_t block, uint8_t cmf, uint8_t flg,
                         uint32_t adler_xor)
{
    bytes z = {0};
    put(&z, (uint8_t[]){cmf, flg}, 2);
    size_t off = 0;
    do {
        size_t len = n - off < block ? n - off : block;
        uint8_t head[5] = {off + len == n, (uint8_t)len, (uint8_t)(len >> 8),
                           (uint8_t)~len, (uint8_t)(~len >> 8)};
        put(&z, head, 5);
        put(&z, data + off, len);
        off += len;
    } while (off < n);
    put32(&z, adler32_of(data, n) ^ adler_xor);
    return z;
}

/* ---- the file ---- */

/* The IDAT chunks: the stream cut at each of `cuts` (ascending offsets). */
static bytes png_file(const form *f, const bytes *z, const size_t *cuts, int n_cuts)
{
    bytes b = {0};
    put(&b, "\x89PNG\r\n\x1a\n", 8);
    uint8_t ihdr[13] = {0, 0, 0, W, 0, 0, 0, H, (uint8_t)f->bit_depth, (uint8_t)f->color_type,
                        0, 0, (uint8_t)f->interlaced};
    put_chunk(&b, "IHDR", ihdr, 13);
    size_t from = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : z->n;
        put_chunk(&b, "IDAT", z->p + from, to - from);
        from = to;
    }
    put_chunk(&b, "IEND", NULL, 0);
    return b;
}

/* The offset of the n-th chunk's CRC (chunks counted from IHDR = 0). */
static size_t crc_offset(const bytes *file, int n)
{
    size_t at = 8;
    for (;;) {
        uint32_t len = (uint32_t)file->p[at] << 24 | (uint32_t)file->p[at + 1] << 16 |
                       (uint32_t)file->p[at + 2] << 8 | file->p[at + 3];
        if (n-- == 0)
            return at + 8 + len;
        at += 12 + len;
    }
}

/* ---- checks ---- */

static void expect_pixels(const char *what, const bytes *file, const uint8_t *rgb)
{
    orin_image img;
    orin_error_clear();
    int rc = orin_image_decode_mem(file->p, file->n, what, 0, &img);
    CHECK(rc == 0, "%s: %s", what, orin_error());
    if (rc)
        return;
    CHECK(img.width == W && img.height == H, "%s: %dx%d", what, img.width, img.height);
    CHECK(memcmp(img.rgb, rgb, (size_t)W * H * 3) == 0, "%s: the pixels differ", what);
    orin_image_free(&img);
}

static void expect_error(const char *what, const bytes *file, const char *want)
{
    orin_image img;
    orin_error_clear();
    int rc = orin_image_decode_mem(file->p, file->n, what, 0, &img);
    CHECK(rc == -1 && strstr(orin_error(), want) && !img.rgb, "%s: rc %d, error \"%s\" lacks "
          "\"%s\"", what, rc, orin_error(), want);
    if (rc == 0)
        orin_image_free(&img);
}

/* Every filter at every row position, for one sample layout. */
static void test_filters(const form *f, const char *name)
{
    uint8_t *raw = raw_rows(f), rgb[W * H * 3];
    expected_rgb(f, raw, rgb);
    for (int shift = 0; shift < 5; shift++) {
        bytes data = f->interlaced ? filtered_adam7(f, raw, shift) : filtered(f, raw, shift);
        bytes z = zlib_stored(data.p, data.n, 65535, 0x78, 0x01, 0);
        bytes file = png_file(f, &z, NULL, 0);
        char what[64];
        snprintf(what, sizeof what, "%s, filters from %d", name, shift);
        expect_pixels(what, &file, rgb);
        free(data.p);
        free(z.p);
        free(file.p);
    }
    free(raw);
}

/* The stream and its chunks varied, on 8-bit RGB. */
static void test_streams(void)
{
    const form f = {.color_type = 2, .bit_depth = 8, .channels = 3};
    uint8_t *raw = raw_rows(&f), rgb[W * H * 3];
    expected_rgb(&f, raw, rgb);
    bytes data = filtered(&f, raw, 0);
    bytes z = zlib_stored(data.p, data.n, 300, 0x78, 0x01, 0);
    size_t cuts[] = {1, 100, 101, 700, z.n - 4};
    bytes file = png_file(&f, &z, cuts, 5);
    expect_pixels("six IDATs, the Adler-32 in the last", &file, rgb);

    /* libpng checks the Adler-32 only where it must read on to reach it:
     * not when the last row is read and the checksum lies in the next chunk. */
    bytes bad_adler = zlib_stored(data.p, data.n, 300, 0x78, 0x01, 1);
    free(file.p);
    file = png_file(&f, &bad_adler, (size_t[]){bad_adler.n - 4}, 1);
    expect_pixels("a wrong Adler-32 in a chunk of its own", &file, rgb);
    free(file.p);
    file = png_file(&f, &bad_adler, NULL, 0);
    expect_error("a wrong Adler-32", &file, "incorrect data check");

    /* A 512-byte window declared (no distance in a stored stream needs more). */
    bytes small = zlib_stored(data.p, data.n, 300, 0x18, 0x19, 0);
    free(file.p);
    file = png_file(&f, &small, NULL, 0);
    expect_pixels("a 512-byte window", &file, rgb);

    /* Bytes after the stream's end, in its chunk: libpng warns only. */
    bytes extra = {0};
    put(&extra, z.p, z.n);
    put(&extra, "\0\1\2", 3);
    free(file.p);
    file = png_file(&f, &extra, NULL, 0);
    expect_pixels("data after the stream", &file, rgb);

    /* A stream longer than the image, and one shorter. */
    bytes longer = {0}, longer_z, shorter_z;
    put(&longer, data.p, data.n);
    put(&longer, raw, 50);
    longer_z = zlib_stored(longer.p, longer.n, 65535, 0x78, 0x01, 0);
    free(file.p);
    file = png_file(&f, &longer_z, NULL, 0);
    expect_pixels("a stream longer than the image", &file, rgb);
    shorter_z = zlib_stored(data.p, data.n - 1, 65535, 0x78, 0x01, 0);
    free(file.p);
    file = png_file(&f, &shorter_z, NULL, 0);
    expect_error("a stream one byte short", &file, "Not enough image data");

    /* A chunk past the stream's end that libpng never reads. */
    bytes after = {0};
    put(&after, z.p, z.n);
    put(&after, "junk", 4);
    free(file.p);
    file = png_file(&f, &after, (size_t[]){z.n}, 1);
    file.p[crc_offset(&file, 2)] ^= 1;
    expect_pixels("a broken IDAT after the stream", &file, rgb);

    /* A broken CRC inside the stream, an unknown filter, a cut file. */
    free(file.p);
    file = png_file(&f, &z, cuts, 5);
    file.p[crc_offset(&file, 3)] ^= 1;
    expect_error("a broken CRC in the third IDAT", &file, "CRC error");
    bytes bad_filter = {0};
    put(&bad_filter, data.p, data.n);
    bad_filter.p[(W * 3 + 1) * 5] = 5;
    bytes bad_filter_z = zlib_stored(bad_filter.p, bad_filter.n, 65535, 0x78, 0x01, 0);
    free(file.p);
    file = png_file(&f, &bad_filter_z, NULL, 0);
    expect_error("filter type 5", &file, "bad adaptive filter value");
    free(file.p);
    file = png_file(&f, &z, cuts, 5);
    file.n = crc_offset(&file, 4) - 10;
    expect_error("a file cut in its IDATs", &file, "truncated");

    bytes *all[] = {&data, &z, &bad_adler, &small, &extra, &longer, &longer_z, &shorter_z,
                    &after, &bad_filter, &bad_filter_z, &file};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]->p);
    free(raw);
}

int main(void)
{
    test_filters(&(form){.color_type = 2, .bit_depth = 8, .channels = 3}, "8-bit RGB");
    test_filters(&(form){.color_type = 0, .bit_depth = 8, .channels = 1}, "8-bit grey");
    test_filters(&(form){.color_type = 2, .bit_depth = 16, .channels = 3}, "16-bit RGB");
    /* Interlaced files are libpng's: 8-bit RGB goes straight into the image. */
    test_filters(&(form){.color_type = 2, .bit_depth = 8, .channels = 3, .interlaced = true},
                 "8-bit RGB, interlaced");
    test_filters(&(form){.color_type = 6, .bit_depth = 8, .channels = 4, .interlaced = true},
                 "8-bit RGBA, interlaced");
    test_streams();
    return test_finish();
}
