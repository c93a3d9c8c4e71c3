// SPDX-License-Identifier: MIT
/* `eprof trace` on untrusted files: the Chrome trace writer. The JSON must always parse. */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/profile.h"
#include "output/trace.h"
#include "util/sink.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static void one(const struct profile *p, const struct trace_opts *o)
{
	struct sink *s = sink_mem();
	struct trace_stats st;
	const char *out;
	size_t len;

	if (!s)
		return;
	if (!trace_write(s, p, o, &st)) {
		out = sink_mem_data(s, &len);
		FUZZ_CHECK(strlen(out) == len, "NUL byte in the trace");
		FUZZ_CHECK(fuzz_json_valid(out, len), "trace is not valid JSON:\n%.*s",
			   len > 4000 ? 4000 : (int)len, out);
	}
	sink_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p;
	struct trace_opts o;

	if (fuzz_unpacked_bytes(data, size) > FUZZ_MAX_UNPACKED) /* size, not a bug */
		return 0;
	p = fuzz_read_profile(data, size);
	if (!p)
		return 0;
	if (fuzz_profile_records(p) > FUZZ_MAX_RECORDS) { /* size, not a bug */
		profile__free(p);
		return 0;
	}
	memset(&o, 0, sizeof(o));
	/*
	 * 64 KB can ask for 2M slices (deep stacks on a thread off CPU between samples): 160 MB
	 * of JSON, 0.5 s in the CLI but tens of seconds under ASan, most of it in the oracle
	 * that parses the JSON back. A cap of 4,096 slices keeps the budget's path under test
	 * (inputs past it are common) at an output the harness checks in milliseconds.
	 */
	o.max_slices = 4096;
	one(p, &o);
	o.no_counters = true;
	if (p->samples.n)
		o.filter.tid = p->samples.v[p->samples.n - 1].tid;
	one(p, &o);
	profile__free(p);
	return 0;
}
