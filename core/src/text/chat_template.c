/* Chat templates: the public API (orin/chat_template.h): loading from a model
 * folder, compiling, and building the context transformers' apply_chat_template
 * gives the template. */
#include "chat_template_impl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orin/error.h"
#include "orin/file.h"

/* The special tokens transformers passes to templates (special_tokens_map). */
static const char *const special_token_names[] = {
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
};
#define N_SPECIAL (sizeof special_token_names / sizeof special_token_names[0])

struct orin_chat_template {
    struct ct_arena arena;
    const char *name;
    const char *src; /* normalised source, for error positions */
    size_t src_len;
    struct ct_node *body;
    char *special[N_SPECIAL]; /* malloc'd; NULL where the config has none */
};

/* ---- compile ---- */

/* Parses into tpl->arena. Inputs come through `job` so that nothing the
 * function uses after the setjmp lives only in a register. */
struct compile_job {
    orin_chat_template *tpl;
    const char *name, *source;
    size_t len;
};

static bool parse_template(const struct compile_job *job)
{
    orin_chat_template *tpl = job->tpl;
    struct ct_env env = {.name = job->name, .arena = &tpl->arena};
    if (setjmp(env.jmp))
        return false;
    tpl->name = ct_strndup(&env, job->name, strlen(job->name));
    tpl->body = ct_parse(&env, job->source, job->len);
    tpl->src = env.src;
    tpl->src_len = env.src_len;
    return true;
}

orin_chat_template *orin_chat_template_compile(const char *source, const char *name)
{
    if (!name)
        name = "chat template";
    if (!source) {
        orin_error_set("%s: no template source", name);
        return NULL;
    }
    size_t len = strlen(source);
    if (!ct_utf8_valid(source, len)) {
        orin_error_set("%s: template is not valid UTF-8", name);
        return NULL;
    }
    struct compile_job job = {.tpl = calloc(1, sizeof *job.tpl), .name = name,
                              .source = source, .len = len};
    if (!job.tpl) {
        orin_error_set("%s: out of memory", name);
        return NULL;
    }
    if (!parse_template(&job)) {
        ct_arena_free(&job.tpl->arena);
        free(job.tpl);
        return NULL;
    }
    return job.tpl;
}

void orin_chat_template_free(orin_chat_template *tpl)
{
    if (!tpl)
        return;
    for (size_t i = 0; i < N_SPECIAL; i++)
        free(tpl->special[i]);
    ct_arena_free(&tpl->arena);
    free(tpl);
}

/* ---- loading ---- */

/* tokenizer_config.json and chat_template.jinja are kilobytes. */
#define CT_MAX_FILE_BYTES (64u << 20)

/* Chat templates are text: a NUL inside one cannot be rendered into a C string. */
static char *read_file(const char *path, bool *missing)
{
    size_t len;
    char *buf = orin_read_file(path, CT_MAX_FILE_BYTES, &len);
    *missing = !buf && errno == ENOENT;
    if (buf && strlen(buf) != len) {
        orin_error_set("%s: contains a NUL byte", path);
        free(buf);
        return NULL;
    }
    return buf;
}

/* A special token in tokenizer_config.json: "<s>" or {"content": "<s>", ...}. */
static const char *token_text(const cJSON *item)
{
    if (cJSON_IsString(item))
        return item->valuestring;
    if (cJSON_IsObject(item)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(item, "content");
        if (cJSON_IsString(c))
            return c->valuestring;
    }
    return NULL;
}

/* The "chat_template" value: a string, or [{"name": ..., "template": ...}]. */
static const char *config_template(const cJSON *root)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    if (cJSON_IsString(t))
        return t->valuestring;
    if (!cJSON_IsArray(t))
        return NULL;
    const cJSON *item;
    cJSON_ArrayForEach(item, t) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(item, "template");
        if (cJSON_IsString(name) && cJSON_IsString(src) && !strcmp(name->valuestring, "default"))
            return src->valuestring;
    }
    return NULL;
}

/* Loads tokenizer_config.json; compiles `jinja_src` when given, else the
 * config's own template. */
static orin_chat_template *load(const char *config_path, const char *jinja_src,
                                const char *jinja_name, bool config_optional)
{
    orin_chat_template *tpl = NULL;
    cJSON *root = NULL;
    bool missing;
    char *text = read_file(config_path, &missing);
    if (!text && !(missing && config_optional))
        return NULL;
    if (text) {
        root = cJSON_Parse(text);
        if (!root || !cJSON_IsObject(root)) {
            orin_error_set("%s: not a JSON object", config_path);
            goto out;
        }
    }
    if (jinja_src) {
        tpl = orin_chat_template_compile(jinja_src, jinja_name);
    } else {
        const char *src = config_template(root);
        if (!src) {
            orin_error_set("%s: no chat_template", config_path);
            goto out;
        }
        tpl = orin_chat_template_compile(src, config_path);
    }
    if (!tpl || !root)
        goto out;
    for (size_t i = 0; i < N_SPECIAL; i++) {
        const char *tok = token_text(cJSON_GetObjectItemCaseSensitive(root, special_token_names[i]));
        if (!tok)
            continue;
        if (!ct_utf8_valid(tok, strlen(tok)) || !(tpl->special[i] = strdup(tok))) {
            orin_error_set("%s: bad %s", config_path, special_token_names[i]);
            orin_chat_template_free(tpl);
            tpl = NULL;
            goto out;
        }
    }
out:
    cJSON_Delete(root);
    free(text);
    return tpl;
}

orin_chat_template *orin_chat_template_from_config(const char *tokenizer_config_path)
{
    return load(tokenizer_config_path, NULL, NULL, false);
}

orin_chat_template *orin_chat_template_open(const char *model_dir)
{
    char config[4096], jinja[4096];
    if (snprintf(config, sizeof config, "%s/tokenizer_config.json", model_dir) >= (int)sizeof config ||
        snprintf(jinja, sizeof jinja, "%s/chat_template.jinja", model_dir) >= (int)sizeof jinja) {
        orin_error_set("%s: path too long", model_dir);
        return NULL;
    }
    bool missing;
    char *src = read_file(jinja, &missing);
    if (!src && !missing)
        return NULL;
    orin_chat_template *tpl = load(config, src, jinja, src != NULL);
    free(src);
    return tpl;
}

/* ---- the context ---- */

/* What apply_chat_template does to each message: keys whose value is None are
 * dropped, and reasoning given as reasoning_content, thinking or reasoning is
 * visible as "thinking" (first) and "reasoning_content". */
static ct_val *normalize_message(struct ct_env *env, ct_val *msg)
{
    if (msg->kind != CT_DICT)
        return msg;
    static const char *const reasoning_keys[] = {"reasoning_content", "thinking", "reasoning"};
    ct_val *reasoning = NULL;
    for (size_t k = 0; k < 3 && !reasoning; k++) {
        ct_val *v = ct_dict_get(msg->u.dict, reasoning_keys[k], strlen(reasoning_keys[k]));
        if (v && v->kind != CT_NONE)
            reasoning = v;
    }
    ct_val *out = ct_dict(env);
    if (reasoning)
        ct_dict_set(env, out->u.dict, ct_cstr(env, "thinking"), reasoning);
    for (size_t i = 0; i < msg->u.dict->n; i++)
        if (msg->u.dict->vals[i]->kind != CT_NONE)
            ct_dict_set(env, out->u.dict, msg->u.dict->keys[i], msg->u.dict->vals[i]);
    if (reasoning)
        ct_dict_set(env, out->u.dict, ct_cstr(env, "reasoning_content"), reasoning);
    return out;
}

static ct_val *checked_str(struct ct_env *env, const char *s, const char *what, size_t index)
{
    size_t len = strlen(s);
    if (!ct_utf8_valid(s, len))
        ct_fail(env, CT_NOPOS, "message %zu: %s is not valid UTF-8", index, what);
    return ct_str(env, s, len);
}

/* A content list: [{"type": "text", "text": ...} | {"type": "image"}, ...]. */
static ct_val *content_list(struct ct_env *env, const orin_chat_message *m, size_t index)
{
    ct_val *list = ct_list(env, m->n_parts, false);
    for (size_t k = 0; k < m->n_parts; k++) {
        const orin_chat_part *part = &m->parts[k];
        ct_val *d = ct_dict(env);
        switch (part->type) {
        case ORIN_CHAT_PART_TEXT:
            if (!part->text)
                ct_fail(env, CT_NOPOS, "message %zu: part %zu: a text part without text", index,
                        k);
            ct_dict_set(env, d->u.dict, ct_cstr(env, "type"), ct_cstr(env, "text"));
            ct_dict_set(env, d->u.dict, ct_cstr(env, "text"),
                        checked_str(env, part->text, "text", index));
            break;
        case ORIN_CHAT_PART_IMAGE:
            ct_dict_set(env, d->u.dict, ct_cstr(env, "type"), ct_cstr(env, "image"));
            break;
        default:
            ct_fail(env, CT_NOPOS, "message %zu: part %zu: unknown type %d", index, k,
                    (int)part->type);
        }
        list->u.list.items[k] = d;
    }
    return list;
}

/* The special tokens of the config, unless `skip` (a JSON context) sets them. */
static void set_special_tokens(struct ct_render *r, const orin_chat_template *tpl,
                               const cJSON *skip, const orin_chat_options *opt)
{
    for (size_t i = 0; i < N_SPECIAL; i++) {
        const char *tok = tpl->special[i];
        if (opt && i == 0 && opt->bos_token)
            tok = opt->bos_token;
        if (opt && i == 1 && opt->eos_token)
            tok = opt->eos_token;
        if (!tok || (skip && cJSON_GetObjectItemCaseSensitive(skip, special_token_names[i])))
            continue;
        if (!ct_utf8_valid(tok, strlen(tok)))
            ct_fail(&r->env, CT_NOPOS, "%s is not valid UTF-8", special_token_names[i]);
        ct_set_global(r, special_token_names[i], ct_cstr(&r->env, tok));
    }
}

static ct_val *from_json(struct ct_render *r, const cJSON *j, int depth)
{
    struct ct_env *env = &r->env;
    if (depth > CT_MAX_DEPTH)
        ct_fail(env, CT_NOPOS, "context JSON nests too deeply");
    if (cJSON_IsNull(j))
        return &ct_none;
    if (cJSON_IsBool(j))
        return ct_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0)
            return ct_int(env, (int64_t)d);
        return ct_float(env, d);
    }
    if (cJSON_IsString(j)) {
        size_t len = strlen(j->valuestring);
        if (!ct_utf8_valid(j->valuestring, len))
            ct_fail(env, CT_NOPOS, "context JSON: string is not valid UTF-8");
        return ct_str(env, j->valuestring, len);
    }
    if (cJSON_IsArray(j)) {
        struct ct_vec v = {0};
        const cJSON *item;
        cJSON_ArrayForEach(item, j)
            ct_vec_push(env, &v, from_json(r, item, depth + 1));
        return ct_vec_finish(env, &v, false);
    }
    if (cJSON_IsObject(j)) {
        ct_val *d = ct_dict(env);
        const cJSON *item;
        cJSON_ArrayForEach(item, j) {
            size_t len = strlen(item->string);
            if (!ct_utf8_valid(item->string, len))
                ct_fail(env, CT_NOPOS, "context JSON: key is not valid UTF-8");
            ct_dict_set(env, d->u.dict, ct_str(env, item->string, len), from_json(r, item, depth + 1));
        }
        return d;
    }
    ct_fail(env, CT_NOPOS, "context JSON: unsupported value");
}

/* ---- render ---- */

struct render_input {
    const orin_chat_message *msgs;
    size_t n;
    const orin_chat_options *opt;
    const cJSON *json;
};

static void build_context(struct ct_render *r, const orin_chat_template *tpl,
                          const struct render_input *in)
{
    struct ct_env *env = &r->env;
    ct_set_global(r, "tools", &ct_none);
    ct_set_global(r, "documents", &ct_none);
    if (in->json) {
        ct_set_global(r, "messages", ct_list(env, 0, false));
        ct_set_global(r, "add_generation_prompt", &ct_false);
        set_special_tokens(r, tpl, in->json, NULL);
        const cJSON *item;
        cJSON_ArrayForEach(item, in->json) {
            ct_val *v = from_json(r, item, 1);
            if (!strcmp(item->string, "messages") && v->kind == CT_LIST)
                for (size_t i = 0; i < v->u.list.n; i++)
                    v->u.list.items[i] = normalize_message(env, v->u.list.items[i]);
            ct_set_global(r, item->string, v);
        }
        return;
    }
    ct_val *msgs = ct_list(env, in->n, false);
    for (size_t i = 0; i < in->n; i++) {
        const orin_chat_message *m = &in->msgs[i];
        ct_val *d = ct_dict(env);
        if (m->role)
            ct_dict_set(env, d->u.dict, ct_cstr(env, "role"), checked_str(env, m->role, "role", i));
        if (m->content)
            ct_dict_set(env, d->u.dict, ct_cstr(env, "content"),
                        checked_str(env, m->content, "content", i));
        else if (m->parts)
            ct_dict_set(env, d->u.dict, ct_cstr(env, "content"), content_list(env, m, i));
        if (m->reasoning_content)
            ct_dict_set(env, d->u.dict, ct_cstr(env, "reasoning_content"),
                        checked_str(env, m->reasoning_content, "reasoning_content", i));
        msgs->u.list.items[i] = normalize_message(env, d);
    }
    ct_set_global(r, "messages", msgs);
    ct_set_global(r, "add_generation_prompt", ct_bool(in->opt->add_generation_prompt));
    if (in->opt->enable_thinking >= 0)
        ct_set_global(r, "enable_thinking", ct_bool(in->opt->enable_thinking != 0));
    set_special_tokens(r, tpl, NULL, in->opt);
}

static int render(const orin_chat_template *tpl, const struct render_input *in, char **out)
{
    /* The arena is on the heap: an automatic object changed between setjmp
     * and longjmp would have an indeterminate value after the jump. */
    struct ct_arena *arena = calloc(1, sizeof *arena);
    *out = NULL;
    if (!arena)
        return orin_error_set("%s: out of memory", tpl->name);
    struct ct_buf text = {.arena = true};
    struct ct_render r = {
        .env = {.src = tpl->src, .src_len = tpl->src_len, .name = tpl->name, .arena = arena},
        .out = &text,
    };
    int rc = -1;
    if (setjmp(r.env.jmp))
        goto done;
    build_context(&r, tpl, in);
    ct_render_tree(&r, tpl->body);
    if (text.len && memchr(text.data, '\0', text.len)) {
        /* Only a template's own "\0" escape can do this; a C string cannot
         * carry it, so say so rather than truncate. */
        orin_error_set("%s: rendered text contains a NUL character", tpl->name);
        goto done;
    }
    char *s = malloc(text.len + 1);
    if (!s) {
        orin_error_set("%s: out of memory", tpl->name);
        goto done;
    }
    if (text.len)
        memcpy(s, text.data, text.len);
    s[text.len] = '\0';
    *out = s;
    rc = 0;
done:
    ct_arena_free(arena);
    free(arena);
    return rc;
}

int orin_chat_template_render(const orin_chat_template *tpl, const orin_chat_message *msgs,
                              size_t n, const orin_chat_options *opt, char **out)
{
    orin_chat_options defaults = ORIN_CHAT_OPTIONS_DEFAULT;
    *out = NULL;
    if (!tpl)
        return orin_error_set("chat template: none loaded");
    if (!n)
        return orin_error_set("%s: cannot render an empty conversation", tpl->name);
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role)
            return orin_error_set("%s: message %zu has no role", tpl->name, i);
    for (size_t i = 0; i < n; i++)
        if (msgs[i].content && msgs[i].parts)
            return orin_error_set("%s: message %zu has both content and parts", tpl->name, i);
    struct render_input in = {.msgs = msgs, .n = n, .opt = opt ? opt : &defaults};
    return render(tpl, &in, out);
}

int orin_chat_template_render_json(const orin_chat_template *tpl, const char *context_json,
                                   char **out)
{
    *out = NULL;
    if (!tpl)
        return orin_error_set("chat template: none loaded");
    cJSON *root = cJSON_Parse(context_json ? context_json : "{}");
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return orin_error_set("%s: context is not a JSON object", tpl->name);
    }
    struct render_input in = {.json = root};
    int rc = render(tpl, &in, out);
    cJSON_Delete(root);
    return rc;
}

int orin_chat_render(const char *template_src, const orin_chat_message *msgs, size_t n,
                     const orin_chat_options *opt, char **out)
{
    *out = NULL;
    orin_chat_template *tpl = orin_chat_template_compile(template_src, NULL);
    if (!tpl)
        return -1;
    int rc = orin_chat_template_render(tpl, msgs, n, opt, out);
    orin_chat_template_free(tpl);
    return rc;
}
