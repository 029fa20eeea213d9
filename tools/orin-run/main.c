/* orin-run: parses the command line into an orin_cli, loads the configuration
 * and hands over to exactly one mode (mode_*.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "orin/error.h"
#include "orin/plugin.h"

#ifndef ORIN_VERSION_STRING
#define ORIN_VERSION_STRING "unknown"
#endif

typedef enum opt_id {
    OPT_CONFIG,
    OPT_SET,
    OPT_PROMPT,
    OPT_IMAGE,
    OPT_MAX_PIXELS,
    OPT_INTERACTIVE,
    OPT_LIST_PLUGINS,
    OPT_TOKENIZE,
    OPT_SCORE,
    OPT_BENCH,
    OPT_JSON,
    OPT_VERBOSE_PROMPT,
    OPT_VERBOSE,
    OPT_PROFILE,
    OPT_HELP,
    OPT_VERSION,
    OPT_GENERATE, /* no option: the mode when none is given */
} opt_id;

typedef struct opt_def {
    const char *name;   /* long name, without "--" */
    char short_name;    /* 0: none */
    bool takes_value;
    opt_id id;
} opt_def;

static const opt_def options[] = {
    {"config", 0, true, OPT_CONFIG},
    {"set", 0, true, OPT_SET},
    {"prompt", 'p', true, OPT_PROMPT},
    {"image", 0, true, OPT_IMAGE},
    {"max-pixels", 0, true, OPT_MAX_PIXELS},
    {"interactive", 'i', false, OPT_INTERACTIVE},
    {"list-plugins", 0, false, OPT_LIST_PLUGINS},
    {"tokenize", 0, true, OPT_TOKENIZE},
    {"score", 0, true, OPT_SCORE},
    {"bench", 0, false, OPT_BENCH},
    {"json", 0, false, OPT_JSON},
    {"verbose-prompt", 0, false, OPT_VERBOSE_PROMPT},
    {"verbose", 'v', false, OPT_VERBOSE},
    {"profile", 0, false, OPT_PROFILE},
    {"help", 'h', false, OPT_HELP},
    {"version", 0, false, OPT_VERSION},
};

#define N_OPTIONS (sizeof options / sizeof options[0])

static void print_help(void)
{
    printf(
        "Usage: orin-run [--config FILE] [--set SECTION.KEY=VALUE]... [MODE] [OPTION]...\n"
        "\n"
        "Runs a Qwen model whose ops come from runtime-loaded plugins; the INI file\n"
        "picks which implementation runs (etc/orin.ini documents every key).\n"
        "\n"
        "Modes (one at a time; without one, orin-run generates):\n"
        "  (none)              generate from generate.prompt, streaming the text, then\n"
        "                      one stats line; with -i, go on as an interactive chat\n"
        "  --score FILE        teacher-forced log-probabilities of FILE's tokens: one\n"
        "                      JSON object per line, then {\"tokens\": n, \"ppl\": p}\n"
        "  --tokenize FILE     the token ids of FILE's text as one JSON array\n"
        "  --bench             prefill and decode throughput ([bench] keys)\n"
        "  --list-plugins      the loaded plugins and their op implementations\n"
        "\n"
        "Options:\n"
        "  --config FILE       read the INI FILE; without it, built-in defaults apply\n"
        "  --set S.K=VALUE     set key K of section S after FILE; repeatable, applied\n"
        "                      in order (also --set=S.K=VALUE)\n"
        "  -p, --prompt TEXT   the same as --set generate.prompt=TEXT\n"
        "  --image FILE        an image (JPEG, PNG) for the user turn, before the text;\n"
        "                      repeatable; replaces generate.image; a vision-language\n"
        "                      model folder (Qwen3-VL). In a chat, /image FILE adds one\n"
        "                      to the next turn; with --bench, the images lead the\n"
        "                      benchmark's prompt\n"
        "  --max-pixels N      the same as --set generate.max_pixels=N: images larger\n"
        "                      than N pixels are resized down to at most N\n"
        "  -i, --interactive   the same as --set generate.interactive=true\n"
        "  --json              machine-readable output (--list-plugins, --bench, stats)\n"
        "  --verbose-prompt    print the rendered prompt on stderr before generating\n"
        "  -v, --verbose       debug log lines on stderr\n"
        "  --profile           with --bench or a generation: time every op of the decode\n"
        "                      steps (run op by op, not replayed as a graph) and print,\n"
        "                      per op kind, time, bytes moved and the fraction of the\n"
        "                      measured memory bandwidth, on stderr\n"
        "  -h, --help          print this help\n"
        "  --version           print the version and the plugin ABI version\n"
        "\n"
        "Plugins: every *.so of plugins.dir (or the files of plugins.load). When\n"
        "plugins.dir is unset: \"plugins\" next to the orin-run executable (a build\n"
        "tree), else <prefix>/lib/orin/plugins (an installed orin).\n"
        "\n"
        "Op binding: the model asks the registry for each op at its device and dtype,\n"
        "naming the provider the INI chose (attention.backend for attention), and\n"
        "binds the first of\n"
        "  1. that provider at that device and dtype;\n"
        "  2. the op's reference implementation (mha for attention) there;\n"
        "  3. any other provider there, in alphabetical order.\n"
        "Devices and dtypes are never substituted. Steps 2 and 3 log one line saying\n"
        "what was bound and why; attention.strict = true makes them an error.\n"
        "\n"
        "Quantized weights: an AWQ int4 folder (config.json's quantization_config) runs\n"
        "as it is (matmul.awq4); model.quant = int8 quantizes a float folder's linear\n"
        "layers at load (matmul.int8). Both matmuls are on the CPU only so far.\n"
        "\n"
        "Exit codes:\n"
        "  %-3d  success\n"
        "  %-3d  bad command line or configuration\n"
        "  %-3d  a plugin, the model or the tokenizer failed to load\n"
        "  %-3d  failure while running (input too long, op error, I/O)\n"
        "  %-3d  interrupted\n",
        ORIN_EXIT_OK, ORIN_EXIT_USAGE, ORIN_EXIT_LOAD, ORIN_EXIT_RUNTIME, ORIN_EXIT_INTERRUPTED);
}

int cli_flush_stdout(void)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    return errno ? orin_error_set("stdout: write failed: %s", strerror(errno))
                 : orin_error_set("stdout: write failed");
}

/* The long option nearest to `name` (without dashes), or NULL. */
static const char *near_option(const char *name)
{
    size_t limit = strlen(name) / 3 < 2 ? 2 : strlen(name) / 3;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        size_t d = orin_edit_distance(name, options[i].name);
        if (d < best_d) {
            best_d = d;
            best = options[i].name;
        }
    }
    return best;
}

static int usage_error(const char *fmt, ...) ORIN_PRINTF(1, 2);

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("orin-run: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'orin-run --help' for more.\n", stderr);
    return ORIN_EXIT_USAGE;
}

static int unknown_option(const char *arg)
{
    char name[64];
    const char *bare = arg + strspn(arg, "-");
    snprintf(name, sizeof name, "%.*s", (int)strcspn(bare, "="), bare);
    const char *hint = *name ? near_option(name) : NULL;
    if (hint)
        return usage_error("unknown option '%s'; did you mean --%s?", arg, hint);
    return usage_error("unknown option '%s'", arg);
}

typedef struct parse_state {
    const char *config_path;
    const char **overrides;   /* argc entries at most */
    int n_overrides;
    char **owned;             /* strings made here, freed at exit */
    int n_owned;
    opt_id mode;              /* OPT_LIST_PLUGINS, ..., OPT_GENERATE */
    const char *mode_arg;     /* as the user spelt the mode option */
} parse_state;

static int add_override(parse_state *ps, const char *prefix, const char *value)
{
    char *s = malloc(strlen(prefix) + strlen(value) + 1);
    if (!s) {
        fprintf(stderr, "orin-run: out of memory\n");
        return ORIN_EXIT_RUNTIME;
    }
    strcpy(s, prefix);
    strcat(s, value);
    ps->owned[ps->n_owned++] = s;
    ps->overrides[ps->n_overrides++] = s;
    return ORIN_EXIT_OK;
}

static int set_mode(parse_state *ps, opt_id mode, const char *arg)
{
    if (ps->mode != OPT_GENERATE && ps->mode != mode)
        return usage_error("%s and %s are different modes; give one", ps->mode_arg, arg);
    if (ps->mode == mode)
        return usage_error("%s given twice", arg);
    ps->mode = mode;
    ps->mode_arg = arg;
    return ORIN_EXIT_OK;
}

/* Acts on one option; returns an exit code, or -1 to carry on. */
static int apply_option(orin_cli *cli, parse_state *ps, const opt_def *o, const char *arg,
                        const char *value)
{
    switch (o->id) {
    case OPT_CONFIG:
        if (ps->config_path)
            return usage_error("--config given twice");
        ps->config_path = value;
        break;
    case OPT_SET:
        ps->overrides[ps->n_overrides++] = value;
        break;
    case OPT_PROMPT:
        return add_override(ps, "generate.prompt=", value) ? ORIN_EXIT_RUNTIME : -1;
    case OPT_MAX_PIXELS:
        return add_override(ps, "generate.max_pixels=", value) ? ORIN_EXIT_RUNTIME : -1;
    case OPT_IMAGE:
        cli->images[cli->n_images++] = value;
        break;
    case OPT_INTERACTIVE:
        ps->overrides[ps->n_overrides++] = "generate.interactive=true";
        break;
    case OPT_LIST_PLUGINS:
    case OPT_BENCH:
        return set_mode(ps, o->id, arg) ? ORIN_EXIT_USAGE : -1;
    case OPT_TOKENIZE:
    case OPT_SCORE:
        if (set_mode(ps, o->id, arg))
            return ORIN_EXIT_USAGE;
        if (o->id == OPT_TOKENIZE)
            cli->tokenize_file = value;
        else
            cli->score_file = value;
        break;
    case OPT_JSON: cli->json = true; break;
    case OPT_VERBOSE_PROMPT: cli->verbose_prompt = true; break;
    case OPT_PROFILE: cli->profile = true; break;
    case OPT_VERBOSE: cli->verbose = true; break;
    case OPT_HELP: print_help(); return ORIN_EXIT_OK;
    case OPT_GENERATE: break;
    case OPT_VERSION:
        printf("orin-run %s (plugin ABI %u)\n", ORIN_VERSION_STRING, ORIN_PLUGIN_ABI_VERSION);
        return ORIN_EXIT_OK;
    }
    return -1;
}

/* Parses argv; returns an exit code to stop with, or -1 to go on and run. */
static int parse_args(int argc, char **argv, orin_cli *cli, parse_state *ps)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const opt_def *o = NULL;
        const char *value = NULL;
        if (arg[0] != '-' || !arg[1])
            return usage_error("unexpected argument '%s' (orin-run takes options only)", arg);
        if (arg[1] == '-') {
            size_t len = strcspn(arg + 2, "=");
            for (size_t k = 0; k < N_OPTIONS && !o; k++)
                if (strlen(options[k].name) == len && !strncmp(options[k].name, arg + 2, len))
                    o = &options[k];
            if (o && arg[2 + len] == '=') {
                if (!o->takes_value)
                    return usage_error("--%s takes no value", o->name);
                value = arg + 3 + len;
            }
        } else {
            for (size_t k = 0; k < N_OPTIONS && !o; k++)
                if (options[k].short_name == arg[1])
                    o = &options[k];
            if (o && arg[2]) {
                if (!o->takes_value)
                    o = NULL; /* "-vi" or "-list-plugins": no bundling */
                else
                    value = arg + 2;
            }
        }
        if (!o)
            return unknown_option(arg);
        if (o->takes_value && !value) {
            if (i + 1 >= argc)
                return usage_error("%s needs a value", arg);
            value = argv[++i];
        }
        int rc = apply_option(cli, ps, o, arg, value);
        if (rc >= 0)
            return rc;
    }
    return -1;
}

static int run_mode(const orin_cli *cli, opt_id mode)
{
    switch (mode) {
    case OPT_LIST_PLUGINS: return mode_list_plugins(cli);
    case OPT_TOKENIZE: return mode_tokenize(cli);
    case OPT_SCORE: return mode_score(cli);
    case OPT_BENCH: return mode_bench(cli);
    default: return mode_generate(cli);
    }
}

int main(int argc, char **argv)
{
    static orin_cli cli; /* the config is large: keep it off the stack */
    parse_state ps = {.mode = OPT_GENERATE};
    int rc;
    cli.argv0 = argv[0];
    ps.overrides = calloc((size_t)argc + 1, sizeof *ps.overrides);
    ps.owned = calloc((size_t)argc + 1, sizeof *ps.owned);
    cli.images = calloc((size_t)argc + 1, sizeof *cli.images);
    if (!ps.overrides || !ps.owned || !cli.images) {
        fprintf(stderr, "orin-run: out of memory\n");
        rc = ORIN_EXIT_RUNTIME;
        goto out;
    }
    rc = parse_args(argc, argv, &cli, &ps);
    if (rc >= 0)
        goto out;
    if (cli.n_images > 0 && ps.mode != OPT_GENERATE && ps.mode != OPT_BENCH) {
        rc = usage_error("--image works when generating (one prompt or -i) and with --bench, "
                         "not with %s", ps.mode_arg);
        goto out;
    }

    orin_log_set_level(cli.verbose ? ORIN_LOG_DEBUG : ORIN_LOG_INFO);
    if (orin_config_load(&cli.cfg, ps.config_path, ps.overrides, ps.n_overrides)) {
        fprintf(stderr, "orin-run: %s\n", orin_error());
        rc = ORIN_EXIT_USAGE;
        goto out;
    }
    rc = run_mode(&cli, ps.mode);
out:
    for (int i = 0; i < ps.n_owned; i++)
        free(ps.owned[i]);
    free(ps.owned);
    free(ps.overrides);
    free(cli.images);
    return rc;
}
