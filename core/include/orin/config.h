/* orin.ini: the user's configuration as a typed, validated struct.
 *
 * Every key has a default (orin_config_defaults). Loading parses the INI with
 * inih, then applies `--set section.key=value` overrides in order. Any unknown
 * section or key, bad value (type, range, enum) or syntax error is an error
 * naming file:line (or "--set"), section.key and the value, with a "did you
 * mean" hint for near misses. Relative paths (model.path, plugins.dir) resolve
 * against the INI file's folder. */
#ifndef ORIN_CONFIG_H
#define ORIN_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include "orin/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum orin_score_path { ORIN_SCORE_PREFILL = 0, ORIN_SCORE_DECODE } orin_score_path;
/* model.quant: quantize the linear layers of a float folder at load. */
typedef enum orin_load_quant { ORIN_LOAD_QUANT_NONE = 0, ORIN_LOAD_QUANT_INT8 } orin_load_quant;

#define ORIN_CONFIG_MAX_STR 4096

typedef struct orin_config {
    char source[ORIN_CONFIG_MAX_STR];     /* the INI file's path ("" for defaults only) */

    struct {
        char path[ORIN_CONFIG_MAX_STR];   /* Hugging Face model folder, resolved */
        orin_dtype dtype;                 /* f32 | f16 | bf16          default f32 */
        orin_load_quant quant;            /* none | int8                default none */
        bool quant_lm_head;               /* int8 lm_head too           default false */
    } model;

    struct {
        char device[16];                  /* auto | cpu | cuda          default auto */
        bool cuda_graph;                  /*                            default true */
        bool fused_ops;                   /*                            default true */
        int32_t max_context;              /* >= 1; 0 = the model's max_position_embeddings, default 4096 */
        int32_t threads;                  /* >= 0; 0 = all cores        default 0 */
        int32_t prefill_chunk;            /* tokens per prefill pass    default 0: by device */
    } runtime;

    struct {
        char dir[ORIN_CONFIG_MAX_STR];    /* resolved; default "plugins" next to orin-run's build */
        char load[ORIN_CONFIG_MAX_STR];   /* comma-separated file names in dir; "" = every *.so */
    } plugins;

    struct {
        char backend[64];                 /* mha | fa1 | fa2 | a plugin's provider, default fa2 */
        bool strict;                      /*                            default false */
    } attention;

    struct {
        char prompt[ORIN_CONFIG_MAX_STR]; /* default "Hello" */
        char system[ORIN_CONFIG_MAX_STR]; /* default "" (the template's own default) */
        bool chat;                        /* default true */
        bool interactive;                 /* default false */
        int32_t max_tokens;               /* >= 0, default 128 */
        float temperature;                /* >= 0, default 0.7; 0 = greedy */
        int32_t top_k;                    /* >= 0, 0 = off, default 20 */
        float top_p;                      /* (0, 1], default 0.8 */
        float min_p;                      /* [0, 1), default 0 */
        float repetition_penalty;         /* > 0, 1 = off, default 1 */
        float presence_penalty;           /* 0 = off, default 0 */
        uint64_t seed;                    /* default 0 */
        bool stream;                      /* default true */
        char image[ORIN_CONFIG_MAX_STR];  /* comma-separated image paths, resolved; default "" */
        int32_t max_pixels;               /* >= 0; 0 = the processor's own, default 0 */
    } generate;

    struct {
        orin_score_path path;             /* prefill | decode, default prefill */
    } score;

    struct {
        int32_t prompt_tokens;            /* default 512 */
        int32_t gen_tokens;               /* default 128 */
        int32_t repeats;                  /* default 3 */
    } bench;

    /* Which keys the user set (INI or --set), for defaults that other sources
     * (generation_config.json) may supply: see orin_config_is_set. */
    uint64_t set_mask[2];
} orin_config;

void orin_config_defaults(orin_config *cfg);

/* Loads `path` (NULL: defaults only), then applies overrides[0..n), each
 * "section.key=value". Returns 0 or -1 with orin_error_set(). */
int orin_config_load(orin_config *cfg, const char *path, const char *const *overrides, int n);

/* The same for INI text in memory (for tests and fuzzing): defaults, then
 * text[0..len) (need not be NUL-terminated). `name` labels error messages
 * (NULL: "<string>"); relative paths resolve against base_dir (NULL: the
 * current directory). Returns 0 or -1 with orin_error_set(). */
int orin_config_load_string(orin_config *cfg, const char *text, size_t len, const char *name,
                            const char *base_dir);

/* Applies one "section.key=value" (also used by --set). `origin` names where it
 * came from for error messages ("--set", "orin.ini:12"). */
int orin_config_set(orin_config *cfg, const char *section, const char *key, const char *value,
                    const char *origin);

/* True when the user set section.key explicitly. */
bool orin_config_is_set(const orin_config *cfg, const char *section, const char *key);

/* Writes every key with its current value as INI text (for tests and --help). */
int orin_config_write(const orin_config *cfg, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
