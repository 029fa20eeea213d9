/* What the GPU benchmark programs share (attention_bench, matmul_bench,
 * vision_bench): the device and registry, random inputs, the copy bandwidth,
 * and the timing of an op's calls, eagerly between the device's marks and as
 * a CUDA graph replay; and for the probes that load no plugins (stream_probe,
 * layer_probe), the device check and the copy bandwidth alone. */
#ifndef ORIN_BENCH_UTIL_H
#define ORIN_BENCH_UTIL_H

#include "orin/device.h"
#include "orin/plugin.h"
#include "orin/registry.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { BENCH_MAX_LIST = 16 };

/* A comma-separated list, split in place. */
typedef struct bench_list {
    const char *item[BENCH_MAX_LIST];
    int n;
} bench_list;

void bench_split_list(bench_list *l, char *text);
bool bench_listed(const bench_list *l, const char *name);

typedef struct bench {
    orin_device *dev;
    orin_registry *reg;
    orin_plugin_set *plugins;
    bool json;
    int runs;
    double copy_gbs;     /* bytes read + written by a 1 GiB device copy, best of 5 */
    float *noise;        /* host: random values in [-1, 1) to upload from */
    size_t noise_n;
    size_t l2_bytes;
} bench;

/* Opens cuda, loads the plugins of `plugin_dir`, fills the noise and measures
 * the copy bandwidth; keeps the caller's json and runs, clears the rest. Returns 0, 77 without a GPU, 2 on failure (said on
 * stderr, prefixed with `prog`). */
int bench_open(bench *b, const char *prog, const char *plugin_dir);
void bench_close(bench *b);

double bench_median(double *v, int n);

/* Device memory of n elements of dt, filled with noise (from `offset` into it,
 * so that tensors differ); NULL with `status` set ("skipped (memory: ...)" or
 * "failed: upload: ..."). */
void *bench_device_random(bench *b, char *status, size_t status_cap, orin_dtype dt, size_t n,
                          size_t offset);
void bench_device_free(bench *b, void *p);
size_t bench_free_bytes(bench *b);

/* Calls of one op, cycling through n_args call structs of args_size bytes. */
typedef struct bench_calls {
    const orin_op_impl *impl;
    orin_exec ex;
    const void *args;
    size_t args_size;
    int n_args;
    int next;
} bench_calls;

int bench_call_next(bench_calls *t);
/* One call of each struct. */
int bench_call_all(bench_calls *t);
/* The median seconds of `runs` calls, each between two marks. */
int bench_time_eager(bench *b, bench_calls *t, int runs, double *seconds);
/* One graph of one call per struct, replayed: the median over 5 replays of the
 * seconds per call. */
int bench_time_graph(bench *b, bench_calls *t, double *seconds);

/* For the probes that load no plugins (stream_probe, layer_probe): device 0's
 * name in name[0..cap) and the copy bandwidth (orin_device_copy_gbs, as every
 * floor in bench/ is measured). Returns 0; 77 without a GPU or on one before
 * sm_90 (the bulk copies they time); 2 where the bandwidth cannot be
 * measured. Each failure is said on stderr, `prog` first. */
int bench_probe_open(const char *prog, char *name, size_t cap, double *copy_gbs);

/* The device and its copy bandwidth: a JSON line (--json), else a line ending
 * in `what`. */
void bench_print_copy(const bench *b, const char *what);

/* s as the inside of a JSON string. */
const char *bench_json_text(const char *s, char *buf, size_t cap);

#endif
