/* orin-run as a user sees it: exit codes, messages, --help, --version,
 * --list-plugins (table and JSON) and configuration errors.
 *
 * Usage: test_cli ORIN_RUN GROUP (one ctest test per group, "cli.GROUP"). */
#include "test_util.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *orin_run; /* the binary under test */
static char *tmp;

typedef enum stream { STDOUT_ONLY, STDERR_ONLY } stream;

/* Runs "orin-run ARGS" through the shell; returns the exit code and the chosen
 * stream's text in *out (the caller frees). */
static int run(const char *args, stream which, char **out)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s %s", orin_run, args,
             which == STDOUT_ONLY ? "2>/dev/null" : "2>&1 >/dev/null");
    int rc = test_run(cmd, out, false);
    if (!*out)
        *out = strdup("");
    return rc;
}

static bool has(const char *haystack, const char *needle)
{
    return strstr(haystack, needle) != NULL;
}

/* Runs, expects `code`, and that the stream holds every string of the list. */
#define EXPECT(args, which, code, ...)                                                    \
    do {                                                                                  \
        const char *parts_[] = {__VA_ARGS__, NULL};                                       \
        char *out_;                                                                       \
        int rc_ = run(args, which, &out_);                                                \
        CHECK(rc_ == (code), "orin-run %s: exit %d, want %d; output:\n%s", args, rc_, code, \
              out_);                                                                      \
        for (const char **p_ = parts_; *p_; p_++)                                         \
            CHECK(has(out_, *p_), "orin-run %s: output lacks '%s':\n%s", args, *p_, out_); \
        free(out_);                                                                       \
    } while (0)

static const char *const plugin_names[] = {"ops_common", "attention_mha", "attention_fa1",
                                           "attention_fa2"};

static void test_help(void)
{
    EXPECT("--help", STDOUT_ONLY, 0, "Usage: orin-run", "--config FILE", "--set",
           "--list-plugins", "--score FILE", "--tokenize FILE", "--bench", "--json",
           "--verbose-prompt", "-i, --interactive", "-p, --prompt", "-v, --verbose", "--version");
    /* Exit codes as cli.h defines them, and the registry's resolution order. */
    EXPECT("--help", STDOUT_ONLY, 0, "Exit codes", "0    success",
           "1    bad command line or configuration", "2    a plugin, the model",
           "3    failure while running", "130  interrupted", "1. that provider",
           "2. the op's reference", "3. any other provider", "strict");
    EXPECT("-h", STDOUT_ONLY, 0, "Usage: orin-run");
    /* --help wins over a mode and does no work. */
    EXPECT("--list-plugins --help", STDOUT_ONLY, 0, "Usage: orin-run");
    char *err;
    CHECK(run("--help", STDERR_ONLY, &err) == 0 && !*err, "nothing on stderr: %s", err);
    free(err);
}

static void test_version(void)
{
    EXPECT("--version", STDOUT_ONLY, 0, "orin-run " ORIN_EXPECTED_VERSION, "plugin ABI 5");
}

static void test_usage(void)
{
    EXPECT("--lis-plugins", STDERR_ONLY, 1, "unknown option '--lis-plugins'",
           "did you mean --list-plugins?", "--help");
    EXPECT("--verbos", STDERR_ONLY, 1, "did you mean --verbose?");
    EXPECT("--configg x.ini", STDERR_ONLY, 1, "did you mean --config?");
    EXPECT("-list-plugins", STDERR_ONLY, 1, "did you mean --list-plugins?");
    EXPECT("--frobnicate", STDERR_ONLY, 1, "unknown option '--frobnicate'");
    char *err;
    run("--frobnicate", STDERR_ONLY, &err);
    CHECK(!has(err, "did you mean"), "no hint for a far miss: %s", err);
    free(err);
    EXPECT("-x", STDERR_ONLY, 1, "unknown option '-x'");
    EXPECT("-vi", STDERR_ONLY, 1, "unknown option '-vi'");
    EXPECT("--config", STDERR_ONLY, 1, "--config needs a value");
    EXPECT("--set", STDERR_ONLY, 1, "--set needs a value");
    EXPECT("-p", STDERR_ONLY, 1, "-p needs a value");
    EXPECT("--score", STDERR_ONLY, 1, "--score needs a value");
    EXPECT("--json=yes", STDERR_ONLY, 1, "--json takes no value");
    EXPECT("stray", STDERR_ONLY, 1, "unexpected argument 'stray'");
    EXPECT("--bench --list-plugins", STDERR_ONLY, 1, "--bench and --list-plugins",
           "different modes");
    EXPECT("--score a.txt --tokenize b.txt", STDERR_ONLY, 1, "different modes");
    EXPECT("--bench --bench", STDERR_ONLY, 1, "--bench given twice");
    EXPECT("--config a.ini --config b.ini", STDERR_ONLY, 1, "--config given twice");
    /* Nothing on stdout when the command line is wrong. */
    char *out;
    CHECK(run("--frobnicate", STDOUT_ONLY, &out) == 1 && !*out, "stdout: %s", out);
    free(out);
}

static void test_bad_set(void)
{
    EXPECT("--set generate.top_k=abc --list-plugins", STDERR_ONLY, 1,
           "--set: generate.top_k = 'abc': not an integer");
    EXPECT("--set=generate.top_k=abc --list-plugins", STDERR_ONLY, 1, "generate.top_k");
    EXPECT("--set generate.topk=3 --list-plugins", STDERR_ONLY, 1, "generate.topk",
           "did you mean generate.top_k?");
    EXPECT("--set genrate.top_k=3 --list-plugins", STDERR_ONLY, 1, "did you mean [generate]?");
    EXPECT("--set top_k --list-plugins", STDERR_ONLY, 1, "expected section.key=value");
    EXPECT("--set runtime.device=gpu --list-plugins", STDERR_ONLY, 1, "runtime.device",
           "'gpu'", "auto, cpu, cuda");
    EXPECT("--set generate.top_p=2 --list-plugins", STDERR_ONLY, 1, "out of range (0, 1]");
    /* -p is generate.prompt, so its escapes are checked. */
    EXPECT("-p 'a\\qb' --list-plugins", STDERR_ONLY, 1, "generate.prompt", "unknown escape");
    EXPECT("--config /nonexistent/orin.ini --list-plugins", STDERR_ONLY, 1,
           "/nonexistent/orin.ini", "No such file");
}

static void test_config_typo(void)
{
    char ini[PATH_MAX], args[PATH_MAX + 64];
    snprintf(ini, sizeof ini, "%s/typo.ini", tmp);
    const char *text = "[generate]\n; a comment\ntop_kk = 3\n";
    CHECK(test_write_file(ini, text, strlen(text)) == 0);
    snprintf(args, sizeof args, "--config '%s' --list-plugins", ini);
    EXPECT(args, STDERR_ONLY, 1, "typo.ini:3", "generate.top_kk", "'3'",
           "did you mean generate.top_k?");

    snprintf(ini, sizeof ini, "%s/section.ini", tmp);
    text = "[genrate]\ntop_k = 3\n";
    CHECK(test_write_file(ini, text, strlen(text)) == 0);
    snprintf(args, sizeof args, "--config '%s' --list-plugins", ini);
    EXPECT(args, STDERR_ONLY, 1, "section.ini:2", "did you mean [generate]?");

    snprintf(ini, sizeof ini, "%s/syntax.ini", tmp);
    text = "[generate]\ntop_k 3\n";
    CHECK(test_write_file(ini, text, strlen(text)) == 0);
    snprintf(args, sizeof args, "--config '%s' --list-plugins", ini);
    EXPECT(args, STDERR_ONLY, 1, "syntax.ini:2", "syntax error", "top_k 3");
}

/* --list-plugins --json, parsed; NULL (and a failed check) when it is not JSON. */
static cJSON *list_json(const char *extra)
{
    char args[PATH_MAX + 64], *out;
    snprintf(args, sizeof args, "--list-plugins --json %s", extra);
    int rc = run(args, STDOUT_ONLY, &out);
    CHECK(rc == 0, "exit %d", rc);
    cJSON *root = cJSON_Parse(out);
    CHECK(root != NULL, "not JSON: %s", out);
    free(out);
    return root;
}

static bool json_has_plugin(const cJSON *root, const char *name)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(root, "plugins"))
    {
        const cJSON *n = cJSON_GetObjectItem(p, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
            return true;
    }
    return false;
}

static void test_list_plugins(void)
{
    /* The table: every plugin of the build's plugin folder, and the header. */
    EXPECT("--list-plugins", STDOUT_ONLY, 0, "ops_common", "attention_mha", "attention_fa1",
           "attention_fa2", "plugins in " ORIN_PLUGIN_DIR);
    char *out;
    CHECK(run("--list-plugins", STDOUT_ONLY, &out) == 0);
    CHECK((has(out, "op ") && has(out, "provider") && has(out, "dtype") && has(out, "plugin")) ||
              has(out, "no op implementations registered"),
          "%s", out);
    free(out);

    cJSON *root = list_json("");
    if (root) {
        const cJSON *dir = cJSON_GetObjectItem(root, "plugin_dir");
        CHECK(cJSON_IsString(dir) && !strcmp(dir->valuestring, ORIN_PLUGIN_DIR));
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(root, "plugins")) == 4);
        for (size_t i = 0; i < 4; i++)
            CHECK(json_has_plugin(root, plugin_names[i]), "%s", plugin_names[i]);
        const cJSON *ops = cJSON_GetObjectItem(root, "ops"), *op;
        CHECK(cJSON_IsArray(ops));
        /* Every row is complete and comes from a listed plugin, sorted by op. */
        const char *prev = "";
        cJSON_ArrayForEach(op, ops)
        {
            const cJSON *name = cJSON_GetObjectItem(op, "op");
            const cJSON *owner = cJSON_GetObjectItem(op, "plugin");
            CHECK(cJSON_IsString(name) && cJSON_IsString(cJSON_GetObjectItem(op, "provider")) &&
                  cJSON_IsString(cJSON_GetObjectItem(op, "device")) &&
                  cJSON_IsString(cJSON_GetObjectItem(op, "dtype")) &&
                  cJSON_IsArray(cJSON_GetObjectItem(op, "flags")) && cJSON_IsString(owner));
            if (!cJSON_IsString(name) || !cJSON_IsString(owner))
                continue;
            CHECK(json_has_plugin(root, owner->valuestring), "%s", owner->valuestring);
            CHECK(strcmp(prev, name->valuestring) <= 0, "%s after %s", name->valuestring, prev);
            prev = name->valuestring;
        }
        cJSON_Delete(root);
    }

    /* plugins.load restricts the set; ".so" may be left out. */
    root = list_json("--set plugins.load=ops_common");
    if (root) {
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(root, "plugins")) == 1);
        CHECK(json_has_plugin(root, "ops_common"));
        const cJSON *op;
        cJSON_ArrayForEach(op, cJSON_GetObjectItem(root, "ops"))
        {
            const cJSON *owner = cJSON_GetObjectItem(op, "plugin");
            CHECK(cJSON_IsString(owner) && !strcmp(owner->valuestring, "ops_common"));
        }
        cJSON_Delete(root);
    }
    root = list_json("--set 'plugins.load=attention_mha.so, attention_fa1'");
    if (root) {
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(root, "plugins")) == 2);
        CHECK(json_has_plugin(root, "attention_mha") && json_has_plugin(root, "attention_fa1"));
        cJSON_Delete(root);
    }
    EXPECT("--list-plugins --set plugins.load=missing", STDERR_ONLY, 2, "missing.so");

    /* -v adds debug lines on stderr. */
    EXPECT("-v --list-plugins", STDERR_ONLY, 0, "debug:");
    /* The shipped etc/orin.ini works with the default plugin folder. */
    EXPECT("--config '" ORIN_SOURCE_DIR "/etc/orin.ini' --list-plugins", STDOUT_ONLY, 0,
           "attention_fa2");
}

static void test_plugin_dir(void)
{
    EXPECT("--list-plugins --set plugins.dir=/nonexistent", STDERR_ONLY, 2, "/nonexistent");
    EXPECT("--list-plugins --set plugins.dir=/etc/passwd", STDERR_ONLY, 2, "/etc/passwd",
           "not a folder");
    /* An empty folder loads nothing and is not an error. */
    char args[PATH_MAX + 64];
    snprintf(args, sizeof args, "--list-plugins --set plugins.dir='%s'", tmp);
    EXPECT(args, STDOUT_ONLY, 0, "(none)");

    /* plugins.dir relative to the INI's folder, whatever the current directory. */
    char link[PATH_MAX], ini[PATH_MAX];
    snprintf(link, sizeof link, "%s/plugs", tmp);
    CHECK(symlink(ORIN_PLUGIN_DIR, link) == 0);
    snprintf(ini, sizeof ini, "%s/rel.ini", tmp);
    const char *text = "[plugins]\ndir = plugs\n";
    CHECK(test_write_file(ini, text, strlen(text)) == 0);
    CHECK(chdir("/") == 0);
    snprintf(args, sizeof args, "--config '%s' --list-plugins", ini);
    EXPECT(args, STDOUT_ONLY, 0, "plugins in ", "/plugs", "ops_common", "attention_fa2");
    /* From --set, relative to the current directory. */
    CHECK(chdir(tmp) == 0);
    EXPECT("--set plugins.dir=plugs --list-plugins", STDOUT_ONLY, 0, "ops_common");
    CHECK(chdir("/") == 0);
}

/* A Qwen3-VL folder runs a text prompt as a text model would; --image
 * errors: a text model, a missing file, a folder without the processor's
 * settings, the wrong mode, a bad --max-pixels. */
static void test_vl_folder(void)
{
    char args[4 * PATH_MAX], vl[PATH_MAX], text[PATH_MAX], img[PATH_MAX];
    snprintf(vl, sizeof vl, "--config '%s/etc/orin.ini' --set generate.max_tokens=2 "
             "--set model.path='%s/models/qwen3vl-tiny'", ORIN_SOURCE_DIR, ORIN_TEST_DATA);
    snprintf(text, sizeof text, "--config '%s/etc/orin.ini' --set generate.max_tokens=2",
             ORIN_SOURCE_DIR);
    snprintf(img, sizeof img, "%s/vision/image1.png", ORIN_TEST_DATA);
    snprintf(args, sizeof args, "%s -p hi", vl);
    EXPECT(args, STDERR_ONLY, 0, "[prompt ", "generated 2 tokens");
    snprintf(args, sizeof args, "%s -p hi --image '%s'", text, img);
    EXPECT(args, STDERR_ONLY, 1, "image1.png", "Qwen3ForCausalLM",
           "not a vision-language model");
    snprintf(args, sizeof args, "%s -p hi --image /nonexistent/cat.png", vl);
    EXPECT(args, STDERR_ONLY, 3, "/nonexistent/cat.png");
    snprintf(args, sizeof args, "%s -p hi --image '%s/models/qwen3vl-tiny/config.json'", vl,
             ORIN_TEST_DATA);
    EXPECT(args, STDERR_ONLY, 3, "config.json");
    snprintf(args, sizeof args, "%s --score '%s' --image '%s'", vl, img, img);
    EXPECT(args, STDERR_ONLY, 1, "--image works when generating", "and with --bench", "--score");
    snprintf(args, sizeof args, "%s --tokenize '%s' --image '%s'", vl, img, img);
    EXPECT(args, STDERR_ONLY, 1, "--image works when generating", "--tokenize");
    snprintf(args, sizeof args, "%s -p hi --max-pixels -5 --image '%s'", vl, img);
    EXPECT(args, STDERR_ONLY, 1, "generate.max_pixels");
    snprintf(args, sizeof args, "%s -p hi --set generate.chat=false --image '%s'", vl, img);
    EXPECT(args, STDERR_ONLY, 1, "generate.chat");
    snprintf(args, sizeof args, "%s -p hi --set generate.imag=x", vl);
    EXPECT(args, STDERR_ONLY, 1, "generate.image");
}

/* A yarn folder's window: factor x original_max_position_embeddings where that
 * exceeds max_position_embeddings (qwen3-tiny-yarn's config with factor 8:
 * 8 x 512 = 4,096 over 2,048), so that a context up to it draws no warning
 * and one past it a warning naming it. */
static void test_yarn_context(void)
{
    char src[PATH_MAX], dir[PATH_MAX], from[PATH_MAX + 64], to[PATH_MAX + 64];
    snprintf(src, sizeof src, "%s/models/qwen3-tiny-yarn", ORIN_TEST_DATA);
    snprintf(dir, sizeof dir, "%s/yarn", tmp);
    CHECK(mkdir(dir, 0755) == 0);
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json",
                                        "generation_config.json", "model.safetensors.index.json",
                                        "model-00001-of-00004.safetensors",
                                        "model-00002-of-00004.safetensors",
                                        "model-00003-of-00004.safetensors",
                                        "model-00004-of-00004.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(from, sizeof from, "%s/%s", src, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        CHECK(symlink(from, to) == 0, "%s", to);
    }
    snprintf(from, sizeof from, "%s/config.json", src);
    char *text = test_read_file(from, NULL);
    cJSON *cfg = cJSON_Parse(text);
    cJSON *rope = cJSON_GetObjectItem(cfg, "rope_parameters");
    CHECK(rope && cJSON_GetObjectItem(rope, "factor"), "%s: no rope_parameters.factor", from);
    if (!rope) {
        free(text);
        cJSON_Delete(cfg);
        return;
    }
    cJSON_ReplaceItemInObject(rope, "factor", cJSON_CreateNumber(8.0));
    char *edited = cJSON_Print(cfg);
    snprintf(to, sizeof to, "%s/config.json", dir);
    CHECK(test_write_file(to, edited, strlen(edited)) == 0);
    free(edited);
    free(text);
    cJSON_Delete(cfg);

    char args[4 * PATH_MAX], base[2 * PATH_MAX];
    snprintf(base, sizeof base, "--config '%s/etc/orin.ini' --set generate.max_tokens=1 "
             "--set model.path='%s' -p hi", ORIN_SOURCE_DIR, dir);
    snprintf(args, sizeof args, "%s --set runtime.max_context=4096", base);
    char *err;
    CHECK(run(args, STDERR_ONLY, &err) == 0 && !has(err, "warning"), "%s:\n%s", args, err);
    free(err);
    snprintf(args, sizeof args, "%s --set runtime.max_context=4097", base);
    EXPECT(args, STDERR_ONLY, 0, "runtime.max_context 4097 exceeds the model's 4096 positions");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s ORIN_RUN GROUP\n", argv[0]);
        return 2;
    }
    orin_run = argv[1];
    tmp = test_tmpdir("cli");
    if (!tmp)
        return 2;
    const char *g = argv[2];
    if (!strcmp(g, "help"))
        test_help();
    else if (!strcmp(g, "version"))
        test_version();
    else if (!strcmp(g, "usage"))
        test_usage();
    else if (!strcmp(g, "bad_set"))
        test_bad_set();
    else if (!strcmp(g, "config_typo"))
        test_config_typo();
    else if (!strcmp(g, "list_plugins"))
        test_list_plugins();
    else if (!strcmp(g, "plugin_dir"))
        test_plugin_dir();
    else if (!strcmp(g, "vl_folder"))
        test_vl_folder();
    else if (!strcmp(g, "yarn_context"))
        test_yarn_context();
    else {
        fprintf(stderr, "unknown group %s\n", g);
        return 2;
    }
    test_tmpdir_remove(tmp);
    return test_finish();
}
