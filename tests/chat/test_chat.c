/* chat.*: the chat template interpreter against transformers.
 *
 *   qwen    every conversation of tests/data/chat/qwen_refs.json (Qwen3 and
 *           Qwen2.5-Instruct templates through apply_chat_template), byte for
 *           byte, through both the message API and the JSON context API
 *   jinja   one template per Jinja feature (jinja_refs.json): same output as
 *           transformers' environment, or an error where jinja raises one
 *   errors  error messages (file:line:col), loading from model folders,
 *           options, bad input
 *   fuzz    mutated templates compile and render or fail cleanly, never crash
 *           (test_chat fuzz [ITERATIONS [SEED]] for longer runs) */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "orin/chat_template.h"
#include "orin/error.h"
#include "test_util.h"

static cJSON *load_json(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ORIN_TEST_DATA, rel);
    char *text = test_read_file(path, NULL);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        return NULL;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

/* Prints where two renderings first differ. */
static void show_diff(const char *name, const char *want, const char *got)
{
    size_t i = 0;
    while (want[i] && want[i] == got[i])
        i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "  %s: first difference at byte %zu\n  want: ...%.80s\n  got:  ...%.80s\n",
            name, i, want + from, got + from);
}

static void check_equal(const char *name, const char *want, const char *got)
{
    bool ok = got && strcmp(want, got) == 0;
    CHECK(ok, "%s: rendering differs", name);
    if (!ok && got)
        show_diff(name, want, got);
}

/* ---- qwen ---- */

static orin_chat_template *templates_get(cJSON *refs, const char *name)
{
    static struct {
        char name[32];
        orin_chat_template *tpl;
    } cache[8];
    for (size_t i = 0; i < 8 && cache[i].tpl; i++)
        if (!strcmp(cache[i].name, name))
            return cache[i].tpl;
    const cJSON *rel = cJSON_GetObjectItem(cJSON_GetObjectItem(refs, "templates"), name);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ORIN_TEST_DATA, rel->valuestring);
    orin_chat_template *tpl = orin_chat_template_from_config(path);
    CHECK(tpl != NULL, "%s: %s", path, orin_error());
    for (size_t i = 0; i < 8; i++) {
        if (!cache[i].tpl) {
            snprintf(cache[i].name, sizeof cache[i].name, "%s", name);
            cache[i].tpl = tpl;
            break;
        }
    }
    return tpl;
}

static const char *str_or_null(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void qwen_case(cJSON *refs, const cJSON *c)
{
    const char *tname = cJSON_GetObjectItem(c, "template")->valuestring;
    char name[256];
    snprintf(name, sizeof name, "%s/%s", tname, cJSON_GetObjectItem(c, "name")->valuestring);
    const char *want = cJSON_GetObjectItem(c, "expected")->valuestring;
    orin_chat_template *tpl = templates_get(refs, tname);
    if (!tpl)
        return;
    char *got = NULL;
    const cJSON *context = cJSON_GetObjectItem(c, "context");
    if (context) {
        char *ctx = cJSON_PrintUnformatted(context);
        CHECK(orin_chat_template_render_json(tpl, ctx, &got) == 0, "%s: %s", name, orin_error());
        check_equal(name, want, got);
        free(got);
        free(ctx);
        return;
    }

    /* The message API. */
    const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
    size_t n = (size_t)cJSON_GetArraySize(msgs);
    orin_chat_message *m = calloc(n, sizeof *m);
    for (size_t i = 0; i < n; i++) {
        const cJSON *item = cJSON_GetArrayItem(msgs, (int)i);
        m[i] = (orin_chat_message){
            .role = str_or_null(item, "role"),
            .content = str_or_null(item, "content"),
            .reasoning_content = str_or_null(item, "reasoning_content"),
        };
    }
    const cJSON *think = cJSON_GetObjectItem(c, "enable_thinking");
    orin_chat_options opt = ORIN_CHAT_OPTIONS_DEFAULT;
    opt.add_generation_prompt = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
    opt.enable_thinking = cJSON_IsBool(think) ? cJSON_IsTrue(think) : -1;
    CHECK(orin_chat_template_render(tpl, m, n, &opt, &got) == 0, "%s: %s", name, orin_error());
    check_equal(name, want, got);
    free(got);
    free(m);

    /* The JSON API with the same conversation. */
    cJSON *ctx = cJSON_CreateObject();
    cJSON_AddItemToObject(ctx, "messages", cJSON_Duplicate(msgs, 1));
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", opt.add_generation_prompt);
    if (cJSON_IsBool(think))
        cJSON_AddBoolToObject(ctx, "enable_thinking", cJSON_IsTrue(think));
    char *text = cJSON_PrintUnformatted(ctx);
    got = NULL;
    CHECK(orin_chat_template_render_json(tpl, text, &got) == 0, "%s (json): %s", name, orin_error());
    check_equal(name, want, got);
    free(got);
    free(text);
    cJSON_Delete(ctx);
}

static void test_qwen(void)
{
    cJSON *refs = load_json("chat/qwen_refs.json");
    CHECK(refs != NULL, "qwen_refs.json");
    if (!refs)
        return;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "cases")) {
        qwen_case(refs, c);
        n++;
    }
    CHECK(n >= 40, "only %d reference conversations", n);
    /* The same template reached through the model folder (tokenizer_config.json
     * of the tiny Qwen2 model, whose template is Qwen2.5-Instruct's). */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/qwen2-tiny", ORIN_TEST_DATA);
    orin_chat_template *tpl = orin_chat_template_open(dir);
    CHECK(tpl != NULL, "open %s: %s", dir, orin_error());
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "cases")) {
        if (strcmp(cJSON_GetObjectItem(c, "template")->valuestring, "qwen2.5") ||
            strcmp(cJSON_GetObjectItem(c, "name")->valuestring, "multi_turn_system"))
            continue;
        orin_chat_message m[6];
        const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
        for (int i = 0; i < 6; i++)
            m[i] = (orin_chat_message){
                .role = str_or_null(cJSON_GetArrayItem(msgs, i), "role"),
                .content = str_or_null(cJSON_GetArrayItem(msgs, i), "content")};
        char *got = NULL;
        CHECK(tpl && orin_chat_template_render(tpl, m, 6, NULL, &got) == 0, "%s", orin_error());
        check_equal("qwen2-tiny folder", cJSON_GetObjectItem(c, "expected")->valuestring, got);
        free(got);
    }
    orin_chat_template_free(tpl);
    for (int i = 0; i < 2; i++)
        orin_chat_template_free(templates_get(refs, i ? "qwen3" : "qwen2.5"));
    cJSON_Delete(refs);
}

/* ---- jinja ---- */

static void test_jinja(void)
{
    cJSON *refs = load_json("chat/jinja_refs.json");
    CHECK(refs != NULL, "jinja_refs.json");
    if (!refs)
        return;
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "cases")) {
        n++;
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *src = cJSON_GetObjectItem(c, "template")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(c, "expected");
        char *ctx = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "context"));
        orin_error_clear();
        orin_chat_template *tpl = orin_chat_template_compile(src, name);
        char *got = NULL;
        int rc = tpl ? orin_chat_template_render_json(tpl, ctx, &got) : -1;
        if (want) {
            CHECK(rc == 0, "%s: %s", name, orin_error());
            if (rc == 0)
                check_equal(name, want->valuestring, got);
        } else {
            CHECK(rc == -1 && got == NULL, "%s: rendered although jinja raises (%s): [%s]", name,
                  cJSON_GetObjectItem(c, "error")->valuestring, got ? got : "");
            /* Every error names the template. */
            CHECK(rc == 0 || strncmp(orin_error(), name, strlen(name)) == 0, "%s: error \"%s\"",
                  name, orin_error());
        }
        free(got);
        free(ctx);
        orin_chat_template_free(tpl);
    }
    CHECK(n >= 100, "only %d feature cases", n);
    cJSON_Delete(refs);
}

/* ---- errors ---- */

/* Compiles (and renders when it compiles) src; expects an error equal to `want`. */
static void expect_error(const char *src, const char *ctx, const char *want)
{
    orin_chat_template *tpl = orin_chat_template_compile(src, "t.jinja");
    char *out = NULL;
    int rc = tpl ? orin_chat_template_render_json(tpl, ctx, &out) : -1;
    CHECK(rc == -1 && !out, "no error for %s", src);
    CHECK(strcmp(orin_error(), want) == 0, "for %s\n  want: %s\n  got:  %s", src, want,
          orin_error());
    free(out);
    orin_chat_template_free(tpl);
}

static char *tmp_file(const char *dir, const char *name, const char *text)
{
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    test_write_file(path, text, strlen(text));
    return path;
}

static void test_errors(void)
{
    /* Positions are line:column of the offending token (1-based). */
    expect_error("line one\n{{ x | bogus }}", "{}", "t.jinja:2:8: no filter named 'bogus'");
    /* Inside an if, Jinja reports unknown filters only when they run. */
    const char *soft = "line one\n{% if x %}\n  {{ x | bogus }}\n{% endif %}";
    expect_error(soft, "{\"x\": 1}", "t.jinja:3:10: no filter named 'bogus'");
    char *out = NULL;
    orin_chat_template *tpl = orin_chat_template_compile(soft, "t.jinja");
    CHECK(tpl && orin_chat_template_render_json(tpl, "{}", &out) == 0 && !strcmp(out, "line one\n"),
          "untaken branch with an unknown filter: %s", tpl ? orin_error() : "no template");
    free(out);
    orin_chat_template_free(tpl);
    expect_error("{{ x is bogus }}", "{}", "t.jinja:1:9: no test named 'bogus'");
    expect_error("a\n\n  {% if true %}never closed", "{}",
                 "t.jinja:3:16: unexpected end of template: missing {% endif %}");
    expect_error("{% for x in y %}", "{}",
                 "t.jinja:1:17: unexpected end of template: missing {% endfor %}");
    expect_error("ok\n  {% endfor %}", "{}",
                 "t.jinja:2:6: unexpected 'endfor': no open block to close");
    expect_error("{% frob %}", "{}", "t.jinja:1:4: unknown tag 'frob'");
    expect_error("{{ 'abc }}", "{}", "t.jinja:1:4: unterminated string literal");
    expect_error("{{ (1, 2] }}", "{}", "t.jinja:1:9: unexpected ']', expected ')'");
    expect_error("x {{ 1 +", "{}", "t.jinja:1:3: unexpected end of template: '{{' is not closed");
    expect_error("{# open", "{}", "t.jinja:1:1: missing end of comment tag");
    expect_error("{{ }}", "{}", "t.jinja:1:4: expected an expression, got end of print statement");
    expect_error("{% include 'x' %}", "{}", "t.jinja:1:4: 'include' tags are not supported");
    expect_error("{% break %}", "{}", "t.jinja:1:4: 'break' outside a for loop");
    expect_error("{% for x in [1] recursive %}{% endfor %}", "{}",
                 "t.jinja:1:17: recursive for loops are not supported");
    /* Render-time errors point at the operator, call or filter. */
    expect_error("{{ raise_exception('No tools, please.') }}", "{}",
                 "t.jinja:1:19: template error: No tools, please.");
    expect_error("\n{{ 1 + x }}", "{}", "t.jinja:2:6: 'x' is undefined");
    expect_error("{{ m.content.strip() }}", "{\"m\": {\"role\": \"user\"}}",
                 "t.jinja:1:14: 'dict object' has no attribute 'content'");
    expect_error("{{ 'é' + 1 }}", "{}",
                 "t.jinja:1:8: unsupported operand type(s) for +: 'str' and 'int'");
    expect_error("héé\n  ü{{ 1 // 0 }}", "{}", "t.jinja:2:9: integer division or modulo by zero");
    expect_error("{{ 'a' * 100000000 }}", "{}", "t.jinja:1:8: string repetition result is too large");
    /* An empty string repeated any number of times is empty, at once. */
    tpl = orin_chat_template_compile("[{{ '' * 9000000000000000000 }}{{ ('ab' * 3) | length }}]",
                                     "t.jinja");
    out = NULL;
    CHECK(tpl && orin_chat_template_render_json(tpl, "{}", &out) == 0 && !strcmp(out, "[6]"),
          "empty repetition: %s", out ? out : orin_error());
    free(out);
    orin_chat_template_free(tpl);
    expect_error("{{ range(1000000) | length }}", "{}",
                 "t.jinja:1:9: range too big, the sandbox allows at most 100000 items");
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}",
                 "t.jinja:1:21: macro 'f': calls nest too deeply");
    /* Loops that multiply (10^15 iterations, empty bodies) and macros that
     * branch (2^100 calls) end at the step budget, not at the end of time. */
    expect_error("{% for a in range(100000) %}{% for b in range(100000) %}"
                 "{% for c in range(100000) %}{% endfor %}{% endfor %}{% endfor %}", "{}",
                 "t.jinja:1:60: the template ran more than 250000 steps (statements and loop "
                 "iterations); a loop without end?");
    expect_error("{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}"
                 "{{ m(100) }}", "{}",
                 "t.jinja:1:20: the template ran more than 250000 steps (statements and loop "
                 "iterations); a loop without end?");
    /* Deep expressions inside recursive macros: each level alone is allowed,
     * their product would overflow the C stack. */
    char rec[1024];
    size_t r = (size_t)sprintf(rec, "{%% macro m(n) %%}{{ ");
    for (int i = 0; i < 150; i++)
        rec[r++] = '-';
    r += (size_t)sprintf(rec + r, "m(n + 1) }}{%% endmacro %%}{{ m(0) }}");
    expect_error(rec, "{}", "t.jinja:1:41: expressions and blocks nest more than 2000 deep "
                            "(across macro calls)");
    /* Jinja can render a NUL; a C string cannot carry one. */
    expect_error("{{ 'a\\0b' }}", "{}", "t.jinja: rendered text contains a NUL character");
    expect_error("{{ x }}", "[1]", "t.jinja: context is not a JSON object");
    expect_error("{{ x }}", "{\"x\": ", "t.jinja: context is not a JSON object");

    /* Deep nesting is an error, not a stack overflow. */
    char deep[4096];
    size_t k = 0;
    k += (size_t)sprintf(deep, "{{ ");
    for (int i = 0; i < 1000; i++)
        deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++)
        deep[k++] = ')';
    strcpy(deep + k, " }}");
    tpl = orin_chat_template_compile(deep, "deep");
    CHECK(!tpl && strstr(orin_error(), "nest too deeply"), "deep: %s", orin_error());

    /* Bad input to the API. */
    tpl = orin_chat_template_compile("{{ messages[0].content }}", NULL);
    CHECK(tpl != NULL, "%s", orin_error());
    out = (char *)1;
    orin_chat_message bad_utf8 = {.role = "user", .content = "a\xff"};
    CHECK(orin_chat_template_render(tpl, &bad_utf8, 1, NULL, &out) == -1 && out == NULL,
          "invalid UTF-8 accepted");
    CHECK(!strcmp(orin_error(), "chat template: message 0: content is not valid UTF-8"), "%s",
          orin_error());
    CHECK(orin_chat_template_render(tpl, &bad_utf8, 0, NULL, &out) == -1, "empty conversation");
    CHECK(strstr(orin_error(), "empty conversation") != NULL, "%s", orin_error());
    orin_chat_message no_role = {.content = "x"};
    CHECK(orin_chat_template_render(tpl, &no_role, 1, NULL, &out) == -1, "no role");
    CHECK(orin_chat_template_compile("\xc3(", "bin") == NULL &&
              !strcmp(orin_error(), "bin: template is not valid UTF-8"),
          "%s", orin_error());
    CHECK(orin_chat_template_render(NULL, &no_role, 1, NULL, &out) == -1, "NULL template");
    orin_chat_template_free(NULL);
    orin_chat_template_free(tpl);

    /* NULL members are absent keys; options reach the template. */
    const char *probe =
        "{{ messages[0] | tojson }}|{{ add_generation_prompt }}|{{ enable_thinking is defined }}"
        "{{ enable_thinking }}|{{ bos_token is defined }}|{{ eos_token }}|{{ pad_token }}";
    tpl = orin_chat_template_compile(probe, NULL);
    orin_chat_message m = {.role = "assistant", .content = NULL, .reasoning_content = "r"};
    orin_chat_options opt = {.add_generation_prompt = false, .enable_thinking = 0,
                             .eos_token = "</s>"};
    CHECK(orin_chat_template_render(tpl, &m, 1, &opt, &out) == 0, "%s", orin_error());
    check_equal("options",
                "{\"thinking\": \"r\", \"role\": \"assistant\", \"reasoning_content\": \"r\"}"
                "|False|TrueFalse|False|</s>|",
                out);
    free(out);
    opt = (orin_chat_options){.add_generation_prompt = true, .enable_thinking = -1,
                              .bos_token = "<s>"};
    CHECK(orin_chat_template_render(tpl, &m, 1, &opt, &out) == 0, "%s", orin_error());
    CHECK(out && strstr(out, "|True|False|True|") != NULL, "options 2: %s", out);
    free(out);
    orin_chat_template_free(tpl);

    /* Model folders: chat_template.jinja wins over tokenizer_config.json, whose
     * special tokens (string or {"content": ...}) still reach the template. */
    char *dir = test_tmpdir("chat");
    char *cfg = tmp_file(dir, "tokenizer_config.json",
                         "{\"chat_template\": \"config {{ eos_token }}\", \"eos_token\": "
                         "{\"content\": \"<|im_end|>\", \"special\": true}, \"bos_token\": null, "
                         "\"pad_token\": \"<pad>\"}");
    tpl = orin_chat_template_open(dir);
    CHECK(tpl && orin_chat_template_render(tpl, &no_role + 0, 0, NULL, &out) == -1, "open 1");
    orin_chat_message hi = {.role = "user", .content = "hi"};
    CHECK(tpl && orin_chat_template_render(tpl, &hi, 1, NULL, &out) == 0, "%s", orin_error());
    check_equal("config template", "config <|im_end|>", tpl ? out : "");
    if (tpl)
        free(out);
    orin_chat_template_free(tpl);
    char *jinja = tmp_file(dir, "chat_template.jinja", "jinja {{ pad_token }} {{ bos_token }}\n");
    tpl = orin_chat_template_open(dir);
    CHECK(tpl && orin_chat_template_render(tpl, &hi, 1, NULL, &out) == 0, "%s", orin_error());
    check_equal("jinja file", "jinja <pad> ", tpl ? out : "");
    if (tpl)
        free(out);
    orin_chat_template_free(tpl);
    /* A list of named templates: "default" is used. */
    free(tmp_file(dir, "tokenizer_config.json",
             "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
             "{\"name\": \"default\", \"template\": \"D\"}]}"));
    remove(jinja);
    tpl = orin_chat_template_open(dir);
    CHECK(tpl && orin_chat_template_render(tpl, &hi, 1, NULL, &out) == 0, "%s", orin_error());
    check_equal("named templates", "D", tpl ? out : "");
    if (tpl)
        free(out);
    orin_chat_template_free(tpl);
    free(tmp_file(dir, "tokenizer_config.json", "{\"eos_token\": \"x\"}"));
    tpl = orin_chat_template_open(dir);
    CHECK(!tpl && strstr(orin_error(), "tokenizer_config.json: no chat_template"), "%s",
          orin_error());
    free(tmp_file(dir, "tokenizer_config.json", "{not json"));
    tpl = orin_chat_template_open(dir);
    CHECK(!tpl && strstr(orin_error(), "tokenizer_config.json: not a JSON object"), "%s",
          orin_error());
    free(tmp_file(dir, "tokenizer_config.json", "{\"chat_template\": \"{% if %}\"}"));
    tpl = orin_chat_template_open(dir);
    CHECK(!tpl && strstr(orin_error(), "tokenizer_config.json:1:7: expected an expression"), "%s",
          orin_error());
    remove(cfg);
    tpl = orin_chat_template_open(dir);
    CHECK(!tpl && strstr(orin_error(), "No such file or directory"), "%s", orin_error());
    remove(dir);
    free(cfg);
    free(jinja);
    free(dir);

    /* orin_chat_render: the one-shot form. */
    orin_chat_message conv[2] = {{.role = "user", .content = "a"}, {.role = "assistant", .content = "b"}};
    CHECK(orin_chat_render("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}", conv,
                           2, NULL, &out) == 0, "%s", orin_error());
    check_equal("one-shot", "user:a;assistant:b;", out);
    free(out);
    CHECK(orin_chat_render("{% if %}", conv, 2, NULL, &out) == -1 && !out, "one-shot error");
}

/* ---- fuzz ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_fuzz(int iterations, uint64_t seed)
{
    rng_state ^= seed * 0x2545F4914F6CDD1Dull;
    cJSON *refs = load_json("chat/qwen_refs.json");
    cJSON *jrefs = load_json("chat/jinja_refs.json");
    CHECK(refs && jrefs, "refs");
    if (!refs || !jrefs)
        return;
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer/qwen3/tokenizer_config.json", ORIN_TEST_DATA);
    char *text = test_read_file(path, NULL);
    cJSON *cfg = cJSON_Parse(text);
    free(text);
    const char *seeds[64];
    size_t nseeds = 0;
    seeds[nseeds++] = cJSON_GetObjectItem(cfg, "chat_template")->valuestring;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(jrefs, "cases")) {
        if (nseeds < 64 && rnd() % 3 == 0)
            seeds[nseeds++] = cJSON_GetObjectItem(c, "template")->valuestring;
    }
    const char *ctx =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", "
        "\"content\": \"u {{ }}\"}, {\"role\": \"assistant\", \"content\": \"<think>\\nr\\n</think>\\n\\na\"}, "
        "{\"role\": \"user\", \"content\": \"q\"}], \"add_generation_prompt\": true, \"b\": [1, \"x\"], "
        "\"c\": {\"k\": null}, \"s\": \"str\"}";
    static const char alphabet[] = "{}%#-+()[]'\".,|~:=<>!*/ \n\tabcxyz01_9\\é";
    int compiled = 0, rendered = 0;
    for (int it = 0; it < iterations; it++) {
        const char *seed = seeds[rnd() % nseeds];
        size_t len = strlen(seed);
        char *buf = malloc(len + 64);
        memcpy(buf, seed, len + 1);
        int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits; e++) {
            size_t n = strlen(buf), at = n ? rnd() % n : 0;
            char ch = alphabet[rnd() % (sizeof alphabet - 1)];
            switch (rnd() % 3) {
            case 0: /* delete a run */
                if (n) {
                    size_t k = 1 + rnd() % 4;
                    if (at + k > n)
                        k = n - at;
                    memmove(buf + at, buf + at + k, n - at - k + 1);
                }
                break;
            case 1: /* insert */
                if (n + 2 < len + 64) {
                    memmove(buf + at + 1, buf + at, n - at + 1);
                    buf[at] = ch;
                }
                break;
            default: /* replace */
                if (n)
                    buf[at] = ch;
                break;
            }
        }
        orin_chat_template *tpl = orin_chat_template_compile(buf, "fuzz");
        if (tpl) {
            compiled++;
            char *out = NULL;
            int rc = orin_chat_template_render_json(tpl, ctx, &out);
            if (rc == 0) {
                rendered++;
                CHECK(out != NULL, "rendered without output");
            } else {
                CHECK(out == NULL && strncmp(orin_error(), "fuzz", 4) == 0, "render error: %s",
                      orin_error());
            }
            free(out);
            orin_chat_template_free(tpl);
        } else {
            CHECK(strncmp(orin_error(), "fuzz", 4) == 0, "compile error: %s", orin_error());
        }
        free(buf);
    }
    printf("fuzz: %d mutations, %d compiled, %d rendered\n", iterations, compiled, rendered);
    CHECK(compiled > iterations / 10 && rendered > iterations / 20, "mutations too destructive");
    cJSON_Delete(cfg);
    cJSON_Delete(refs);
    cJSON_Delete(jrefs);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    bool all = !strcmp(mode, "all");
    if (all || !strcmp(mode, "qwen"))
        test_qwen();
    if (all || !strcmp(mode, "jinja"))
        test_jinja();
    if (all || !strcmp(mode, "errors"))
        test_errors();
    if (all || !strcmp(mode, "fuzz"))
        test_fuzz(argc > 2 ? atoi(argv[2]) : 3000, argc > 3 ? strtoull(argv[3], NULL, 0) : 0);
    return test_finish();
}
