/* safetensors: files from a tiny writer here and one from the Python
 * `safetensors` package (tests/data/loader/python_writer.safetensors, made by
 * scripts/gen_loader_fixtures.py), sharded folders, one case per class of lying
 * header, and truncation at every 4 KiB boundary. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orin/error.h"
#include "orin/safetensors.h"
#include "test_util.h"

/* ---- a tiny writer ---------------------------------------------------- */

typedef struct buf {
    unsigned char *p;
    size_t len;
} buf;

/* 8-byte length, `header` padded with spaces to a multiple of 8 (as the
 * reference writer does), then `data`. */
static buf make_raw(const char *header, const void *data, size_t data_len)
{
    size_t hlen = strlen(header);
    size_t padded = (hlen + 7) / 8 * 8;
    buf b = {.len = 8 + padded + data_len};
    b.p = malloc(b.len ? b.len : 1);
    for (int i = 0; i < 8; i++)
        b.p[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(b.p + 8, header, hlen);
    memset(b.p + 8 + hlen, ' ', padded - hlen);
    if (data_len)
        memcpy(b.p + 8 + padded, data, data_len);
    return b;
}

/* `hlen` header bytes (NULs allowed) after a length field of `hlen_field`. */
static buf make_exact(uint64_t hlen_field, const char *header, size_t hlen)
{
    buf b = {.len = 8 + hlen};
    b.p = malloc(b.len);
    for (int i = 0; i < 8; i++)
        b.p[i] = (unsigned char)(hlen_field >> (8 * i));
    memcpy(b.p + 8, header, hlen);
    return b;
}

/* The header length field set to `hlen_field`, whatever follows. */
static buf make_lying_length(uint64_t hlen_field, const char *header)
{
    return make_exact(hlen_field, header, strlen(header));
}

typedef struct spec {
    const char *name, *dtype;
    int ndim;
    int64_t shape[6];
    const void *data;
    size_t nbytes;
} spec;

/* A well-formed file holding `n` tensors back to back. */
static buf make_file(const spec *t, int n)
{
    size_t cap = 4096 + (size_t)n * 256, off = 0, data_len = 0;
    char *h = malloc(cap);
    int w = snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++)
        data_len += t[i].nbytes;
    unsigned char *data = malloc(data_len ? data_len : 1);
    for (int i = 0; i < n; i++) {
        w += snprintf(h + w, cap - (size_t)w, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name,
                      t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            w += snprintf(h + w, cap - (size_t)w, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        w += snprintf(h + w, cap - (size_t)w, "],\"data_offsets\":[%zu,%zu]}", off,
                      off + t[i].nbytes);
        if (t[i].nbytes)
            memcpy(data + off, t[i].data, t[i].nbytes);
        off += t[i].nbytes;
    }
    snprintf(h + w, cap - (size_t)w, "}");
    buf b = make_raw(h, data, data_len);
    free(h);
    free(data);
    return b;
}

static char *tmpdir;

static char *tmp_path(const char *name)
{
    static char paths[8][512];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", tmpdir, name);
    return p;
}

static void write_buf(const char *path, buf b)
{
    if (test_write_file(path, b.p, b.len) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

/* ---- well-formed files ------------------------------------------------ */

static const float f32_vals[6] = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f};
static const uint16_t f16_bits[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001};
static const uint16_t bf16_bits[4] = {0x3F80, 0xBF80, 0x4049, 0x0001};
static const int32_t i32_vals[3] = {7, -1, 2147483647};
static const int8_t i8_vals[2] = {-128, 127};
static const uint8_t u8_vals[3] = {0, 128, 255};

static const spec basic[] = {
    {"model.embed_tokens.weight", "F32", 2, {2, 3}, f32_vals, sizeof f32_vals},
    {"h16", "F16", 2, {2, 2}, f16_bits, sizeof f16_bits},
    {"b16", "BF16", 1, {4}, bf16_bits, sizeof bf16_bits},
    {"ids", "I32", 3, {1, 3, 1}, i32_vals, sizeof i32_vals},
    {"i8", "I8", 4, {1, 1, 1, 2}, i8_vals, sizeof i8_vals},
    {"u8", "U8", 1, {3}, u8_vals, sizeof u8_vals},
};
#define N_BASIC ((int)(sizeof basic / sizeof basic[0]))

static void check_basic(const orin_st_archive *ar, const char *file)
{
    static const orin_dtype want_dt[] = {ORIN_F32, ORIN_F16, ORIN_BF16, ORIN_I32, ORIN_I8, ORIN_U8};
    CHECK(orin_st_count(ar) == N_BASIC, "%zu", orin_st_count(ar));
    for (int i = 0; i < N_BASIC; i++) {
        const orin_st_tensor *t = orin_st_find(ar, basic[i].name);
        CHECK(t != NULL, "%s not found", basic[i].name);
        if (!t)
            continue;
        CHECK(strcmp(t->name, basic[i].name) == 0);
        CHECK(strcmp(t->file, file) == 0, "%s vs %s", t->file, file);
        CHECK(strcmp(t->dtype_name, basic[i].dtype) == 0);
        CHECK(t->dtype_known == 1 && t->dtype == want_dt[i], "%s", t->name);
        CHECK(t->ndim == basic[i].ndim, "%s", t->name);
        for (int d = 0; d < basic[i].ndim; d++)
            CHECK(t->shape[d] == basic[i].shape[d], "%s dim %d", t->name, d);
        CHECK(t->nbytes == basic[i].nbytes, "%s", t->name);
        CHECK(memcmp(t->data, basic[i].data, basic[i].nbytes) == 0, "%s data", t->name);
    }
    CHECK(orin_st_find(ar, "model.embed_tokens") == NULL);
    CHECK(orin_st_find(ar, "zzz") == NULL && orin_st_find(ar, "") == NULL);
    CHECK(orin_st_find(ar, "__metadata__") == NULL);
    /* orin_st_at walks each tensor once. */
    int seen = 0;
    for (size_t i = 0; i < orin_st_count(ar); i++) {
        const orin_st_tensor *t = orin_st_at(ar, i);
        seen += t && orin_st_find(ar, t->name) == t;
    }
    CHECK(seen == N_BASIC);
    CHECK(orin_st_at(ar, orin_st_count(ar)) == NULL);
}

static void test_round_trip(void)
{
    buf b = make_file(basic, N_BASIC);
    orin_st_archive *ar = NULL;
    CHECK(orin_st_open_buffer(b.p, b.len, "mem.safetensors", &ar) == 0, "%s", orin_error());
    if (ar)
        check_basic(ar, "mem.safetensors");
    orin_st_close(ar);

    const char *path = tmp_path("basic.safetensors");
    write_buf(path, b);
    ar = NULL;
    CHECK(orin_st_open_file(path, &ar) == 0, "%s", orin_error());
    if (ar)
        check_basic(ar, path);
    orin_st_close(ar);
    free(b.p);

    /* Scalars, empty tensors and a file with no tensors at all. */
    float one = 1.0f;
    spec odd[] = {
        {"scalar", "F32", 0, {0}, &one, 4},
        {"empty", "F16", 2, {0, 5}, NULL, 0},
        {"empty2", "BF16", 1, {0}, NULL, 0},
    };
    b = make_file(odd, 3);
    CHECK(orin_st_open_buffer(b.p, b.len, "odd", &ar) == 0, "%s", orin_error());
    if (ar) {
        const orin_st_tensor *t = orin_st_find(ar, "scalar");
        CHECK(t && t->ndim == 0 && t->nbytes == 4 && *(const float *)t->data == 1.0f);
        t = orin_st_find(ar, "empty");
        CHECK(t && t->ndim == 2 && t->shape[0] == 0 && t->shape[1] == 5 && t->nbytes == 0);
        orin_st_close(ar);
    }
    free(b.p);
    b = make_raw("{}", NULL, 0);
    CHECK(orin_st_open_buffer(b.p, b.len, "none", &ar) == 0 && orin_st_count(ar) == 0);
    orin_st_close(ar);
    free(b.p);
    b = make_raw("{\"__metadata__\":{}}", NULL, 0);
    CHECK(orin_st_open_buffer(b.p, b.len, "none", &ar) == 0 && orin_st_count(ar) == 0);
    orin_st_close(ar);
    free(b.p);
    orin_st_close(NULL);
}

/* Unknown dtypes open fine (the consumer decides); their sizes are still checked
 * where the format fixes one. */
static void test_unknown_dtypes(void)
{
    char data[16] = {0};
    orin_st_archive *ar = NULL;
    buf b = make_raw("{\"a\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", data, 16);
    CHECK(orin_st_open_buffer(b.p, b.len, "x", &ar) == 0, "%s", orin_error());
    if (ar) {
        const orin_st_tensor *t = orin_st_find(ar, "a");
        CHECK(t && t->dtype_known == 0 && strcmp(t->dtype_name, "I64") == 0 && t->nbytes == 16);
        orin_st_close(ar);
    }
    free(b.p);
    b = make_raw("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4,4],\"data_offsets\":[0,16]}}", data, 16);
    CHECK(orin_st_open_buffer(b.p, b.len, "x", &ar) == 0, "%s", orin_error());
    if (ar) {
        CHECK(orin_st_find(ar, "a")->dtype_known == 0);
        orin_st_close(ar);
    }
    free(b.p);
    /* A name we know nothing about: bounds are still checked, size cannot be. */
    b = make_raw("{\"a\":{\"dtype\":\"F4\",\"shape\":[4,8],\"data_offsets\":[0,16]}}", data, 16);
    CHECK(orin_st_open_buffer(b.p, b.len, "x", &ar) == 0, "%s", orin_error());
    if (ar) {
        CHECK(strcmp(orin_st_find(ar, "a")->dtype_name, "F4") == 0);
        orin_st_close(ar);
    }
    free(b.p);
    b = make_raw("{\"a\":{\"dtype\":\"F64\",\"shape\":[4],\"data_offsets\":[0,16]}}", data, 16);
    CHECK(orin_st_open_buffer(b.p, b.len, "x", &ar) == -1 && ar == NULL);
    CHECK(strstr(orin_error(), "'a'") && strstr(orin_error(), "F64"), "%s", orin_error());
    free(b.p);
}

/* The file written by Python's safetensors.torch.save_file; the expected values
 * and bit patterns are stated by hand (see scripts/gen_loader_fixtures.py). */
static void test_python_writer(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/loader/python_writer.safetensors", ORIN_TEST_DATA);
    orin_st_archive *ar = NULL;
    CHECK(orin_st_open_file(path, &ar) == 0, "%s", orin_error());
    if (!ar)
        return;
    CHECK(orin_st_count(ar) == 9, "%zu", orin_st_count(ar));

    const orin_st_tensor *t = orin_st_find(ar, "f32.matrix");
    CHECK(t && t->dtype == ORIN_F32 && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 5 &&
          t->nbytes == 60);
    if (t) {
        const unsigned char *p = t->data;
        for (int i = 0; i < 15; i++) {
            float v;
            memcpy(&v, p + 4 * i, 4); /* the format does not promise alignment */
            CHECK(v == i * 0.25f - 2.0f, "f32.matrix[%d] = %g", i, v);
        }
    }
    /* 0, 1, -2, 0.5, 65504, 2^-24, -0, inf */
    static const uint16_t want_f16[8] = {0x0000, 0x3C00, 0xC000, 0x3800,
                                         0x7BFF, 0x0001, 0x8000, 0x7C00};
    t = orin_st_find(ar, "f16.values");
    CHECK(t && t->dtype == ORIN_F16 && t->ndim == 1 && t->shape[0] == 8 && t->nbytes == 16);
    for (int i = 0; t && i < 8; i++) {
        uint16_t h;
        memcpy(&h, (const unsigned char *)t->data + 2 * i, 2);
        CHECK(h == want_f16[i], "f16.values[%d] = 0x%04x, want 0x%04x", i, h, want_f16[i]);
    }
    /* 1, -1, 0.5, 3, 2^-10, -65536 */
    static const uint16_t want_bf16[6] = {0x3F80, 0xBF80, 0x3F00, 0x4040, 0x3A80, 0xC780};
    t = orin_st_find(ar, "bf16.values");
    CHECK(t && t->dtype == ORIN_BF16 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3);
    for (int i = 0; t && i < 6; i++) {
        uint16_t h;
        memcpy(&h, (const unsigned char *)t->data + 2 * i, 2);
        CHECK(h == want_bf16[i], "bf16.values[%d] = 0x%04x, want 0x%04x", i, h, want_bf16[i]);
    }
    static const int32_t want_i32[4] = {1, -2, 2147483647, -2147483647 - 1};
    t = orin_st_find(ar, "i32.ids");
    CHECK(t && t->dtype == ORIN_I32 && t->nbytes == 16);
    if (t)
        CHECK(memcmp(t->data, want_i32, 16) == 0);
    static const int8_t want_i8[3] = {-128, 0, 127};
    t = orin_st_find(ar, "i8.bytes");
    CHECK(t && t->dtype == ORIN_I8 && t->nbytes == 3 && memcmp(t->data, want_i8, 3) == 0);
    static const uint8_t want_u8[5] = {0, 1, 128, 254, 255};
    t = orin_st_find(ar, "u8.bytes");
    CHECK(t && t->dtype == ORIN_U8 && t->nbytes == 5 && memcmp(t->data, want_u8, 5) == 0);
    t = orin_st_find(ar, "i64.unknown");
    CHECK(t && !t->dtype_known && strcmp(t->dtype_name, "I64") == 0 && t->nbytes == 24);
    if (t) {
        int64_t v[3];
        memcpy(v, t->data, 24);
        CHECK(v[0] == 7 && v[1] == -7 && v[2] == (int64_t)1 << 40);
    }
    t = orin_st_find(ar, "scalar");
    CHECK(t && t->ndim == 0 && t->nbytes == 4);
    if (t) {
        float v;
        memcpy(&v, t->data, 4);
        CHECK(v == 1.5f);
    }
    t = orin_st_find(ar, "empty");
    CHECK(t && t->ndim == 2 && t->shape[0] == 0 && t->shape[1] == 4 && t->nbytes == 0);
    orin_st_close(ar);
}

/* ---- lying headers ---------------------------------------------------- */

/* Parsing `b` must fail, with an error naming the file and the fragments. */
static void expect_bad(buf b, const char *what, const char *frag1, const char *frag2)
{
    orin_st_archive *ar = (orin_st_archive *)&ar; /* must be reset to NULL */
    orin_error_clear();
    int rc = orin_st_open_buffer(b.p, b.len, "bad.safetensors", &ar);
    const char *msg = orin_error();
    if (getenv("ORIN_TEST_VERBOSE")) /* to read the messages */
        printf("error: %s\n", msg);
    CHECK(rc == -1 && ar == NULL, "%s: expected an error", what);
    CHECK(strstr(msg, "bad.safetensors") != NULL, "%s: error lacks the file: %s", what, msg);
    if (frag1)
        CHECK(strstr(msg, frag1) != NULL, "%s: error lacks '%s': %s", what, frag1, msg);
    if (frag2)
        CHECK(strstr(msg, frag2) != NULL, "%s: error lacks '%s': %s", what, frag2, msg);
    if (rc == 0)
        orin_st_close(ar);
    free(b.p);
}

/* A one-tensor header around `entry` over `data_len` zero bytes. */
static buf one(const char *entry, size_t data_len)
{
    char h[1024];
    snprintf(h, sizeof h, "{\"w\":%s}", entry);
    unsigned char *zeros = calloc(1, data_len + 1);
    buf b = make_raw(h, zeros, data_len);
    free(zeros);
    return b;
}

static void test_bad_headers(void)
{
    /* The length field. */
    expect_bad((buf){.p = calloc(1, 1), .len = 0}, "empty", "too short", NULL);
    expect_bad((buf){.p = calloc(1, 7), .len = 7}, "7 bytes", "too short", NULL);
    expect_bad(make_lying_length(100, "{}"), "length past end", "header length 100", "past");
    expect_bad(make_lying_length((uint64_t)1 << 40, "{}"), "absurd length", "absurd", NULL);
    expect_bad(make_lying_length(UINT64_MAX, "{}"), "max length", "header length", NULL);
    expect_bad(make_lying_length(0, "{}"), "zero length", "not valid JSON", NULL);

    /* The JSON. */
    expect_bad(make_raw("{\"w\": {", NULL, 0), "unterminated", "not valid JSON", NULL);
    expect_bad(make_raw("not json at all", NULL, 0), "garbage", "not valid JSON", NULL);
    expect_bad(make_raw("{} trailing", NULL, 0), "trailing", "not valid JSON", NULL);
    expect_bad(make_exact(3, "{}", 3), "NUL in header", "not valid JSON", NULL);
    expect_bad(make_raw("[1, 2]", NULL, 0), "array", "not a JSON object", NULL);
    expect_bad(make_raw("\"w\"", NULL, 0), "string", "not a JSON object", NULL);
    expect_bad(make_raw("{\"__metadata__\": [1]}", NULL, 0), "metadata list", "__metadata__",
               NULL);
    expect_bad(make_raw("{\"__metadata__\": {\"format\": 1}}", NULL, 0), "metadata value",
               "__metadata__.format", NULL);

    /* Entries. */
    expect_bad(one("5", 0), "entry not object", "'w'", "not an object");
    expect_bad(one("{\"shape\":[1],\"data_offsets\":[0,4]}", 4), "no dtype", "'w'", "dtype");
    expect_bad(one("{\"dtype\":\"F32\",\"data_offsets\":[0,4]}", 4), "no shape", "'w'", "shape");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1]}", 4), "no offsets", "'w'", "data_offsets");
    expect_bad(one("{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}", 4), "dtype number",
               "'w'", "dtype");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}", 4), "shape number",
               "'w'", "shape");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}", 4), "negative dim",
               "'w'", "shape[0] = -1");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1,2.5],\"data_offsets\":[0,10]}", 10),
               "fractional dim", "'w'", "shape[1] = 2.5");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}", 4),
               "string dim", "'w'", "shape[0]");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}", 4), "null dim",
               "'w'", "shape[0]");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}",
                   4), "9 dims", "'w'", "9 dimensions");
    expect_bad(one("{\"dtype\":\"U8\",\"shape\":[4503599627370496,4503599627370496],"
                   "\"data_offsets\":[0,4]}", 4), "overflow", "'w'", "too large");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":4}", 4), "offsets number",
               "'w'", "data_offsets");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}", 4), "one offset",
               "'w'", "data_offsets");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}", 8),
               "three offsets", "'w'", "data_offsets");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}", 4),
               "negative offset", "'w'", "data_offsets");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}", 8),
               "fractional offset", "'w'", "data_offsets");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}", 4),
               "string offset", "'w'", "data_offsets");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}", 8), "begin > end",
               "'w'", "begin after end");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}", 12),
               "past data end", "'w'", "past the end");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[1e300,1e300]}", 4),
               "huge offsets", "'w'", "data_offsets");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9007199254740992,"
                   "9007199254740992]}", 4), "2^53 offsets", "'w'", "past the end");
    expect_bad(one("{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}", 12),
               "size mismatch", "'w'", "12 bytes");
    expect_bad(one("{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,8]}", 8),
               "size mismatch bf16", "'w'", "BF16");

    /* Tensors sharing bytes, and names given twice. */
    static const char overlap[] =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[12,28]}}";
    unsigned char zeros[64] = {0};
    expect_bad(make_raw(overlap, zeros, 28), "overlap", "'a'", "overlap");
    static const char overlap_rev[] =
        "{\"late\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[24,32]},"
        "\"mid\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]},"
        "\"wide\":{\"dtype\":\"U8\",\"shape\":[20],\"data_offsets\":[10,30]}}";
    expect_bad(make_raw(overlap_rev, zeros, 32), "overlap unsorted", "'wide'", "overlap");
    static const char same[] =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
    expect_bad(make_raw(same, zeros, 16), "duplicate", "'a'", "twice");

    /* Touching and empty tensors do not overlap. */
    static const char touching[] =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
    buf b = make_raw(touching, zeros, 16);
    orin_st_archive *ar = NULL;
    CHECK(orin_st_open_buffer(b.p, b.len, "touching", &ar) == 0, "%s", orin_error());
    CHECK(ar && orin_st_count(ar) == 3);
    orin_st_close(ar);
    free(b.p);
}

/* ---- truncation -------------------------------------------------------- */

/* A file with a header over 4 KiB and several data pages; cut short anywhere,
 * it must be refused (the last tensor ends at the last byte), never crash. */
static void test_truncation(void)
{
    enum { N = 120, BIG = 5000 };
    spec t[N + 1];
    char names[N][64];
    static float small[N][3], big[BIG];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "model.layers.%d.self_attn.q_proj.weight", i);
        for (int k = 0; k < 3; k++)
            small[i][k] = (float)(i * 3 + k);
        t[i] = (spec){names[i], "F32", 1, {3}, small[i], sizeof small[i]};
    }
    for (int k = 0; k < BIG; k++)
        big[k] = (float)k;
    t[N] = (spec){"lm_head.weight", "F32", 2, {50, 100}, big, sizeof big};
    buf full = make_file(t, N + 1);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | full.p[i];
    CHECK(hlen > 4096, "header should span pages: %llu", (unsigned long long)hlen);
    size_t data_start = 8 + (size_t)hlen;

    const char *path = tmp_path("trunc.safetensors");
    orin_st_archive *ar = NULL;
    write_buf(path, full);
    CHECK(orin_st_open_file(path, &ar) == 0, "%s", orin_error());
    if (ar) {
        const orin_st_tensor *lm = orin_st_find(ar, "lm_head.weight");
        CHECK(lm && lm->nbytes == sizeof big && memcmp(lm->data, big, sizeof big) == 0);
        orin_st_close(ar);
    }

    size_t cuts[256];
    int n_cuts = 0;
    for (size_t c = 0; c < full.len; c += 4096)
        cuts[n_cuts++] = c;
    size_t odd[] = {1, 7, 8, 9, 15, 4095, 4097, data_start - 1, data_start, data_start + 1,
                    data_start + 13, full.len - 4, full.len - 1};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        cuts[n_cuts++] = odd[i];

    int refused_file = 0, refused_buf = 0;
    for (int i = 0; i < n_cuts; i++) {
        size_t len = cuts[i];
        /* From disk (mmap) ... */
        buf part = {.p = full.p, .len = len};
        write_buf(path, part);
        ar = NULL;
        orin_error_clear();
        if (orin_st_open_file(path, &ar) == -1 && ar == NULL && strstr(orin_error(), path))
            refused_file++;
        else
            fprintf(stderr, "cut at %zu: file accepted or bad error: %s\n", len, orin_error());
        orin_st_close(ar);
        /* ... and from an exact-size heap copy, so that a sanitizer sees overreads. */
        unsigned char *copy = malloc(len ? len : 1);
        memcpy(copy, full.p, len);
        ar = NULL;
        if (orin_st_open_buffer(copy, len, "cut", &ar) == -1 && ar == NULL)
            refused_buf++;
        orin_st_close(ar);
        free(copy);
    }
    CHECK(refused_file == n_cuts, "%d of %d cuts refused from disk", refused_file, n_cuts);
    CHECK(refused_buf == n_cuts, "%d of %d cuts refused from memory", refused_buf, n_cuts);
    remove(path);
    free(full.p);
}

/* Random byte edits of a valid file (mostly in the header): each is either a
 * clean error or a file whose every tensor lies inside the buffer. */
static void test_mutations(void)
{
    buf b = make_file(basic, N_BASIC);
    unsigned char *copy = malloc(b.len);
    uint32_t seed = 12345;
    int ok = 0, refused = 0, bad = 0;
    static const unsigned char alphabet[] = "0123456789[]{},:\" -.eE\\\x00\xff";
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(copy, b.p, b.len);
        int edits = 1 + iter % 4;
        for (int k = 0; k < edits; k++) {
            seed = seed * 1664525u + 1013904223u;
            size_t pos = (seed >> 8) % (iter % 8 == 0 ? b.len : b.len - 40);
            seed = seed * 1664525u + 1013904223u;
            copy[pos] = alphabet[(seed >> 8) % (sizeof alphabet - 1)];
        }
        orin_st_archive *ar = NULL;
        if (orin_st_open_buffer(copy, b.len, "fuzz", &ar) != 0) {
            refused += ar == NULL;
            bad += ar != NULL;
            continue;
        }
        ok++;
        for (size_t i = 0; i < orin_st_count(ar); i++) {
            const orin_st_tensor *t = orin_st_at(ar, i);
            const unsigned char *p = t->data;
            if (p < copy || p + t->nbytes > copy + b.len || t->ndim < 0 || t->ndim > ORIN_ST_MAX_DIMS)
                bad++;
        }
        orin_st_close(ar);
    }
    CHECK(bad == 0, "%d mutated files gave a tensor outside the buffer or a half-made archive", bad);
    CHECK(refused > 1000, "only %d of 3000 mutations refused", refused);
    free(copy);
    free(b.p);
}

/* ---- folders ----------------------------------------------------------- */

static const float s1a[4] = {1, 2, 3, 4}, s1b[2] = {5, 6}, s2a[3] = {7, 8, 9};

static void write_index(const char *dir, const char *weight_map)
{
    char path[512], text[2048];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    snprintf(text, sizeof text, "{\"metadata\": {\"total_size\": 36}, \"weight_map\": %s}",
             weight_map);
    CHECK(test_write_file(path, text, strlen(text)) == 0);
}

static void expect_dir_error(const char *dir, const char *what, const char *frag1,
                             const char *frag2)
{
    orin_st_archive *ar = (orin_st_archive *)&ar;
    orin_error_clear();
    int rc = orin_st_open_dir(dir, &ar);
    const char *msg = orin_error();
    if (getenv("ORIN_TEST_VERBOSE")) /* to read the messages */
        printf("error: %s\n", msg);
    CHECK(rc == -1 && ar == NULL, "%s: expected an error", what);
    CHECK(strstr(msg, frag1) != NULL, "%s: error lacks '%s': %s", what, frag1, msg);
    if (frag2)
        CHECK(strstr(msg, frag2) != NULL, "%s: error lacks '%s': %s", what, frag2, msg);
    if (rc == 0)
        orin_st_close(ar);
}

static void test_dirs(void)
{
    char *dir = test_tmpdir("loader-st-dir");
    char shard1[512], shard2[512], single[512], index[512];
    snprintf(shard1, sizeof shard1, "%s/model-00001-of-00002.safetensors", dir);
    snprintf(shard2, sizeof shard2, "%s/model-00002-of-00002.safetensors", dir);
    snprintf(single, sizeof single, "%s/model.safetensors", dir);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);

    expect_dir_error(dir, "empty folder", dir, "model.safetensors");

    /* One file. */
    buf b = make_file(basic, N_BASIC);
    write_buf(single, b);
    free(b.p);
    orin_st_archive *ar = NULL;
    CHECK(orin_st_open_dir(dir, &ar) == 0, "%s", orin_error());
    if (ar)
        check_basic(ar, single);
    orin_st_close(ar);
    remove(single);

    /* Two shards and an index (which wins over a stray model.safetensors). */
    spec p1[] = {{"a", "F32", 2, {2, 2}, s1a, sizeof s1a}, {"b", "F32", 1, {2}, s1b, sizeof s1b}};
    spec p2[] = {{"c", "F32", 1, {3}, s2a, sizeof s2a}};
    b = make_file(p1, 2);
    write_buf(shard1, b);
    free(b.p);
    b = make_file(p2, 1);
    write_buf(shard2, b);
    free(b.p);
    b = make_raw("garbage", NULL, 0);
    write_buf(single, b);
    free(b.p);
    write_index(dir, "{\"a\": \"model-00001-of-00002.safetensors\", "
                     "\"c\": \"model-00002-of-00002.safetensors\", "
                     "\"b\": \"model-00001-of-00002.safetensors\"}");
    ar = NULL;
    CHECK(orin_st_open_dir(dir, &ar) == 0, "%s", orin_error());
    if (ar) {
        CHECK(orin_st_count(ar) == 3);
        const orin_st_tensor *a = orin_st_find(ar, "a"), *bb = orin_st_find(ar, "b"),
                             *c = orin_st_find(ar, "c");
        CHECK(a && bb && c);
        if (a && bb && c) {
            CHECK(strcmp(a->file, shard1) == 0 && strcmp(bb->file, shard1) == 0);
            CHECK(strcmp(c->file, shard2) == 0, "%s", c->file);
            CHECK(a->file == bb->file, "a shard is opened once");
            CHECK(memcmp(a->data, s1a, 16) == 0 && memcmp(bb->data, s1b, 8) == 0 &&
                  memcmp(c->data, s2a, 12) == 0);
            CHECK(a->shape[0] == 2 && a->shape[1] == 2 && c->shape[0] == 3);
        }
        orin_st_close(ar);
    }

    /* The index lies: a name its shard lacks, or the wrong shard. */
    write_index(dir, "{\"a\": \"model-00001-of-00002.safetensors\", "
                     "\"zz\": \"model-00002-of-00002.safetensors\"}");
    expect_dir_error(dir, "missing tensor", "'zz'", "model-00002-of-00002.safetensors");
    write_index(dir, "{\"a\": \"model-00002-of-00002.safetensors\", "
                     "\"c\": \"model-00002-of-00002.safetensors\"}");
    expect_dir_error(dir, "wrong shard", "'a'", shard2);
    /* Both shards open, 'b' mapped to the one that lacks it. */
    write_index(dir, "{\"a\": \"model-00001-of-00002.safetensors\", "
                     "\"b\": \"model-00002-of-00002.safetensors\", "
                     "\"c\": \"model-00002-of-00002.safetensors\"}");
    expect_dir_error(dir, "tensor in the other shard", "'b'", shard2);
    write_index(dir, "{\"a\": \"model-00001-of-00002.safetensors\", "
                     "\"c\": \"model-00003-of-00002.safetensors\"}");
    expect_dir_error(dir, "missing shard", "model-00003-of-00002.safetensors", NULL);
    write_index(dir, "{\"a\": \"../model-00001-of-00002.safetensors\"}");
    expect_dir_error(dir, "escaping shard", index, "weight_map['a']");
    write_index(dir, "{\"a\": \"/etc/passwd\"}");
    expect_dir_error(dir, "absolute shard", index, "weight_map['a']");
    write_index(dir, "{\"a\": 1}");
    expect_dir_error(dir, "shard not a string", index, "weight_map['a']");
    write_index(dir, "[]");
    expect_dir_error(dir, "weight_map a list", index, "weight_map");
    CHECK(test_write_file(index, "{\"metadata\": {}}", 16) == 0);
    expect_dir_error(dir, "no weight_map", index, "weight_map");
    CHECK(test_write_file(index, "{\"weight", 8) == 0);
    expect_dir_error(dir, "index not JSON", index, NULL);

    /* A shard with a bad header is named. */
    b = make_raw("{\"c\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", s2a, 12);
    write_buf(shard2, b);
    free(b.p);
    write_index(dir, "{\"a\": \"model-00001-of-00002.safetensors\", "
                     "\"c\": \"model-00002-of-00002.safetensors\"}");
    expect_dir_error(dir, "bad shard", shard2, "'c'");

    /* The same name in two shards. */
    spec dup[] = {{"c", "F32", 1, {3}, s2a, sizeof s2a}, {"b", "F32", 1, {2}, s1b, sizeof s1b}};
    b = make_file(dup, 2);
    write_buf(shard2, b);
    free(b.p);
    expect_dir_error(dir, "duplicate across shards", "'b'", "is also in");

    remove(shard1);
    remove(shard2);
    remove(single);
    remove(index);
    remove(dir);
    free(dir);
}

static void test_open_file_errors(void)
{
    orin_st_archive *ar = (orin_st_archive *)&ar;
    const char *path = tmp_path("does-not-exist.safetensors");
    CHECK(orin_st_open_file(path, &ar) == -1 && ar == NULL);
    CHECK(strstr(orin_error(), path) != NULL, "%s", orin_error());
    CHECK(orin_st_open_file(tmpdir, &ar) == -1 && strstr(orin_error(), tmpdir));
    /* An empty file cannot be mapped: still a clean error. */
    path = tmp_path("empty.safetensors");
    CHECK(test_write_file(path, "", 0) == 0);
    CHECK(orin_st_open_file(path, &ar) == -1 && strstr(orin_error(), "too short"), "%s",
          orin_error());
    remove(path);
}

int main(void)
{
    tmpdir = test_tmpdir("loader-st");
    if (!tmpdir)
        return 2;
    test_round_trip();
    test_unknown_dtypes();
    test_python_writer();
    test_bad_headers();
    test_truncation();
    test_mutations();
    test_dirs();
    test_open_file_errors();
    remove(tmp_path("basic.safetensors"));
    remove(tmpdir);
    free(tmpdir);
    return test_finish();
}
