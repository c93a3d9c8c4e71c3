/* SPDX-License-Identifier: MIT */
/*
 * Text for a terminal: names come from targets (perf maps, command lines, thread names) and
 * may hold escape sequences (OSC 52 writes the clipboard). docs/security.md.
 */
#ifndef EPROF_ESC_H
#define EPROF_ESC_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Writes s[0..n) to out (room for 4 * n bytes) with every C0 control byte but '\n', DEL and
 * every C1 control (a byte that is not part of valid UTF-8, or U+0080..U+009F) as \xNN; valid
 * UTF-8 passes. Returns the bytes written. *used: the input taken, short of n only when more
 * (more input follows) and s ends inside a UTF-8 sequence, which the next call then starts.
 */
size_t esc_ctl(char *out, const char *s, size_t n, bool more, size_t *used);
/* The same into a malloc'd NUL-terminated string; NULL on ENOMEM. */
char *esc_ctl_str(const char *s);

#endif
