/* orin.ini parsing: defaults, every error class, --set, path resolution,
 * is_set, write/read round trip, and etc/orin.ini against the built-in defaults.
 *
 * Usage: test_config GROUP (one ctest test per group, "config.GROUP"). */
#include "test_util.h"

#include "orin/config.h"
#include "orin/error.h"

#include <limits.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *tmp;          /* a fresh folder for this run */
static orin_config cfg;    /* big: keep it off the stack */

/* Writes `text` to tmp/name and loads it with the overrides; returns the rc. */
static int load_text(const char *name, const char *text, const char *const *overrides, int n)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    if (test_write_file(path, text, strlen(text))) {
        fprintf(stderr, "cannot write %s\n", path);
        return -2;
    }
    orin_error_clear();
    return orin_config_load(&cfg, path, overrides, n);
}

static bool has(const char *haystack, const char *needle)
{
    return strstr(haystack, needle) != NULL;
}

/* Loads `text` from t.ini, expects failure and that the error contains every
 * string of `parts` (NULL-terminated). */
#define EXPECT_ERROR(text, ...)                                                             \
    do {                                                                                    \
        const char *parts_[] = {__VA_ARGS__, NULL};                                         \
        int rc_ = load_text("t.ini", text, NULL, 0);                                        \
        CHECK(rc_ == -1, "loading [%s] should fail", text);                                 \
        for (const char **p_ = parts_; *p_; p_++)                                           \
            CHECK(has(orin_error(), *p_), "error '%s' lacks '%s'", orin_error(), *p_);      \
    } while (0)

/* Applies one --set, expects failure with every part in the message. */
#define EXPECT_SET_ERROR(override, ...)                                                     \
    do {                                                                                    \
        const char *parts_[] = {__VA_ARGS__, NULL};                                         \
        const char *ov_[] = {override};                                                     \
        orin_error_clear();                                                                 \
        int rc_ = orin_config_load(&cfg, NULL, ov_, 1);                                     \
        CHECK(rc_ == -1, "--set %s should fail", override);                                 \
        for (const char **p_ = parts_; *p_; p_++)                                           \
            CHECK(has(orin_error(), *p_), "error '%s' lacks '%s'", orin_error(), *p_);      \
    } while (0)

static void test_defaults(void)
{
    /* The values config.h and DESIGN.md promise, typed out by hand. */
    CHECK(orin_config_load(&cfg, NULL, NULL, 0) == 0, "%s", orin_error());
    CHECK(!strcmp(cfg.source, ""));
    CHECK(!strcmp(cfg.model.path, ""));
    CHECK(cfg.model.dtype == ORIN_F32);
    CHECK(!strcmp(cfg.runtime.device, "auto"));
    CHECK(cfg.runtime.cuda_graph == true);
    CHECK(cfg.runtime.fused_ops == true);
    CHECK(cfg.runtime.max_context == 4096);
    CHECK(cfg.runtime.threads == 0);
    CHECK(cfg.runtime.prefill_chunk == 0);
    CHECK(!strcmp(cfg.plugins.dir, ""));
    CHECK(!strcmp(cfg.plugins.load, ""));
    CHECK(!strcmp(cfg.attention.backend, "fa2"));
    CHECK(cfg.attention.strict == false);
    CHECK(!strcmp(cfg.generate.prompt, "Hello"));
    CHECK(!strcmp(cfg.generate.system, ""));
    CHECK(cfg.generate.chat == true);
    CHECK(cfg.generate.interactive == false);
    CHECK(cfg.generate.max_tokens == 128);
    CHECK(cfg.generate.temperature == 0.7f);
    CHECK(cfg.generate.top_k == 20);
    CHECK(cfg.generate.top_p == 0.8f);
    CHECK(cfg.generate.min_p == 0.0f);
    CHECK(cfg.generate.repetition_penalty == 1.0f);
    CHECK(cfg.generate.seed == 0);
    CHECK(cfg.generate.stream == true);
    CHECK(cfg.score.path == ORIN_SCORE_PREFILL);
    CHECK(cfg.model.quant == ORIN_LOAD_QUANT_NONE && !cfg.model.quant_lm_head);
    CHECK(cfg.bench.prompt_tokens == 512);
    CHECK(cfg.bench.gen_tokens == 128);
    CHECK(cfg.bench.repeats == 3);
    CHECK(cfg.set_mask[0] == 0 && cfg.set_mask[1] == 0, "defaults are not 'set'");
    CHECK(!orin_config_is_set(&cfg, "generate", "temperature"));

    /* An empty file and a file of comments change nothing. */
    CHECK(load_text("empty.ini", "", NULL, 0) == 0, "%s", orin_error());
    CHECK(cfg.generate.top_k == 20);
    CHECK(load_text("comments.ini", "; a comment\n# another\n\n[generate]\n; top_k = 3\n", NULL,
                    0) == 0, "%s", orin_error());
    CHECK(cfg.generate.top_k == 20);
    CHECK(!orin_config_is_set(&cfg, "generate", "top_k"));
}

static void test_values(void)
{
    const char *ini =
        "\xEF\xBB\xBF[model]\n"
        "dtype = bf16\n"
        "[runtime]\n"
        "  device = cpu      ; indented, with an inline comment\n"
        "\tcuda_graph = off\n"
        "max_context=0\n"
        "threads : 3\n"
        "[attention]\n"
        "backend = mha\n"
        "strict = YES\n"
        "[generate]\n"
        "prompt = line one\\nline two\\ttab \\\\ back\\; semi\n"
        "system = You are terse.\n"
        "chat = 0\n"
        "interactive = 1\n"
        "max_tokens = 7\n"
        "temperature = 0\n"
        "top_k = 0\n"
        "top_p = 1\n"
        "min_p = 0.05\n"
        "repetition_penalty = 1.1\n"
        "seed = 18446744073709551615\n"
        "stream = false\n"
        "[score]\n"
        "path = decode\n"
        "[bench]\n"
        "prompt_tokens = 1\n"
        "gen_tokens = 2\n"
        "repeats = 1000\n"
        "[plugins]\n"
        "load = attention_fa2.so, ops_common\n";
    CHECK(load_text("values.ini", ini, NULL, 0) == 0, "%s", orin_error());
    CHECK(cfg.model.dtype == ORIN_BF16);
    CHECK(!strcmp(cfg.runtime.device, "cpu"), "device '%s'", cfg.runtime.device);
    CHECK(cfg.runtime.cuda_graph == false);
    CHECK(cfg.runtime.max_context == 0);
    CHECK(cfg.runtime.threads == 3);
    CHECK(!strcmp(cfg.attention.backend, "mha"));
    CHECK(cfg.attention.strict == true);
    CHECK(!strcmp(cfg.generate.prompt, "line one\nline two\ttab \\ back; semi"), "prompt '%s'",
          cfg.generate.prompt);
    CHECK(!strcmp(cfg.generate.system, "You are terse."));
    CHECK(cfg.generate.chat == false && cfg.generate.interactive == true);
    CHECK(cfg.generate.max_tokens == 7);
    CHECK(cfg.generate.temperature == 0.0f && cfg.generate.top_k == 0);
    CHECK(cfg.generate.top_p == 1.0f && cfg.generate.min_p == 0.05f);
    CHECK(cfg.generate.repetition_penalty == 1.1f);
    CHECK(cfg.generate.seed == UINT64_MAX);
    CHECK(cfg.generate.stream == false);
    CHECK(cfg.score.path == ORIN_SCORE_DECODE);
    CHECK(cfg.bench.prompt_tokens == 1 && cfg.bench.gen_tokens == 2 && cfg.bench.repeats == 1000);
    CHECK(!strcmp(cfg.plugins.load, "attention_fa2.so, ops_common"));

    /* CRLF line ends, a comment after a section header. */
    CHECK(load_text("crlf.ini", "[model] ; the model\r\ndtype = f16\r\n[generate]\r\nprompt = hi \r\n",
                    NULL, 0) == 0, "%s", orin_error());
    CHECK(cfg.model.dtype == ORIN_F16 && !strcmp(cfg.generate.prompt, "hi"), "'%s'",
          cfg.generate.prompt);

    /* Other dtype spellings. */
    CHECK(load_text("d.ini", "[model]\ndtype = float16\n", NULL, 0) == 0 &&
          cfg.model.dtype == ORIN_F16);
    CHECK(load_text("d.ini", "[model]\ndtype = fp32\n", NULL, 0) == 0 &&
          cfg.model.dtype == ORIN_F32);
    /* '#' after a value is part of it: here it makes a bad integer. */
    EXPECT_ERROR("[generate]\ntop_k = 5 # five\n", "t.ini:2", "generate.top_k", "5 # five");
    /* A string value keeps a '#', and " ;" starts a comment. */
    CHECK(load_text("h.ini", "[generate]\nprompt = issue #4 ; the comment\n", NULL, 0) == 0);
    CHECK(!strcmp(cfg.generate.prompt, "issue #4"), "prompt '%s'", cfg.generate.prompt);
}

static void test_errors(void)
{
    /* Syntax errors name the file:line and quote the line. */
    EXPECT_ERROR("[model]\ndtype = f32\nthis line has no equals sign\n", "t.ini:3",
                 "syntax error", "this line has no equals sign");
    EXPECT_ERROR("[model\ndtype = f32\n", "t.ini:1", "syntax error", "[model");
    EXPECT_ERROR("[model]\n= f32\n", "t.ini:2", "no key name");
    /* No multi-line values: an indented line is a line of its own. */
    EXPECT_ERROR("[generate]\nprompt = a\n  continued\n", "t.ini:3", "syntax error", "continued");
    /* The earliest error wins, whatever its kind. */
    EXPECT_ERROR("[generate]\ntop_k = x\ngarbage\n", "t.ini:2", "generate.top_k");
    EXPECT_ERROR("[generate]\ngarbage\ntop_k = x\n", "t.ini:2", "syntax error", "garbage");

    /* Unknown sections and keys, with hints. */
    EXPECT_ERROR("[model]\ndtype = f32\n[modle]\npath = x\n", "t.ini:4", "modle.path", "'x'",
                 "unknown section [modle]", "did you mean [model]?");
    EXPECT_ERROR("[Generate]\ntop_k = 3\n", "t.ini:2", "did you mean [generate]?");
    EXPECT_ERROR("[gen]\ntop_k = 3\n", "t.ini:2", "unknown section [gen]",
                 "did you mean generate.top_k?");
    EXPECT_ERROR("[xyzzy]\nfoo = 3\n", "t.ini:2", "unknown section [xyzzy]", "sections:");
    EXPECT_ERROR("[generate]\nimages = a.png\n", "t.ini:2", "did you mean generate.image?");
    EXPECT_ERROR("[generate]\nimage = a.png,,b.png\n", "t.ini:2", "generate.image",
                 "empty name in the list");
    EXPECT_ERROR("[generate]\nmax_pixels = -1\n", "t.ini:2", "generate.max_pixels",
                 "out of range");
    EXPECT_ERROR("[generate]\n\ntop_kk = 3\n", "t.ini:3", "generate.top_kk", "'3'",
                 "unknown key in [generate]", "did you mean generate.top_k?");
    EXPECT_ERROR("[generate]\ntpo_p = 0.5\n", "did you mean generate.top_p?");
    EXPECT_ERROR("[generate]\ntemprature = 0.5\n", "did you mean generate.temperature?");
    /* A key in the wrong section is found in the right one. */
    EXPECT_ERROR("[model]\nmax_tokens = 3\n", "t.ini:2", "model.max_tokens",
                 "did you mean generate.max_tokens?");
    EXPECT_ERROR("[runtime]\nbackend = fa1\n", "did you mean attention.backend?");
    /* Nothing near: no hint. */
    EXPECT_ERROR("[generate]\nfrobnicate = 1\n", "unknown key in [generate]");
    CHECK(!has(orin_error(), "did you mean"), "%s", orin_error());
    EXPECT_ERROR("top_k = 3\n", "t.ini:1", "top_k", "outside any [section]");

    /* Bad booleans. */
    EXPECT_ERROR("[generate]\nstream = maybe\n", "t.ini:2", "generate.stream", "'maybe'",
                 "not a boolean", "true/false");
    EXPECT_ERROR("[generate]\nstream =\n", "t.ini:2", "generate.stream", "''");

    /* Bad integers: garbage, trailing garbage, overflow, range. */
    EXPECT_ERROR("[generate]\nmax_tokens = many\n", "t.ini:2", "generate.max_tokens", "'many'",
                 "not an integer");
    EXPECT_ERROR("[generate]\nmax_tokens = 12abc\n", "generate.max_tokens", "'12abc'",
                 "trailing 'abc'");
    EXPECT_ERROR("[generate]\nmax_tokens = 1.5\n", "'1.5'", "not an integer");
    EXPECT_ERROR("[generate]\nmax_tokens =\n", "generate.max_tokens", "not an integer");
    EXPECT_ERROR("[generate]\nmax_tokens = 99999999999999999999999\n", "'99999999999999999999999'",
                 "out of range [0, 2147483647]");
    EXPECT_ERROR("[generate]\nmax_tokens = 2147483648\n", "out of range [0, 2147483647]");
    EXPECT_ERROR("[generate]\nmax_tokens = -1\n", "generate.max_tokens", "'-1'", "out of range");
    EXPECT_ERROR("[runtime]\nprefill_chunk = -1\n", "runtime.prefill_chunk", "out of range [0,");
    EXPECT_ERROR("[bench]\nrepeats = 1001\n", "bench.repeats", "'1001'", "out of range [1, 1000]");
    EXPECT_ERROR("[generate]\nseed = -1\n", "generate.seed", "'-1'", "not an unsigned integer");
    EXPECT_ERROR("[generate]\nseed = 18446744073709551616\n", "generate.seed", "out of range");

    /* Bad floats and ranges with open and closed ends. */
    EXPECT_ERROR("[generate]\ntemperature = warm\n", "t.ini:2", "generate.temperature", "'warm'",
                 "not a number");
    EXPECT_ERROR("[generate]\ntemperature = 0.7x\n", "'0.7x'", "trailing 'x'");
    EXPECT_ERROR("[generate]\ntemperature = nan\n", "'nan'", "not a finite number");
    EXPECT_ERROR("[generate]\ntemperature = inf\n", "'inf'", "not a finite number");
    EXPECT_ERROR("[generate]\ntemperature = 1e999\n", "'1e999'");
    EXPECT_ERROR("[generate]\ntemperature = -0.1\n", "generate.temperature", "'-0.1'",
                 "out of range [0, inf)");
    EXPECT_ERROR("[generate]\ntop_p = 0\n", "generate.top_p", "'0'", "out of range (0, 1]");
    EXPECT_ERROR("[generate]\ntop_p = 1.01\n", "out of range (0, 1]");
    EXPECT_ERROR("[generate]\nmin_p = 1\n", "generate.min_p", "out of range [0, 1)");
    EXPECT_ERROR("[generate]\nrepetition_penalty = 0\n", "out of range (0, inf)");

    /* Bad enums list the allowed values. */
    EXPECT_ERROR("[runtime]\ndevice = gpu\n", "t.ini:2", "runtime.device", "'gpu'",
                 "not one of auto, cpu, cuda, cuda:N");
    EXPECT_ERROR("[runtime]\ndevice = cuda:\n", "runtime.device", "'cuda:'", "cuda:N");
    EXPECT_ERROR("[runtime]\ndevice = cuda:1x\n", "runtime.device", "'cuda:1x'");
    CHECK(load_text("c.ini", "[runtime]\ndevice = cuda:1\n", NULL, 0) == 0, "%s", orin_error());
    CHECK(!strcmp(cfg.runtime.device, "cuda:1"));
    EXPECT_ERROR("[score]\npath = both\n", "score.path", "'both'", "not one of prefill, decode");
    EXPECT_ERROR("[model]\nquant = int4\n", "model.quant", "'int4'", "not one of none, int8");
    EXPECT_ERROR("[model]\ndtype = f64\n", "model.dtype", "'f64'", "f32, f16, bf16");
    EXPECT_ERROR("[model]\ndtype = i8\n", "model.dtype", "'i8'", "not a compute dtype");

    /* Escapes: only in prompt/system, unknown ones are errors. */
    EXPECT_ERROR("[generate]\nprompt = a\\qb\n", "generate.prompt", "unknown escape '\\q'");
    EXPECT_ERROR("[generate]\nsystem = trailing\\\n", "generate.system", "lone '\\'");
    CHECK(load_text("e.ini", "[plugins]\nload = a\\b\n", NULL, 0) == 0, "%s", orin_error());
    EXPECT_ERROR("[plugins]\nload = /abs/x.so\n", "plugins.load", "is a path");
    EXPECT_ERROR("[plugins]\nload = a.so,,b.so\n", "plugins.load", "empty name");

    /* A key twice in one file is an error naming both lines. */
    EXPECT_ERROR("[generate]\ntop_k = 1\n[model]\ndtype = f16\n[generate]\ntop_k = 2\n", "t.ini:6",
                 "generate.top_k", "'2'", "set twice", "line 2");

    /* Strings too long for their field are errors, not truncations. */
    char long_ini[300];
    memset(long_ini, 0, sizeof long_ini);
    strcpy(long_ini, "[attention]\nbackend = ");
    memset(long_ini + strlen(long_ini), 'x', 70);
    strcat(long_ini, "\n");
    EXPECT_ERROR(long_ini, "t.ini:2", "attention.backend", "too long (70 bytes; at most 63)");
    CHECK(!has(orin_error(), "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
          "a long value is shortened in the message: %s", orin_error());

    /* A missing or unreadable file. */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/does-not-exist.ini", tmp);
    CHECK(orin_config_load(&cfg, path, NULL, 0) == -1);
    CHECK(has(orin_error(), "does-not-exist.ini") && has(orin_error(), "No such file"), "%s",
          orin_error());
    CHECK(orin_config_load(&cfg, tmp, NULL, 0) == -1, "a folder is not an INI file");
    CHECK(has(orin_error(), tmp), "%s", orin_error());

    /* Errors are one line. */
    EXPECT_ERROR("[generate]\nprompt = a\\qb\n", "generate.prompt");
    CHECK(!strchr(orin_error(), '\n'), "%s", orin_error());
}

static void test_long_lines(void)
{
    /* A 4000-byte prompt fits (inih's default line buffer is 200 bytes). */
    size_t n = 4000;
    char *ini = malloc(n + 64);
    strcpy(ini, "[generate]\nprompt = ");
    size_t at = strlen(ini);
    for (size_t i = 0; i < n; i++)
        ini[at + i] = (char)('a' + i % 26);
    strcpy(ini + at + n, "\nmax_tokens = 3\n");
    CHECK(load_text("long.ini", ini, NULL, 0) == 0, "%s", orin_error());
    CHECK(strlen(cfg.generate.prompt) == n, "prompt of %zu bytes", strlen(cfg.generate.prompt));
    CHECK(cfg.generate.max_tokens == 3, "the line after a long one is still read");
    free(ini);

    /* One byte over the field: an error. */
    n = ORIN_CONFIG_MAX_STR;
    ini = malloc(n + 64);
    strcpy(ini, "[generate]\nsystem = ");
    at = strlen(ini);
    memset(ini + at, 's', n);
    strcpy(ini + at + n, "\n");
    EXPECT_ERROR(ini, "t.ini:2", "generate.system", "too long (4096 bytes; at most 4095)");
    free(ini);

    /* A line longer than any buffer: an error, never split into two lines. */
    n = 3 * ORIN_CONFIG_MAX_STR;
    ini = malloc(n + 64);
    strcpy(ini, "[generate]\nsystem = ");
    at = strlen(ini);
    memset(ini + at, 's', n);
    strcpy(ini + at + n, "\n");
    EXPECT_ERROR(ini, "t.ini:2");
    CHECK(has(orin_error(), "too long"), "%s", orin_error());
    free(ini);
}

static void test_overrides(void)
{
    /* --set applies after the file, in order, last wins. */
    const char *ov[] = {"generate.top_k=5", "generate.top_k = 6", " runtime.device=cpu ",
                        "generate.prompt=a=b\\nc"};
    CHECK(load_text("o.ini", "[generate]\ntop_k = 1\ntop_p = 0.5\n", ov, 4) == 0, "%s",
          orin_error());
    CHECK(cfg.generate.top_k == 6);
    CHECK(cfg.generate.top_p == 0.5f);
    CHECK(!strcmp(cfg.runtime.device, "cpu"));
    CHECK(!strcmp(cfg.generate.prompt, "a=b\nc"), "prompt '%s'", cfg.generate.prompt);

    /* Errors name --set. */
    EXPECT_SET_ERROR("generate.top_k=abc", "--set", "generate.top_k", "'abc'", "not an integer");
    EXPECT_SET_ERROR("generate.top_kk=3", "--set", "generate.top_kk", "did you mean generate.top_k?");
    EXPECT_SET_ERROR("genrate.top_k=3", "--set", "did you mean [generate]?");
    EXPECT_SET_ERROR("generate.top_k", "--set", "'generate.top_k'", "expected section.key=value");
    EXPECT_SET_ERROR("top_k=3", "--set", "expected section.key=value");
    EXPECT_SET_ERROR(".top_k=3", "--set", "expected section.key=value");
    EXPECT_SET_ERROR("runtime.device=tpu", "--set", "runtime.device", "'tpu'", "auto, cpu, cuda");
    /* The file is checked before the overrides. */
    const char *good[] = {"generate.top_k=5"};
    CHECK(load_text("o.ini", "[generate]\ntop_k = bad\n", good, 1) == -1);
    CHECK(has(orin_error(), "o.ini:2"), "%s", orin_error());

    /* orin_config_set with its own origin. */
    orin_config_defaults(&cfg);
    CHECK(orin_config_set(&cfg, "generate", "seed", "42", "-s") == 0 && cfg.generate.seed == 42);
    CHECK(orin_config_set(&cfg, "generate", "seed", "x", "-s") == -1);
    CHECK(has(orin_error(), "-s: generate.seed = 'x'"), "%s", orin_error());
}

static void test_paths(void)
{
    char sub[PATH_MAX], ini[PATH_MAX], want[PATH_MAX * 2];
    char *real_tmp = realpath(tmp, NULL);
    snprintf(sub, sizeof sub, "%s/etc", tmp);
    CHECK(mkdir(sub, 0755) == 0);
    snprintf(ini, sizeof ini, "%s/etc/orin.ini", tmp);
    const char *text = "[model]\npath = ../models/tiny\n[plugins]\ndir = /opt/orin/plugins\n";
    CHECK(test_write_file(ini, text, strlen(text)) == 0);

    /* Relative to the INI's folder, whatever the current directory. */
    CHECK(chdir("/") == 0);
    CHECK(orin_config_load(&cfg, ini, NULL, 0) == 0, "%s", orin_error());
    snprintf(want, sizeof want, "%s/etc/../models/tiny", real_tmp);
    CHECK(!strcmp(cfg.model.path, want), "model.path '%s', want '%s'", cfg.model.path, want);
    CHECK(!strcmp(cfg.plugins.dir, "/opt/orin/plugins"), "absolute paths stay");
    CHECK(!strcmp(cfg.source, ini));

    /* An INI given by a relative name resolves the same way. */
    CHECK(chdir(tmp) == 0);
    CHECK(orin_config_load(&cfg, "etc/orin.ini", NULL, 0) == 0, "%s", orin_error());
    CHECK(!strcmp(cfg.model.path, want), "model.path '%s', want '%s'", cfg.model.path, want);

    /* --set paths resolve against the current directory. */
    CHECK(chdir(sub) == 0);
    const char *ov[] = {"plugins.dir=my-plugins", "model.path="};
    CHECK(orin_config_load(&cfg, ini, ov, 2) == 0, "%s", orin_error());
    snprintf(want, sizeof want, "%s/etc/my-plugins", real_tmp);
    CHECK(!strcmp(cfg.plugins.dir, want), "plugins.dir '%s', want '%s'", cfg.plugins.dir, want);
    CHECK(!strcmp(cfg.model.path, ""), "an empty path stays empty");
    CHECK(chdir("/") == 0);
    free(real_tmp);
}

static void test_is_set(void)
{
    const char *ov[] = {"bench.repeats=2"};
    CHECK(load_text("s.ini", "[generate]\ntemperature = 0.7\n", ov, 1) == 0, "%s", orin_error());
    CHECK(orin_config_is_set(&cfg, "generate", "temperature"), "set to its default value");
    CHECK(orin_config_is_set(&cfg, "bench", "repeats"));
    CHECK(!orin_config_is_set(&cfg, "generate", "top_p"));
    CHECK(!orin_config_is_set(&cfg, "model", "path"));
    CHECK(!orin_config_is_set(&cfg, "nope", "nope"));
    /* A failed value does not count as set. */
    const char *bad[] = {"generate.top_p=2"};
    CHECK(orin_config_load(&cfg, NULL, bad, 1) == -1);
    CHECK(!orin_config_is_set(&cfg, "generate", "top_p"));
    /* A reload starts over. */
    CHECK(orin_config_load(&cfg, NULL, NULL, 0) == 0);
    CHECK(!orin_config_is_set(&cfg, "bench", "repeats"));
}

/* Every "key = value" line of INI text, as "section.key" names, in order. */
static int key_names(const char *text, char names[][64], int cap)
{
    char section[64] = "";
    int n = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        size_t len = strcspn(line, "\n");
        if (line[0] == '[') {
            snprintf(section, sizeof section, "%.*s", (int)strcspn(line + 1, "]"), line + 1);
        } else if (line[0] != ';' && line[0] != '#' && memchr(line, '=', len) && n < cap) {
            int klen = (int)strcspn(line, " =");
            snprintf(names[n++], 64, "%s.%.*s", section, klen, line);
        }
    }
    return n;
}

static void test_round_trip(void)
{
    static char text[65536];
    static orin_config first;
    const char *ini = "[generate]\nprompt = semi\\; x \\\\n\\n\\t end\n"
                      "system = sys\ntemperature = 0.123456789\ntop_p = 0.3\nseed = 12345678901234\n"
                      "[score]\npath = decode\n[model]\ndtype = f16\npath = /m\nquant = int8\n"
                      "quant_lm_head = yes\n[generate]\nimage = a.png , /abs/b.png,c.png\n";
    char images[3 * PATH_MAX];
    CHECK(load_text("r.ini", ini, NULL, 0) == 0, "%s", orin_error());
    /* generate.image: each item of the list resolved against the INI's folder. */
    snprintf(images, sizeof images, "%s/a.png, /abs/b.png, %s/c.png", tmp, tmp);
    CHECK(!strcmp(cfg.generate.image, images), "'%s'", cfg.generate.image);
    first = cfg;
    int len = orin_config_write(&cfg, text, sizeof text);
    CHECK(len > 0 && (size_t)len == strlen(text), "%d", len);
    CHECK(load_text("r2.ini", text, NULL, 0) == 0, "%s\n%s", orin_error(), text);
    CHECK(!strcmp(first.generate.prompt, "semi; x \\n\n\t end"), "'%s'", first.generate.prompt);
    CHECK(!strcmp(first.generate.prompt, cfg.generate.prompt), "'%s' vs '%s'",
          first.generate.prompt, cfg.generate.prompt);
    CHECK(first.generate.temperature == cfg.generate.temperature);
    CHECK(first.generate.top_p == cfg.generate.top_p);
    CHECK(first.generate.seed == cfg.generate.seed);
    CHECK(cfg.score.path == ORIN_SCORE_DECODE && cfg.model.dtype == ORIN_F16);
    CHECK(!strcmp(cfg.model.path, "/m"));
    CHECK(cfg.model.quant == ORIN_LOAD_QUANT_INT8 && cfg.model.quant_lm_head);

    CHECK(!strcmp(cfg.generate.image, images), "'%s'", cfg.generate.image);

    /* Every key is written, and the written file sets all 33 of them. */
    char names[64][64];
    int n = key_names(text, names, 64);
    CHECK(n == 33, "%d keys written", n);
    for (int i = 0; i < n; i++) {
        char sec[64], *dot;
        snprintf(sec, sizeof sec, "%s", names[i]);
        dot = strchr(sec, '.');
        *dot = '\0';
        CHECK(orin_config_is_set(&cfg, sec, dot + 1), "%s", names[i]);
    }

    /* Everything but the source file and the set-mask matches. */
    memset(first.source, 0, sizeof first.source);
    memset(cfg.source, 0, sizeof cfg.source);
    memset(first.set_mask, 0, sizeof first.set_mask);
    memset(cfg.set_mask, 0, sizeof cfg.set_mask);
    CHECK(!memcmp(&first, &cfg, sizeof cfg), "round trip changed a value");
    /* Too small a buffer is an error, not a silent cut. */
    char small[64];
    CHECK(orin_config_write(&cfg, small, sizeof small) == -1);
}

/* etc/orin.ini lists every key: the active ones and, as "#key = value" lines,
 * the ones left at their default. With those lines uncommented, the file must
 * load, set every key, and (but for model.path) hold exactly the defaults. */
static void test_orin_ini(void)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/etc/orin.ini", ORIN_SOURCE_DIR);
    CHECK(orin_config_load(&cfg, path, NULL, 0) == 0, "%s", orin_error());
    CHECK(!strcmp(cfg.attention.backend, "fa2") && !strcmp(cfg.runtime.device, "auto") &&
          cfg.model.dtype == ORIN_F32);
    char want[PATH_MAX];
    char *real_want = realpath(ORIN_SOURCE_DIR, NULL);
    snprintf(want, sizeof want, "%s/etc/../tests/data/models/qwen3-tiny", real_want);
    free(real_want);
    CHECK(!strcmp(cfg.model.path, want), "model.path '%s', want '%s'", cfg.model.path, want);
    CHECK(!orin_config_is_set(&cfg, "generate", "temperature"),
          "sampling keys are left to generation_config.json");

    size_t len;
    char *text = test_read_file(path, &len);
    CHECK(text != NULL);
    if (!text)
        return;
    /* Uncomment "#key" lines. */
    char *open = malloc(len + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        bool line_start = i == 0 || text[i - 1] == '\n';
        if (line_start && text[i] == '#' && i + 1 < len &&
            ((text[i + 1] >= 'a' && text[i + 1] <= 'z')))
            continue;
        open[o++] = text[i];
    }
    open[o] = '\0';
    static orin_config defaults;
    orin_config_defaults(&defaults);
    CHECK(load_text("orin-open.ini", open, NULL, 0) == 0, "%s", orin_error());
    static char got[65536], exp[65536];
    orin_config_write(&cfg, got, sizeof got);
    /* Every key is set by the uncommented file. */
    char names[64][64];
    int n = key_names(got, names, 64);
    for (int i = 0; i < n; i++) {
        char sec[64], *dot;
        snprintf(sec, sizeof sec, "%.63s", names[i]); /* a name is at most 63 chars */
        dot = strchr(sec, '.');
        *dot = '\0';
        CHECK(orin_config_is_set(&cfg, sec, dot + 1), "etc/orin.ini lacks %s", names[i]);
    }
    /* And holds the defaults. */
    snprintf(cfg.model.path, sizeof cfg.model.path, "%s", defaults.model.path);
    orin_config_write(&cfg, got, sizeof got);
    orin_config_write(&defaults, exp, sizeof exp);
    CHECK(!strcmp(got, exp), "etc/orin.ini's values differ from the defaults:\n%s\nvs\n%s", got,
          exp);
    free(open);
    free(text);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s GROUP\n", argv[0]);
        return 2;
    }
    tmp = test_tmpdir("config");
    if (!tmp)
        return 2;
    orin_log_set_level(ORIN_LOG_ERROR);
    const char *g = argv[1];
    if (!strcmp(g, "defaults"))
        test_defaults();
    else if (!strcmp(g, "values"))
        test_values();
    else if (!strcmp(g, "errors"))
        test_errors();
    else if (!strcmp(g, "long_lines"))
        test_long_lines();
    else if (!strcmp(g, "overrides"))
        test_overrides();
    else if (!strcmp(g, "paths"))
        test_paths();
    else if (!strcmp(g, "is_set"))
        test_is_set();
    else if (!strcmp(g, "round_trip"))
        test_round_trip();
    else if (!strcmp(g, "orin_ini"))
        test_orin_ini();
    else {
        fprintf(stderr, "unknown group %s\n", g);
        return 2;
    }
    test_tmpdir_remove(tmp);
    return test_finish();
}
