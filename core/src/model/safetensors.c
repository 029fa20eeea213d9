/* safetensors reader.
 *
 * File layout: an 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * (possibly padded with spaces), then the data; offsets are relative to the end
 * of the header. Nothing in the header is trusted: every number is checked before
 * it is used to form a pointer, so that a lying or truncated file is an error and
 * never a read outside the mapping.
 */
#include "orin/safetensors.h"
#include "orin/error.h"
#include "orin/file.h"
#include "orin/tensor.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation refuses headers over 100 MB; so do we. */
#define ST_MAX_HEADER 100000000ull
/* Offsets and dims are JSON numbers (doubles): beyond 2^53 they are not exact. */
#define ST_MAX_INT 9007199254740992.0

typedef struct st_file {
    char *path;
    const unsigned char *base; /* the whole file */
    size_t len;
    bool mapped;               /* munmap on close */
    const unsigned char *data; /* after the header */
    size_t data_len;
} st_file;

typedef struct st_entry {
    orin_st_tensor t;          /* first: orin_st_at() hands out &entry->t */
    size_t file;
    uint64_t begin, end;       /* relative to the file's data */
} st_entry;

struct orin_st_archive {
    st_file *files;
    size_t n_files;
    st_entry *entries;
    size_t n_entries, cap_entries;
};

static const struct st_dtype {
    const char *name;
    int known;          /* maps to an orin_dtype */
    orin_dtype dtype;
    unsigned size;      /* bytes per element */
} st_dtypes[] = {
    {"F32", 1, ORIN_F32, 4},  {"F16", 1, ORIN_F16, 2}, {"BF16", 1, ORIN_BF16, 2},
    {"I32", 1, ORIN_I32, 4},  {"I8", 1, ORIN_I8, 1},   {"U8", 1, ORIN_U8, 1},
    /* In the format but not in orin: kept so that their sizes are still checked. */
    {"F64", 0, 0, 8},  {"I64", 0, 0, 8}, {"U64", 0, 0, 8},     {"U32", 0, 0, 4},
    {"I16", 0, 0, 2},  {"U16", 0, 0, 2}, {"BOOL", 0, 0, 1},    {"F8_E4M3", 0, 0, 1},
    {"F8_E5M2", 0, 0, 1}, {"F8_E8M0", 0, 0, 1}, {"C64", 0, 0, 8},
};

static const struct st_dtype *lookup_dtype(const char *name)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, name) == 0)
            return &st_dtypes[i];
    return NULL;
}

void orin_st_close(orin_st_archive *ar)
{
    if (!ar)
        return;
    for (size_t i = 0; i < ar->n_entries; i++) {
        free((char *)ar->entries[i].t.name);
        free((char *)ar->entries[i].t.dtype_name);
    }
    free(ar->entries);
    for (size_t i = 0; i < ar->n_files; i++) {
        if (ar->files[i].mapped)
            munmap((void *)ar->files[i].base, ar->files[i].len);
        free(ar->files[i].path);
    }
    free(ar->files);
    free(ar);
}

static orin_st_archive *archive_new(void)
{
    orin_st_archive *ar = calloc(1, sizeof *ar);
    if (!ar)
        orin_error_set("safetensors: out of memory");
    return ar;
}

/* Adds a file slot; the caller fills base/len. Returns its index or -1. */
static long add_file(orin_st_archive *ar, const char *path)
{
    st_file *files = realloc(ar->files, (ar->n_files + 1) * sizeof *files);
    if (!files)
        return orin_error_set("%s: out of memory", path);
    ar->files = files;
    st_file *f = &files[ar->n_files];
    *f = (st_file){.path = strdup(path)};
    if (!f->path)
        return orin_error_set("%s: out of memory", path);
    return (long)ar->n_files++;
}

static st_entry *add_entry(orin_st_archive *ar, const char *file)
{
    if (ar->n_entries == ar->cap_entries) {
        size_t cap = ar->cap_entries ? ar->cap_entries * 2 : 64;
        st_entry *e = realloc(ar->entries, cap * sizeof *e);
        if (!e) {
            orin_error_set("%s: out of memory", file);
            return NULL;
        }
        ar->entries = e;
        ar->cap_entries = cap;
    }
    st_entry *e = &ar->entries[ar->n_entries++];
    *e = (st_entry){0};
    return e;
}

/* A non-negative integer that a double holds exactly. */
static bool get_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return false;
    double d = v->valuedouble;
    if (!(d >= 0) || d > ST_MAX_INT || d != floor(d))
        return false;
    *out = (uint64_t)d;
    return true;
}

static int parse_shape(const cJSON *shape, const char *file, const char *name, st_entry *e,
                       uint64_t *numel)
{
    if (!cJSON_IsArray(shape))
        return orin_error_set("%s: tensor '%s': shape is not a list", file, name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ORIN_ST_MAX_DIMS)
        return orin_error_set("%s: tensor '%s': %d dimensions, at most %d are supported", file,
                              name, ndim, ORIN_ST_MAX_DIMS);
    *numel = 1;
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        uint64_t dim;
        if (!get_uint(d, &dim)) {
            char *s = cJSON_PrintUnformatted(d);
            orin_error_set("%s: tensor '%s': shape[%d] = %s is not a non-negative integer", file,
                           name, i, s ? s : "?");
            free(s);
            return -1;
        }
        if (__builtin_mul_overflow(*numel, dim, numel))
            return orin_error_set("%s: tensor '%s': shape too large", file, name);
        e->t.shape[i++] = (int64_t)dim;
    }
    e->t.ndim = ndim;
    return 0;
}

static int parse_offsets(const cJSON *offs, const char *file, const char *name, st_entry *e)
{
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        !get_uint(cJSON_GetArrayItem(offs, 0), &e->begin) ||
        !get_uint(cJSON_GetArrayItem(offs, 1), &e->end)) {
        char *s = cJSON_PrintUnformatted(offs);
        orin_error_set("%s: tensor '%s': data_offsets = %s is not a pair of non-negative integers",
                       file, name, s ? s : "?");
        free(s);
        return -1;
    }
    if (e->begin > e->end)
        return orin_error_set("%s: tensor '%s': data_offsets [%llu, %llu] begin after end", file,
                              name, (unsigned long long)e->begin, (unsigned long long)e->end);
    return 0;
}

static int parse_tensor(orin_st_archive *ar, size_t fi, const cJSON *item)
{
    const st_file *f = &ar->files[fi];
    const char *name = item->string;
    if (!cJSON_IsObject(item))
        return orin_error_set("%s: tensor '%s': entry is not an object", f->path, name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!dtype || !shape || !offs)
        return orin_error_set("%s: tensor '%s': missing '%s'", f->path, name,
                              !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!cJSON_IsString(dtype))
        return orin_error_set("%s: tensor '%s': dtype is not a string", f->path, name);

    st_entry *e = add_entry(ar, f->path);
    if (!e)
        return -1;
    e->file = fi;
    e->t.file = f->path;
    e->t.name = strdup(name);
    e->t.dtype_name = strdup(dtype->valuestring);
    if (!e->t.name || !e->t.dtype_name)
        return orin_error_set("%s: out of memory", f->path);

    uint64_t numel = 0;
    if (parse_shape(shape, f->path, name, e, &numel) || parse_offsets(offs, f->path, name, e))
        return -1;
    if (e->end > f->data_len)
        return orin_error_set("%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the "
                              "data (%zu bytes)", f->path, name, (unsigned long long)e->begin,
                              (unsigned long long)e->end, f->data_len);

    const struct st_dtype *dt = lookup_dtype(e->t.dtype_name);
    e->t.dtype_known = dt && dt->known;
    e->t.dtype = e->t.dtype_known ? dt->dtype : ORIN_F32;
    e->t.nbytes = (size_t)(e->end - e->begin);
    e->t.data = f->data + e->begin;
    /* Sub-byte and exotic dtypes we have no size for are bounds-checked only. */
    if (dt) {
        uint64_t want;
        if (__builtin_mul_overflow(numel, (uint64_t)dt->size, &want) || want != e->end - e->begin)
            return orin_error_set("%s: tensor '%s': %llu bytes in data_offsets, but %s x %llu "
                                  "elements is %llu", f->path, name,
                                  (unsigned long long)(e->end - e->begin), dt->name,
                                  (unsigned long long)numel, (unsigned long long)want);
    }
    return 0;
}

static int check_metadata(const st_file *f, const cJSON *meta)
{
    if (!cJSON_IsObject(meta))
        return orin_error_set("%s: __metadata__ is not an object", f->path);
    const cJSON *v;
    cJSON_ArrayForEach(v, meta) {
        if (!cJSON_IsString(v))
            return orin_error_set("%s: __metadata__.%s is not a string", f->path, v->string);
    }
    return 0;
}

static int cmp_entry_ptr_offset(const void *a, const void *b)
{
    const st_entry *x = *(st_entry *const *)a, *y = *(st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Tensors of one file, sorted by offset, must not share bytes. */
static int check_overlaps(orin_st_archive *ar, size_t fi, size_t first)
{
    size_t n = ar->n_entries - first;
    if (n < 2)
        return 0;
    st_entry **v = malloc(n * sizeof *v);
    if (!v)
        return orin_error_set("%s: out of memory", ar->files[fi].path);
    for (size_t i = 0; i < n; i++)
        v[i] = &ar->entries[first + i];
    qsort(v, n, sizeof *v, cmp_entry_ptr_offset);
    int rc = 0;
    const st_entry *prev = NULL;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (v[i]->begin == v[i]->end)
            continue; /* empty tensors own no bytes */
        if (prev && v[i]->begin < prev->end)
            rc = orin_error_set("%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                                ar->files[fi].path, prev->t.name, (unsigned long long)prev->begin,
                                (unsigned long long)prev->end, v[i]->t.name,
                                (unsigned long long)v[i]->begin, (unsigned long long)v[i]->end);
        prev = v[i];
    }
    free(v);
    return rc;
}

static bool only_spaces(const unsigned char *p, const unsigned char *end)
{
    for (; p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return false;
    return true;
}

/* Parses the header of ar->files[fi] (base/len set) and appends its tensors. */
static int parse_file(orin_st_archive *ar, size_t fi)
{
    st_file *f = &ar->files[fi];
    if (f->len < 8)
        return orin_error_set("%s: file too short (%zu bytes) to hold the header length", f->path,
                              f->len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | f->base[i];
    if (n > ST_MAX_HEADER)
        return orin_error_set("%s: header length %llu is absurd (limit %llu): not a safetensors "
                              "file?", f->path, (unsigned long long)n, ST_MAX_HEADER);
    if (n > f->len - 8)
        return orin_error_set("%s: header length %llu runs past the end of the file (%zu bytes): "
                              "truncated?", f->path, (unsigned long long)n, f->len);
    const char *hdr = (const char *)f->base + 8;
    f->data = f->base + 8 + n;
    f->data_len = f->len - 8 - (size_t)n;

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)n, &end, 0);
    if (!root || !only_spaces((const unsigned char *)end, (const unsigned char *)hdr + n)) {
        cJSON_Delete(root);
        return orin_error_set("%s: header is not valid JSON", f->path);
    }
    int rc = -1;
    size_t first = ar->n_entries;
    if (!cJSON_IsObject(root)) {
        orin_error_set("%s: header is not a JSON object", f->path);
        goto out;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (check_metadata(f, item))
                goto out;
        } else if (parse_tensor(ar, fi, item)) {
            goto out;
        }
    }
    rc = check_overlaps(ar, fi, first);
out:
    cJSON_Delete(root);
    return rc;
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->t.name, ((const st_entry *)b)->t.name);
}

/* Sorts by name (for orin_st_find) and rejects a name seen twice. */
static int finish(orin_st_archive *ar)
{
    if (ar->n_entries > 1)
        qsort(ar->entries, ar->n_entries, sizeof *ar->entries, cmp_entry_name);
    for (size_t i = 1; i < ar->n_entries; i++) {
        const orin_st_tensor *a = &ar->entries[i - 1].t, *b = &ar->entries[i].t;
        if (strcmp(a->name, b->name) != 0)
            continue;
        if (a->file == b->file)
            return orin_error_set("%s: tensor '%s' appears twice", a->file, a->name);
        return orin_error_set("%s: tensor '%s' is also in %s", b->file, b->name, a->file);
    }
    return 0;
}

static int map_file(orin_st_archive *ar, size_t fi)
{
    st_file *f = &ar->files[fi];
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return orin_error_set("%s: %s", f->path, strerror(errno));
    int rc = -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        orin_error_set("%s: %s", f->path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        orin_error_set("%s: not a regular file", f->path);
        goto out;
    }
    if (st.st_size < 8) {
        orin_error_set("%s: file too short (%lld bytes) to hold the header length", f->path,
                       (long long)st.st_size);
        goto out;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        orin_error_set("%s: mmap: %s", f->path, strerror(errno));
        goto out;
    }
    f->base = p;
    f->len = (size_t)st.st_size;
    f->mapped = true;
    rc = 0;
out:
    close(fd);
    return rc;
}

static int open_one(orin_st_archive *ar, const char *path, long *index)
{
    long fi = add_file(ar, path);
    if (fi < 0 || map_file(ar, (size_t)fi) || parse_file(ar, (size_t)fi))
        return -1;
    if (index)
        *index = fi;
    return 0;
}

int orin_st_open_file(const char *path, orin_st_archive **out)
{
    *out = NULL;
    orin_st_archive *ar = archive_new();
    if (!ar)
        return -1;
    if (open_one(ar, path, NULL) || finish(ar)) {
        orin_st_close(ar);
        return -1;
    }
    *out = ar;
    return 0;
}

int orin_st_open_buffer(const void *buf, size_t len, const char *name, orin_st_archive **out)
{
    *out = NULL;
    orin_st_archive *ar = archive_new();
    if (!ar)
        return -1;
    long fi = add_file(ar, name ? name : "<buffer>");
    if (fi >= 0) {
        ar->files[fi].base = buf;
        ar->files[fi].len = len;
    }
    if (fi < 0 || parse_file(ar, (size_t)fi) || finish(ar)) {
        orin_st_close(ar);
        return -1;
    }
    *out = ar;
    return 0;
}


/* Shard names come from a downloaded file: keep them inside the model folder. */
static bool safe_shard_name(const char *s)
{
    if (!*s || s[0] == '/')
        return false;
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return false;
        p += n;
        if (*p == '/')
            p++;
    }
    return true;
}

static int open_index(orin_st_archive *ar, const char *dir, const char *index_path)
{
    size_t len = 0;
    /* An index is kilobytes to a few MB. */
    char *text = orin_read_file(index_path, 256u << 20, &len);
    if (!text)
        return -1;
    int rc = -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    const cJSON *item;
    char path[4096];
    long *shard_of = NULL;  /* per weight_map entry: the file index */
    if (!root || !cJSON_IsObject(root)) {
        orin_error_set("%s: %s", index_path, root ? "not a JSON object" : "not valid JSON");
        goto out;
    }
    if (!cJSON_IsObject(map)) {
        orin_error_set("%s: weight_map %s", index_path, map ? "is not an object" : "missing");
        goto out;
    }
    shard_of = calloc((size_t)cJSON_GetArraySize(map) + 1, sizeof *shard_of);
    if (!shard_of) {
        orin_error_set("%s: out of memory", index_path);
        goto out;
    }
    /* Open each shard once, in order of first mention. */
    size_t k = 0;
    cJSON_ArrayForEach(item, map) {
        if (!cJSON_IsString(item) || !safe_shard_name(item->valuestring)) {
            orin_error_set("%s: weight_map['%s']: not a file name in the model folder",
                           index_path, item->string);
            goto out;
        }
        if (snprintf(path, sizeof path, "%s/%s", dir, item->valuestring) >= (int)sizeof path) {
            orin_error_set("%s: weight_map['%s']: path too long", index_path, item->string);
            goto out;
        }
        long fi = -1;
        for (size_t j = 0; j < ar->n_files; j++)
            if (strcmp(ar->files[j].path, path) == 0)
                fi = (long)j;
        if (fi < 0 && open_one(ar, path, &fi))
            goto out;
        shard_of[k++] = fi;
    }
    if (finish(ar))
        goto out;
    /* Every tensor the index promises is where it says. */
    k = 0;
    cJSON_ArrayForEach(item, map) {
        const orin_st_tensor *t = orin_st_find(ar, item->string);
        const char *shard = ar->files[shard_of[k]].path;
        if (!t || t->file != shard) {
            orin_error_set("%s: tensor '%s' is missing (%s lists it there)", shard,
                           item->string, index_path);
            goto out;
        }
        k++;
    }
    rc = 0;
out:
    free(shard_of);
    cJSON_Delete(root);
    free(text);
    return rc;
}

int orin_st_open_dir(const char *model_dir, orin_st_archive **out)
{
    char index_path[4096], single[4096];
    *out = NULL;
    if (snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", model_dir) >=
            (int)sizeof index_path ||
        snprintf(single, sizeof single, "%s/model.safetensors", model_dir) >= (int)sizeof single)
        return orin_error_set("%s: path too long", model_dir);

    orin_st_archive *ar = archive_new();
    if (!ar)
        return -1;
    int rc;
    if (access(index_path, F_OK) == 0) {
        rc = open_index(ar, model_dir, index_path);
    } else if (access(single, F_OK) == 0) {
        rc = open_one(ar, single, NULL) || finish(ar) ? -1 : 0;
    } else {
        rc = orin_error_set("%s: no model.safetensors or model.safetensors.index.json",
                            model_dir);
    }
    if (rc) {
        orin_st_close(ar);
        return -1;
    }
    *out = ar;
    return 0;
}

const orin_st_tensor *orin_st_find(const orin_st_archive *ar, const char *name)
{
    size_t lo = 0, hi = ar->n_entries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ar->entries[mid].t.name, name);
        if (c == 0)
            return &ar->entries[mid].t;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t orin_st_count(const orin_st_archive *ar)
{
    return ar->n_entries;
}

const orin_st_tensor *orin_st_at(const orin_st_archive *ar, size_t i)
{
    return i < ar->n_entries ? &ar->entries[i].t : NULL;
}

/* safetensors.h */
const orin_st_tensor *orin_st_find_shaped(const orin_st_archive *ar, const char *model_dir,
                                          const char *name, int ndim, const int64_t *dims)
{
    const orin_st_tensor *st = orin_st_find(ar, name);
    if (!st) {
        orin_error_set("%s: missing tensor '%s'", model_dir, name);
        return NULL;
    }
    char have[96], want[96];
    bool same = st->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = st->shape[i] == dims[i];
    if (!same) {
        orin_error_set("%s: tensor '%s' has shape %s, config.json implies %s", st->file, name,
                       orin_shape_str(have, sizeof have, st->ndim, st->shape),
                       orin_shape_str(want, sizeof want, ndim, dims));
        return NULL;
    }
    return st;
}

/* safetensors.h */
const orin_st_tensor *orin_st_find_float(const orin_st_archive *ar, const char *model_dir,
                                         const char *name, int ndim, const int64_t *dims)
{
    const orin_st_tensor *st = orin_st_find_shaped(ar, model_dir, name, ndim, dims);
    if (st && (!st->dtype_known ||
               (st->dtype != ORIN_F32 && st->dtype != ORIN_F16 && st->dtype != ORIN_BF16))) {
        orin_error_set("%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", st->file,
                       name, st->dtype_name);
        return NULL;
    }
    return st;
}
