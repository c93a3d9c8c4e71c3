// SPDX-License-Identifier: MIT
/* A profile's CPU stacks (or the weights a reader put in its samples) as an SVG flamegraph. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph/flamegraph.h"
#include "svg.h"

/* The tooltip's extra line: a Python frame's source file, in full. */
static const char *frame_file(const struct profile *p, const struct frame *f)
{
	return f->kind == FRAME_PYTHON && f->file ? profile__str(p, f->file) : NULL;
}

static int build_stacks(const struct profile *p, const struct folded_opts *o, struct wstack **out,
			size_t *nout, struct wstack_frame **frames_out, char ***labels_out,
			size_t *nlabels)
{
	const struct frame **tmp = malloc(STACK_MAX_FRAMES * sizeof(*tmp));
	struct collapsed_set cs = { 0 };
	struct collapsed *c;
	struct wstack_frame *frames = NULL;
	struct wstack *st = NULL;
	size_t n = 0, total = 0, pos = 0;
	char buf[1024], **labels = NULL;
	size_t nl = 0;
	int err = -ENOMEM;

	if (!tmp || collapse_stacks_gil(p, &o->filter, o->lines, o->gil, &cs))
		goto out;
	c = cs.v;
	n = cs.n;
	for (size_t i = 0; i < n; i++) {
		size_t t;

		collapsed_frames(&cs, p, c[i].node, tmp, 0, &t);
		total += (t < STACK_MAX_FRAMES ? t : STACK_MAX_FRAMES) + 1;
	}
	st = calloc(n ? n : 1, sizeof(*st));
	frames = calloc(total ? total : 1, sizeof(*frames));
	labels = calloc(total ? total : 1, sizeof(*labels)); /* --lines and Python frames */
	if (!st || !frames || !labels)
		goto out;
	for (size_t i = 0; i < n; i++) {
		size_t nf = collapsed_frames(&cs, p, c[i].node, tmp, STACK_MAX_FRAMES, NULL);

		st[i].frames = &frames[pos];
		st[i].weight = o->weight_ns ? c[i].weight : c[i].samples;
		st[i].gil_held = o->weight_ns ? c[i].gil_weight[0] : c[i].gil_samples[0];
		st[i].gil_free = o->weight_ns ? c[i].gil_weight[1] : c[i].gil_samples[1];
		if (!o->no_comm) {
			const char *comm = profile__str(p, c[i].comm);

			frames[pos++] = (struct wstack_frame){ *comm ? comm : "[unknown]", FRAME_SPECIAL };
			st[i].n++;
		}
		for (size_t k = 0; k < nf; k++, st[i].n++) {
			const char *l = frame_label(p, tmp[k], o->lines, buf, sizeof(buf));

			if (l == buf) {
				labels[nl] = strdup(buf);
				if (!labels[nl])
					goto out;
				l = labels[nl++];
			}
			frames[pos++] =
			    (struct wstack_frame){ l, tmp[k]->kind, frame_file(p, tmp[k]) };
		}
	}
	*out = st;
	*nout = n;
	*frames_out = frames;
	*labels_out = labels;
	*nlabels = nl;
	st = NULL;
	frames = NULL;
	labels = NULL;
	err = 0;
out:
	for (size_t i = 0; labels && i < nl; i++)
		free(labels[i]);
	free(labels);
	free(st);
	free(frames);
	collapsed_set__free(&cs);
	free(tmp);
	return err;
}

int flamegraph_svg_write(struct sink *out, const struct profile *p, const struct svg_opts *o)
{
	struct wstack *st = NULL;
	struct wstack_frame *frames = NULL;
	char **labels = NULL;
	size_t n = 0, nl = 0;
	int err;

	err = build_stacks(p, &o->stacks, &st, &n, &frames, &labels, &nl);
	if (err)
		return err;
	err = flamegraph_write_svg(out, st, n, &o->fg);
	for (size_t i = 0; i < nl; i++)
		free(labels[i]);
	free(labels);
	free(st);
	free(frames);
	return err;
}
