// SPDX-License-Identifier: MIT
/*
 * `eprof report` on untrusted files: the reader, the hot-function and thread
 * analyses and the text and JSON writers. The JSON must always parse. The file is also
 * taken as two ranks of a job: the job report and the path across ranks (their JSON must
 * parse too), and the two merged into one profile (model/merge.c) that is reported again.
 */
#include <stdint.h>
#include <string.h>

#include "analysis/ranks.h"
#include "fuzz_common.h"
#include "model/merge.h"
#include "model/profile.h"
#include "output/report.h"
#include "output/report_job.h"
#include "util/sink.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static void one(struct profile *p, const struct report_opts *o)
{
	struct sink *s = sink_mem();
	const char *out;
	size_t len;
	int err;

	if (!s)
		return;
	err = report_write(s, p, o);
	out = sink_mem_data(s, &len);
	FUZZ_CHECK(strlen(out) == len || !o->json, "NUL byte in the JSON report");
	if (!err && o->json)
		FUZZ_CHECK(fuzz_json_valid(out, len), "report --json is not valid JSON:\n%.*s",
			   len > 4000 ? 4000 : (int)len, out);
	sink_close(s);
}

static void check_job_json(struct sink *s)
{
	size_t len;
	const char *out = sink_mem_data(s, &len);

	FUZZ_CHECK(strlen(out) == len && fuzz_json_valid(out, len),
		   "job --json is not valid JSON:\n%.*s", len > 4000 ? 4000 : (int)len, out);
}

/* The file twice, as two ranks of a job; then the two merged into one profile. */
static void job(struct profile *p, const struct report_opts *o)
{
	struct profile *const two[2] = { p, p };
	char *paths[2] = { "a.data", "b.data" };
	struct job_summary js;
	struct job_path jp;
	struct profile *m;
	uint32_t next = 0;
	struct sink *s;

	if (!job_analyze(two, paths, 2, &js)) {
		for (int json = 0; json < 2; json++) {
			s = sink_mem();
			if (s && !report_job_write(s, &js, json) && json)
				check_job_json(s);
			if (s)
				sink_close(s);
		}
		if (!job_path(&js, &jp)) {
			s = sink_mem();
			if (s && !report_job_path(s, &js, &jp, true, true))
				check_job_json(s);
			if (s)
				sink_close(s);
			job_path_free(&jp);
		}
		job_summary_free(&js);
	}
	m = profile__new();
	if (!m)
		return;
	if (!profile_merge(m, p, &(struct merge_opts){ .proc_prefix = "rank 0 " }, &next) &&
	    !profile_merge(m, p, &(struct merge_opts){ .id_base = next, .ts_shift = -1000,
						       .thread_name = "h/rank 1" },
			   &next))
		one(m, o);
	profile__free(m);
}

/*
 * One configuration of the report per input, chosen by its size (a mutation that changes
 * nothing else reaches the next): running all five on every input made each execution cost
 * five reports, and coverage grows with executions, not with repeats of the same input.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p;
	struct report_opts o;
	uint32_t pid = 0, tid = 0;

	if (fuzz_unpacked_bytes(data, size) > FUZZ_MAX_UNPACKED) /* size, not a bug */
		return 0;
	p = fuzz_read_profile(data, size);
	if (!p)
		return 0;
	if (fuzz_profile_records(p) > FUZZ_MAX_RECORDS) { /* size, not a bug */
		profile__free(p);
		return 0;
	}
	if (p->samples.n) {
		pid = p->samples.v[p->samples.n / 2].pid;
		tid = p->samples.v[p->samples.n / 2].tid;
	}
	memset(&o, 0, sizeof(o));
	o.path = "fuzz.data";
	switch (size % 5) {
	case 0: /* text, all rows, threads */
		o.threads = true;
		one(p, &o);
		break;
	case 1:
		o.json = true;
		o.hot.sort = SORT_TOTAL;
		one(p, &o);
		break;
	case 2: /* JSON by line, inlined functions apart, one process */
	case 3: /* the same as text, one thread */
		o.json = size % 5 == 2;
		o.hot.by_line = true;
		o.hot.inlined = true;
		o.limit = 5;
		o.hot.filter.pid = pid;
		o.hot.filter.tid = o.json ? 0 : tid;
		one(p, &o);
		break;
	default:
		o.json = true;
		job(p, &o);
	}
	profile__free(p);
	return 0;
}
