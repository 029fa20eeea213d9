/* JPEG and PNG files into 8-bit RGB, as PIL decodes them and as transformers'
 * convert_to_rgb then converts them (see orin/image.h).
 *
 * libpng and libjpeg report fatal errors through callbacks that must not
 * return: both are given handlers that keep the message and longjmp back to
 * the function that called setjmp. Everything that must be freed afterwards
 * lives in a job struct owned by the caller of that function, so no local
 * variable is read after a longjmp.
 *
 * libpng reads a PNG's header chunks; its image data is inflated whole by
 * libdeflate where that gives what libpng would (image_png_inflate.c), and
 * read by libpng a row at a time otherwise. */
#include "orin/image.h"
#include "orin/error.h"
#include "orin/file.h"
#include "vision_internal.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

/* A file of more than this is not read: even a 16-bit RGBA PNG at the pixel
 * cap compresses to less. */
#define IMAGE_FILE_MAX ((size_t)2 << 30)

/* How a decoder failed: with the library's message in job->msg, or with the
 * error already set. */
#define DECODE_LIB_ERROR (-1)
#define DECODE_REPORTED (-2)

typedef struct decode_job {
    const char *name;
    const uint8_t *data; /* the bytes not read yet */
    size_t len;
    int64_t max_pixels;
    orin_image img;
    uint8_t *raw;        /* PNG: the rows as stored (one, or all for interlaced) */
    char msg[JMSG_LENGTH_MAX]; /* the library's message */
} decode_job;

/* What PIL's alpha_composite onto an opaque white background gives for one
 * channel: c * a + 255 * (255 - a), divided by 255 and rounded. */
static uint8_t over_white(unsigned c, unsigned a)
{
    return (uint8_t)((c * a + 255u * (255u - a) + 127u) / 255u);
}

static int check_size(const decode_job *job, uint32_t width, uint32_t height)
{
    if (width == 0 || height == 0)
        return orin_error_set("%s: the image is empty (%ux%u)", job->name, width, height);
    if ((uint64_t)width * height > (uint64_t)job->max_pixels)
        return orin_error_set("%s: %ux%u is more than %lld pixels", job->name, width, height,
                              (long long)job->max_pixels);
    return 0;
}

static int alloc_rgb(decode_job *job, uint32_t width, uint32_t height)
{
    job->img.width = (int32_t)width;
    job->img.height = (int32_t)height;
    job->img.rgb = vision_alloc((size_t)width * height * 3);
    if (!job->img.rgb)
        return orin_error_set("%s: out of memory for %ux%u pixels", job->name, width, height);
    return 0;
}

/* ---- PNG ---- */

/* What the rows mean: IHDR, PLTE and tRNS. */
typedef struct png_form {
    int color_type, bit_depth;
    uint8_t palette[256][4]; /* RGBA; entries past the PLTE are black, as in PIL */
    bool transparency;       /* a tRNS chunk (palette alphas or a colour key) */
    uint16_t key[3];         /* grey or RGB key, as written in the file */
} png_form;

static void png_on_error(png_structp png, png_const_charp msg)
{
    decode_job *job = png_get_error_ptr(png);
    snprintf(job->msg, sizeof job->msg, "%s", msg);
    png_longjmp(png, 1);
}

/* Warnings (unknown chunks, a bad iCCP profile) do not stop PIL either. */
static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void png_read_mem(png_structp png, png_bytep out, size_t n)
{
    decode_job *job = png_get_io_ptr(png);
    if (n > job->len)
        png_error(png, "truncated file");
    memcpy(out, job->data, n);
    job->data += n;
    job->len -= n;
}

static void png_read_form(png_structp png, png_infop info, png_form *f)
{
    memset(f, 0, sizeof *f);
    f->color_type = png_get_color_type(png, info);
    f->bit_depth = png_get_bit_depth(png, info);
    for (int i = 0; i < 256; i++)
        f->palette[i][3] = 255;
    png_colorp pal;
    int n_pal;
    if (png_get_PLTE(png, info, &pal, &n_pal) & PNG_INFO_PLTE) {
        for (int i = 0; i < n_pal && i < 256; i++) {
            f->palette[i][0] = pal[i].red;
            f->palette[i][1] = pal[i].green;
            f->palette[i][2] = pal[i].blue;
        }
    }
    png_bytep alpha;
    int n_trans;
    png_color_16p color;
    if (png_get_tRNS(png, info, &alpha, &n_trans, &color) & PNG_INFO_tRNS) {
        f->transparency = true;
        if (f->color_type == PNG_COLOR_TYPE_PALETTE) {
            for (int i = 0; i < n_trans && i < 256; i++)
                f->palette[i][3] = alpha[i];
        } else if (color) {
            f->key[0] = f->color_type == PNG_COLOR_TYPE_GRAY ? color->gray : color->red;
            f->key[1] = color->green;
            f->key[2] = color->blue;
        }
    }
}

/* One sample of a row as stored: 1, 2, 4-bit samples arrive one a byte
 * (png_set_packing), 16-bit ones big-endian. */
static unsigned sample(const uint8_t *row, size_t i, int bit_depth)
{
    return bit_depth == 16 ? (unsigned)row[2 * i] << 8 | row[2 * i + 1] : row[i];
}

/* PIL reduces 16-bit colour samples to their high byte (rawmode "RGB;16B"),
 * but clips 16-bit grey (mode I;16, converted with a clip to 255). */
static unsigned to8(unsigned s, int bit_depth)
{
    return bit_depth == 16 ? s >> 8 : s;
}

/* PIL's colour key, whatever the bit depth: it compares the 8-bit pixel (after
 * expansion or reduction) with the low byte of the value written in tRNS, or,
 * for 1-bit grey, with 255 for any non-zero key. */
static unsigned key8(const png_form *f, int i)
{
    if (f->color_type == PNG_COLOR_TYPE_GRAY && f->bit_depth == 1)
        return f->key[0] ? 255 : 0;
    return f->key[i] & 0xff;
}

/* Grey: 1, 2, 4-bit grey expanded to 8 bits (x255, x85, x17), 16-bit grey
 * clipped. A transparent pixel ends white. */
static void png_grey_row(const png_form *f, const uint8_t *row, uint32_t width, uint8_t *out)
{
    unsigned max = (1u << (f->bit_depth == 16 ? 8 : f->bit_depth)) - 1;
    unsigned key = key8(f, 0);
    for (uint32_t x = 0; x < width; x++) {
        unsigned s = sample(row, x, f->bit_depth);
        unsigned v = f->bit_depth == 16 ? (s > 255 ? 255 : s) : s * 255 / max;
        if (f->transparency && v == key)
            v = 255;
        out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = (uint8_t)v;
    }
}

static void png_rgb_row(const png_form *f, const uint8_t *row, uint32_t width, uint8_t *out)
{
    unsigned kr = key8(f, 0), kg = key8(f, 1), kb = key8(f, 2);
    for (uint32_t x = 0; x < width; x++) {
        unsigned r = to8(sample(row, 3 * x, f->bit_depth), f->bit_depth);
        unsigned g = to8(sample(row, 3 * x + 1, f->bit_depth), f->bit_depth);
        unsigned b = to8(sample(row, 3 * x + 2, f->bit_depth), f->bit_depth);
        if (f->transparency && r == kr && g == kg && b == kb)
            r = g = b = 255;
        out[3 * x] = (uint8_t)r;
        out[3 * x + 1] = (uint8_t)g;
        out[3 * x + 2] = (uint8_t)b;
    }
}

static void png_palette_row(const png_form *f, const uint8_t *row, uint32_t width, uint8_t *out)
{
    for (uint32_t x = 0; x < width; x++) {
        const uint8_t *p = f->palette[row[x]];
        for (int c = 0; c < 3; c++)
            out[3 * x + c] = f->transparency ? over_white(p[c], p[3]) : p[c];
    }
}

/* Grey + alpha and RGBA: composited onto white. */
static void png_alpha_row(const png_form *f, const uint8_t *row, uint32_t width, uint8_t *out)
{
    int grey = f->color_type == PNG_COLOR_TYPE_GRAY_ALPHA;
    size_t n = grey ? 2 : 4;
    for (uint32_t x = 0; x < width; x++) {
        unsigned a = to8(sample(row, n * x + n - 1, f->bit_depth), f->bit_depth);
        for (int c = 0; c < 3; c++) {
            unsigned v = to8(sample(row, n * x + (grey ? 0 : (size_t)c), f->bit_depth),
                             f->bit_depth);
            out[3 * x + c] = over_white(v, a);
        }
    }
}

static void png_convert_row(const png_form *f, const uint8_t *row, uint32_t width, uint8_t *out)
{
    switch (f->color_type) {
    case PNG_COLOR_TYPE_GRAY:
        png_grey_row(f, row, width, out);
        break;
    case PNG_COLOR_TYPE_RGB:
        png_rgb_row(f, row, width, out);
        break;
    case PNG_COLOR_TYPE_PALETTE:
        png_palette_row(f, row, width, out);
        break;
    default:
        png_alpha_row(f, row, width, out);
        break;
    }
}

/* 8-bit RGB without a colour key is already what the conversion gives. */
static bool png_is_rgb8(const png_form *f)
{
    return f->color_type == PNG_COLOR_TYPE_RGB && f->bit_depth == 8 && !f->transparency;
}

/* Rows read straight into the image, for the 8-bit RGB files left to libpng
 * (interlaced ones, those png_read_whole declines): no copy through job->raw
 * and no conversion pass (0.7 ms of 5 for 1,024 x 768). Interlaced, each
 * pass writes only its own pixels of a row, as it does into job->raw. */
static void png_read_rows_direct(png_structp png, orin_image *img, int passes)
{
    size_t stride = (size_t)img->width * 3;
    for (int pass = 0; pass < passes; pass++)
        for (int32_t y = 0; y < img->height; y++)
            png_read_row(png, img->rgb + (size_t)y * stride, NULL);
}

/* Rows as stored into job->raw, converted once the last pass has them. May
 * longjmp (a libpng error). */
static int png_read_rows_converted(png_structp png, png_infop info, decode_job *job,
                                   const png_form *f, int passes)
{
    uint32_t width = (uint32_t)job->img.width, height = (uint32_t)job->img.height;
    size_t rowbytes = png_get_rowbytes(png, info);
    /* An interlaced image fills its rows over seven passes: it needs them all. */
    size_t rows = passes > 1 ? height : 1;
    job->raw = rowbytes <= SIZE_MAX / rows ? malloc(rowbytes * rows) : NULL;
    if (!job->raw)
        return orin_error_set("%s: out of memory for %ux%u pixels", job->name, width, height);
    for (int pass = 0; pass < passes; pass++) {
        for (uint32_t y = 0; y < height; y++) {
            uint8_t *row = job->raw + (rows > 1 ? y * rowbytes : 0);
            png_read_row(png, row, NULL);
            if (pass == passes - 1)
                png_convert_row(f, row, width, job->img.rgb + (size_t)y * width * 3);
        }
    }
    return 0;
}

/* The whole-buffer path (image_png_inflate.c) for non-interlaced files of 8
 * or 16-bit samples, from the first IDAT's data, where png_read_info leaves
 * the file. 1: the image is decoded; 0: declined, nothing changed, libpng
 * reads the rows; -1: out of memory (error set). */
static int png_read_whole(png_structp png, png_infop info, decode_job *job, const png_form *f)
{
    uint32_t width = png_get_image_width(png, info), height = png_get_image_height(png, info);
    size_t bpp = (size_t)png_get_channels(png, info) * (size_t)(f->bit_depth / 8);
    if (png_get_interlace_type(png, info) != PNG_INTERLACE_NONE || f->bit_depth < 8 ||
        width > SIZE_MAX / bpp || memcmp(job->data - 4, "IDAT", 4) != 0)
        return 0;
    uint8_t *rows = vision_png_inflate(job->data, job->len, height, bpp * width, bpp);
    if (!rows)
        return 0;
    if (png_is_rgb8(f)) { /* the rows are the image */
        job->img = (orin_image){.width = (int32_t)width, .height = (int32_t)height, .rgb = rows};
        return 1;
    }
    job->raw = rows;
    if (alloc_rgb(job, width, height))
        return -1;
    for (uint32_t y = 0; y < height; y++)
        png_convert_row(f, rows + (size_t)y * bpp * width, width,
                        job->img.rgb + (size_t)y * width * 3);
    return 1;
}

/* Runs under setjmp: a libpng error comes back here as DECODE_LIB_ERROR. */
static int png_run(png_structp png, png_infop info, decode_job *job, png_form *f)
{
    if (setjmp(png_jmpbuf(png)))
        return DECODE_LIB_ERROR;
    png_set_read_fn(png, job, png_read_mem);
    /* Palette indices past the PLTE are PIL's black, not an error. */
    png_set_check_for_invalid_index(png, 0);
    png_read_info(png, info);
    uint32_t width = png_get_image_width(png, info), height = png_get_image_height(png, info);
    if (check_size(job, width, height))
        return DECODE_REPORTED;
    png_read_form(png, info, f);
    int whole = png_read_whole(png, info, job, f);
    if (whole < 0)
        return DECODE_REPORTED;
    if (whole > 0)
        goto done;
    if (f->bit_depth < 8)
        png_set_packing(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (alloc_rgb(job, width, height))
        return DECODE_REPORTED;
    if (png_is_rgb8(f))
        png_read_rows_direct(png, &job->img, passes);
    else if (png_read_rows_converted(png, info, job, f, passes))
        return DECODE_REPORTED;
done:
    job->img.was_rgb = f->color_type == PNG_COLOR_TYPE_RGB && !f->transparency;
    return 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int decode_png(decode_job *job)
{
    /* An empty or oversized image is named as such before libpng sees it
     * (libpng calls a zero width "Invalid IHDR data"). */
    if (job->len >= 24 && memcmp(job->data + 12, "IHDR", 4) == 0 &&
        check_size(job, be32(job->data + 16), be32(job->data + 20)))
        return -1;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, png_on_error,
                                             png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return orin_error_set("%s: out of memory", job->name);
    }
    png_form form;
    int rc = png_run(png, info, job, &form);
    png_destroy_read_struct(&png, &info, NULL);
    if (rc == DECODE_LIB_ERROR)
        return orin_error_set("%s: PNG: %s", job->name, job->msg);
    return rc < 0 ? -1 : 0;
}

/* ---- JPEG ---- */

typedef struct jpeg_job {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr err;
    jmp_buf on_error;
    decode_job *job;
} jpeg_job;

static void jpeg_on_error(j_common_ptr cinfo)
{
    jpeg_job *j = (jpeg_job *)cinfo->client_data;
    cinfo->err->format_message(cinfo, j->job->msg);
    longjmp(j->on_error, 1);
}

/* PIL ignores libjpeg's warnings about corrupt data, but a file that ends
 * before the image does is its "image file is truncated": an error here. */
static void jpeg_on_message(j_common_ptr cinfo, int level)
{
    jpeg_job *j = (jpeg_job *)cinfo->client_data;
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
        snprintf(j->job->msg, sizeof j->job->msg, "truncated file");
        longjmp(j->on_error, 1);
    }
}

/* Grey rows are decoded into the start of their RGB row and spread from the
 * end, so that no byte is overwritten before it is read. */
static void grey_to_rgb(uint8_t *row, uint32_t width)
{
    for (uint32_t x = width; x-- > 0;)
        row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = row[x];
}

static int jpeg_run(jpeg_job *j)
{
    struct jpeg_decompress_struct *cinfo = &j->cinfo;
    decode_job *job = j->job;
    if (setjmp(j->on_error))
        return DECODE_LIB_ERROR;
    jpeg_mem_src(cinfo, job->data, (unsigned long)job->len);
    jpeg_read_header(cinfo, TRUE);
    if (check_size(job, cinfo->image_width, cinfo->image_height))
        return DECODE_REPORTED;
    bool grey = cinfo->jpeg_color_space == JCS_GRAYSCALE;
    if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) {
        orin_error_set("%s: CMYK JPEG images are not supported", job->name);
        return DECODE_REPORTED;
    }
    /* libjpeg's defaults are PIL's: the accurate integer IDCT, fancy upsampling. */
    cinfo->out_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(cinfo);
    if (cinfo->output_components != (grey ? 1 : 3)) {
        orin_error_set("%s: JPEG of %d components decoded to %d", job->name,
                       cinfo->num_components, cinfo->output_components);
        return DECODE_REPORTED;
    }
    if (alloc_rgb(job, cinfo->output_width, cinfo->output_height))
        return DECODE_REPORTED;
    while (cinfo->output_scanline < cinfo->output_height) {
        uint8_t *row = job->img.rgb + (size_t)cinfo->output_scanline * cinfo->output_width * 3;
        jpeg_read_scanlines(cinfo, &row, 1);
        if (grey)
            grey_to_rgb(row, cinfo->output_width);
    }
    job->img.was_rgb = !grey;
    return 0;
}

static int decode_jpeg(decode_job *job)
{
    jpeg_job *j = calloc(1, sizeof *j);
    if (!j)
        return orin_error_set("%s: out of memory", job->name);
    j->job = job;
    j->cinfo.err = jpeg_std_error(&j->err);
    j->err.error_exit = jpeg_on_error;
    j->err.emit_message = jpeg_on_message;
    j->cinfo.client_data = j;
    int rc = DECODE_LIB_ERROR;
    /* jpeg_create_decompress allocates, and may fail through error_exit. */
    if (setjmp(j->on_error) == 0) {
        jpeg_create_decompress(&j->cinfo);
        rc = jpeg_run(j);
    }
    jpeg_destroy_decompress(&j->cinfo);
    free(j);
    if (rc == DECODE_LIB_ERROR)
        return orin_error_set("%s: JPEG: %s", job->name, job->msg);
    return rc < 0 ? -1 : 0;
}

/* ---- files ---- */

static const char *other_format(const uint8_t *d, size_t n)
{
    if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return "GIF";
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return "WebP";
    if (n >= 2 && memcmp(d, "BM", 2) == 0)
        return "BMP";
    if (n >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0))
        return "TIFF";
    return NULL;
}

int orin_image_decode_mem(const void *data, size_t len, const char *name, int64_t max_pixels,
                          orin_image *out)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    decode_job job = {
        .name = name,
        .data = data,
        .len = len,
        .max_pixels = max_pixels > 0 && max_pixels < ORIN_IMAGE_MAX_PIXELS ? max_pixels
                                                                           : ORIN_IMAGE_MAX_PIXELS,
    };
    memset(out, 0, sizeof *out);
    const char *other = other_format(data, len);
    int rc;
    if (len >= 8 && memcmp(data, png_sig, 8) == 0)
        rc = decode_png(&job);
    else if (len >= 3 && memcmp(data, "\xff\xd8\xff", 3) == 0)
        rc = decode_jpeg(&job);
    else if (len == 0)
        rc = orin_error_set("%s: the file is empty", name);
    else if (other)
        rc = orin_error_set("%s: a %s image: only JPEG and PNG are supported", name, other);
    else
        rc = orin_error_set("%s: not a JPEG or PNG image", name);
    free(job.raw);
    if (rc != 0) {
        free(job.img.rgb);
        return -1;
    }
    *out = job.img;
    return 0;
}

int orin_image_decode(const char *path, orin_image *out)
{
    size_t len;
    memset(out, 0, sizeof *out);
    char *data = orin_read_file(path, IMAGE_FILE_MAX, &len);
    if (!data)
        return -1;
    int rc = orin_image_decode_mem(data, len, path, 0, out);
    free(data);
    return rc;
}

void orin_image_free(orin_image *img)
{
    if (!img)
        return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}
