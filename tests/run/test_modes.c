/* orin-run's score and generate modes end to end, against the Hugging Face
 * references of the tiny models (tests/data/models, scripts/gen_tiny_models.py).
 *
 * usage: test_modes ORIN_RUN MODEL_NAME */
#include "test_util.h"

#include "orin/tokenizer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *orin_run, *model;
static char model_dir[1024], tmp[512];

/* Runs orin-run with `args`; stdout into *out, stderr into *err. */
static int run(const char *args, char **out, char **err)
{
    char cmd[4096], errfile[600];
    snprintf(errfile, sizeof errfile, "%s/stderr", tmp);
    snprintf(cmd, sizeof cmd, "%s --set model.path=%s --set runtime.device=cpu %s 2>%s", orin_run,
             model_dir, args, errfile);
    int rc = test_run(cmd, out, false);
    if (err)
        *err = test_read_file(errfile, NULL);
    return rc;
}

static void check_score(const char *text, const char *path)
{
    char args[1024], ref_path[1200];
    snprintf(args, sizeof args, "--score %s/models/%s.txt --set score.path=%s", ORIN_TEST_DATA,
             text, path);
    snprintf(ref_path, sizeof ref_path, "%s/ref_%s.json", model_dir,
             strcmp(text, "text_short") == 0 ? "short" : "long");
    cJSON *ref = test_load_json(ref_path);
    const cJSON *ids = cJSON_GetObjectItem(ref, "ids"), *lps = cJSON_GetObjectItem(ref, "logprobs");
    char *out = NULL, *err = NULL;
    int rc = run(args, &out, &err);
    CHECK(rc == 0 && ref && out, "%s %s: exit %d: %s", text, path, rc, err ? err : "");
    if (rc != 0 || !ref || !out)
        goto done;
    int n = cJSON_GetArraySize(ids), line_no = 0, bad = 0;
    double worst = 0, sum = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(line);
        if (line_no < n - 1) {
            int pos = cJSON_GetObjectItem(j, "pos") ? cJSON_GetObjectItem(j, "pos")->valueint : -1;
            int id = cJSON_GetObjectItem(j, "id") ? cJSON_GetObjectItem(j, "id")->valueint : -1;
            const cJSON *lp = cJSON_GetObjectItem(j, "logprob");
            double want = cJSON_GetArrayItem(lps, line_no)->valuedouble;
            if (pos != line_no + 1 || id != cJSON_GetArrayItem(ids, line_no + 1)->valueint ||
                !cJSON_IsNumber(lp)) {
                bad++;
            } else {
                double e = fabs(lp->valuedouble - want);
                worst = e > worst ? e : worst;
                sum += want;
            }
        } else if (line_no == n - 1) {
            const cJSON *tokens = cJSON_GetObjectItem(j, "tokens"), *ppl = cJSON_GetObjectItem(j, "ppl");
            double want = exp(-sum / (n - 1));
            CHECK(tokens && tokens->valueint == n, "%s %s: tokens", text, path);
            CHECK(ppl && fabs(ppl->valuedouble - want) < 1e-3 * want, "%s %s: ppl %g, reference %g",
                  text, path, ppl ? ppl->valuedouble : -1, want);
        }
        cJSON_Delete(j);
        line_no++;
    }
    printf("%s score %s %s: %d lines, max |logprob - reference| = %.3g\n", model, text, path,
           line_no, worst);
    CHECK(line_no == n, "%s %s: %d lines for %d tokens", text, path, line_no, n);
    CHECK(bad == 0, "%s %s: %d malformed or misplaced lines", text, path, bad);
    CHECK(worst < 1e-3, "%s %s: max error %g", text, path, worst);
done:
    cJSON_Delete(ref);
    free(out);
    free(err);
}

/* Greedy generation equals transformers' greedy generation (ref_generate.json). */
static void check_generate(void)
{
    char ref_path[1200];
    snprintf(ref_path, sizeof ref_path, "%s/ref_generate.json", model_dir);
    cJSON *ref = test_load_json(ref_path);
    const cJSON *gen = cJSON_GetObjectItem(ref, "generated_ids");
    const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(ref, "prompt"));
    int n = cJSON_GetArraySize(gen);
    int32_t ids[64];
    for (int i = 0; i < n && i < 64; i++)
        ids[i] = cJSON_GetArrayItem(gen, i)->valueint;
    orin_tokenizer *tok = orin_tokenizer_load(model_dir);
    char *want = NULL;
    CHECK(tok && orin_tokenizer_decode(tok, ids, (size_t)n, ORIN_DECODE_SKIP_SPECIAL, &want, NULL) == 0);

    char args[256], *out = NULL, *err = NULL;
    snprintf(args, sizeof args,
             "-p Hello --set generate.temperature=0 --set generate.repetition_penalty=1 "
             "--set generate.max_tokens=%d --verbose-prompt",
             n);
    int rc = run(args, &out, &err);
    CHECK(rc == 0, "generate: exit %d: %s", rc, err ? err : "");
    size_t wl = want ? strlen(want) : 0;
    CHECK(out && want && strncmp(out, want, wl) == 0 && strcmp(out + wl, "\n") == 0,
          "generate: got '%s', want '%s'", out ? out : "", want ? want : "");
    CHECK(err && prompt && strstr(err, prompt), "--verbose-prompt does not show the prompt: %s",
          err ? err : "");
    CHECK(err && strstr(err, "stop: max_tokens"), "stats line: %s", err ? err : "");
    printf("%s generate: %s\n", model, out ? out : "(none)");
    free(out);
    free(err);
    free(want);
    orin_tokenizer_free(tok);
    cJSON_Delete(ref);
}

static void check_errors(void)
{
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "--score %s/models/text_long.txt --set runtime.max_context=64",
             ORIN_TEST_DATA);
    int rc = run(args, &out, &err);
    CHECK(rc == 3 && out && out[0] == '\0' && err && strstr(err, "context"),
          "too long for the context: exit %d, stdout '%s', stderr '%s'", rc, out ? out : "",
          err ? err : "");
    free(out);
    free(err);

    rc = run("--score /nonexistent/file.txt", &out, &err);
    CHECK(rc == 3 && err && strstr(err, "/nonexistent/file.txt"), "missing file: %d %s", rc,
          err ? err : "");
    free(out);
    free(err);

    rc = run("-p Hi --set generate.max_tokens=4 --set model.path=/nonexistent/model", &out, &err);
    CHECK(rc == 2 && err && strstr(err, "/nonexistent/model"), "missing model: %d %s", rc,
          err ? err : "");
    free(out);
    free(err);
}

/* --profile: the table of the decode steps' ops (kinds, a total), and the same
 * text as without it (profiling times the ops, it does not change them). */
static void check_profile(void)
{
    char *out = NULL, *err = NULL;
    int rc = run("--bench --profile --set bench.prompt_tokens=8 --set bench.gen_tokens=4 "
                 "--set bench.repeats=1", &out, &err);
    CHECK(rc == 0 && err && strstr(err, "profile: 4 runs on cpu") &&
              strstr(err, "attention (attention.decode, ") && strstr(err, "lm_head (matmul, ") &&
              strstr(err, "of bw") && strstr(err, "\ntotal "),
          "bench --profile: exit %d, stderr '%s'", rc, err ? err : "");
    free(out);
    free(err);

    char *plain = NULL, *profiled = NULL;
    const char *gen = "-p Hello --set generate.max_tokens=12 --set generate.temperature=0";
    char args[256];
    snprintf(args, sizeof args, "%s --profile", gen);
    int rc1 = run(gen, &plain, NULL), rc2 = run(args, &profiled, &err);
    CHECK(rc1 == 0 && rc2 == 0 && plain && profiled && strcmp(plain, profiled) == 0 && err &&
              strstr(err, "profile: 12 runs"),
          "generate --profile: exits %d %d, text '%s' vs '%s', stderr '%s'", rc1, rc2,
          plain ? plain : "", profiled ? profiled : "", err ? err : "");
    free(plain);
    free(profiled);
    free(err);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s ORIN_RUN MODEL\n", argv[0]);
        return 2;
    }
    orin_run = argv[1];
    model = argv[2];
    snprintf(model_dir, sizeof model_dir, "%s/models/%s", ORIN_TEST_DATA, model);
    char *dir = test_tmpdir("modes");
    snprintf(tmp, sizeof tmp, "%s", dir);
    check_score("text_short", "prefill");
    check_score("text_short", "decode");
    check_score("text_long", "prefill");
    check_score("text_long", "decode");
    check_generate();
    check_errors();
    check_profile();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    free(dir);
    return test_finish();
}
