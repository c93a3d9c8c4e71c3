/* SPDX-License-Identifier: MIT */
/* UTF-8 validation: names come from binaries and /proc and may hold any bytes. */
#ifndef EPROF_UTF8_H
#define EPROF_UTF8_H

#include <stddef.h>

/* Length (1-4) of the valid UTF-8 sequence at s (NUL-terminated), or 0 if it is invalid. */
int utf8_seq_len(const unsigned char *s);
/* A malloc'd copy of s with each invalid byte replaced by U+FFFD; NULL on ENOMEM. */
char *utf8_sanitize(const char *s, size_t *len);

#endif
