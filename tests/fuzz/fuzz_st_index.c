/* model.safetensors.index.json: the input is the index of a model folder that
 * holds two small valid shards (written once, in a temporary folder). Shard
 * names that leave the folder, shards named twice, tensors the index promises
 * but the shard lacks: all errors naming the file, never a crash. */
#include "fuzz_util.h"

#include "orin/error.h"
#include "orin/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

static char dir[256], index_path[300];

/* A shard with tensors named names[0..n), each F32 [2]. */
static void write_shard(const char *file, const char *const *names, int n)
{
    char hdr[1024], path[400];
    int len = 0;
    len += snprintf(hdr + len, sizeof hdr - (size_t)len, "{");
    for (int i = 0; i < n; i++)
        len += snprintf(hdr + len, sizeof hdr - (size_t)len,
                        "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%d,%d]}",
                        i ? "," : "", names[i], 8 * i, 8 * i + 8);
    len += snprintf(hdr + len, sizeof hdr - (size_t)len,
                    ",\"__metadata__\":{\"format\":\"pt\"}}");
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)((uint64_t)len >> (8 * i));
    float zeros[16] = {0};
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, (size_t)len, f);
    fwrite(zeros, sizeof(float), 2 * (size_t)n, f);
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    snprintf(dir, sizeof dir, "/tmp/orin-fuzz-st-index.XXXXXX");
    if (!mkdtemp(dir))
        abort();
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
    write_shard("model-00001-of-00002.safetensors", (const char *[]){"a.weight", "b.weight"}, 2);
    write_shard("model-00002-of-00002.safetensors", (const char *[]){"c.weight"}, 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = open(index_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);
    orin_st_archive *ar = NULL;
    if (orin_st_open_dir(dir, &ar) != 0) {
        FUZZ_ASSERT(ar == NULL, "failed open handed out an archive");
        fuzz_check_error(orin_error());
        return 0;
    }
    for (size_t i = 0; i < orin_st_count(ar); i++) {
        const orin_st_tensor *t = orin_st_at(ar, i);
        FUZZ_ASSERT(orin_st_find(ar, t->name) == t, "'%s' not found by name", t->name);
        FUZZ_ASSERT(strncmp(t->file, dir, strlen(dir)) == 0, "'%s' from %s, outside the folder",
                    t->name, t->file);
        FUZZ_ASSERT(t->nbytes == 8, "'%s': %zu bytes", t->name, t->nbytes);
    }
    orin_st_close(ar);
    return 0;
}
