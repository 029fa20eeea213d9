/* orin.ini: a table of keys, parsed by inih into orin_config.
 *
 * Every key is one row of `keys` below: section, name, type, the field it
 * fills, its range or allowed values, its default (as text, parsed by the same
 * code as user input, so a default can never be out of range) and one line of
 * documentation. Parsing, defaults, --set, is_set and write all walk the table.
 *
 * Decisions (etc/orin.ini documents them for users):
 * - Comments: a line starting with ';' or '#', and inline from a ';' that
 *   follows whitespace ("top_k = 20 ; comment"); a '#' after a value is part
 *   of the value. This is inih's default behaviour.
 * - No multi-line values: leading whitespace is dropped before inih sees a line,
 *   so an indented "key = value" is an ordinary key (inih would otherwise take it
 *   as a continuation of the key above). Long prompts use "\n" escapes.
 * - generate.prompt and generate.system understand the escapes \n \t \\ and \;
 *   (the last one keeps " ;" from starting a comment); any other backslash
 *   sequence is an error. No other key interprets backslashes. Quotes are
 *   kept as written.
 * - A key set twice in one file is an error (it is nearly always an editing
 *   slip); --set may override any key, any number of times, last wins.
 * - Relative paths resolve against the INI file's folder; relative paths from
 *   --set resolve against the current directory. Both become absolute.
 * - A value too long for its field is an error, never truncated.
 * - Only the first error is reported (the earliest line of the file, else the
 *   first bad --set); on error the struct holds what was read up to it. */
#include "orin/config.h"
#include "orin/error.h"
#include "orin/file.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The Debian build of inih reads each line into a buffer of ini_max_line bytes
 * (200 by default) and lets a program change it at run time; upstream builds fix
 * it at compile time and have no such variable. A weak reference raises it where
 * it exists; either way the reader below refuses a line that does not fit, so a
 * long line is an error, never silently split in two. */
#pragma weak ini_max_line
#define INI_LINE_BYTES (2 * ORIN_CONFIG_MAX_STR + 64)

typedef enum key_type {
    KEY_STRING,
    KEY_PATH,     /* a string; relative values resolve against a base folder */
    KEY_BOOL,
    KEY_INT,      /* int32_t */
    KEY_U64,      /* uint64_t */
    KEY_FLOAT,    /* float */
    KEY_ENUM,     /* an int-sized C enum: the index into `choices` */
    KEY_ENUM_STR, /* a string that must be one of `choices` */
    KEY_DTYPE,    /* orin_dtype, a compute dtype: f32, f16 or bf16 */
} key_type;

enum {
    KEY_ESCAPES = 1u << 0,   /* \n \t \\ \; are decoded */
    KEY_FILE_NAMES = 1u << 1, /* comma-separated file names, no '/' */
    KEY_DEVICE = 1u << 2,     /* also "cuda:N", a GPU by its ordinal */
    KEY_LIST = 1u << 3,       /* KEY_PATH: comma-separated paths, each resolved */
};

typedef struct key_def {
    const char *section;
    const char *name;
    key_type type;
    size_t offset, size;          /* the field in orin_config */
    long long imin, imax;         /* KEY_INT */
    double fmin, fmax;            /* KEY_FLOAT */
    bool fmin_open, fmax_open;    /* exclusive bounds */
    const char *const *choices;   /* KEY_ENUM, KEY_ENUM_STR: NULL-terminated */
    unsigned flags;
    const char *def;              /* the default, as INI text */
    const char *doc;
} key_def;

#define FIELD(f) .offset = offsetof(orin_config, f), .size = sizeof(((orin_config *)0)->f)
#define INT_RANGE(lo, hi) .imin = (lo), .imax = (hi)

static const char *const device_names[] = {"auto", "cpu", "cuda", NULL};
static const char *const score_paths[] = {"prefill", "decode", NULL};
static const char *const quant_modes[] = {"none", "int8", NULL};

_Static_assert(sizeof(orin_score_path) == sizeof(int), "KEY_ENUM stores an int");
_Static_assert(ORIN_SCORE_PREFILL == 0 && ORIN_SCORE_DECODE == 1, "score_paths order");
_Static_assert(sizeof(orin_load_quant) == sizeof(int), "KEY_ENUM stores an int");
_Static_assert(ORIN_LOAD_QUANT_NONE == 0 && ORIN_LOAD_QUANT_INT8 == 1, "quant_modes order");

static const key_def keys[] = {
    {"model", "path", KEY_PATH, FIELD(model.path), .def = "",
     .doc = "Hugging Face model folder (config.json, *.safetensors, tokenizer.json)"},
    {"model", "dtype", KEY_DTYPE, FIELD(model.dtype), .def = "f32",
     .doc = "compute dtype: f32, f16 or bf16 (also fp32, fp16, float32, float16, bfloat16)"},
    {"model", "quant", KEY_ENUM, FIELD(model.quant), .choices = quant_modes, .def = "none",
     .doc = "quantize the linear layers at load: none, or int8 (symmetric, an f16 scale per "
            "128 inputs); a quantized folder (AWQ) is used as it is"},
    {"model", "quant_lm_head", KEY_BOOL, FIELD(model.quant_lm_head), .def = "false",
     .doc = "with quant = int8, quantize lm_head too (the embeddings stay float)"},

    {"runtime", "device", KEY_ENUM_STR, FIELD(runtime.device), .choices = device_names,
     .flags = KEY_DEVICE, .def = "auto",
     .doc = "auto (cuda when a GPU is present, else cpu), cpu, cuda or cuda:N (the N-th GPU)"},
    {"runtime", "cuda_graph", KEY_BOOL, FIELD(runtime.cuda_graph), .def = "true",
     .doc = "capture the decode step into a CUDA graph and replay it"},
    {"runtime", "fused_ops", KEY_BOOL, FIELD(runtime.fused_ops), .def = "true",
     .doc = "use fused ops (add+rmsnorm, q/k/v in one product, ...) where a plugin has them"},
    {"runtime", "max_context", KEY_INT, FIELD(runtime.max_context), INT_RANGE(0, INT32_MAX),
     .def = "4096", .doc = "KV cache length in tokens (unset: 4096, or the model's limit if "
                           "smaller); 0 = the model's max_position_embeddings (yarn: factor x "
                           "original where larger)"},
    {"runtime", "threads", KEY_INT, FIELD(runtime.threads), INT_RANGE(0, 4096), .def = "0",
     .doc = "host threads for CPU ops; 0 = all cores"},
    {"runtime", "prefill_chunk", KEY_INT, FIELD(runtime.prefill_chunk), INT_RANGE(0, INT32_MAX),
     .def = "0", .doc = "prompt tokens per prefill pass; 0 = 512 on the CPU, 2048 on CUDA"},

    {"plugins", "dir", KEY_PATH, FIELD(plugins.dir), .def = "",
     .doc = "plugin folder; empty = the plugins folder of orin-run's build or install"},
    {"plugins", "load", KEY_STRING, FIELD(plugins.load), .flags = KEY_FILE_NAMES, .def = "",
     .doc = "comma-separated plugin files in dir to load; empty = every *.so"},

    {"attention", "backend", KEY_STRING, FIELD(attention.backend), .def = "fa2",
     .doc = "attention provider: mha, fa1, fa2 or any loaded plugin's provider name"},
    {"attention", "strict", KEY_BOOL, FIELD(attention.strict), .def = "false",
     .doc = "make a fallback to another provider an error"},

    {"generate", "prompt", KEY_STRING, FIELD(generate.prompt), .flags = KEY_ESCAPES,
     .def = "Hello", .doc = "the user prompt (escapes: \\n \\t \\\\ \\;)"},
    {"generate", "system", KEY_STRING, FIELD(generate.system), .flags = KEY_ESCAPES, .def = "",
     .doc = "the system prompt; empty = the chat template's default"},
    {"generate", "chat", KEY_BOOL, FIELD(generate.chat), .def = "true",
     .doc = "wrap the prompt in the model's chat template"},
    {"generate", "interactive", KEY_BOOL, FIELD(generate.interactive), .def = "false",
     .doc = "read further user turns from stdin (-i)"},
    {"generate", "max_tokens", KEY_INT, FIELD(generate.max_tokens), INT_RANGE(0, INT32_MAX),
     .def = "128", .doc = "tokens to generate per turn at most"},
    {"generate", "temperature", KEY_FLOAT, FIELD(generate.temperature), .fmin = 0,
     .fmax = FLT_MAX, .def = "0.7", .doc = "sampling temperature; 0 = greedy"},
    {"generate", "top_k", KEY_INT, FIELD(generate.top_k), INT_RANGE(0, INT32_MAX), .def = "20",
     .doc = "keep the k most likely tokens; 0 = off"},
    {"generate", "top_p", KEY_FLOAT, FIELD(generate.top_p), .fmin = 0, .fmin_open = true,
     .fmax = 1, .def = "0.8", .doc = "nucleus sampling mass; 1 = off"},
    {"generate", "min_p", KEY_FLOAT, FIELD(generate.min_p), .fmin = 0, .fmax = 1,
     .fmax_open = true, .def = "0", .doc = "drop tokens below min_p times the top probability; 0 = off"},
    {"generate", "repetition_penalty", KEY_FLOAT, FIELD(generate.repetition_penalty), .fmin = 0,
     .fmin_open = true, .fmax = FLT_MAX, .def = "1", .doc = "penalty on repeated tokens; 1 = off"},
    {"generate", "presence_penalty", KEY_FLOAT, FIELD(generate.presence_penalty), .fmin = -FLT_MAX,
     .fmax = FLT_MAX, .def = "0", .doc = "subtracted once from the logit of every token seen; 0 = off"},
    {"generate", "seed", KEY_U64, FIELD(generate.seed), .def = "0",
     .doc = "random seed of the sampler"},
    {"generate", "stream", KEY_BOOL, FIELD(generate.stream), .def = "true",
     .doc = "print tokens as they are generated"},
    {"generate", "image", KEY_PATH, FIELD(generate.image), .flags = KEY_LIST, .def = "",
     .doc = "comma-separated image files put before the prompt's text (a VL model; --image)"},
    {"generate", "max_pixels", KEY_INT, FIELD(generate.max_pixels), INT_RANGE(0, INT32_MAX),
     .def = "0", .doc = "cap on the image processor's max_pixels; 0 = the model folder's"},

    {"score", "path", KEY_ENUM, FIELD(score.path), .choices = score_paths, .def = "prefill",
     .doc = "--score runs the tokens through prefill (one pass) or decode (one at a time)"},

    {"bench", "prompt_tokens", KEY_INT, FIELD(bench.prompt_tokens), INT_RANGE(1, INT32_MAX),
     .def = "512", .doc = "prompt length of --bench"},
    {"bench", "gen_tokens", KEY_INT, FIELD(bench.gen_tokens), INT_RANGE(1, INT32_MAX),
     .def = "128", .doc = "tokens --bench decodes"},
    {"bench", "repeats", KEY_INT, FIELD(bench.repeats), INT_RANGE(1, 1000), .def = "3",
     .doc = "runs of --bench; the median is reported"},
};

#define N_KEYS (sizeof keys / sizeof keys[0])
_Static_assert(N_KEYS <= 64 * sizeof(((orin_config *)0)->set_mask) / sizeof(uint64_t),
               "set_mask has a bit per key");

/* ---- small helpers ---- */

/* A value shown in an error: long ones are cut so that the message stays one line. */
static const char *shown(const char *value, char *buf, size_t cap)
{
    size_t n = strlen(value);
    if (n < cap && n <= 60 && !strpbrk(value, "\n\r"))
        return value;
    size_t keep = 0;
    while (keep < 57 && keep + 4 < cap && value[keep] && value[keep] != '\n' && value[keep] != '\r')
        keep++;
    snprintf(buf, cap, "%.*s...", (int)keep, value);
    return buf;
}

static int key_error(const char *origin, const key_def *k, const char *value, const char *fmt, ...)
    ORIN_PRINTF(4, 5);

/* "<origin>: section.key = 'value': <reason>" */
static int key_error(const char *origin, const key_def *k, const char *value, const char *fmt, ...)
{
    char reason[512], cut[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return orin_error_set("%s: %s.%s = '%s': %s", origin, k->section, k->name,
                          shown(value, cut, sizeof cut), reason);
}

/* How far a misspelling may be from a name and still be hinted. */
static size_t hint_limit(const char *word)
{
    size_t n = strlen(word) / 3;
    return n < 2 ? 2 : n;
}

static bool section_exists(const char *section)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(keys[i].section, section))
            return true;
    return false;
}

static const key_def *find_key(const char *section, const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(keys[i].section, section) && !strcmp(keys[i].name, name))
            return &keys[i];
    return NULL;
}

/* The closest known section name, or NULL. */
static const char *near_section(const char *section)
{
    const char *best = NULL;
    size_t best_d = hint_limit(section) + 1;
    for (size_t i = 0; i < N_KEYS; i++) {
        size_t d = orin_edit_distance(section, keys[i].section);
        if (d < best_d) {
            best_d = d;
            best = keys[i].section;
        }
    }
    return best;
}

/* The closest key: edit distance on the key name over every section, plus one
 * for being in another section, so that a key in the wrong section is found
 * and a near key in the right one wins a tie. */
static const key_def *near_key(const char *section, const char *name)
{
    const key_def *best = NULL;
    size_t best_d = hint_limit(name) + 1;
    for (size_t i = 0; i < N_KEYS; i++) {
        size_t d = orin_edit_distance(name, keys[i].name);
        if (d != SIZE_MAX && strcmp(section, keys[i].section))
            d++;
        if (d < best_d) {
            best_d = d;
            best = &keys[i];
        }
    }
    return best;
}

static int unknown_key_error(const char *origin, const char *section, const char *name,
                             const char *value)
{
    char cut[64];
    const char *v = shown(value, cut, sizeof cut);
    if (!*section)
        return orin_error_set("%s: %s = '%s': key outside any [section]", origin, name, v);
    if (!section_exists(section)) {
        const char *s = near_section(section);
        if (s)
            return orin_error_set("%s: %s.%s = '%s': unknown section [%s]; did you mean [%s]?",
                                  origin, section, name, v, section, s);
        const key_def *k = near_key(section, name);
        if (k)
            return orin_error_set("%s: %s.%s = '%s': unknown section [%s]; did you mean %s.%s?",
                                  origin, section, name, v, section, k->section, k->name);
        return orin_error_set("%s: %s.%s = '%s': unknown section [%s] (sections: model, "
                              "runtime, plugins, attention, generate, score, bench)",
                              origin, section, name, v, section);
    }
    const key_def *k = near_key(section, name);
    if (k)
        return orin_error_set("%s: %s.%s = '%s': unknown key in [%s]; did you mean %s.%s?",
                              origin, section, name, v, section, k->section, k->name);
    return orin_error_set("%s: %s.%s = '%s': unknown key in [%s]", origin, section, name, v,
                          section);
}

static size_t key_index(const key_def *k)
{
    return (size_t)(k - keys);
}

static void mark_set(orin_config *cfg, const key_def *k)
{
    size_t i = key_index(k);
    cfg->set_mask[i / 64] |= UINT64_C(1) << (i % 64);
}

static void *field(orin_config *cfg, const key_def *k)
{
    return (char *)cfg + k->offset;
}

static const void *cfield(const orin_config *cfg, const key_def *k)
{
    return (const char *)cfg + k->offset;
}

/* ---- value parsers: each stores into the field or sets an error ---- */

static int store_string(orin_config *cfg, const key_def *k, const char *text, const char *value,
                        const char *origin)
{
    size_t n = strlen(text);
    if (n >= k->size)
        return key_error(origin, k, value, "too long (%zu bytes; at most %zu)", n, k->size - 1);
    memcpy(field(cfg, k), text, n + 1);
    return 0;
}

/* Decodes \n \t \\ \; into out (at least strlen(value)+1 bytes). */
static int unescape(const key_def *k, const char *value, char *out, const char *origin)
{
    const char *s = value;
    while (*s) {
        if (*s != '\\') {
            *out++ = *s++;
            continue;
        }
        switch (s[1]) {
        case 'n': *out++ = '\n'; break;
        case 't': *out++ = '\t'; break;
        case '\\': *out++ = '\\'; break;
        case ';': *out++ = ';'; break;
        case '\0':
            return key_error(origin, k, value, "a lone '\\' at the end (write \\\\ for a backslash)");
        default:
            return key_error(origin, k, value, "unknown escape '\\%c' (known: \\n \\t \\\\ \\;)",
                             s[1]);
        }
        s += 2;
    }
    *out = '\0';
    return 0;
}

/* The comma-separated item at *s, trimmed of spaces, as [*start, *end);
 * *s moves past it and its comma. */
static void next_list_item(const char **s, const char **start, const char **end)
{
    const size_t n = strcspn(*s, ",");
    *start = *s;
    *end = *s + n;
    while (*start < *end && isspace((unsigned char)**start))
        (*start)++;
    while (*end > *start && isspace((unsigned char)(*end)[-1]))
        (*end)--;
    *s += n + ((*s)[n] == ',');
}

static int check_file_names(const key_def *k, const char *value, const char *origin)
{
    for (const char *s = value; *s;) {
        const char *start, *end;
        next_list_item(&s, &start, &end);
        if (start == end)
            return key_error(origin, k, value, "empty name in the list");
        if (memchr(start, '/', (size_t)(end - start)))
            return key_error(origin, k, value,
                             "'%.*s' is a path; list file names in plugins.dir",
                             (int)(end - start), start);
    }
    return 0;
}

static int set_string(orin_config *cfg, const key_def *k, const char *value, const char *origin)
{
    if (k->flags & KEY_FILE_NAMES && check_file_names(k, value, origin))
        return -1;
    if (!(k->flags & KEY_ESCAPES))
        return store_string(cfg, k, value, value, origin);
    char *decoded = malloc(strlen(value) + 1);
    if (!decoded)
        return key_error(origin, k, value, "out of memory");
    int rc = unescape(k, value, decoded, origin);
    if (rc == 0)
        rc = store_string(cfg, k, decoded, value, origin);
    free(decoded);
    return rc;
}

static int set_path(orin_config *cfg, const key_def *k, const char *value, const char *base,
                    const char *origin)
{
    if (!*value || value[0] == '/' || !base)
        return store_string(cfg, k, value, value, origin);
    char joined[2 * ORIN_CONFIG_MAX_STR + 2];
    int n = snprintf(joined, sizeof joined, "%s/%s", base, value);
    if (n < 0 || (size_t)n >= sizeof joined)
        return key_error(origin, k, value, "too long once resolved against %s", base);
    return store_string(cfg, k, joined, value, origin);
}

/* A KEY_LIST path key: each comma-separated item trimmed and resolved as
 * set_path resolves one, then joined again with ", " (so that the value
 * written back reads the same). */
static int set_path_list(orin_config *cfg, const key_def *k, const char *value,
                         const char *base, const char *origin)
{
    char out[2 * ORIN_CONFIG_MAX_STR + 2];
    size_t len = 0;
    for (const char *s = value; *s;) {
        const char *start, *end;
        next_list_item(&s, &start, &end);
        if (start == end)
            return key_error(origin, k, value, "empty name in the list");
        bool relative = *start != '/' && base && *base;
        int w = snprintf(out + len, sizeof out - len, "%s%s%s%.*s", len ? ", " : "",
                         relative ? base : "", relative ? "/" : "", (int)(end - start), start);
        if (w < 0 || (size_t)w >= sizeof out - len)
            return key_error(origin, k, value, "too long once resolved");
        len += (size_t)w;
    }
    out[len] = '\0';
    return store_string(cfg, k, out, value, origin);
}

static int set_bool(orin_config *cfg, const key_def *k, const char *value, const char *origin)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(value, yes[i]) || !strcasecmp(value, no[i])) {
            *(bool *)field(cfg, k) = !strcasecmp(value, yes[i]);
            return 0;
        }
    }
    return key_error(origin, k, value, "not a boolean (true/false, yes/no, on/off, 1/0)");
}

static int set_int(orin_config *cfg, const key_def *k, const char *value, const char *origin)
{
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (end == value || isspace((unsigned char)*value))
        return key_error(origin, k, value, "not an integer");
    if (*end)
        return key_error(origin, k, value, "not an integer (trailing '%s')", end);
    if (errno == ERANGE || v < k->imin || v > k->imax)
        return key_error(origin, k, value, "out of range [%lld, %lld]", k->imin, k->imax);
    *(int32_t *)field(cfg, k) = (int32_t)v;
    return 0;
}

static int set_u64(orin_config *cfg, const key_def *k, const char *value, const char *origin)
{
    char *end;
    errno = 0;
    /* strtoull accepts "-1" and wraps it: refuse any sign up front. */
    if (!isdigit((unsigned char)value[0]))
        return key_error(origin, k, value, "not an unsigned integer");
    unsigned long long v = strtoull(value, &end, 10);
    if (*end)
        return key_error(origin, k, value, "not an unsigned integer (trailing '%s')", end);
    if (errno == ERANGE)
        return key_error(origin, k, value, "out of range [0, %llu]", (unsigned long long)UINT64_MAX);
    *(uint64_t *)field(cfg, k) = v;
    return 0;
}

static int set_float(orin_config *cfg, const key_def *k, const char *value, const char *origin)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || isspace((unsigned char)*value))
        return key_error(origin, k, value, "not a number");
    if (*end)
        return key_error(origin, k, value, "not a number (trailing '%s')", end);
    if (!isfinite(v))
        return key_error(origin, k, value, "not a finite number");
    bool low = k->fmin_open ? v <= k->fmin : v < k->fmin;
    bool high = k->fmax_open ? v >= k->fmax : v > k->fmax;
    if (low || high || (errno == ERANGE && fabs(v) > 1)) {
        char hi[32];
        if (k->fmax >= FLT_MAX)
            snprintf(hi, sizeof hi, "inf");
        else
            snprintf(hi, sizeof hi, "%g", k->fmax);
        return key_error(origin, k, value, "out of range %c%g, %s%c", k->fmin_open ? '(' : '[',
                         k->fmin, hi, k->fmax_open || k->fmax >= FLT_MAX ? ')' : ']');
    }
    *(float *)field(cfg, k) = (float)v;
    return 0;
}

static int choice_error(const key_def *k, const char *value, const char *origin)
{
    char list[256] = "";
    size_t len = 0;
    for (const char *const *c = k->choices; *c; c++) {
        int n = snprintf(list + len, sizeof list - len, "%s%s", c == k->choices ? "" : ", ", *c);
        if (n < 0 || (size_t)n >= sizeof list - len)
            break;
        len += (size_t)n;
    }
    return key_error(origin, k, value, "not one of %s%s", list,
                     k->flags & KEY_DEVICE ? ", cuda:N" : "");
}

/* "cuda:N" with N a GPU ordinal of at most 4 digits. */
static bool is_cuda_index(const char *value)
{
    if (strncmp(value, "cuda:", 5))
        return false;
    size_t digits = strspn(value + 5, "0123456789");
    return digits >= 1 && digits <= 4 && !value[5 + digits];
}

static int set_enum(orin_config *cfg, const key_def *k, const char *value, const char *origin)
{
    for (int i = 0; k->choices[i]; i++) {
        if (strcmp(value, k->choices[i]))
            continue;
        if (k->type == KEY_ENUM)
            *(int *)field(cfg, k) = i;
        else
            return store_string(cfg, k, value, value, origin);
        return 0;
    }
    if (k->flags & KEY_DEVICE && is_cuda_index(value))
        return store_string(cfg, k, value, value, origin);
    return choice_error(k, value, origin);
}

static int set_dtype(orin_config *cfg, const key_def *k, const char *value, const char *origin)
{
    orin_dtype dt;
    if (orin_dtype_from_name(value, &dt) || (dt != ORIN_F32 && dt != ORIN_F16 && dt != ORIN_BF16))
        return key_error(origin, k, value,
                         "not a compute dtype (f32, f16, bf16; also fp32, fp16, float32, "
                         "float16, bfloat16)");
    *(orin_dtype *)field(cfg, k) = dt;
    return 0;
}

/* Parses `value` into k's field. `base` is the folder relative paths resolve
 * against (NULL: keep them as written, for defaults). */
static int set_value(orin_config *cfg, const key_def *k, const char *value, const char *base,
                     const char *origin)
{
    switch (k->type) {
    case KEY_STRING: return set_string(cfg, k, value, origin);
    case KEY_PATH:
        return k->flags & KEY_LIST ? set_path_list(cfg, k, value, base, origin)
                                   : set_path(cfg, k, value, base, origin);
    case KEY_BOOL: return set_bool(cfg, k, value, origin);
    case KEY_INT: return set_int(cfg, k, value, origin);
    case KEY_U64: return set_u64(cfg, k, value, origin);
    case KEY_FLOAT: return set_float(cfg, k, value, origin);
    case KEY_ENUM:
    case KEY_ENUM_STR: return set_enum(cfg, k, value, origin);
    case KEY_DTYPE: return set_dtype(cfg, k, value, origin);
    }
    return orin_error_set("%s: %s.%s: internal error: bad key type", origin, k->section, k->name);
}

/* ---- public API ---- */

/* The defaults are ours: a failure here is a bug in the table, or out of
 * memory (escaped strings are decoded in a heap buffer). */
static int apply_defaults(orin_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < N_KEYS; i++)
        if (set_value(cfg, &keys[i], keys[i].def, NULL, "default"))
            return -1;
    return 0;
}

void orin_config_defaults(orin_config *cfg)
{
    if (apply_defaults(cfg))
        orin_log(ORIN_LOG_ERROR, "%s", orin_error());
}

static int set_with_base(orin_config *cfg, const char *section, const char *key, const char *value,
                         const char *base, const char *origin)
{
    const key_def *k = find_key(section, key);
    if (!k)
        return unknown_key_error(origin, section, key, value);
    if (set_value(cfg, k, value, base, origin))
        return -1;
    mark_set(cfg, k);
    return 0;
}

/* The current directory, for paths given on the command line. */
static int current_dir(char *buf, size_t cap, const char *origin)
{
    if (getcwd(buf, cap))
        return 0;
    return orin_error_set("%s: cannot resolve a relative path: getcwd: %s", origin, strerror(errno));
}

int orin_config_set(orin_config *cfg, const char *section, const char *key, const char *value,
                    const char *origin)
{
    char cwd[ORIN_CONFIG_MAX_STR] = "";
    const key_def *k = find_key(section, key);
    /* A list may hold relative paths after an absolute one. */
    bool relative = k && k->type == KEY_PATH && *value && (value[0] != '/' || k->flags & KEY_LIST);
    if (relative && current_dir(cwd, sizeof cwd, origin))
        return -1;
    return set_with_base(cfg, section, key, value, cwd, origin);
}

static void trim(char **start, char **end)
{
    while (*start < *end && isspace((unsigned char)**start))
        (*start)++;
    while (*end > *start && isspace((unsigned char)(*end)[-1]))
        (*end)--;
}

/* One "section.key=value" from the command line. */
static int apply_override(orin_config *cfg, const char *text)
{
    char cut[64];
    char *copy = strdup(text);
    if (!copy)
        return orin_error_set("--set: out of memory");
    int rc = -1;
    char *eq = strchr(copy, '=');
    char *dot = eq ? memchr(copy, '.', (size_t)(eq - copy)) : NULL;
    if (!eq || !dot) {
        orin_error_set("--set: '%s': expected section.key=value", shown(text, cut, sizeof cut));
        goto out;
    }
    char *sec = copy, *sec_end = dot, *key = dot + 1, *key_end = eq;
    trim(&sec, &sec_end);
    trim(&key, &key_end);
    *sec_end = '\0';
    *key_end = '\0';
    char *value = eq + 1, *value_end = value + strlen(value);
    trim(&value, &value_end);
    *value_end = '\0';
    if (!*sec || !*key) {
        orin_error_set("--set: '%s': expected section.key=value", shown(text, cut, sizeof cut));
        goto out;
    }
    rc = orin_config_set(cfg, sec, key, value, "--set");
out:
    free(copy);
    return rc;
}

/* ---- INI files ---- */

typedef struct ini_source {
    orin_config *cfg;
    const char *path;      /* as given, for messages */
    char base[ORIN_CONFIG_MAX_STR]; /* the file's folder, absolute */
    const char *text;      /* the whole file */
    size_t len, pos;
    int lineno;            /* of the line last handed to inih */
    const char *line;      /* its raw text */
    size_t line_len;
    int error_line;        /* the first line with an error of ours; 0 = none */
    bool stop;             /* the reader found a line it refuses */
    int first_line[N_KEYS]; /* where each key was set in this file, 0 = not yet */
} ini_source;

/* inih's fgets-like reader. It numbers lines itself (the library may be built
 * without INI_HANDLER_LINENO), drops a UTF-8 BOM and leading whitespace (see
 * the top of the file), and refuses lines that do not fit inih's buffer. */
static char *read_line(char *str, int num, void *stream)
{
    ini_source *src = stream;
    if (src->stop || src->pos >= src->len)
        return NULL;
    const char *line = src->text + src->pos;
    const char *nl = memchr(line, '\n', src->len - src->pos);
    size_t n = nl ? (size_t)(nl - line) : src->len - src->pos;
    src->pos += n + (nl != NULL);
    src->lineno++;
    src->line = line;
    src->line_len = n;
    if (src->lineno == 1 && n >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) {
        line += 3;
        n -= 3;
    }
    while (n && (*line == ' ' || *line == '\t')) {
        line++;
        n--;
    }
    if (memchr(line, '\0', n)) {
        orin_error_set("%s:%d: the line contains a NUL byte", src->path, src->lineno);
        goto refuse;
    }
    if (num < 2 || n > (size_t)num - 2) {
        orin_error_set("%s:%d: line too long (%zu bytes; at most %d)", src->path, src->lineno, n,
                       num - 2);
        goto refuse;
    }
    memcpy(str, line, n);
    str[n] = '\n';
    str[n + 1] = '\0';
    return str;
refuse:
    src->error_line = src->lineno;
    src->stop = true;
    return NULL;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    ini_source *src = user;
    if (src->error_line)
        return 1; /* only the first error is reported; let inih run to its end */
    char origin[ORIN_CONFIG_MAX_STR + 32];
    snprintf(origin, sizeof origin, "%s:%d", src->path, src->lineno);
    const key_def *k = find_key(section, name);
    char cut[64];
    int rc;
    if (!*name) {
        rc = orin_error_set("%s: syntax error: '= %s' has no key name", origin,
                            shown(value, cut, sizeof cut));
    } else if (k && src->first_line[key_index(k)]) {
        rc = orin_error_set("%s: %s.%s = '%s': set twice in this file (first at line %d)", origin,
                            section, name, shown(value, cut, sizeof cut),
                            src->first_line[key_index(k)]);
    } else {
        rc = set_with_base(src->cfg, section, name, value, src->base, origin);
    }
    if (rc) {
        src->error_line = src->lineno;
        return 0;
    }
    src->first_line[key_index(k)] = src->lineno;
    return 1;
}


/* The absolute folder holding `path`. */
static int folder_of(const char *path, char *out, size_t cap)
{
    char *abs = realpath(path, NULL);
    if (!abs)
        return orin_error_set("%s: cannot resolve: %s", path, strerror(errno));
    char *slash = strrchr(abs, '/');
    if (slash == abs)
        slash[1] = '\0'; /* a file in "/" */
    else
        *slash = '\0';
    int rc = 0;
    if (strlen(abs) >= cap)
        rc = orin_error_set("%s: folder name too long", path);
    else
        strcpy(out, abs);
    free(abs);
    return rc;
}

/* Parses INI text (NUL-terminated, len bytes) into cfg. `name` labels error
 * messages and becomes cfg->source; `base` resolves relative paths. */
static int parse_text(orin_config *cfg, const char *text, size_t len, const char *name,
                      const char *base)
{
    if (strlen(name) >= sizeof cfg->source)
        return orin_error_set("%s: file name too long", name);
    if (strlen(base) >= sizeof ((ini_source *)0)->base)
        return orin_error_set("%s: folder name too long", name);
    ini_source *src = calloc(1, sizeof *src);
    if (!src)
        return orin_error_set("%s: out of memory", name);
    int rc = -1;
    strcpy(src->base, base);
    strcpy(cfg->source, name);
    src->cfg = cfg;
    src->path = name;
    src->text = text;
    src->len = len;
    if (&ini_max_line && ini_max_line < INI_LINE_BYTES)
        ini_max_line = INI_LINE_BYTES;
    int first_bad = ini_parse_stream(read_line, src, on_key, src);
    if (first_bad == -2) {
        orin_error_set("%s: out of memory", name);
        goto out;
    }
    if (src->error_line && (first_bad <= 0 || src->error_line <= first_bad))
        goto out; /* our message is already set */
    if (first_bad > 0) {
        /* inih found a line that is neither "[section]" nor "key = value". */
        const char *line = src->text;
        for (int i = 1; i < first_bad; i++)
            line = strchr(line, '\n') + 1;
        size_t n = strcspn(line, "\r\n");
        char raw[ORIN_CONFIG_MAX_STR], cut[64];
        snprintf(raw, sizeof raw, "%.*s", (int)(n < sizeof raw - 1 ? n : sizeof raw - 1), line);
        orin_error_set("%s:%d: syntax error: '%s' is neither [section] nor key = value", name,
                       first_bad, shown(raw, cut, sizeof cut));
        goto out;
    }
    rc = 0;
out:
    free(src);
    return rc;
}

static int load_file(orin_config *cfg, const char *path)
{
    char base[ORIN_CONFIG_MAX_STR];
    size_t len;
    if (strlen(path) >= sizeof cfg->source)
        return orin_error_set("%s: file name too long", path);
    /* An INI file is kilobytes; a huge one is a wrong path. */
    char *text = orin_read_file(path, 16u << 20, &len);
    if (!text)
        return -1;
    int rc = folder_of(path, base, sizeof base);
    if (!rc)
        rc = parse_text(cfg, text, len, path, base);
    free(text);
    return rc;
}

int orin_config_load_string(orin_config *cfg, const char *text, size_t len, const char *name,
                            const char *base_dir)
{
    char cwd[ORIN_CONFIG_MAX_STR];
    if (apply_defaults(cfg))
        return -1;
    if (!name)
        name = "<string>";
    if (!base_dir) {
        if (current_dir(cwd, sizeof cwd, name))
            return -1;
        base_dir = cwd;
    }
    /* The reader and the syntax-error report rely on a terminating NUL. */
    char *copy = malloc(len + 1);
    if (!copy)
        return orin_error_set("%s: out of memory", name);
    memcpy(copy, text, len);
    copy[len] = '\0';
    int rc = parse_text(cfg, copy, len, name, base_dir);
    free(copy);
    return rc;
}

int orin_config_load(orin_config *cfg, const char *path, const char *const *overrides, int n)
{
    if (apply_defaults(cfg))
        return -1;
    if (path && load_file(cfg, path))
        return -1;
    for (int i = 0; i < n; i++)
        if (apply_override(cfg, overrides[i]))
            return -1;
    return 0;
}

bool orin_config_is_set(const orin_config *cfg, const char *section, const char *key)
{
    const key_def *k = find_key(section, key);
    if (!k)
        return false;
    size_t i = key_index(k);
    return cfg->set_mask[i / 64] >> (i % 64) & 1;
}

/* ---- writing ---- */

typedef struct out_buf {
    char *buf;
    size_t cap, len;
    bool overflow;
} out_buf;

static void put(out_buf *o, const char *fmt, ...) ORIN_PRINTF(2, 3);

static void put(out_buf *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room)
        o->overflow = true;
    o->len += n > 0 ? (size_t)n : 0;
}

/* A string value as INI text that reads back the same. */
static void put_text(out_buf *o, const char *s, bool escapes)
{
    for (; *s; s++) {
        if (escapes && *s == '\n')
            put(o, "\\n");
        else if (escapes && *s == '\t')
            put(o, "\\t");
        else if (escapes && *s == '\\')
            put(o, "\\\\");
        else if (escapes && *s == ';')
            put(o, "\\;");
        else
            put(o, "%c", *s);
    }
}

static void put_value(out_buf *o, const orin_config *cfg, const key_def *k)
{
    const void *p = cfield(cfg, k);
    switch (k->type) {
    case KEY_STRING:
    case KEY_PATH:
    case KEY_ENUM_STR: put_text(o, p, k->flags & KEY_ESCAPES); break;
    case KEY_BOOL: put(o, "%s", *(const bool *)p ? "true" : "false"); break;
    case KEY_INT: put(o, "%d", (int)*(const int32_t *)p); break;
    case KEY_U64: put(o, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case KEY_FLOAT: put(o, "%.9g", (double)*(const float *)p); break;
    case KEY_ENUM: put(o, "%s", k->choices[*(const int *)p]); break;
    case KEY_DTYPE: put(o, "%s", orin_dtype_name(*(const orin_dtype *)p)); break;
    }
}

/* inih takes a ';' after whitespace for a comment, so "key = ;x" reads as
 * empty: a raw value starting with ';' is written as "key =;x". (Keys with
 * escapes write it as "\;".) */
static const char *separator(const orin_config *cfg, const key_def *k)
{
    bool raw_text = (k->type == KEY_STRING || k->type == KEY_PATH || k->type == KEY_ENUM_STR) &&
                    !(k->flags & KEY_ESCAPES);
    return raw_text && *(const char *)cfield(cfg, k) == ';' ? " =" : " = ";
}

/* Returns the length of the text (without the NUL), or -1 with an error when
 * it does not fit in cap bytes. */
int orin_config_write(const orin_config *cfg, char *buf, size_t cap)
{
    out_buf o = {.buf = buf, .cap = cap};
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_def *k = &keys[i];
        if (i == 0 || strcmp(k->section, keys[i - 1].section))
            put(&o, "%s[%s]\n", i ? "\n" : "", k->section);
        put(&o, "; %s\n%s%s", k->doc, k->name, separator(cfg, k));
        put_value(&o, cfg, k);
        put(&o, "\n");
    }
    if (o.overflow || o.len > INT_MAX)
        return orin_error_set("config: %zu bytes do not fit in a %zu-byte buffer", o.len + 1, cap);
    return (int)o.len;
}
