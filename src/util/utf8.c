// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static int cont(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

int utf8_seq_len(const unsigned char *s)
{
	unsigned char c = s[0];

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return cont(s[1]) ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		/* no overlongs (e0 a0..), no surrogates (ed 80..9f) */
		if (!cont(s[1]) || !cont(s[2]) || (c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))
			return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (!cont(s[1]) || !cont(s[2]) || !cont(s[3]) || (c == 0xf0 && s[1] < 0x90) ||
		    (c == 0xf4 && s[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
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
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			p++;
		}
	}
	out[o] = '\0';
	if (len)
		*len = o;
	return out;
}
