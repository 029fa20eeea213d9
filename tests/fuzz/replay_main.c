/* A plain main for the fuzz targets, for ctest (fuzz.replay.*): runs each
 * file given, or each file in each folder given, through
 * LLVMFuzzerTestOneInput once. The committed seeds (and any input that once
 * crashed, kept beside them) so run in every tree, the sanitizer job's
 * included, with any compiler. */
#include "fuzz_util.h"

#include <dirent.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return -1;
    }
    uint8_t *data = NULL;
    size_t len = 0, cap = 0, r;
    do {
        if (cap - len < 65536) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *d = realloc(data, cap);
            if (!d)
                abort();
            data = d;
        }
        r = fread(data + len, 1, cap - len, f);
        len += r;
    } while (r > 0);
    fclose(f);
    /* An exact-size copy, so that ASan sees a read past the input's end. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact)
        abort();
    memcpy(exact, data, len);
    free(data);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs the regular files of dir in name order; returns how many, or -1. */
static int run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: cannot open\n", dir);
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char **grown = realloc(names, (n + 1) * sizeof *names);
        if (!grown)
            abort();
        names = grown;
        names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (!names[n])
            abort();
        sprintf(names[n++], "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, compare_names);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(names[i]) != 0)
                count = -1;
            else if (count >= 0)
                count++;
        }
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int n = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? run_dir(argv[i])
                                                                : run_file(argv[i]) ? -1 : 1;
        if (n < 0)
            return 1;
        total += n;
    }
    printf("%d inputs ran\n", total);
    return total > 0 ? 0 : 1;
}
