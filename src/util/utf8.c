// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static int cont(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

size_t utf8_char_len(const void *str, size_t avail)
{
	const unsigned char *s = str;
	unsigned char c = s[0];
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* Each byte is read only after the one before it continued the sequence: a NUL ends it. */
	for (size_t i = 1; i < n; i++) {
		if (i >= avail || !cont(s[i]))
			return 0;
	}
	/* no overlongs (e0 80..9f, f0 80..8f), no surrogates (ed a0..), nothing past U+10FFFF */
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||
	    (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
		return 0;
	return n;
}

int utf8_seq_len(const unsigned char *s)
{
	return (int)utf8_char_len(s, 4);
}

size_t utf8_prefix(const char *s, size_t len, size_t max_chars, size_t *n_chars)
{
	size_t o = 0, k = 0;

	while (o < len && k < max_chars) {
		size_t c = utf8_char_len(s + o, len - o);

		o += c ? c : 1;
		k++;
	}
	if (n_chars)
		*n_chars = k;
	return o;
}

char *utf8_sanitize(const char *s, size_t *len)
{
	size_t n = strlen(s), o = 0;
	char *out = malloc(n * 3 + 1);

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int l = utf8_seq_len(p);

		if (l) {
			memcpy(out + o, p, l);
			o += l;
			p += l;
		} else {
			memcpy(out + o, UTF8_REPLACEMENT, 3);
			o += 3;
			p++;
		}
	}
	out[o] = '\0';
	if (len)
		*len = o;
	return out;
}
