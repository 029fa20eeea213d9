/* The real Qwen chat templates (Qwen3 with its thinking logic, Qwen2.5 with
 * its tool calls) rendering arbitrary messages. Input: the first byte picks
 * the template and the options; the rest is split at 0x00 bytes into
 * messages, each starting with a byte that picks its role and whether it has
 * reasoning_content (the rest of the message after a 0x01 byte). Invalid UTF-8
 * may be an error (one line); nothing may crash, read out of bounds or leak. */
#include "fuzz_util.h"

#include "orin/chat_template.h"
#include "orin/error.h"

#ifndef FUZZ_CHAT_DATA
#error "FUZZ_CHAT_DATA: tests/data (for the Qwen tokenizer_config.json files)"
#endif

#define MAX_MSGS 16

static orin_chat_template *templates[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *paths[2] = {FUZZ_CHAT_DATA "/models/qwen3-tiny/tokenizer_config.json",
                            FUZZ_CHAT_DATA "/chat/qwen2.5_tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        templates[i] = orin_chat_template_from_config(paths[i]);
        if (!templates[i]) {
            fprintf(stderr, "fuzz_chat_render: %s\n", orin_error());
            exit(1);
        }
    }
    return 0;
}

static const char *const roles[] = {"user", "assistant", "system", "tool"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    char *buf = fuzz_strdup(data + 1, size - 1);
    size_t len = size - 1;
    orin_chat_message msgs[MAX_MSGS];
    size_t n = 0;
    for (size_t at = 0; at < len && n < MAX_MSGS;) {
        char *msg = buf + at;
        size_t mlen = strlen(msg); /* up to the next 0x00 */
        at += mlen + 1;
        if (mlen == 0)
            continue;
        uint8_t pick = (uint8_t)msg[0];
        orin_chat_message m = {.role = roles[pick & 3], .content = msg + 1};
        char *split = strchr(msg + 1, '\x01');
        if (split && (pick & 4)) {
            *split = '\0';
            m.reasoning_content = split + 1;
        }
        if (pick & 8)
            m.content = NULL;
        msgs[n++] = m;
    }
    orin_chat_options opt = {
        .add_generation_prompt = flags & 2,
        .enable_thinking = (flags >> 2) % 3 - 1,
        .bos_token = NULL,
        .eos_token = NULL,
    };
    char *out = NULL;
    if (orin_chat_template_render(templates[flags & 1], msgs, n, &opt, &out) != 0) {
        fuzz_check_error(orin_error());
    } else {
        FUZZ_ASSERT(out != NULL, "render succeeded without text");
    }
    free(out);
    free(buf);
    return 0;
}
