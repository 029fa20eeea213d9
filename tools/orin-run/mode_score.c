/* --score FILE: teacher-forced log-probabilities of the file's tokens.
 *
 * One JSON object per line for every token after the first,
 *   {"pos": i, "id": t, "logprob": log p(t | tokens before i)}
 * then {"tokens": n, "scored": n - 1, "ppl": exp(-mean logprob)}.
 * score.path = prefill runs the tokens through the prefill path in chunks;
 * score.path = decode feeds them one at a time through the decode path. The
 * output is assembled in memory and printed only when every token was scored, so
 * a failure never leaves a partial result that looks whole. */
#include "cli.h"
#include "engine.h"
#include "text_buffer.h"

#include "orin/error.h"
#include "orin/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* log_softmax(row)[id], accumulated in double. */
static double token_logprob(const float *row, int32_t vocab, int32_t id)
{
    float max = row[0];
    for (int32_t j = 1; j < vocab; j++)
        if (row[j] > max)
            max = row[j];
    double sum = 0;
    for (int32_t j = 0; j < vocab; j++)
        sum += exp((double)row[j] - (double)max);
    return (double)row[id] - (double)max - log(sum);
}

typedef struct score_state {
    const int32_t *ids;
    int32_t n;
    double total;         /* sum of the log-probs so far */
    text_buffer out;
} score_state;

/* Row `row` of logits predicts token row + 1. */
static int score_row(score_state *s, const float *logits, int32_t vocab, int32_t row)
{
    if (row + 1 >= s->n)
        return 0;
    int32_t id = s->ids[row + 1];
    double lp = token_logprob(logits, vocab, id);
    s->total += lp;
    return text_buffer_printf(&s->out, "{\"pos\": %d, \"id\": %d, \"logprob\": %.9g}\n", row + 1,
                              id, lp);
}

static int score_prefill(orin_model *m, score_state *s, int32_t chunk, int32_t vocab)
{
    float *logits = malloc((size_t)chunk * (size_t)vocab * sizeof *logits);
    if (!logits)
        return orin_error_set("score: out of memory for %d rows of logits", chunk);
    int rc = 0;
    for (int32_t done = 0; rc == 0 && done < s->n; done += chunk) {
        int32_t len = s->n - done < chunk ? s->n - done : chunk;
        rc = orin_model_prefill(m, s->ids + done, len, done, logits, true);
        for (int32_t r = 0; rc == 0 && r < len; r++)
            rc = score_row(s, logits + (size_t)r * vocab, vocab, done + r);
    }
    free(logits);
    return rc;
}

static int score_decode(orin_model *m, score_state *s, int32_t vocab)
{
    float *logits = malloc((size_t)vocab * sizeof *logits);
    if (!logits)
        return orin_error_set("score: out of memory");
    int rc = 0;
    for (int32_t i = 0; rc == 0 && i + 1 < s->n; i++) {
        rc = orin_model_decode(m, s->ids[i], i, logits);
        if (rc == 0)
            rc = score_row(s, logits, vocab, i);
    }
    free(logits);
    return rc;
}

int mode_score(const orin_cli *cli)
{
    orin_engine e = {0};
    int32_t *ids = NULL;
    size_t n_ids = 0;
    score_state s = {0};
    int code = engine_open_model(&e, cli);
    if (code != ORIN_EXIT_OK)
        return code;

    code = ORIN_EXIT_RUNTIME;
    if (engine_encode_file(&e, cli->score_file, &ids, &n_ids) != 0)
        goto fail;
    int32_t ctx = orin_model_context(e.model);
    if (n_ids < 2) {
        orin_error_set("%s: %zu token%s; scoring needs at least 2", cli->score_file, n_ids,
                       n_ids == 1 ? "" : "s");
        goto fail;
    }
    if (n_ids > (size_t)ctx) {
        orin_error_set("%s: %zu tokens do not fit the context of %d (runtime.max_context)",
                       cli->score_file, n_ids, ctx);
        goto fail;
    }
    s.ids = ids;
    s.n = (int32_t)n_ids;
    int32_t vocab = orin_model_get_config(e.model)->vocab_size;
    int rc = cli->cfg.score.path == ORIN_SCORE_DECODE
                 ? score_decode(e.model, &s, vocab)
                 : score_prefill(e.model, &s, orin_model_prefill_chunk(e.model), vocab);
    if (rc != 0 || text_buffer_printf(&s.out, "{\"tokens\": %d, \"scored\": %d, \"ppl\": %.9g}\n",
                                      s.n, s.n - 1, exp(-s.total / (s.n - 1))) != 0)
        goto fail;
    fwrite(s.out.data, 1, s.out.len, stdout);
    if (cli_flush_stdout() != 0)
        goto fail;
    code = ORIN_EXIT_OK;
    goto out;
fail:
    fprintf(stderr, "orin-run: %s\n", orin_error());
out:
    text_buffer_free(&s.out);
    free(ids);
    engine_close(&e);
    return code;
}
