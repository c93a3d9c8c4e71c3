// SPDX-License-Identifier: MIT
/* Escaping control bytes for terminals: see esc.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "esc.h"

/*
 * Length of the valid UTF-8 sequence at s[0..n) (2-4), 0 when it is not one, -1 when s ends
 * before the sequence does (it may go on in the next piece).
 */
static int seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	int len;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0; /* overlong */
	else if (c == 0xed)
		hi = 0x9f; /* surrogates */
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	for (int i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return -1;
		if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
			return 0;
	}
	return len;
}

static size_t put_hex(char *out, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";

	out[0] = '\\';
	out[1] = 'x';
	out[2] = hex[c >> 4];
	out[3] = hex[c & 15];
	return 4;
}

size_t esc_ctl(char *out, const char *s, size_t n, bool more, size_t *used)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, o = 0;

	while (i < n) {
		unsigned char c = u[i];
		int len;

		if (c < 0x80) {
			if ((c < 0x20 && c != '\n') || c == 0x7f)
				o += put_hex(out + o, c);
			else
				out[o++] = (char)c;
			i++;
			continue;
		}
		len = seq_len(u + i, n - i);
		if (len < 0 && more)
			break;
		if (len == 2 && c == 0xc2 && u[i + 1] < 0xa0) {
			/* U+0080..U+009F: C1 controls, in their UTF-8 form */
			o += put_hex(out + o, c);
			o += put_hex(out + o, u[i + 1]);
			i += 2;
			continue;
		}
		if (len <= 0) {
			o += put_hex(out + o, c);
			i++;
			continue;
		}
		memcpy(out + o, u + i, (size_t)len);
		o += (size_t)len;
		i += (size_t)len;
	}
	*used = i;
	return o;
}

char *esc_ctl_str(const char *s)
{
	size_t n = strlen(s), used;
	char *out = malloc(4 * n + 1);

	if (!out)
		return NULL;
	out[esc_ctl(out, s, n, false, &used)] = '\0';
	return out;
}
