/* Image files for a vision-language prompt (see images.h). */
#include "images.h"

#include "cli.h"
#include "orin/cpu_util.h"
#include "orin/error.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

void image_loader_init(image_loader *l, const char *model_dir, int64_t max_pixels)
{
    orin_model_config mc;
    memset(l, 0, sizeof *l);
    snprintf(l->model_dir, sizeof l->model_dir, "%s", model_dir);
    l->max_pixels = max_pixels;
    if (orin_model_config_load(model_dir, &mc) != 0) {
        orin_error_clear();
        return;
    }
    l->is_vl = mc.vl.is_vl;
    snprintf(l->arch, sizeof l->arch, "%s", mc.architecture);
}

int image_loader_load(image_loader *l, const char *path, run_image *out)
{
    memset(out, 0, sizeof *out);
    if (!l->is_vl) {
        orin_error_set("%s: model.path = '%s' is a %s folder, not a vision-language model "
                       "(images need one, e.g. Qwen3-VL)", path, l->model_dir,
                       l->arch[0] ? l->arch : "text model");
        return ORIN_EXIT_USAGE;
    }
    /* Read once, at the first image: a text-only prompt to a VL folder
     * needs no processor settings. */
    if (!l->have_processor) {
        if (orin_image_processor_load(l->model_dir, &l->processor) != 0)
            return ORIN_EXIT_LOAD;
        l->have_processor = true;
    }
    double t0 = orin_seconds();
    if (orin_image_load(&l->processor, path, l->max_pixels, &out->patches) != 0)
        return ORIN_EXIT_RUNTIME;
    out->load_s = orin_seconds() - t0;
    out->serial = ++l->next_serial;
    return ORIN_EXIT_OK;
}

void run_image_free(run_image *img)
{
    orin_image_patches_free(&img->patches);
    memset(img, 0, sizeof *img);
}

int image_split_list(char *list, const char **paths, int cap)
{
    int n = 0;
    for (char *s = list; *s;) {
        size_t len = strcspn(s, ",");
        char *start = s, *end = s + len;
        s += len + (s[len] == ',');
        while (start < end && isspace((unsigned char)*start))
            start++;
        while (end > start && isspace((unsigned char)end[-1]))
            end--;
        if (start == end)
            continue; /* the config refuses empty items; a trailing comma here is harmless */
        if (n == cap)
            return orin_error_set("generate.image: more than %d images", cap);
        *end = '\0';
        paths[n++] = start;
    }
    return n;
}
