/* orin-run: the parsed command line and the modes it dispatches to.
 * main.c parses and validates; each mode_*.c does one job and returns an exit code. */
#ifndef ORIN_RUN_CLI_H
#define ORIN_RUN_CLI_H

#include <stdbool.h>
#include "orin/config.h"

/* Exit codes (documented in --help). */
enum {
    ORIN_EXIT_OK = 0,
    ORIN_EXIT_USAGE = 1,       /* bad command line or configuration */
    ORIN_EXIT_LOAD = 2,        /* a plugin, the model or the tokenizer failed to load */
    ORIN_EXIT_RUNTIME = 3,     /* failure while running: input too long, op error, I/O */
    ORIN_EXIT_INTERRUPTED = 130,
};

/* The largest text file a mode reads (--score, --tokenize). */
#define ORIN_RUN_MAX_TEXT_BYTES (1u << 30)

typedef struct orin_cli {
    orin_config cfg;
    const char *argv0;          /* for locating the default plugin folder */
    const char *score_file;     /* --score FILE */
    const char *tokenize_file;  /* --tokenize FILE */
    const char **images;        /* --image FILE, in order (replace generate.image) */
    int n_images;
    bool list_plugins;          /* --list-plugins */
    bool bench;                 /* --bench */
    bool json;                  /* --json: machine-readable stats / bench */
    bool verbose_prompt;        /* --verbose-prompt */
    bool verbose;               /* -v: debug log lines */
    bool profile;               /* --profile: per-op times of the decode steps */
} orin_cli;

/* Flushes stdout: -1 with orin_error_set() when anything written to it was
 * lost (a full disk, a closed pipe), so that no mode exits 0 over a partial
 * result. Every mode ends with it. */
int cli_flush_stdout(void);

int mode_list_plugins(const orin_cli *cli);
int mode_tokenize(const orin_cli *cli);
int mode_score(const orin_cli *cli);
int mode_generate(const orin_cli *cli);
int mode_bench(const orin_cli *cli);

#endif
