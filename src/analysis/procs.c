// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hmap.h"
#include "util/vec.h"
#include "procs.h"

static int cmp_proc(const void *a, const void *b)
{
	const struct proc_stat *x = a, *y = b;

	if (x->samples != y->samples)
		return x->samples < y->samples ? 1 : -1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int add_proc(const struct profile *p, struct proc_stat **v, size_t *n, size_t *cap,
		    uint32_t pid)
{
	const struct process *pr = profile__find_proc(p, pid);

	if (arr_grow(*v, *cap, *n + 1))
		return -ENOMEM;
	(*v)[*n] = 
(struct proc_stat){ .pid = pid };
	if (pr) {
		(*v)[*n].ppid = pr->ppid;
		(*v)[*n].comm = pr->comm;
		(*v)[*n].cmdline = pr->cmdline;
	}
	(*n)++;
	return 0;
}

int process_stats(const struct profile *p, const struct sample_filter *f, struct proc_stat **out,
		  size_t *nout)
{
	struct hmap *procs = hmap__new(16), *threads = hmap__new(64);
	struct proc_stat *v = NULL;
	size_t n = 0, cap = 0;
	int err = -ENOMEM;

	*out = NULL;
	*nout = 0;
	if (!procs || !threads)
		goto out;
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		uint64_t k, seen;

		if (!sample_filter__match(f, s))
			continue;
		if (!hmap__get(procs, s->pid, 0, &k)) {
			k = n;
			if (add_proc(p, &v, &n, &cap, s->pid) || hmap__put(procs, s->pid, 0, k))
				goto out;
		}
		v[k].samples++;
		v[k].weight += s->weight;
		if (!hmap__get(threads, s->pid, s->tid, &seen)) {
			if (hmap__put(threads, s->pid, s->tid, 1))
				goto out;
			v[k].threads++;
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_proc);
	*out = n ? v : NULL;
	*nout = n;
	if (!n)
		free(v);
	v = NULL;
	err = 0;
out:
	free(v);
	hmap__free(procs);
	hmap__free(threads);
	return err;
}

const char *proc_command(const struct profile *p, const struct proc_stat *ps, char *buf,
			 size_t len)
{
	const char *cmd = ps->cmdline ? profile__str(p, ps->cmdline) : "";
	const char *comm = ps->comm ? profile__str(p, ps->comm) : "";

	if (*cmd)
		return cmd;
	if (!*comm)
		return "?";
	/* No argv (a kernel thread, or a file that has none): the name, as ps shows it. */
	snprintf(buf, len, "[%s]", comm);
	return buf;
}

void proc_command_short(const char *cmdline, char *buf, size_t len)
{
	size_t off = 0;
	int words = 0;

	if (!len)
		return;
	buf[0] = '\0';
	while (cmdline && *cmdline && words < 3 && off + 1 < len) {
		size_t wl = strcspn(cmdline, " "), bl;
		const char *w = cmdline, *slash;

		cmdline += wl + strspn(cmdline + wl, " ");
		if (!wl)
			continue;
		/* a path: its last part, unless it ends in '/' */
		slash = memrchr(w, '/', wl);
		if (slash && slash + 1 < w + wl) {
			wl -= slash + 1 - w;
			w = slash + 1;
		}
		bl = off ? 1 : 0;
		if (off + bl + wl >= len) {
			if (!off) /* one long word: its start */
				wl = len - 1;
			else
				break;
		}
		if (bl)
			buf[off++] = ' ';
		memcpy(buf + off, w, wl);
		off += wl;
		buf[off] = '\0';
		words++;
	}
}
