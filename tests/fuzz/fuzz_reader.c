// SPDX-License-Identifier: MIT
/*
 * The eprof.data reader (src/format/reader.c) on untrusted files: no crash,
 * no leak, and a profile that keeps every model invariant the writers rely
 * on, or a one-line error.
 */
#include <stdint.h>

#include "fuzz_common.h"
#include "model/profile.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p = fuzz_read_profile(data, size);

	if (p) {
		/* Lookups the readers use after loading. */
		for (size_t i = 0; i < p->samples.n && i < 64; i++) {
			const struct sample *s = &p->samples.v[i];

			profile__thread(p, s->pid, s->tid, false);
			profile__proc(p, s->pid, false);
		}
		profile__meta_u64(p, "sample_rate", 0);
		for (size_t i = 0; i < p->objects.n; i++)
			profile__object_module(p, i);
	}
	profile__free(p);
	return 0;
}
