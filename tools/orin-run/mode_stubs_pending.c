/* Placeholders for the modes that have not landed yet, so that orin-run links.
 * Each function here is deleted when its real mode_*.c arrives (mode_generate.c,
 * mode_bench.c, mode_tokenize.c); the file goes when empty. mode_score.c has landed. */
#include <stdio.h>

#include "cli.h"

static int not_yet(const char *mode)
{
    fprintf(stderr, "orin-run: %s is not implemented yet\n", mode);
    return ORIN_EXIT_RUNTIME;
}

int mode_generate(const orin_cli *cli)
{
    return not_yet("generate");
}
