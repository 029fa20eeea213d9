/* Chat templates: the model's own Jinja2 chat_template, rendered in C.
 *
 * A Hugging Face model folder carries its prompt format as a Jinja2 template
 * (tokenizer_config.json "chat_template", or chat_template.jinja). This module
 * renders it exactly as transformers' apply_chat_template(messages,
 * tokenize=False, add_generation_prompt=..., enable_thinking=...) does: the
 * same environment settings (trim_blocks, lstrip_blocks, no trailing newline),
 * the same globals (namespace, raise_exception, strftime_now, range, dict), the
 * same tojson, and the same treatment of messages (keys whose value is None are
 * dropped, reasoning_content is also visible as "thinking").
 *
 * The interpreter covers the Jinja2 subset that chat templates use: output
 * {{ }}, if/elif/else, for (loop.*, else, inline if, tuple targets), set
 * (including namespace attributes and {% set x %}...{% endset %}), macro, with,
 * break/continue, raw, comments, whitespace control, the expression grammar
 * (arithmetic, ~, comparisons, in, and/or/not, inline if, slices, literals of
 * lists, tuples and dicts), the common filters, tests and str/dict methods.
 * Anything else is a clean error naming the template line and column, never a
 * crash: compile errors for bad syntax, unknown filters or tests; render errors
 * for type errors, undefined values used in arithmetic, raise_exception, and
 * runaway templates (memory, output and recursion limits).
 *
 * Compile once, render many: a compiled template is immutable and may be
 * rendered from several threads at once. */
#ifndef ORIN_CHAT_TEMPLATE_H
#define ORIN_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One item of a message whose content is a list, as multimodal chats give
 * it: the template sees {"type": "text", "text": ...} or {"type": "image"}
 * (Qwen3-VL's template renders an image as
 * <|vision_start|><|image_pad|><|vision_end|>). */
typedef enum orin_chat_part_type { ORIN_CHAT_PART_TEXT = 0, ORIN_CHAT_PART_IMAGE } orin_chat_part_type;

typedef struct orin_chat_part {
    orin_chat_part_type type;
    const char *text;              /* TEXT only (UTF-8, not NULL) */
} orin_chat_part;

/* One turn. Strings are UTF-8 (checked; invalid UTF-8 is an error). A NULL
 * member is absent from the message dict the template sees, as transformers
 * drops None values. */
typedef struct orin_chat_message {
    const char *role;              /* "system" | "user" | "assistant" | "tool" | ... */
    const char *content;
    const char *reasoning_content; /* Qwen3: an assistant turn's thinking; usually NULL */
    /* Non-NULL: content is this list of n_parts items instead of a string
     * (content must then be NULL). */
    const orin_chat_part *parts;
    size_t n_parts;
} orin_chat_message;

typedef struct orin_chat_options {
    bool add_generation_prompt;    /* end with the assistant header */
    int enable_thinking;           /* -1: not passed (undefined in the template), 0 or 1 */
    /* Special tokens visible to the template as bos_token / eos_token. NULL:
     * the ones read from tokenizer_config.json (orin_chat_template_open), or
     * undefined when there are none. */
    const char *bos_token;
    const char *eos_token;
} orin_chat_options;

/* add_generation_prompt = true, enable_thinking unset, tokens from the config. */
#define ORIN_CHAT_OPTIONS_DEFAULT                                                           \
    ((orin_chat_options){.add_generation_prompt = true, .enable_thinking = -1,               \
                         .bos_token = NULL, .eos_token = NULL})

typedef struct orin_chat_template orin_chat_template;

/* Parses `source`. `name` (e.g. the file it came from) prefixes error
 * messages; NULL means "chat template". Returns NULL with orin_error_set()
 * ("NAME:LINE:COL: reason") on a syntax error. */
orin_chat_template *orin_chat_template_compile(const char *source, const char *name);

/* Reads and compiles a model folder's template: chat_template.jinja when
 * present (it takes precedence, as in transformers), else tokenizer_config.json's
 * "chat_template" (a string, or a list of {name, template} from which "default"
 * is taken). The special tokens named in tokenizer_config.json (bos_token,
 * eos_token, pad_token, unk_token, as strings or {"content": ...}) are kept and
 * passed to the template, as transformers passes special_tokens_map. */
orin_chat_template *orin_chat_template_open(const char *model_dir);

/* The same from one tokenizer_config.json file. */
orin_chat_template *orin_chat_template_from_config(const char *tokenizer_config_path);

void orin_chat_template_free(orin_chat_template *tpl);

/* Renders msgs[0..n) into a malloc'd, NUL-terminated string (*out; the caller
 * frees). `opt` NULL means ORIN_CHAT_OPTIONS_DEFAULT. Returns 0, or -1 with
 * orin_error_set() and *out = NULL. */
int orin_chat_template_render(const orin_chat_template *tpl, const orin_chat_message *msgs,
                              size_t n, const orin_chat_options *opt, char **out);

/* Renders with an arbitrary context: `context_json` is a JSON object whose
 * keys become template variables (e.g. {"messages": [...], "tools": [...],
 * "add_generation_prompt": true}). The special tokens from the config are
 * added unless the object sets them. JSON numbers without a fraction or
 * exponent are integers. */
int orin_chat_template_render_json(const orin_chat_template *tpl, const char *context_json,
                                   char **out);

/* One-shot: compile `template_src`, render, free. */
int orin_chat_render(const char *template_src, const orin_chat_message *msgs, size_t n,
                     const orin_chat_options *opt, char **out);

#ifdef __cplusplus
}
#endif
#endif
