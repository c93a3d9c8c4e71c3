// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "esc.h"
#include "log.h"

static enum log_level cur_level = LOG_WARN;

void log_set_level(enum log_level level)
{
	cur_level = level;
}

enum log_level log_get_level(void)
{
	return cur_level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const prefix[] = { "eprof: ", "eprof: warning: ", "eprof: ", "eprof: debug: " };
	char buf[1024], out[4 * sizeof(buf)];
	va_list ap;
	size_t n, used;

	if (level > cur_level)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* One message is one line: trim trailing newlines so callers can't break the format. */
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	/* Names from targets reach messages: no control byte reaches the terminal. */
	out[esc_ctl(out, buf, n, false, &used)] = '\0';
	fprintf(stderr, "%s%s\n", prefix[level], out);
}
