// SPDX-License-Identifier: MIT
/*
 * Messages of the CUPTI injection library as the recorder converts them
 * (src/record/gpu_conv.c): the input is a sequence of messages, each a
 * little-endian u16 length and that many bytes, fed to one converter in
 * order, as a socket would deliver them.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/profile.h"
#include "decode/gpu_conv.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

/* The recorder receives each message into an 8-aligned buffer (records are read in place). */
static uint64_t msgbuf[65536 / 8];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p = profile__new();
	struct gpu_conv c;
	size_t pos = 0;

	if (!p)
		return 0;
	if (gpu_conv_init(&c, p)) {
		profile__free(p);
		return 0;
	}
	while (pos + 2 <= size) {
		size_t len = data[pos] | (size_t)data[pos + 1] << 8;
		int err;

		pos += 2;
		if (len > size - pos)
			len = size - pos;
		memcpy(msgbuf, data + pos, len);
		err = gpu_conv_message(&c, msgbuf, len, 0);
		FUZZ_CHECK(err == 0 || err == -EINVAL || err == -ENOMEM, "error %d", err);
		pos += len;
	}
	/* Every event the converter made names valid strings and kinds. */
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		FUZZ_CHECK(e->name < strtab__count(p->strs), "event name %u out of range", e->name);
		FUZZ_CHECK(e->kind > 0 && e->kind < EVK_KIND_MAX, "event kind %u", e->kind);
	}
	gpu_conv_free(&c);
	profile__free(p);
	return 0;
}
