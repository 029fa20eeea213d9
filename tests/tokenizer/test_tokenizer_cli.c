/* orin-run --tokenize end to end: a few corpus lines (CRLF, special tokens,
 * invalid UTF-8) written to files, the printed JSON array compared with the
 * Hugging Face ids; and the errors' exit codes.
 *
 * usage: test_tokenizer_cli ORIN_RUN TOKENIZER_DIR corpus.jsonl */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tok_test_data.h"
#include "test_util.h"

static const char *orin_run, *model_dir;
static char *tmp_dir;

static int run(const char *model, const char *file, char **out, bool merge)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --set 'model.path=%s' --tokenize '%s'", orin_run, model, file);
    return test_run(cmd, out, merge);
}

static void check_line(const tok_record *r)
{
    char path[600], *out = NULL;
    snprintf(path, sizeof path, "%s/line%d.txt", tmp_dir, r->line);
    CHECK(test_write_file(path, r->text, r->len) == 0);
    int rc = run(model_dir, path, &out, false);
    CHECK(rc == 0, "line %d: exit %d", r->line, rc);
    if (out) {
        size_t len = strlen(out);
        CHECK(len > 0 && out[len - 1] == '\n' && memchr(out, '\n', len) == out + len - 1,
              "line %d: not exactly one line of output", r->line);
        cJSON *arr = cJSON_Parse(out);
        CHECK(cJSON_IsArray(arr), "line %d: not a JSON array: %.80s", r->line, out);
        size_t n;
        int32_t *ids = tok_json_ids(arr, &n);
        char label[64];
        snprintf(label, sizeof label, "orin-run on corpus line %d", r->line);
        CHECK(tok_ids_equal(label, ids, n, r->ids, r->n_ids));
        free(ids);
        cJSON_Delete(arr);
    }
    free(out);
    unlink(path);
}

/* The first record of a category whose text holds `needle` (NULL: any). */
static const tok_record *find(const tok_corpus *c, const char *cat, const char *needle, bool valid)
{
    for (size_t i = 0; i < c->n; i++) {
        const tok_record *r = &c->recs[i];
        if (!strcmp(r->cat, cat) && r->valid == valid && (!needle || memmem(r->text, r->len, needle, strlen(needle))))
            return r;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s ORIN_RUN TOKENIZER_DIR corpus.jsonl\n", argv[0]);
        return 2;
    }
    orin_run = argv[1];
    model_dir = argv[2];
    tok_corpus corpus;
    tmp_dir = test_tmpdir("tokenize-cli");
    if (!tmp_dir || tok_corpus_load(argv[3], &corpus))
        return 1;

    const tok_record *picks[] = {
        find(&corpus, "code", "\r\n", true),
        find(&corpus, "special", "<|im_start|>", true),
        find(&corpus, "invalid_utf8", NULL, false),
        find(&corpus, "mixed", NULL, true),
        find(&corpus, "long", NULL, true),
    };
    for (size_t i = 0; i < sizeof picks / sizeof *picks; i++) {
        CHECK(picks[i] != NULL, "no corpus line for pick %zu", i);
        if (picks[i])
            check_line(picks[i]);
    }

    /* An empty file is an empty array. */
    char path[600], *out = NULL;
    snprintf(path, sizeof path, "%s/empty.txt", tmp_dir);
    CHECK(test_write_file(path, "", 0) == 0);
    CHECK(run(model_dir, path, &out, false) == 0 && out && !strcmp(out, "[]\n"), "empty: %s", out ? out : "");
    free(out);

    /* Errors: one "orin-run: " line and the documented exit codes. */
    CHECK(run(model_dir, "/nonexistent/input.txt", &out, true) == 3, "missing input file");
    CHECK(out && !strncmp(out, "orin-run: /nonexistent/input.txt: cannot open", 45), "%s", out ? out : "");
    free(out);
    CHECK(run(tmp_dir, path, &out, true) == 2, "no tokenizer.json");
    CHECK(out && strstr(out, "orin-run: ") == out && strstr(out, "tokenizer.json: cannot open"), "%s",
          out ? out : "");
    free(out);

    unlink(path);
    rmdir(tmp_dir);
    free(tmp_dir);
    tok_corpus_free(&corpus);
    return test_finish();
}
