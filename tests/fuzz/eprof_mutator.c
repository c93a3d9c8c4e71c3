// SPDX-License-Identifier: MIT
/*
 * A chunk-aware libFuzzer mutator for eprof.data inputs. Every chunk is
 * compressed (zlib in version 1 files, zstd since) with a CRC, so byte flips in a file almost never get past
 * the CRC check. This mutator decompresses one chunk, lets libFuzzer mutate
 * the payload (the sections the reader parses), recompresses it and fixes
 * the header; sometimes it drops, repeats, retypes or cuts off chunks, and
 * sometimes it flips raw bytes so the framing is fuzzed too. Inputs stay
 * real eprof.data files: a crash reproduces with `eprof report FILE`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "format/format.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#define MAX_CHUNKS 512
#define MAX_RAW (4u << 20)

struct chunk {
	size_t off;  /* of the chunk header in the input */
	size_t zlen; /* compressed bytes after the header */
	uint32_t type, raw_len, codec;
};

static uint32_t rng(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static uint32_t le32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static size_t parse(const uint8_t *d, size_t size, struct chunk *c)
{
	size_t n = 0, off = EPROF_HEADER_SIZE;

	if (size < EPROF_HEADER_SIZE || memcmp(d, EPROF_FILE_MAGIC, 8))
		return 0;
	while (n < MAX_CHUNKS && size - off >= EPROF_CHUNK_HDR_SIZE) {
		const uint8_t *h = d + off;
		size_t zlen = le32(h + 12);

		if (le32(h) != EPROF_CHUNK_MAGIC || zlen > size - off - EPROF_CHUNK_HDR_SIZE)
			break;
		c[n++] = (struct chunk){ off, zlen, le32(h + 4), le32(h + 8), le32(h + 20) };
		off += EPROF_CHUNK_HDR_SIZE + zlen;
	}
	return n;
}

struct out {
	uint8_t *v;
	size_t n, cap;
	int oom;
};

static void put(struct out *o, const void *p, size_t len)
{
	if (o->oom)
		return;
	if (o->n + len > o->cap) {
		size_t cap = o->cap ? o->cap : 65536;
		uint8_t *nv;

		while (cap < o->n + len)
			cap *= 2;
		nv = realloc(o->v, cap);
		if (!nv) {
			o->oom = 1;
			return;
		}
		o->v = nv;
		o->cap = cap;
	}
	memcpy(o->v + o->n, p, len);
	o->n += len;
}

/* Appends a chunk of type with raw payload raw, compressed here with codec (kept from the input). */
static int put_chunk(struct out *o, uint32_t type, uint32_t codec, const uint8_t *raw,
		     size_t raw_len)
{
	size_t zlen = codec == CODEC_ZSTD ? ZSTD_compressBound(raw_len) : compressBound(raw_len);
	uint8_t hdr[EPROF_CHUNK_HDR_SIZE] = { 0 }, *z = malloc(zlen ? zlen : 1);
	int bad;

	if (!z)
		return -1;
	if (codec == CODEC_ZSTD) {
		zlen = ZSTD_compress(z, zlen, raw, raw_len, 1);
		bad = ZSTD_isError(zlen);
	} else {
		uLongf zl = zlen;

		bad = compress2(z, &zl, raw, raw_len, 1) != Z_OK;
		zlen = zl;
	}
	if (bad) {
		free(z);
		return -1;
	}
	put32(hdr, EPROF_CHUNK_MAGIC);
	put32(hdr + 4, type);
	put32(hdr + 8, raw_len);
	put32(hdr + 12, zlen);
	put32(hdr + 16, crc32(0, z, zlen));
	put32(hdr + 20, codec);
	put(o, hdr, sizeof(hdr));
	put(o, z, zlen);
	free(z);
	return o->oom ? -1 : 0;
}

static const uint8_t *chunk_bytes(const uint8_t *d, const struct chunk *c, size_t *len)
{
	*len = EPROF_CHUNK_HDR_SIZE + c->zlen;
	return d + c->off;
}

/* A new payload for chunk k: its bytes decompressed, mutated by libFuzzer. */
static int mutate_payload(const uint8_t *d, const struct chunk *k, uint8_t **raw, size_t *len)
{
	size_t cap = (size_t)k->raw_len + 4096;
	const uint8_t *z = d + k->off + EPROF_CHUNK_HDR_SIZE;
	size_t got = k->raw_len;
	uint8_t *buf;
	int bad;

	if (k->raw_len > MAX_RAW)
		return -1;
	buf = malloc(cap);
	if (!buf)
		return -1;
	if (k->codec == CODEC_ZSTD) {
		got = ZSTD_decompress(buf, k->raw_len, z, k->zlen);
		bad = ZSTD_isError(got) || got != k->raw_len;
	} else {
		uLongf zl = k->raw_len;

		bad = k->codec != CODEC_ZLIB || uncompress(buf, &zl, z, k->zlen) != Z_OK ||
		      zl != k->raw_len;
		got = zl;
	}
	if (bad) {
		free(buf);
		return -1;
	}
	*len = LLVMFuzzerMutate(buf, got, cap);
	*raw = buf;
	return 0;
}

static size_t structured(uint8_t *d, size_t size, size_t max, uint32_t *s)
{
	struct chunk c[MAX_CHUNKS];
	size_t n = parse(d, size, c), pick, len;
	struct out o = { 0 };
	uint32_t op;
	uint8_t *raw = NULL;

	if (!n)
		return 0;
	pick = rng(s) % n;
	op = rng(s) % 16;
	put(&o, d, EPROF_HEADER_SIZE);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *b = chunk_bytes(d, &c[i], &len);

		if (i != pick) {
			put(&o, b, len);
			continue;
		}
		switch (op) {
		case 0: /* drop it */
			break;
		case 1: /* repeat it: ids and strings defined twice */
			put(&o, b, len);
			put(&o, b, len);
			break;
		case 2: /* cut the file off inside it, as SIGKILL or a full disk would */
			put(&o, b, len ? rng(s) % len : 0);
			i = n;
			break;
		case 3: { /* another chunk type, CRC still right */
			uint8_t h[EPROF_CHUNK_HDR_SIZE];

			memcpy(h, b, sizeof(h));
			put32(h + 4, CHUNK_DATA + rng(s) % 3);
			put(&o, h, sizeof(h));
			put(&o, b + sizeof(h), len - sizeof(h));
			break;
		}
		default: {
			size_t rlen;

			if (mutate_payload(d, &c[i], &raw, &rlen) ||
			    put_chunk(&o, c[i].type, c[i].codec, raw, rlen)) {
				free(raw);
				free(o.v);
				return 0;
			}
			free(raw);
			raw = NULL;
		}
		}
	}
	if (op != 2) {
		/* Whatever followed the last whole chunk (a cut-off tail) stays. */
		size_t end = c[n - 1].off + EPROF_CHUNK_HDR_SIZE + c[n - 1].zlen;

		put(&o, d + end, size - end);
	}
	if (o.oom || o.n > max || o.n == 0) {
		free(o.v);
		return 0;
	}
	memcpy(d, o.v, o.n);
	free(o.v);
	return o.n;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	uint32_t s = seed ? seed : 0x9e3779b9u;
	size_t n;

	/* One in eight: plain byte mutations of the file (headers, framing, CRCs). */
	if (rng(&s) % 8 == 0)
		return LLVMFuzzerMutate(data, size, max_size);
	n = structured(data, size, max_size, &s);
	return n ? n : LLVMFuzzerMutate(data, size, max_size);
}
