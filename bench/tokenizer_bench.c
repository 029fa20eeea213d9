/* orin's side of bench/tokenizer_bench.py: loads a tokenizer, encodes one text
 * file as one string on one thread, and prints one JSON line of timings.
 *
 * usage: tokenizer_bench MODEL_DIR TEXT_FILE [IDS_OUT]
 *   load_ms      each of 3 loads of tokenizer.json + tokenizer_config.json (the best)
 *   cold_s       the first encode after a load (empty word cache)
 *   warm_s       the best of 3 further encodes
 * IDS_OUT, when given, receives the ids as little-endian int32 for the script
 * to compare with Hugging Face's. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "orin/error.h"
#include "orin/tokenizer.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *data = malloc((size_t)size + 1);
    if (data && fread(data, 1, (size_t)size, f) != (size_t)size) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *len = (size_t)size;
    return data;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR TEXT_FILE [IDS_OUT]\n", argv[0]);
        return 2;
    }
    size_t len;
    char *text = read_file(argv[2], &len);
    if (!text) {
        fprintf(stderr, "tokenizer_bench: cannot read %s\n", argv[2]);
        return 1;
    }

    orin_tokenizer *tok = NULL;
    double load_best = 1e30;
    for (int i = 0; i < 3; i++) {
        orin_tokenizer_free(tok);
        double t0 = now();
        tok = orin_tokenizer_load(argv[1]);
        double dt = now() - t0;
        if (!tok) {
            fprintf(stderr, "tokenizer_bench: %s\n", orin_error());
            return 1;
        }
        load_best = dt < load_best ? dt : load_best;
    }

    int32_t *ids = NULL;
    size_t n_ids = 0;
    double cold = 0, warm = 1e30;
    for (int i = 0; i < 4; i++) {
        free(ids);
        double t0 = now();
        if (orin_tokenizer_encode(tok, text, len, &ids, &n_ids)) {
            fprintf(stderr, "tokenizer_bench: %s\n", orin_error());
            return 1;
        }
        double dt = now() - t0;
        if (i == 0)
            cold = dt;
        else if (dt < warm)
            warm = dt;
    }
    if (argc > 3) {
        FILE *f = fopen(argv[3], "wb");
        if (!f || fwrite(ids, sizeof *ids, n_ids, f) != n_ids || fclose(f)) {
            fprintf(stderr, "tokenizer_bench: cannot write %s\n", argv[3]);
            return 1;
        }
    }
    printf("{\"bytes\": %zu, \"ids\": %zu, \"load_ms\": %.1f, \"cold_s\": %.4f, \"warm_s\": %.4f}\n", len, n_ids,
           load_best * 1e3, cold, warm);
    free(ids);
    free(text);
    orin_tokenizer_free(tok);
    return 0;
}
