/* SPDX-License-Identifier: MIT */
/* Growable byte buffer with LEB128 varint encoding, and a bounds-checked reader. */
#ifndef EPROF_BUF_H
#define EPROF_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf {
	uint8_t *data;
	size_t len, cap;
	int err; /* sticky -ENOMEM */
};

void buf_free(struct buf *b);
void buf_reset(struct buf *b);
void buf_put(struct buf *b, const void *p, size_t n);
void buf_u8(struct buf *b, uint8_t v);
void buf_u32le(struct buf *b, uint32_t v);
void buf_u64le(struct buf *b, uint64_t v);
void buf_varint(struct buf *b, uint64_t v);
void buf_svarint(struct buf *b, int64_t v);
void buf_str(struct buf *b, const char *s); /* varint length + bytes */

/* A reader never reads past its end: after an overrun every getter returns 0 and ok is false. */
struct rbuf {
	const uint8_t *p, *end;
	bool ok;
};

static inline void rbuf_init(struct rbuf *r, const void *p, size_t len)
{
	r->p = p;
	r->end = (const uint8_t *)p + len;
	r->ok = true;
}
uint8_t rbuf_u8(struct rbuf *r);
uint32_t rbuf_u32le(struct rbuf *r);
uint64_t rbuf_u64le(struct rbuf *r);
uint64_t rbuf_varint(struct rbuf *r);
int64_t rbuf_svarint(struct rbuf *r);
/* Returns a pointer into the buffer (not NUL-terminated) and its length. */
const char *rbuf_str(struct rbuf *r, size_t *len);
static inline size_t rbuf_left(const struct rbuf *r)
{
	return r->ok ? (size_t)(r->end - r->p) : 0;
}

#endif
