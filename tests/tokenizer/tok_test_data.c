#include "tok_test_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orin/error.h"
#include "test_util.h"

cJSON *tok_json_load(const char *path)
{
    size_t len;
    char *text = test_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "%s: cannot read\n", path);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j)
        fprintf(stderr, "%s: bad JSON\n", path);
    free(text);
    return j;
}

int32_t *tok_json_ids(const cJSON *arr, size_t *n)
{
    size_t count = cJSON_IsArray(arr) ? (size_t)cJSON_GetArraySize(arr) : 0;
    int32_t *ids = malloc((count ? count : 1) * sizeof *ids);
    size_t i = 0;
    const cJSON *e;
    if (!ids)
        abort();
    cJSON_ArrayForEach(e, arr)
        ids[i++] = (int32_t)e->valuedouble;
    *n = count;
    return ids;
}

static char *dup_string(const cJSON *s)
{
    return cJSON_IsString(s) ? strdup(s->valuestring) : NULL;
}

static char *from_hex(const char *hex, size_t *len)
{
    size_t n = strlen(hex) / 2;
    char *out = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
    out[n] = '\0';
    *len = n;
    return out;
}

static int parse_record(const char *line, size_t len, tok_record *r)
{
    cJSON *j = cJSON_ParseWithLength(line, len);
    if (!j)
        return -1;
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(j, "cat");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(j, "text");
    const cJSON *hex = cJSON_GetObjectItemCaseSensitive(j, "hex");
    snprintf(r->cat, sizeof r->cat, "%s", cJSON_IsString(cat) ? cat->valuestring : "?");
    if (cJSON_IsString(text)) {
        r->text = strdup(text->valuestring);
        r->len = strlen(r->text);
        r->valid = true;
    } else if (cJSON_IsString(hex)) {
        r->text = from_hex(hex->valuestring, &r->len);
        r->valid = false;
    } else {
        cJSON_Delete(j);
        return -1;
    }
    r->replaced = dup_string(cJSON_GetObjectItemCaseSensitive(j, "replaced"));
    r->ids = tok_json_ids(cJSON_GetObjectItemCaseSensitive(j, "ids"), &r->n_ids);
    r->decoded = dup_string(cJSON_GetObjectItemCaseSensitive(j, "decoded"));
    if (!r->decoded)
        r->decoded = strdup(r->text);
    r->decoded_skip = dup_string(cJSON_GetObjectItemCaseSensitive(j, "decoded_skip"));
    if (!r->decoded_skip)
        r->decoded_skip = strdup(r->decoded);
    cJSON_Delete(j);
    return 0;
}

int tok_corpus_load(const char *path, tok_corpus *c)
{
    size_t len;
    char *data = test_read_file(path, &len);
    *c = (tok_corpus){0};
    if (!data) {
        fprintf(stderr, "%s: cannot read\n", path);
        return -1;
    }
    size_t cap = 0;
    int line = 0;
    for (char *p = data, *end; p < data + len; p = end + 1) {
        end = memchr(p, '\n', (size_t)(data + len - p));
        if (!end)
            end = data + len;
        line++;
        if (end == p)
            continue;
        if (c->n == cap) {
            cap = cap ? cap * 2 : 1024;
            c->recs = realloc(c->recs, cap * sizeof *c->recs);
        }
        tok_record *r = &c->recs[c->n];
        *r = (tok_record){.line = line};
        if (parse_record(p, (size_t)(end - p), r)) {
            fprintf(stderr, "%s:%d: bad record\n", path, line);
            free(data);
            return -1;
        }
        c->n++;
    }
    free(data);
    return 0;
}

void tok_corpus_free(tok_corpus *c)
{
    for (size_t i = 0; i < c->n; i++) {
        tok_record *r = &c->recs[i];
        free(r->text);
        free(r->replaced);
        free(r->ids);
        free(r->decoded);
        free(r->decoded_skip);
    }
    free(c->recs);
    *c = (tok_corpus){0};
}

uint64_t tok_fnv1a64(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t tok_fnv1a64_ids(const int32_t *ids, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        unsigned char le[4] = {v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFF, v >> 24};
        h = tok_fnv1a64(le, 4, h);
    }
    return h;
}

bool tok_strict_utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (p[i + j] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (p[i + j] & 0x3F);
        }
        static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k + 1;
    }
    return true;
}

bool tok_ids_equal(const char *label, const int32_t *got, size_t n_got, const int32_t *want, size_t n_want)
{
    size_t i = 0;
    while (i < n_got && i < n_want && got[i] == want[i])
        i++;
    if (i == n_got && i == n_want)
        return true;
    fprintf(stderr, "%s: ids differ at %zu (got %zu ids, want %zu): got", label, i, n_got, n_want);
    for (size_t k = i; k < n_got && k < i + 8; k++)
        fprintf(stderr, " %d", got[k]);
    fprintf(stderr, " ... want");
    for (size_t k = i; k < n_want && k < i + 8; k++)
        fprintf(stderr, " %d", want[k]);
    fprintf(stderr, " ...\n");
    return false;
}

orin_tokenizer *tok_load_or_die(const char *dir)
{
    orin_tokenizer *tok = orin_tokenizer_load(dir);
    if (!tok) {
        fprintf(stderr, "cannot load the tokenizer: %s\n", orin_error());
        exit(1);
    }
    return tok;
}
