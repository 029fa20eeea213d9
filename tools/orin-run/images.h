/* Image files for a vision-language prompt (--image, generate.image, /image):
 * decoded and preprocessed with the model folder's processor settings, each
 * given a serial number so that the prompt cache can tell two images apart
 * although their pad tokens are the same id. */
#ifndef ORIN_RUN_IMAGES_H
#define ORIN_RUN_IMAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "orin/image.h"
#include "orin/model_config.h"

typedef struct run_image {
    orin_image_patches patches;
    int32_t serial;              /* > 0, unique in this run */
    double load_s;               /* decode + preprocess time */
} run_image;

typedef struct image_loader {
    char model_dir[4096];
    char arch[64];
    bool is_vl;
    bool have_processor;         /* read at the first image */
    orin_image_processor processor;
    int64_t max_pixels;          /* generate.max_pixels; 0 = the processor's */
    int32_t next_serial;
} image_loader;

/* Reads the folder's config.json. An unreadable one is left to the model
 * loader's error (is_vl false). */
void image_loader_init(image_loader *l, const char *model_dir, int64_t max_pixels);

/* Loads one image file. Returns ORIN_EXIT_OK, or after orin_error_set():
 * ORIN_EXIT_USAGE (not a vision-language model), ORIN_EXIT_LOAD (the folder's
 * processor settings) or ORIN_EXIT_RUNTIME (the image file). */
int image_loader_load(image_loader *l, const char *path, run_image *out);
void run_image_free(run_image *img);

/* Splits generate.image's comma-separated list in place into paths[]; the
 * number of paths, or -1 with orin_error_set() past `cap`. */
int image_split_list(char *list, const char **paths, int cap);

#endif
