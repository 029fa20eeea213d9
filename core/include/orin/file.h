/* Reading whole files: configs, JSON headers, tokenizer files, prompts. */
#ifndef ORIN_FILE_H
#define ORIN_FILE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the whole of `path` into a malloc'd buffer with a NUL after the last
 * byte (the file may hold NULs of its own: *len counts every byte). A file
 * larger than max_bytes is an error, so that a wrong path cannot make us
 * swallow gigabytes. Returns NULL with orin_error_set("PATH: reason"); errno
 * then says why (ENOENT for a missing file). */
char *orin_read_file(const char *path, size_t max_bytes, size_t *len);

/* The same from an open stream (stdin, a pipe); `name` labels errors. */
char *orin_read_stream(FILE *f, const char *name, size_t max_bytes, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
