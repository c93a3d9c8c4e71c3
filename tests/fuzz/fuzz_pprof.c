// SPDX-License-Identifier: MIT
/*
 * `eprof export --format pprof` on untrusted files: the profile.proto
 * encoder. The output must be a gzip stream holding a well-formed protobuf
 * message whose string table starts with "".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_common.h"
#include "model/profile.h"
#include "output/pprof.h"
#include "util/sink.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static uint8_t *gunzip(const uint8_t *z, size_t zlen, size_t *len)
{
	z_stream st = { 0 };
	size_t cap = zlen * 4 + 1024;
	uint8_t *out = malloc(cap);
	int rc;

	if (!out || inflateInit2(&st, 16 + MAX_WBITS) != Z_OK) {
		free(out);
		return NULL;
	}
	st.next_in = (uint8_t *)z;
	st.avail_in = zlen;
	do {
		if (st.total_out == cap) {
			uint8_t *n = realloc(out, cap * 2);

			if (!n)
				break;
			out = n;
			cap *= 2;
		}
		st.next_out = out + st.total_out;
		st.avail_out = cap - st.total_out;
		rc = inflate(&st, Z_NO_FLUSH);
	} while (rc == Z_OK);
	*len = st.total_out;
	inflateEnd(&st);
	FUZZ_CHECK(rc == Z_STREAM_END, "pprof output is not a complete gzip stream (%d)", rc);
	return out;
}

static uint64_t varint(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		FUZZ_CHECK(*p < end, "varint runs past the message");
		v |= (uint64_t)(**p & 0x7f) << shift;
		if (!(*(*p)++ & 0x80))
			return v;
	}
	FUZZ_CHECK(0, "varint longer than 10 bytes");
	return 0;
}

/* Walks a message's fields; returns how many string_table entries (field 6) it had. */
static size_t check_message(const uint8_t *p, const uint8_t *end, bool top)
{
	size_t strings = 0;

	while (p < end) {
		uint64_t key = varint(&p, end), len;
		unsigned field = key >> 3, type = key & 7;

		FUZZ_CHECK(field > 0, "field number 0");
		switch (type) {
		case 0:
			varint(&p, end);
			break;
		case 1:
			FUZZ_CHECK(end - p >= 8, "fixed64 past the end");
			p += 8;
			break;
		case 5:
			FUZZ_CHECK(end - p >= 4, "fixed32 past the end");
			p += 4;
			break;
		case 2:
			len = varint(&p, end);
			FUZZ_CHECK(len <= (uint64_t)(end - p), "length-delimited field %u past the end",
				   field);
			if (top && field == 6) {
				FUZZ_CHECK(strings || len == 0, "string_table[0] is not empty");
				FUZZ_CHECK(fuzz_utf8_valid((const char *)p, len),
					   "string_table entry %zu is not UTF-8", strings);
				strings++;
			} else if (top && field != 6) {
				/* sample, mapping, location, function: nested messages */
				if (field <= 5)
					check_message(p, p + len, false);
			}
			p += len;
			break;
		default:
			FUZZ_CHECK(0, "wire type %u", type);
		}
	}
	return strings;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p = fuzz_read_profile(data, size);
	struct pprof_opts o = { .level = 1 };

	if (!p)
		return 0;
	for (int pass = 0; pass < 2; pass++) {
		struct sink *s = sink_mem();
		const uint8_t *out;
		uint8_t *raw;
		size_t len, rlen;

		if (!s)
			break;
		if (pass && p->samples.n)
			o.filter.pid = p->samples.v[0].pid;
		if (!pprof_write(s, p, &o)) {
			out = (const uint8_t *)sink_mem_data(s, &len);
			raw = gunzip(out, len, &rlen);
			if (raw)
				FUZZ_CHECK(check_message(raw, raw + rlen, true) >= 1, "no string table");
			free(raw);
		}
		sink_close(s);
	}
	profile__free(p);
	return 0;
}
