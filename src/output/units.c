// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "units.h"

const char *fmt_dur(char *buf, size_t len, double ns, int us_decimals)
{
	if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.*f us", us_decimals, ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
	return buf;
}

void fmt_ns(char *buf, size_t len, uint64_t ns)
{
	fmt_dur(buf, len, (double)ns, 1);
}

const char *fmt_bytes_kib(char *buf, size_t len, double v, int kib_decimals)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double a = fabs(v);
	int u = 0;

	while (a >= 1024 && u < 4) {
		a /= 1024;
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.*f %s", u > 1 ? 2 : u ? kib_decimals : 0, v, units[u]);
	return buf;
}

void fmt_bytes(char *buf, size_t len, double v)
{
	fmt_bytes_kib(buf, len, v, 2);
}

void fmt_count(char *buf, size_t len, uint64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v), o = 0;

	for (int i = 0; i < n && (size_t)o < len - 1; i++) {
		if (i && (n - i) % 3 == 0 && (size_t)o < len - 2)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = '\0';
}
