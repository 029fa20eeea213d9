/* --tokenize FILE: the token ids of FILE's text as one JSON array on one line.
 *
 * The text is the file's exact bytes ("-" reads standard input): no chat
 * template, no BOS, a final newline is tokenized like any other. The tokenizer
 * is model.path's tokenizer.json (and tokenizer_config.json); no weights load. */
#include "cli.h"

#include "orin/error.h"
#include "orin/file.h"
#include "orin/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_input(const char *path, size_t *len)
{
    if (strcmp(path, "-") == 0)
        return orin_read_stream(stdin, "<stdin>", ORIN_RUN_MAX_TEXT_BYTES, len);
    return orin_read_file(path, ORIN_RUN_MAX_TEXT_BYTES, len);
}

static int print_ids(const int32_t *ids, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++)
        printf(i ? ", %d" : "%d", ids[i]);
    fputs("]\n", stdout);
    return cli_flush_stdout();
}

int mode_tokenize(const orin_cli *cli)
{
    orin_tokenizer *tok = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    size_t len = 0, n_ids = 0;
    int rc;

    if (!cli->cfg.model.path[0]) {
        fprintf(stderr, "orin-run: --tokenize needs model.path (the folder with tokenizer.json): "
                        "give --config FILE or --set model.path=DIR\n");
        return ORIN_EXIT_USAGE;
    }
    tok = orin_tokenizer_load(cli->cfg.model.path);
    if (!tok) {
        rc = ORIN_EXIT_LOAD;
        goto fail;
    }
    rc = ORIN_EXIT_RUNTIME;
    text = read_input(cli->tokenize_file, &len);
    if (!text || orin_tokenizer_encode(tok, text, len, &ids, &n_ids) || print_ids(ids, n_ids))
        goto fail;
    rc = ORIN_EXIT_OK;
    goto out;
fail:
    fprintf(stderr, "orin-run: %s\n", orin_error());
out:
    free(ids);
    free(text);
    orin_tokenizer_free(tok);
    return rc;
}
