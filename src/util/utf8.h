/* SPDX-License-Identifier: MIT */
/* UTF-8 validation: names come from binaries and /proc and may hold any bytes. */
#ifndef EPROF_UTF8_H
#define EPROF_UTF8_H

#include <stddef.h>

/* U+FFFD, what stands for a byte that is not valid UTF-8 */
#define UTF8_REPLACEMENT "\xef\xbf\xbd"

/*
 * Length (1-4) of the valid UTF-8 sequence at s, of which avail (>= 1) bytes may be read, or
 * 0 if it is invalid (cut, overlong, a surrogate, past U+10FFFF). Reads no byte after one
 * that ends the sequence early, so a NUL-terminated string may pass 4.
 */
size_t utf8_char_len(const void *s, size_t avail);
/* The same for a NUL-terminated s. */
int utf8_seq_len(const unsigned char *s);
/*
 * Bytes of the first max_chars characters of s (len bytes), whole sequences only, each byte
 * that is not valid UTF-8 counting as one character; *n_chars (if not NULL): how many.
 */
size_t utf8_prefix(const char *s, size_t len, size_t max_chars, size_t *n_chars);
/* A malloc'd copy of s with each invalid byte replaced by U+FFFD; NULL on ENOMEM. */
char *utf8_sanitize(const char *s, size_t *len);

#endif
