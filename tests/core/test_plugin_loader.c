/* The plugin loader, on test plugins this suite builds (tests/core/plugins):
 * every broken plugin gives an error naming its file and the reason, leaves
 * nothing registered, and the process carries on. */
#include "test_util.h"
#include "orin/plugin.h"
#include "orin/error.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CORE_TEST_PLUGIN_DIR
#error "CORE_TEST_PLUGIN_DIR must name the folder the test plugins are built into"
#endif
#define GOOD_DIR CORE_TEST_PLUGIN_DIR "/good"
#define BAD_DIR CORE_TEST_PLUGIN_DIR "/bad"

static bool contains_all(const char *text, const char *const *words)
{
    for (; *words; words++) {
        if (!strstr(text, *words))
            return false;
    }
    return true;
}

/* A registry and plugin set holding test_good_a, for the failure cases. */
static void setup(orin_plugin_set **set, orin_registry **reg)
{
    *set = orin_plugin_set_create();
    *reg = orin_registry_create();
    int rc = orin_plugin_load(*set, *reg, GOOD_DIR "/test_good_a.so");
    CHECK(rc == 0, "loading test_good_a: %s", orin_error());
}

static void teardown(orin_plugin_set *set, orin_registry *reg)
{
    orin_registry_destroy(reg);
    orin_plugin_set_destroy(set);
}

static void test_good(void)
{
    orin_plugin_set *set;
    orin_registry *reg;
    setup(&set, &reg);

    CHECK(orin_plugin_set_count(set) == 1);
    const orin_plugin *p = orin_plugin_set_at(set, 0);
    CHECK(p && strcmp(p->name, "test_good_a") == 0 && strcmp(p->version, "1.0") == 0);
    CHECK(strcmp(orin_plugin_set_path(set, 0), GOOD_DIR "/test_good_a.so") == 0);
    CHECK(orin_registry_count(reg) == 2);
    CHECK(strcmp(orin_registry_owner(reg, 0), "test_good_a") == 0);
    const orin_op_impl *impl =
        orin_registry_find(reg, "test.op", "a", ORIN_DEVICE_CPU, ORIN_F16);
    CHECK(impl && impl->run && impl->run(NULL, NULL) == 0 && (impl->flags & ORIN_OP_REFERENCE));
    teardown(set, reg);
}

static void test_load_dir(void)
{
    orin_plugin_set *set = orin_plugin_set_create();
    orin_registry *reg = orin_registry_create();

    CHECK(orin_plugin_load_dir(set, reg, GOOD_DIR) == 0, "load_dir: %s", orin_error());
    CHECK(orin_plugin_set_count(set) == 2);
    CHECK(strcmp(orin_plugin_set_at(set, 0)->name, "test_good_a") == 0, "name order");
    CHECK(strcmp(orin_plugin_set_at(set, 1)->name, "test_good_b") == 0, "name order");
    CHECK(orin_registry_count(reg) == 3);

    /* Binding across plugins: b has no cpu/f16, so a (the reference) is bound. */
    orin_bind_request req = {
        .op = "test.op", .provider = "b", .device = ORIN_DEVICE_CPU, .dtype = ORIN_F16,
    };
    const orin_op_impl *got = orin_registry_bind(reg, &req);
    CHECK(got && strcmp(got->provider, "a") == 0);
    teardown(set, reg);

    set = orin_plugin_set_create();
    reg = orin_registry_create();
    CHECK(orin_plugin_load_dir(set, reg, CORE_TEST_PLUGIN_DIR "/no-such-folder") == -1);
    CHECK(contains_all(orin_error(), (const char *[]){"no-such-folder", "No such file", NULL}),
          "missing folder: %s", orin_error());
    teardown(set, reg);
}

/* Loads `file` from the bad folder into a registry holding test_good_a and
 * checks that it fails with every word of `words` and leaves no trace. */
static void expect_failure(const char *file, const char *const *words)
{
    char path[4096];
    orin_plugin_set *set;
    orin_registry *reg;

    if (file[0] == '/')
        snprintf(path, sizeof path, "%s", file);
    else
        snprintf(path, sizeof path, "%s/%s", BAD_DIR, file);
    setup(&set, &reg);
    orin_error_clear();
    CHECK(orin_plugin_load(set, reg, path) == -1, "%s loaded", file);
    const char *msg = orin_error();
    CHECK(strstr(msg, path) != NULL, "%s: message does not name the file: %s", file, msg);
    CHECK(contains_all(msg, words), "%s: message lacks the reason: %s", file, msg);
    CHECK(strchr(msg, '\n') == NULL, "%s: one line: %s", file, msg);
    CHECK(orin_plugin_set_count(set) == 1, "%s: plugin set changed", file);
    CHECK(orin_registry_count(reg) == 2, "%s: registry changed (%zu entries)", file,
          orin_registry_count(reg));
    printf("ok: %s\n", msg);
    teardown(set, reg);
}

static void test_bad_plugins(const char *tmp)
{
    char text_so[512], missing[512];

    /* Text files wearing a .so name: one shorter than an ELF header, one longer. */
    snprintf(text_so, sizeof text_so, "%s/bad.so", tmp);
    const char *junk = "this is not a shared object\n";
    CHECK(test_write_file(text_so, junk, strlen(junk)) == 0);
    expect_failure(text_so, (const char *[]){"cannot load", "file too short", NULL});
    const char *prose = "This is a plain text file. It is long enough to hold an ELF header, "
                        "but it does not start with one.\n";
    CHECK(test_write_file(text_so, prose, strlen(prose)) == 0);
    expect_failure(text_so, (const char *[]){"cannot load", "invalid ELF header", NULL});
    snprintf(missing, sizeof missing, "%s/absent.so", tmp);
    expect_failure(missing, (const char *[]){"cannot load", "No such file", NULL});

    expect_failure("wrong_abi.so",
                   (const char *[]){"built for plugin ABI 7", "this orin has ABI 5", NULL});
    expect_failure("no_entry.so", (const char *[]){"no symbol", "orin_plugin_entry", NULL});
    expect_failure("null_entry.so", (const char *[]){"orin_plugin_entry", "NULL", NULL});
    expect_failure("small_struct.so", (const char *[]){"8 bytes", "at least", NULL});
    expect_failure("no_register.so", (const char *[]){"test_no_register", "register_ops", NULL});
    expect_failure("no_name.so", (const char *[]){"no name", NULL});
    expect_failure("dup_op.so",
                   (const char *[]){"test_dup_op", "duplicate", "test.op/a/cpu/f32",
                                    "plugin \"test_good_a\"", NULL});
    expect_failure("dup_name.so",
                   (const char *[]){"duplicate plugin name \"test_good_a\"",
                                    "test_good_a.so", NULL});
    expect_failure("fail_midway.so",
                   (const char *[]){"test_fail_midway", "failed to register",
                                    "kernel table for sm_00 is missing", NULL});
    expect_failure("ignore_error.so",
                   (const char *[]){"test_ignore_error", "duplicate", "test.op/a/cpu/f32",
                                    NULL});
}

/* load_dir takes regular *.so files (and links to them) in name order, skips
 * everything else, and stops at the first failure. */
static void test_dir_filtering(const char *tmp)
{
    char dir[512], path[600];

    snprintf(dir, sizeof dir, "%s/mixed", tmp);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(path, sizeof path, "%s/b_link.so", dir);
    CHECK(symlink(GOOD_DIR "/test_good_b.so", path) == 0);
    snprintf(path, sizeof path, "%s/a_folder.so", dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/README", dir);
    CHECK(test_write_file(path, "x", 1) == 0);
    snprintf(path, sizeof path, "%s/.so", dir);
    CHECK(test_write_file(path, "x", 1) == 0);
    snprintf(path, sizeof path, "%s/c_plugin.so.1", dir);
    CHECK(test_write_file(path, "x", 1) == 0);

    orin_plugin_set *set = orin_plugin_set_create();
    orin_registry *reg = orin_registry_create();
    CHECK(orin_plugin_load_dir(set, reg, dir) == 0, "mixed folder: %s", orin_error());
    CHECK(orin_plugin_set_count(set) == 1 &&
          strcmp(orin_plugin_set_at(set, 0)->name, "test_good_b") == 0);
    teardown(set, reg);

    /* Add a broken one after it: the good one loads, then the error. */
    snprintf(path, sizeof path, "%s/c_broken.so", dir);
    CHECK(symlink(BAD_DIR "/wrong_abi.so", path) == 0);
    set = orin_plugin_set_create();
    reg = orin_registry_create();
    CHECK(orin_plugin_load_dir(set, reg, dir) == -1);
    CHECK(contains_all(orin_error(), (const char *[]){"c_broken.so", "ABI 7", NULL}),
          "broken in folder: %s", orin_error());
    CHECK(orin_plugin_set_count(set) == 1 && orin_registry_count(reg) == 1);
    teardown(set, reg);
}

int main(void)
{
    char *tmp = test_tmpdir("plugins");
    CHECK(tmp != NULL);
    if (!tmp)
        return test_finish();

    test_good();
    test_load_dir();
    test_bad_plugins(tmp);
    test_dir_filtering(tmp);

    CHECK(test_tmpdir_remove(tmp));
    return test_finish();
}
