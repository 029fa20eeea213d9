/* The Jinja chat-template interpreter on arbitrary template text: compile,
 * then render a fixed conversation (with and without the generation prompt
 * and thinking switch) and a fixed JSON context with tools. Anything may be an
 * error (one line); nothing may crash, read out of bounds or leak. */
#include "fuzz_util.h"

#include "orin/chat_template.h"
#include "orin/error.h"

static const orin_chat_message conversation[] = {
    {.role = "system", .content = "You are terse."},
    {.role = "user", .content = "Hi <b>there</b> \"quoted\" 'single' {{ not a tag }}"},
    {.role = "assistant", .content = "Hello.", .reasoning_content = "A greeting."},
    {.role = "tool", .content = "{\"temperature\": 21}"},
    {.role = "user", .content = "\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80 \n\t end"},
};

static const char context_json[] =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", "
    "\"content\": null, \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": "
    "\"get\", \"arguments\": {\"city\": \"Paris\", \"n\": 2, \"f\": 1.5, \"ok\": true}}}]}], "
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get\", \"parameters\": "
    "{\"type\": \"object\"}}}], \"add_generation_prompt\": true, \"list\": [3, 1, 2], "
    "\"n\": -7, \"s\": \"abc\", \"none\": null}";

static void check_render(int rc, char *out)
{
    if (rc == 0)
        FUZZ_ASSERT(out != NULL, "render succeeded without text");
    else
        fuzz_check_error(orin_error());
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = fuzz_strdup(data, size);
    orin_chat_template *tpl = orin_chat_template_compile(src, "fuzz.jinja");
    free(src);
    if (!tpl) {
        fuzz_check_error(orin_error());
        return 0;
    }
    orin_chat_options opt = ORIN_CHAT_OPTIONS_DEFAULT;
    char *out = NULL;
    int rc = orin_chat_template_render(tpl, conversation, 5, &opt, &out);
    check_render(rc, out);
    opt = (orin_chat_options){.add_generation_prompt = false, .enable_thinking = 0,
                              .bos_token = "<s>", .eos_token = "</s>"};
    out = NULL;
    rc = orin_chat_template_render(tpl, conversation, 2, &opt, &out);
    check_render(rc, out);
    out = NULL;
    rc = orin_chat_template_render_json(tpl, context_json, &out);
    check_render(rc, out);
    orin_chat_template_free(tpl);
    return 0;
}
