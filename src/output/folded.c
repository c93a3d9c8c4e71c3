// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/stacks.h"
#include "util/sink.h"
#include "folded.h"

const char *frame_label(const struct profile *p, const struct frame *f, bool lines, char *buf,
			size_t len)
{
	const char *name = profile__str(p, f->name), *file, *slash;

	if (!*name)
		name = "[unknown]"; /* an empty label would break the folded and SVG formats */
	if (f->kind == FRAME_PYTHON && *profile__str(p, f->name))
		return frame_display_name(p, f, buf, len); /* its line is in its name already */
	if (!lines || !f->file || !f->line)
		return name;
	file = profile__str(p, f->file);
	slash = strrchr(file, '/');
	snprintf(buf, len, "%s (%s:%u)", name, slash ? slash + 1 : file, f->line);
	return buf;
}

/* Folded lines are split on ';' and on the last space: keep both out of labels. */
static void write_label(struct sink *out, const char *s)
{
	const char *run = s;

	for (; *s; s++) {
		if (*s != ';' && *s != '\n')
			continue;
		sink_write(out, run, s - run);
		sink_puts(out, *s == ';' ? ":" : " ");
		run = s + 1;
	}
	sink_write(out, run, s - run);
}

int folded_write(struct sink *out, const struct profile *p, const struct folded_opts *o)
{
	const struct frame **frames = malloc(STACK_MAX_FRAMES * sizeof(*frames));
	struct collapsed_set c;
	char buf[1024];
	int err;

	if (!frames)
		return -ENOMEM;
	err = collapse_stacks_view(p, &o->filter, o->lines, o->gil, o->view, &c);
	if (err)
		goto out;
	for (size_t i = 0; i < c.n && !out->err; i++) {
		size_t nf = collapsed_frames(&c, p, c.v[i].node, frames, STACK_MAX_FRAMES, NULL);
		const char *comm = profile__str(p, c.v[i].comm);

		if (!o->no_comm)
			write_label(out, *comm ? comm : "[unknown]");
		for (size_t k = 0; k < nf; k++) {
			if (k || !o->no_comm)
				sink_puts(out, ";");
			write_label(out, frame_label(p, frames[k], o->lines, buf, sizeof(buf)));
		}
		if (!nf && o->no_comm)
			sink_puts(out, "[no stack]");
		sink_printf(out, " %" PRIu64 "\n", o->weight_ns ? c.v[i].weight : c.v[i].samples);
	}
	err = out->err;
	collapsed_set__free(&c);
out:
	free(frames);
	return err;
}
