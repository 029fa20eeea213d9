/* A missing or corrupt tokenizer.json / tokenizer_config.json, or one asking for
 * what orin does not implement, fails to load with a one-line error naming the
 * file and the reason (and, run under ASan, without leaking).
 *
 * usage: test_tokenizer_errors TINY_DIR QWEN3_DIR */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orin/error.h"
#include "tok_test_data.h"
#include "test_util.h"

static char *tmp_dir, json_path[512], config_path[512];
static cJSON *base;

typedef void (*mutate_fn)(cJSON *root);

static cJSON *at(cJSON *obj, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *key = strtok(buf, "."); key && obj; key = strtok(NULL, ".")) {
        if (cJSON_IsArray(obj))
            obj = cJSON_GetArrayItem(obj, atoi(key));
        else
            obj = cJSON_GetObjectItemCaseSensitive(obj, key);
    }
    return obj;
}

static void set(cJSON *root, const char *parent, const char *key, cJSON *value)
{
    cJSON *p = at(root, parent);
    if (cJSON_GetObjectItemCaseSensitive(p, key))
        cJSON_ReplaceItemInObjectCaseSensitive(p, key, value);
    else
        cJSON_AddItemToObject(p, key, value);
}

static void write_text(const char *path, const char *text)
{
    if (test_write_file(path, text, strlen(text))) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static void write_json(const char *path, const cJSON *j)
{
    char *text = cJSON_PrintUnformatted(j);
    write_text(path, text);
    free(text);
}

/* Loads tmp_dir and expects a failure whose message holds `want` and names the file. */
static void expect_error(const char *name, const char *want, const char *file)
{
    orin_error_clear();
    orin_tokenizer *tok = orin_tokenizer_load(tmp_dir);
    CHECK(tok == NULL, "%s: loaded", name);
    orin_tokenizer_free(tok);
    const char *msg = orin_error();
    CHECK(strstr(msg, want) != NULL, "%s: error \"%s\" lacks \"%s\"", name, msg, want);
    CHECK(strstr(msg, file) != NULL, "%s: error \"%s\" does not name %s", name, msg, file);
    CHECK(strchr(msg, '\n') == NULL, "%s: the error is not one line", name);
}

static void expect_json_error(const char *name, mutate_fn fn, const char *want)
{
    cJSON *j = cJSON_Duplicate(base, true);
    fn(j);
    write_json(json_path, j);
    cJSON_Delete(j);
    unlink(config_path);
    expect_error(name, want, "tokenizer.json");
}

#define MUTATION(fn_name, body) static void fn_name(cJSON *r) { body; }

MUTATION(wrong_type, set(r, "model", "type", cJSON_CreateString("WordPiece")))
MUTATION(no_type, cJSON_DeleteItemFromObject(at(r, "model"), "type"))
MUTATION(no_model, cJSON_DeleteItemFromObject(r, "model"))
MUTATION(no_vocab, cJSON_DeleteItemFromObject(at(r, "model"), "vocab"))
MUTATION(empty_vocab, set(r, "model", "vocab", cJSON_CreateObject()))
MUTATION(bad_id, set(r, "model.vocab", "Ġ", cJSON_CreateNumber(-3)))
MUTATION(string_id, set(r, "model.vocab", "Ġ", cJSON_CreateString("32")))
MUTATION(dup_id, set(r, "model.vocab", "Ġ", cJSON_CreateNumber(0)))
MUTATION(no_byte, cJSON_DeleteItemFromObject(at(r, "model.vocab"), "Ġ"))
MUTATION(no_merges, cJSON_DeleteItemFromObject(at(r, "model"), "merges"))
MUTATION(merge_unknown, cJSON_ReplaceItemInArray(at(r, "model.merges"), 0, cJSON_CreateString("Ġ zzz")))
MUTATION(merge_no_result, cJSON_ReplaceItemInArray(at(r, "model.merges"), 0, cJSON_CreateString("q q")))
MUTATION(merge_format, cJSON_ReplaceItemInArray(at(r, "model.merges"), 0, cJSON_CreateString("abc")))
MUTATION(merge_number, cJSON_ReplaceItemInArray(at(r, "model.merges"), 0, cJSON_CreateNumber(7)))
MUTATION(dropout, set(r, "model", "dropout", cJSON_CreateNumber(0.1)))
MUTATION(prefix, set(r, "model", "continuing_subword_prefix", cJSON_CreateString("##")))
MUTATION(suffix, set(r, "model", "end_of_word_suffix", cJSON_CreateString("</w>")))
MUTATION(nfkc, set(r, "normalizer", "type", cJSON_CreateString("NFKC")))
MUTATION(no_pre, cJSON_DeleteItemFromObject(r, "pre_tokenizer"))
MUTATION(pre_whitespace, set(r, "pre_tokenizer", "type", cJSON_CreateString("Whitespace")))
MUTATION(behavior, set(r, "pre_tokenizer.pretokenizers.0", "behavior", cJSON_CreateString("Removed")))
MUTATION(invert, set(r, "pre_tokenizer.pretokenizers.0", "invert", cJSON_CreateTrue()))
MUTATION(string_pattern, {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "String", " ");
    set(r, "pre_tokenizer.pretokenizers.0", "pattern", p);
})
MUTATION(bad_regex, set(r, "pre_tokenizer.pretokenizers.0.pattern", "Regex", cJSON_CreateString("(\\p{L}")))
MUTATION(use_regex, set(r, "pre_tokenizer.pretokenizers.1", "use_regex", cJSON_CreateTrue()))
MUTATION(prefix_space, set(r, "pre_tokenizer.pretokenizers.1", "add_prefix_space", cJSON_CreateTrue()))
MUTATION(no_decoder, cJSON_DeleteItemFromObject(r, "decoder"))
MUTATION(bad_decoder, set(r, "decoder", "type", cJSON_CreateString("WordPiece")))
MUTATION(added_no_content, cJSON_DeleteItemFromObject(at(r, "added_tokens.0"), "content"))
MUTATION(added_no_id, cJSON_DeleteItemFromObject(at(r, "added_tokens.0"), "id"))
MUTATION(added_bad_flag, set(r, "added_tokens.0", "lstrip", cJSON_CreateString("yes")))
MUTATION(added_dup, cJSON_AddItemToArray(at(r, "added_tokens"), cJSON_Duplicate(at(r, "added_tokens.0"), true)))

static void check_json_errors(void)
{
    expect_json_error("wrong model type", wrong_type, "model.type \"WordPiece\" is not supported");
    expect_json_error("no model type", no_type, "model.type is missing");
    expect_json_error("no model", no_model, "\"model\" is missing");
    expect_json_error("no vocab", no_vocab, "model.vocab is missing");
    expect_json_error("empty vocab", empty_vocab, "model.vocab is empty");
    expect_json_error("negative id", bad_id, "is not an id");
    expect_json_error("string id", string_id, "is not an id");
    expect_json_error("duplicate id", dup_id, "gives id 0 to both");
    expect_json_error("missing byte token", no_byte, "for byte 0x20");
    expect_json_error("no merges", no_merges, "model.merges is missing");
    expect_json_error("unknown merge token", merge_unknown, "model.merges[0]: \"zzz\" is not in model.vocab");
    expect_json_error("merge result unknown", merge_no_result, "model.merges[0]: \"qq\" is not in model.vocab");
    expect_json_error("merge format", merge_format, "not two tokens");
    expect_json_error("merge type", merge_number, "model.merges[0] is neither");
    expect_json_error("dropout", dropout, "model.dropout");
    expect_json_error("subword prefix", prefix, "continuing_subword_prefix");
    expect_json_error("word suffix", suffix, "end_of_word_suffix");
    expect_json_error("normalizer", nfkc, "normalizer type \"NFKC\" is not supported");
    expect_json_error("no pre_tokenizer", no_pre, "pre_tokenizer must be a Sequence");
    expect_json_error("pre_tokenizer type", pre_whitespace, "pre_tokenizer must be a Sequence");
    expect_json_error("split behavior", behavior, "behavior \"Removed\" is not supported");
    expect_json_error("split invert", invert, "invert = true");
    expect_json_error("split string pattern", string_pattern, "only regex patterns");
    expect_json_error("bad regex", bad_regex, "regex does not compile");
    expect_json_error("byte-level regex", use_regex, "use_regex = true");
    expect_json_error("prefix space", prefix_space, "add_prefix_space = true");
    expect_json_error("no decoder", no_decoder, "decoder missing is not supported");
    expect_json_error("decoder type", bad_decoder, "decoder WordPiece is not supported");
    expect_json_error("added token content", added_no_content, "added_tokens[0] has no content");
    expect_json_error("added token id", added_no_id, "has no valid id");
    expect_json_error("added token flag", added_bad_flag, "added_tokens[0].lstrip is not true or false");
    expect_json_error("added token twice", added_dup, "is listed twice");
}

static void check_file_errors(const char *tiny_text, const char *qwen3_dir)
{
    unlink(config_path);
    unlink(json_path);
    expect_error("missing tokenizer.json", "cannot open: No such file", "tokenizer.json");

    write_text(json_path, "");
    expect_error("empty file", "invalid JSON", "tokenizer.json");

    char *half = strndup(tiny_text, strlen(tiny_text) / 2);
    write_text(json_path, half);
    free(half);
    expect_error("truncated JSON", "invalid JSON near byte", "tokenizer.json");

    write_text(json_path, "[1, 2]");
    expect_error("not an object", "not a JSON object", "tokenizer.json");

    /* The real file, cut off in the middle of the vocabulary. */
    char path[600];
    size_t len;
    snprintf(path, sizeof path, "%s/tokenizer.json", qwen3_dir);
    char *real = test_read_file(path, &len);
    CHECK(real != NULL);
    if (real) {
        CHECK(test_write_file(json_path, real, len / 2) == 0);
        expect_error("truncated Qwen3 tokenizer.json", "invalid JSON near byte", "tokenizer.json");
        free(real);
    }
}

static void expect_config(const char *name, const char *config, const char *want)
{
    write_json(json_path, base);
    write_text(config_path, config);
    if (want) {
        expect_error(name, want, "tokenizer_config.json");
        return;
    }
    orin_tokenizer *tok = orin_tokenizer_load(tmp_dir);
    CHECK(tok != NULL, "%s: %s", name, orin_error());
    if (tok) {
        CHECK(orin_tokenizer_eos_id(tok) == orin_tokenizer_token_to_id(tok, "<mask>"));
        CHECK(orin_tokenizer_pad_id(tok) == orin_tokenizer_token_to_id(tok, "<sp>"));
        CHECK(orin_tokenizer_bos_id(tok) == -1);
        const char *t = orin_tokenizer_chat_template(tok);
        CHECK(t && !strcmp(t, "{{ messages }}"));
    }
    orin_tokenizer_free(tok);
}

static void check_config(void)
{
    expect_config("config: roles as string and object", "{\"eos_token\": \"<mask>\", \"pad_token\": "
                  "{\"content\": \"<sp>\", \"special\": true}, \"bos_token\": null, "
                  "\"chat_template\": \"{{ messages }}\"}", NULL);
    expect_config("config: template list", "{\"eos_token\": \"<mask>\", \"pad_token\": \"<sp>\", \"chat_template\": "
                  "[{\"name\": \"tool_use\", \"template\": \"x\"}, {\"name\": \"default\", \"template\": "
                  "\"{{ messages }}\"}]}", NULL);
    expect_config("config: truncated", "{\"eos_token\": \"<mask>\"", "invalid JSON");
    expect_config("config: unknown eos", "{\"eos_token\": \"<nope>\"}", "eos_token \"<nope>\" is not a token");
    expect_config("config: eos a number", "{\"eos_token\": 5}", "eos_token is neither a string");
    expect_config("config: template a number", "{\"chat_template\": 5}", "chat_template is not a string");

    /* No tokenizer_config.json at all is fine. */
    unlink(config_path);
    orin_tokenizer *tok = orin_tokenizer_load(tmp_dir);
    CHECK(tok != NULL && orin_tokenizer_eos_id(tok) == -1 && !orin_tokenizer_chat_template(tok));
    orin_tokenizer_free(tok);
    CHECK(orin_tokenizer_load_files(json_path, "/nonexistent/tokenizer_config.json") == NULL);
    CHECK(strstr(orin_error(), "/nonexistent/tokenizer_config.json: cannot open") != NULL, "%s", orin_error());
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s TINY_DIR QWEN3_DIR\n", argv[0]);
        return 2;
    }
    char path[600];
    size_t len;
    snprintf(path, sizeof path, "%s/tokenizer.json", argv[1]);
    char *tiny_text = test_read_file(path, &len);
    base = tiny_text ? cJSON_Parse(tiny_text) : NULL;
    tmp_dir = test_tmpdir("tokenizer");
    if (!base || !tmp_dir) {
        fprintf(stderr, "cannot read %s or make a temporary folder\n", path);
        return 1;
    }
    snprintf(json_path, sizeof json_path, "%s/tokenizer.json", tmp_dir);
    snprintf(config_path, sizeof config_path, "%s/tokenizer_config.json", tmp_dir);

    /* The unmodified file loads: the failures below are the mutations'. */
    write_json(json_path, base);
    orin_tokenizer *tok = orin_tokenizer_load(tmp_dir);
    CHECK(tok != NULL, "the base file does not load: %s", orin_error());
    orin_tokenizer_free(tok);

    check_json_errors();
    check_file_errors(tiny_text, argv[2]);
    check_config();

    unlink(json_path);
    unlink(config_path);
    rmdir(tmp_dir);
    free(tmp_dir);
    free(tiny_text);
    cJSON_Delete(base);
    return test_finish();
}
