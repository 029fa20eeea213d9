/* The token loop shared by generate, chat and bench: prefill what the KV cache
 * does not hold yet, then sample and decode until a stop condition. */
#ifndef ORIN_RUN_GENERATE_H
#define ORIN_RUN_GENERATE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "engine.h"
#include "orin/chat_template.h"
#include "orin/sampler.h"
#include "orin/vl_prompt.h"

typedef enum stop_reason { STOP_EOS = 0, STOP_MAX_TOKENS, STOP_CONTEXT, STOP_INTERRUPT } stop_reason;

typedef struct generator {
    orin_model *model;
    const orin_tokenizer *tok;
    orin_chat_template *tpl;      /* NULL when generate.chat = false */
    orin_sampler *sampler;
    int32_t context, vocab;
    int32_t max_tokens;
    bool chat, stream, verbose_prompt;
    int32_t stop_ids[16];
    int n_stop;
    int32_t *cached;              /* the tokens whose K/V are in the cache, in order */
    int32_t *cached_image;        /* per cached token: its image's serial, 0 for text */
    int32_t n_cached;             /* the logits of the last one are on the model's device */
    const orin_vl_config *vl;     /* a vision-language model's, else NULL */
} generator;

/* The images of a prompt, in the order of their <|image_pad|> tokens. */
typedef struct prompt_images {
    const orin_model_image *images;
    const int32_t *serials;       /* run_image.serial of each */
    int n;
} prompt_images;

typedef struct reply {
    char *text;                   /* the reply's decoded text (NUL-terminated) */
    size_t len;
    int32_t prompt_tokens;        /* tokens of the prompt */
    int32_t prefilled;            /* of those, the ones not found in the cache */
    int32_t generated;
    int32_t images;               /* of the turn's user message (prep_s is theirs) */
    double prep_s;                /* decoding and preprocessing those images */
    double vision_s;              /* the vision encoder on those images */
    double prefill_s, first_token_s, decode_s; /* prefill_s: the language model's only */
    stop_reason stop;
} reply;

/* Sampling settings from the INI where the user set them, else from the model
 * folder's generation_config.json, else the INI defaults. */
int generator_init(generator *g, orin_engine *e, const orin_cli *cli);
void generator_free(generator *g);

/* Generates a reply to the prompt ids; streams when g->stream. `stop_flag`
 * (set by a signal handler) ends the reply early with STOP_INTERRUPT. With
 * images (pi non-NULL, n > 0), ids hold one <|image_pad|> per image, expanded
 * here to each image's token count. */
int generator_reply(generator *g, const int32_t *ids, size_t n_ids, const prompt_images *pi,
                    volatile sig_atomic_t *stop_flag, reply *r);
/* Forgets the cache contents (the next reply prefills everything). */
void generator_forget(generator *g);

void generator_print_stats(const generator *g, const reply *r, bool json);
void reply_free(reply *r);

#endif
