// SPDX-License-Identifier: MIT
/* Flamegraph colours and number formatting (text is escaped by util/sink and util/json). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fg_internal.h"
#include "util/sink.h"

/* --- colours ----------------------------------------------------------------- */

struct hsl_range {
	double h0, dh; /* hue, degrees */
	double s0, ds; /* saturation, 0..1 */
	double l0, dl; /* lightness, 0..1 */
};

/*
 * One palette per frame kind; the name's hash picks a point in the range, so
 * a function keeps its colour from one graph to the next. All are light
 * enough for black labels.
 */
static const struct hsl_range palettes[FG_KIND_N] = {
	[FG_KIND_USER] = { 2, 44, 0.78, 0.17, 0.57, 0.09 },	/* red .. orange .. amber */
	[FG_KIND_KERNEL] = { 22, 16, 0.42, 0.18, 0.50, 0.10 }, /* burnt orange .. tan */
	[FG_KIND_JIT] = { 80, 55, 0.42, 0.20, 0.50, 0.10 },	/* yellow-green .. green */
	[FG_KIND_UNKNOWN] = { 220, 0, 0.03, 0.03, 0.62, 0.08 }, /* grey */
	[FG_KIND_SPECIAL] = { 40, 0, 0.06, 0.04, 0.82, 0.05 }, /* light grey */
	[FG_KIND_PYTHON] = { 195, 40, 0.55, 0.20, 0.60, 0.10 }, /* cyan .. blue */
};

static uint32_t hsl_rgb(double h, double s, double l)
{
	double c = (1 - fabs(2 * l - 1)) * s, hp = h / 60.0;
	double x = c * (1 - fabs(fmod(hp, 2.0) - 1)), m = l - c / 2;
	double r = 0, g = 0, b = 0;

	switch ((int)hp % 6) {
	case 0: r = c; g = x; break;
	case 1: r = x; g = c; break;
	case 2: g = c; b = x; break;
	case 3: g = x; b = c; break;
	case 4: r = x; b = c; break;
	default: r = c; b = x; break;
	}
	return (uint32_t)lround((r + m) * 255) << 16 | (uint32_t)lround((g + m) * 255) << 8 |
	       (uint32_t)lround((b + m) * 255);
}

uint32_t fg_name_rgb(const char *s, size_t len, unsigned kind)
{
	const struct hsl_range *p = &palettes[kind < FG_KIND_N ? kind : FG_KIND_UNKNOWN];
	uint64_t h = 0xcbf29ce484222325ULL;
	double v1, v2, v3;

	/* FNV-1a and a final mix: stable across runs, machines and versions. */
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	v1 = (h & 0xffff) / 65535.0;
	v2 = ((h >> 16) & 0xffff) / 65535.0;
	v3 = ((h >> 32) & 0xffff) / 65535.0;
	return hsl_rgb(p->h0 + p->dh * v1, p->s0 + p->ds * v2, p->l0 + p->dl * v3);
}

/*
 * Differential colour from the relative change (w - base) / max(w, base):
 * white when unchanged, towards red when the frame grew, blue when it shrank.
 * flamegraph.js has the same formula for the interactive view.
 */
uint32_t fg_diff_rgb(uint64_t w, uint64_t base)
{
	static const int red[3] = { 222, 45, 38 }, blue[3] = { 46, 110, 214 };
	uint64_t hi = w > base ? w : base;
	const int *to = w >= base ? red : blue;
	double r, k;
	uint32_t rgb = 0;

	if (!hi)
		return 0xffffff;
	r = (double)(w > base ? w - base : base - w) / (double)hi;
	k = pow(r, 0.7);
	for (int i = 0; i < 3; i++)
		rgb = rgb << 8 | (uint32_t)lround(255 + k * (to[i] - 255));
	return rgb;
}

/*
 * GIL colour from the share of a frame's Python weight that held the GIL: blue where its
 * threads did not hold it (waiting for it, or in native code that released it), orange where
 * they held it, a pale sand between; grey for frames without Python samples.
 * flamegraph.js has the same formula for the interactive view.
 */
uint32_t fg_gil_rgb(uint64_t held, uint64_t free)
{
	static const int lo[3] = { 66, 146, 214 }, mid[3] = { 236, 226, 190 },
			 hi[3] = { 236, 112, 36 };
	const int *a, *b;
	double share, k;
	uint32_t rgb = 0;

	if (!held && !free)
		return 0xdadada;
	share = (double)held / ((double)held + (double)free);
	a = share < 0.5 ? lo : mid;
	b = share < 0.5 ? mid : hi;
	k = share < 0.5 ? share * 2 : share * 2 - 1;
	for (int i = 0; i < 3; i++)
		rgb = rgb << 8 | (uint32_t)lround(a[i] + k * (b[i] - a[i]));
	return rgb;
}

/* --- numbers ------------------------------------------------------------------ */

const char *fg_fmt_group(char *buf, size_t size, uint64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
	size_t o = 0;

	for (int i = 0; i < n && o + 2 < size; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = '\0';
	return buf;
}

/* Three significant digits: "1.23", "12.3", "123". */
static void fmt_scaled(char *buf, size_t size, double v, const char *suffix)
{
	int prec = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;

	snprintf(buf, size, "%.*f %s", prec, v, suffix);
}

const char *fg_fmt_weight(char *buf, size_t size, const char *unit, uint64_t v)
{
	static const char *const bytes[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	char num[32];
	double d = (double)v;
	int i;

	if (unit && !strcmp(unit, "ns")) {
		if (v < 1000)
			snprintf(buf, size, "%" PRIu64 " ns", v);
		else if (v < 1000000)
			fmt_scaled(buf, size, d / 1e3, "\xc2\xb5s");
		else if (v < 1000000000)
			fmt_scaled(buf, size, d / 1e6, "ms");
		else
			fmt_scaled(buf, size, d / 1e9, "s");
	} else if (unit && !strcmp(unit, "bytes")) {
		if (v < 1024) {
			snprintf(buf, size, "%" PRIu64 " B", v);
			return buf;
		}
		for (i = 0, d /= 1024; d >= 1023.95 && i < 4; i++)
			d /= 1024;
		fmt_scaled(buf, size, d, bytes[i]);
	} else if (!unit || !*unit || !strcmp(unit, "samples")) {
		snprintf(buf, size, "%s sample%s", fg_fmt_group(num, sizeof(num), v),
			 v == 1 ? "" : "s");
	} else {
		snprintf(buf, size, "%s %s", fg_fmt_group(num, sizeof(num), v), unit);
	}
	return buf;
}
