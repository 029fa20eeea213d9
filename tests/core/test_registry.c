/* The op registry: exact binds, the documented fallback order and its log
 * line, strict mode, unknown ops, duplicates and transactions. */
#include "test_util.h"
#include "orin/registry.h"
#include "orin/error.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int run_a(const orin_exec *ex, const void *args) { return 0; }
static int run_b(const orin_exec *ex, const void *args) { return 1; }

static orin_op_impl impl(const char *op, const char *provider, orin_device_kind dev,
                         orin_dtype dt, uint32_t flags)
{
    return (orin_op_impl){
        .op = op, .provider = provider, .device = dev, .dtype = dt, .run = run_a,
        .flags = flags,
    };
}

/* ---- capturing stderr, to read the log lines ---- */

static int saved_stderr = -1;
static char capture_path[64];

static void capture_begin(void)
{
    fflush(stderr);
    snprintf(capture_path, sizeof capture_path, "/tmp/orin-test-registry-XXXXXX");
    int fd = mkstemp(capture_path);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* Returns what was written to stderr since capture_begin (caller frees). */
static char *capture_end(void)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    char *text = test_read_file(capture_path, NULL);
    unlink(capture_path);
    return text ? text : strdup("");
}

static bool contains_all(const char *text, const char *const *words)
{
    for (; *words; words++) {
        if (!strstr(text, *words))
            return false;
    }
    return true;
}

/* attention.decode: mha (reference) at cpu/f32 and cuda/f16, fa1 and fa2 at
 * cuda/f16, fa2 and zeta (no reference) at cpu/f16; rmsnorm by "common". */
static orin_registry *make_registry(void)
{
    orin_registry *reg = orin_registry_create();
    const orin_op_impl impls[] = {
        impl("attention.decode", "fa2", ORIN_DEVICE_CUDA, ORIN_F16, ORIN_OP_GRAPH_SAFE),
        impl("attention.decode", "zeta", ORIN_DEVICE_CPU, ORIN_F16, 0),
        impl("attention.decode", "mha", ORIN_DEVICE_CPU, ORIN_F32, ORIN_OP_REFERENCE),
        impl("attention.decode", "fa1", ORIN_DEVICE_CUDA, ORIN_F16, 0),
        impl("attention.decode", "mha", ORIN_DEVICE_CUDA, ORIN_F16, ORIN_OP_REFERENCE),
        impl("attention.decode", "fa2", ORIN_DEVICE_CPU, ORIN_F16, 0),
        impl("rmsnorm", "common", ORIN_DEVICE_CPU, ORIN_F32, ORIN_OP_REFERENCE),
    };
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        CHECK(orin_registry_add(reg, &impls[i]) == 0, "add %zu: %s", i, orin_error());
    return reg;
}

static const orin_op_impl *bind(orin_registry *reg, const char *op, const char *provider,
                                orin_device_kind dev, orin_dtype dt, bool strict, char **log)
{
    orin_bind_request req = {
        .op = op, .provider = provider, .device = dev, .dtype = dt, .strict = strict,
    };
    capture_begin();
    const orin_op_impl *got = orin_registry_bind(reg, &req);
    char *text = capture_end();
    if (log)
        *log = text;
    else
        free(text);
    return got;
}

static void test_exact(void)
{
    orin_registry *reg = make_registry();
    char *log;

    const orin_op_impl *got = bind(reg, "attention.decode", "fa2", ORIN_DEVICE_CUDA, ORIN_F16,
                                   false, &log);
    CHECK(got && strcmp(got->provider, "fa2") == 0 && got->device == ORIN_DEVICE_CUDA &&
          got->dtype == ORIN_F16 && (got->flags & ORIN_OP_GRAPH_SAFE));
    CHECK(log[0] == '\0', "an exact bind logs nothing at INFO: %s", log);
    free(log);

    /* At DEBUG an exact bind says so. */
    orin_log_set_level(ORIN_LOG_DEBUG);
    got = bind(reg, "attention.decode", "fa1", ORIN_DEVICE_CUDA, ORIN_F16, false, &log);
    orin_log_set_level(ORIN_LOG_INFO);
    CHECK(got && strcmp(got->provider, "fa1") == 0);
    CHECK(contains_all(log, (const char *[]){"debug", "attention.decode", "\"fa1\"", NULL}),
          "debug line: %s", log);
    free(log);

    CHECK(orin_registry_find(reg, "attention.decode", "mha", ORIN_DEVICE_CPU, ORIN_F32));
    CHECK(!orin_registry_find(reg, "attention.decode", "mha", ORIN_DEVICE_CPU, ORIN_F16));
    CHECK(!orin_registry_find(reg, "nope", "mha", ORIN_DEVICE_CPU, ORIN_F32));

    /* provides: any device and dtype, but the exact op and provider. */
    CHECK(orin_registry_provides(reg, "attention.decode", "mha"));
    CHECK(orin_registry_provides(reg, "attention.decode", "fa2"));
    CHECK(!orin_registry_provides(reg, "attention.decode", "fa9"));
    CHECK(!orin_registry_provides(reg, "nope", "mha"));
    CHECK(!orin_registry_provides(NULL, "attention.decode", "mha"));
    orin_registry_destroy(reg);
}

static void test_fallback(void)
{
    orin_registry *reg = make_registry();
    char *log;

    /* fa2 has no cpu/f32: the reference (mha) is bound, with one log line. */
    const orin_op_impl *got = bind(reg, "attention.decode", "fa2", ORIN_DEVICE_CPU, ORIN_F32,
                                   false, &log);
    CHECK(got && strcmp(got->provider, "mha") == 0 && got->device == ORIN_DEVICE_CPU &&
          got->dtype == ORIN_F32);
    CHECK(contains_all(log, (const char *[]){"attention.decode", "\"fa2\"", "cpu/f32", "\"mha\"",
                                             "reference", NULL}),
          "fallback line: %s", log);
    CHECK(strchr(log, '\n') == log + strlen(log) - 1, "exactly one line: %s", log);
    free(log);

    /* fa1 has no cpu/f16 and there is no reference there: alphabetical, so
     * fa2 before zeta although zeta registered first. */
    got = bind(reg, "attention.decode", "fa1", ORIN_DEVICE_CPU, ORIN_F16, false, &log);
    CHECK(got && strcmp(got->provider, "fa2") == 0, "got %s", got ? got->provider : "NULL");
    CHECK(contains_all(log, (const char *[]){"\"fa1\"", "cpu/f16", "\"fa2\"", "alphabetical",
                                             NULL}),
          "alphabetical line: %s", log);
    free(log);

    /* A provider nobody registered (a typo in the INI) is explained as such. */
    got = bind(reg, "attention.decode", "fa3", ORIN_DEVICE_CUDA, ORIN_F16, false, &log);
    CHECK(got && strcmp(got->provider, "mha") == 0);
    CHECK(contains_all(log, (const char *[]){"\"fa3\"", "registered", "\"mha\"", NULL}),
          "unknown provider line: %s", log);
    free(log);

    /* No provider asked: the reference first, then alphabetical, silently. */
    got = bind(reg, "attention.decode", NULL, ORIN_DEVICE_CUDA, ORIN_F16, false, &log);
    CHECK(got && strcmp(got->provider, "mha") == 0);
    CHECK(log[0] == '\0', "no log without a provider: %s", log);
    free(log);
    got = bind(reg, "attention.decode", NULL, ORIN_DEVICE_CPU, ORIN_F16, false, &log);
    CHECK(got && strcmp(got->provider, "fa2") == 0);
    CHECK(log[0] == '\0', "no log without a provider: %s", log);
    free(log);
    orin_registry_destroy(reg);
}

/* `supports`: a provider that declines a call's shape is passed over, at every
 * step of the resolution, and the line says why. The args here are an int: the
 * "head_dim" of the call. */
static bool only_64(const void *args, char *why, size_t cap)
{
    int hd = *(const int *)args;
    if (hd == 64)
        return true;
    snprintf(why, cap, "head_dim %d (runs 64)", hd);
    return false;
}

static bool declines_all(const void *args, char *why, size_t cap)
{
    return false; /* and gives no reason */
}

static void test_supports(void)
{
    orin_registry *reg = orin_registry_create();
    orin_op_impl fa2 = impl("attention.prefill", "fa2", ORIN_DEVICE_CUDA, ORIN_F16, 0);
    orin_op_impl mha = impl("attention.prefill", "mha", ORIN_DEVICE_CUDA, ORIN_F16,
                            ORIN_OP_REFERENCE);
    orin_op_impl fa1 = impl("attention.prefill", "fa1", ORIN_DEVICE_CUDA, ORIN_F16, 0);
    fa2.supports = only_64;
    fa1.supports = declines_all;
    CHECK(orin_registry_add(reg, &fa2) == 0 && orin_registry_add(reg, &mha) == 0 &&
          orin_registry_add(reg, &fa1) == 0);
    int hd = 64;
    orin_bind_request req = {.op = "attention.prefill", .provider = "fa2",
                             .device = ORIN_DEVICE_CUDA, .dtype = ORIN_F16, .args = &hd};
    capture_begin();
    const orin_op_impl *got = orin_registry_bind(reg, &req);
    char *log = capture_end();
    CHECK(got && strcmp(got->provider, "fa2") == 0 && log[0] == '\0', "hd 64: fa2, silently");
    free(log);

    hd = 96;
    capture_begin();
    got = orin_registry_bind(reg, &req);
    log = capture_end();
    CHECK(got && strcmp(got->provider, "mha") == 0, "hd 96: the reference");
    CHECK(contains_all(log, (const char *[]){"\"fa2\" does not run head_dim 96 (runs 64)",
                                             "cuda/f16", "\"mha\"", "reference", NULL}),
          "declined line: %s", log);
    free(log);

    req.strict = true;
    CHECK(orin_registry_bind(reg, &req) == NULL &&
              strstr(orin_error(), "does not run head_dim 96") && strstr(orin_error(), "strict"),
          "strict: %s", orin_error());
    req.strict = false;

    /* no args: nothing to check, the provider asked for is bound */
    req.args = NULL;
    CHECK(orin_registry_bind(reg, &req) == &orin_registry_at(reg, 0)[0], "no args: fa2");

    /* a provider declining without a reason, and no one else who runs it */
    req.args = &hd;
    req.provider = "fa1";
    mha.supports = only_64;
    orin_registry *reg2 = orin_registry_create();
    CHECK(orin_registry_add(reg2, &fa1) == 0 && orin_registry_add(reg2, &mha) == 0);
    CHECK(orin_registry_bind(reg2, &req) == NULL &&
              strstr(orin_error(), "\"fa1\" does not run a call of this shape") &&
              strstr(orin_error(), "no other"),
          "nobody runs it: %s", orin_error());
    orin_registry_destroy(reg2);
    orin_registry_destroy(reg);
}

static void test_errors(void)
{
    orin_registry *reg = make_registry();
    char *log;

    /* strict: the fallback becomes an error with the same explanation. */
    const orin_op_impl *got = bind(reg, "attention.decode", "fa2", ORIN_DEVICE_CPU, ORIN_F32,
                                   true, &log);
    CHECK(got == NULL);
    CHECK(log[0] == '\0', "strict logs nothing: %s", log);
    free(log);
    CHECK(contains_all(orin_error(), (const char *[]){"attention.decode", "\"fa2\"", "cpu/f32",
                                                      "strict", "\"mha\"", NULL}),
          "strict error: %s", orin_error());
    /* strict with an exact match is fine. */
    CHECK(bind(reg, "attention.decode", "fa2", ORIN_DEVICE_CPU, ORIN_F16, true, NULL));

    CHECK(bind(reg, "attention.nope", "fa2", ORIN_DEVICE_CPU, ORIN_F32, false, NULL) == NULL);
    CHECK(contains_all(orin_error(), (const char *[]){"attention.nope", "unknown op", NULL}),
          "unknown op: %s", orin_error());
    CHECK(bind(reg, "attention.nope", NULL, ORIN_DEVICE_CPU, ORIN_F32, false, NULL) == NULL);

    /* Known op, but nothing at that (device, dtype): never substituted. */
    CHECK(bind(reg, "rmsnorm", "common", ORIN_DEVICE_CUDA, ORIN_BF16, false, NULL) == NULL);
    CHECK(contains_all(orin_error(), (const char *[]){"rmsnorm", "cuda/bf16", "\"common\"",
                                                      "common cpu/f32", NULL}),
          "nothing fits: %s", orin_error());
    orin_registry_destroy(reg);
}

static void test_add_errors(void)
{
    orin_registry *reg = make_registry();
    size_t n = orin_registry_count(reg);

    /* A duplicate key names the key and its first owner (the core here). */
    orin_op_impl dup = impl("attention.decode", "fa2", ORIN_DEVICE_CUDA, ORIN_F16, 0);
    dup.run = run_b;
    CHECK(orin_registry_add(reg, &dup) == -1);
    CHECK(contains_all(orin_error(), (const char *[]){"duplicate", "attention.decode", "fa2",
                                                      "cuda", "f16", "core", NULL}),
          "duplicate: %s", orin_error());
    CHECK(orin_registry_count(reg) == n);
    /* The first registration stays. */
    CHECK(orin_registry_find(reg, "attention.decode", "fa2", ORIN_DEVICE_CUDA, ORIN_F16)->run ==
          run_a);

    orin_op_impl bad = impl("x", "p", ORIN_DEVICE_CPU, ORIN_F32, 0);
    bad.run = NULL;
    CHECK(orin_registry_add(reg, &bad) == -1 && strstr(orin_error(), "run"), "no run: %s",
          orin_error());
    bad = impl("x", "", ORIN_DEVICE_CPU, ORIN_F32, 0);
    CHECK(orin_registry_add(reg, &bad) == -1, "empty provider");
    bad = impl(NULL, "p", ORIN_DEVICE_CPU, ORIN_F32, 0);
    CHECK(orin_registry_add(reg, &bad) == -1, "no op name");
    bad = impl("x", "p", ORIN_DEVICE_CPU, ORIN_DTYPE_COUNT, 0);
    CHECK(orin_registry_add(reg, &bad) == -1, "bad dtype");
    CHECK(orin_registry_add(reg, NULL) == -1, "NULL impl");
    CHECK(orin_registry_count(reg) == n);

    /* Iteration is in registration order; the core owns these. */
    CHECK(strcmp(orin_registry_at(reg, 0)->provider, "fa2") == 0);
    CHECK(strcmp(orin_registry_at(reg, n - 1)->op, "rmsnorm") == 0);
    CHECK(orin_registry_at(reg, n) == NULL);
    CHECK(strcmp(orin_registry_owner(reg, 0), "") == 0);
    orin_registry_destroy(reg);
}

static void test_transactions(void)
{
    orin_registry *reg = make_registry();
    size_t n = orin_registry_count(reg);

    /* Commit keeps, with the owner recorded. */
    orin_registry_begin(reg, "plugin_one");
    orin_op_impl a = impl("swiglu", "one", ORIN_DEVICE_CPU, ORIN_F32, 0);
    CHECK(orin_registry_add(reg, &a) == 0);
    CHECK(orin_registry_commit(reg) == 0, "commit: %s", orin_error());
    CHECK(orin_registry_count(reg) == n + 1);
    CHECK(strcmp(orin_registry_owner(reg, n), "plugin_one") == 0);

    /* A later duplicate names that plugin as the first owner. */
    orin_registry_begin(reg, "plugin_two");
    CHECK(orin_registry_add(reg, &a) == -1);
    CHECK(contains_all(orin_error(), (const char *[]){"swiglu", "plugin \"plugin_one\"", NULL}),
          "duplicate names the owner: %s", orin_error());
    orin_registry_rollback(reg);

    /* Rollback removes everything added since begin. */
    orin_registry_begin(reg, "plugin_three");
    orin_op_impl b = impl("add", "three", ORIN_DEVICE_CPU, ORIN_F32, 0);
    orin_op_impl c = impl("add", "three", ORIN_DEVICE_CPU, ORIN_F16, 0);
    CHECK(orin_registry_add(reg, &b) == 0 && orin_registry_add(reg, &c) == 0);
    CHECK(orin_registry_count(reg) == n + 3);
    orin_registry_rollback(reg);
    CHECK(orin_registry_count(reg) == n + 1, "rolled back");
    CHECK(!orin_registry_find(reg, "add", "three", ORIN_DEVICE_CPU, ORIN_F32));

    /* A failed add that the plugin ignored makes commit fail and roll back. */
    orin_registry_begin(reg, "plugin_four");
    orin_op_impl d = impl("argmax", "four", ORIN_DEVICE_CPU, ORIN_F32, 0);
    CHECK(orin_registry_add(reg, &d) == 0);
    (void)orin_registry_add(reg, &a); /* duplicate, ignored */
    orin_op_impl e = impl("argmax", "four", ORIN_DEVICE_CPU, ORIN_F16, 0);
    CHECK(orin_registry_add(reg, &e) == 0);
    orin_error_clear();
    CHECK(orin_registry_commit(reg) == -1, "commit after an ignored failure");
    CHECK(contains_all(orin_error(), (const char *[]){"duplicate", "swiglu", "plugin_one", NULL}),
          "commit reports the first failure: %s", orin_error());
    CHECK(orin_registry_count(reg) == n + 1, "nothing of plugin_four stays");
    CHECK(!orin_registry_find(reg, "argmax", "four", ORIN_DEVICE_CPU, ORIN_F32));

    /* The next transaction starts clean. */
    orin_registry_begin(reg, "plugin_five");
    CHECK(orin_registry_add(reg, &d) == 0);
    CHECK(orin_registry_commit(reg) == 0, "clean after a failed one: %s", orin_error());

    CHECK(orin_registry_commit(reg) == -1, "commit without begin");
    orin_registry_rollback(reg); /* harmless without begin */
    CHECK(orin_registry_count(reg) == n + 2);
    orin_registry_destroy(reg);
}

int main(void)
{
    test_exact();
    test_fallback();
    test_supports();
    test_errors();
    test_add_errors();
    test_transactions();
    return test_finish();
}
