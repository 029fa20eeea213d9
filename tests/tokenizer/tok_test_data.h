/* Reference data for the tokenizer tests (made by scripts/gen_tokenizer_refs.py). */
#ifndef TOK_TEST_DATA_H
#define TOK_TEST_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "orin/tokenizer.h"

typedef struct tok_record {
    int line;               /* 1-based line of corpus.jsonl */
    char cat[32];
    char *text;             /* the exact input bytes */
    size_t len;
    bool valid;             /* valid UTF-8 */
    char *replaced;         /* invalid lines: what Hugging Face was given */
    int32_t *ids;
    size_t n_ids;
    char *decoded;          /* transformers decode, skip_special_tokens=False */
    char *decoded_skip;     /* ... = True */
} tok_record;

typedef struct tok_corpus {
    tok_record *recs;
    size_t n;
} tok_corpus;

int tok_corpus_load(const char *path, tok_corpus *c);
void tok_corpus_free(tok_corpus *c);

/* Reads a JSON file (NULL on failure, with a message on stderr). */
cJSON *tok_json_load(const char *path);
/* A JSON array of numbers as malloc'd ids (non-NULL even when empty). */
int32_t *tok_json_ids(const cJSON *arr, size_t *n);

uint64_t tok_fnv1a64(const void *data, size_t n, uint64_t h);
uint64_t tok_fnv1a64_ids(const int32_t *ids, size_t n);

/* Strict UTF-8 check, written apart from the tokenizer's own. */
bool tok_strict_utf8(const char *s, size_t n);

/* Compares ids; on a mismatch prints where (with the label) and returns false. */
bool tok_ids_equal(const char *label, const int32_t *got, size_t n_got, const int32_t *want, size_t n_want);

/* Loads a tokenizer or exits the test with a message. */
orin_tokenizer *tok_load_or_die(const char *dir);

#endif
