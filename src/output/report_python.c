// SPDX-License-Identifier: MIT
/* The Python section of `eprof report`: how often each Python thread held the GIL. */
#include <inttypes.h>
#include <stdlib.h>

#include "../analysis/pygil.h"
#include "../util/json.h"
#include "../util/sink.h"
#include "report_python.h"

static const char *thread_name(const struct profile *p, uint32_t pid, uint32_t tid)
{
	const struct thread *t = profile__find_thread(p, pid, tid);

	return t ? profile__str(p, t->comm) : "";
}

static double share(uint64_t a, uint64_t b)
{
	return b ? 100.0 * a / b : 0.0;
}

int report_python_text(struct sink *out, const struct profile *p, const struct sample_filter *f)
{
	struct py_gil_thread *t;
	size_t n;
	int err = py_gil_stats(p, f, &t, &n);

	if (err || !n)
		return err;
	sink_printf(out, "\n%8s %8s  %-16s %9s %9s\n", "PID", "TID", "Python thread", "Samples",
		    "GIL held");
	for (size_t i = 0; i < n; i++)
		sink_printf(out, "%8u %8u  %-16s %9" PRIu64 " %8.1f%%\n", t[i].pid, t[i].tid,
			    thread_name(p, t[i].pid, t[i].tid), t[i].samples,
			    share(t[i].held, t[i].samples));
	sink_puts(out, "# GIL held: share of the thread's samples taken while it held the GIL "
		       "(samples without a readable GIL not counted)\n");
	free(t);
	return 0;
}

int report_python_json(struct sink *out, const struct profile *p, const struct sample_filter *f)
{
	struct py_gil_thread *t;
	struct json j;
	size_t n;
	int err = py_gil_stats(p, f, &t, &n);

	if (err)
		return err;
	json_init_members(&j, out, 0);
	json_arr_open(&j, 2, "python_gil");
	for (size_t i = 0; i < n; i++) {
		json_obj_open(&j, 4, NULL);
		json_kv_u64(&j, "pid", t[i].pid);
		json_kv_u64(&j, "tid", t[i].tid);
		json_kv_str(&j, "comm", thread_name(p, t[i].pid, t[i].tid));
		json_kv_u64(&j, "samples", t[i].samples);
		json_kv_u64(&j, "gil_held", t[i].held);
		json_kv_f(&j, "gil_held_pct", share(t[i].held, t[i].samples), 2);
		json_obj_end(&j);
	}
	json_arr_close(&j, n ? 2 : -1); /* [] when empty */
	free(t);
	return json_flush(&j);
}
