// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "vec.h"

void buf_free(struct buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void buf_reset(struct buf *b)
{
	b->len = 0;
}

/* Room for n more bytes: false (b->err set) when it cannot grow. */
static bool buf_room(struct buf *b, size_t n)
{
	if (b->err)
		return false;
	if (arr_grow(b->data, b->cap, b->len + n)) {
		b->err = -ENOMEM;
		return false;
	}
	return true;

}

void buf_put(struct buf *b, const void *p, size_t n)
{
	/* n == 0 on an empty buffer would offset a NULL pointer. */
	if (!n || !buf_room(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void buf_u8(struct buf *b, uint8_t v)
{
	buf_put(b, &v, 1);
}

void buf_u32le(struct buf *b, uint32_t v)
{
	uint8_t x[4] = { v, v >> 8, v >> 16, v >> 24 };

	buf_put(b, x, 4);
}

void buf_u64le(struct buf *b, uint64_t v)
{
	buf_u32le(b, (uint32_t)v);
	buf_u32le(b, (uint32_t)(v >> 32));
}

/* Written in place: the encoder of every sample and event, a call per field. */
void buf_varint(struct buf *b, uint64_t v)
{
	uint8_t *p;

	if (!buf_room(b, 10))
		return;
	p = b->data + b->len;
	while (v >= 0x80) {
		*p++ = (uint8_t)v | 0x80;
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	b->len = p - b->data;
}

void buf_svarint(struct buf *b, int64_t v)
{
	buf_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void buf_str(struct buf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	buf_varint(b, n);
	buf_put(b, s, n);
}

uint8_t rbuf_u8(struct rbuf *r)
{
	if (!r->ok || r->p >= r->end) {
		r->ok = false;
		return 0;
	}
	return *r->p++;
}

uint32_t rbuf_u32le(struct rbuf *r)
{
	uint32_t v = 0;

	if (!r->ok || r->end - r->p < 4) {
		r->ok = false;
		return 0;
	}
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)r->p[i] << (8 * i);
	r->p += 4;
	return v;
}

uint64_t rbuf_u64le(struct rbuf *r)
{
	uint64_t lo = rbuf_u32le(r);

	return lo | (uint64_t)rbuf_u32le(r) << 32;
}

uint64_t rbuf_varint(struct rbuf *r)
{
	const uint8_t *p = r->p;
	uint64_t v = 0;

	/* One loop on a local cursor: the reader decodes most of a file through here. */
	for (int shift = 0; r->ok && shift < 64 && p < r->end; shift += 7) {
		uint8_t c = *p++;

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			r->p = p;
			return v;
		}
	}
	r->ok = false;
	return 0;
}

int64_t rbuf_svarint(struct rbuf *r)
{
	uint64_t u = rbuf_varint(r);

	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

const char *rbuf_str(struct rbuf *r, size_t *len)
{
	uint64_t n = rbuf_varint(r);
	const char *s;

	if (!r->ok || n > (uint64_t)(r->end - r->p)) {
		r->ok = false;
		*len = 0;
		return "";
	}
	s = (const char *)r->p;
	r->p += n;
	*len = n;
	return s;
}
