/* A model folder's generation_config.json: the sampling defaults and the stop
 * tokens its authors chose. orin-run uses them where the user set nothing. */
#ifndef ORIN_GENERATION_CONFIG_H
#define ORIN_GENERATION_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORIN_GEN_MAX_EOS 8

typedef struct orin_generation_config {
    bool present;               /* the file exists */
    /* Each value is < 0 when the file does not set it. */
    int do_sample;              /* -1, 0 or 1 */
    double temperature;
    int32_t top_k;
    double top_p;
    double min_p;
    double repetition_penalty;
    int32_t eos_token_ids[ORIN_GEN_MAX_EOS];
    int32_t n_eos;
} orin_generation_config;

/* Reads model_dir/generation_config.json. A missing file is not an error
 * (present = false); bad JSON or a field of the wrong type is, naming the file
 * and the field. */
int orin_generation_config_load(const char *model_dir, orin_generation_config *out);
int orin_generation_config_parse(const char *json, size_t len, const char *name,
                                 orin_generation_config *out);

#ifdef __cplusplus
}
#endif
#endif
