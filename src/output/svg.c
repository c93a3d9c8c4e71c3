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

/* One view's stacks as the renderer takes them, and what they own. */
struct view_stacks {
	struct wstack *st;
	size_t n;
	struct wstack_frame *frames;
	char **labels; /* --lines and Python frames */
	size_t nl;
};

static void view_stacks_free(struct view_stacks *v)
{
	for (size_t i = 0; v->labels && i < v->nl; i++)
		free(v->labels[i]);
	free(v->labels);
	free(v->st);
	free(v->frames);
	memset(v, 0, sizeof(*v));
}

static int build_stacks(const struct profile *p, const struct folded_opts *o, enum stack_view v,
			struct view_stacks *out)
{
	const struct frame **tmp = malloc(STACK_MAX_FRAMES * sizeof(*tmp));
	struct collapsed_set cs = { 0 };
	struct view_stacks r = { 0 };
	struct collapsed *c;
	size_t total = 0, pos = 0;
	char buf[1024];
	int err = -ENOMEM;

	if (!tmp || collapse_stacks_view(p, &o->filter, o->lines, o->gil, v, &cs))
		goto out;
	c = cs.v;
	for (size_t i = 0; i < cs.n; i++) {
		size_t t;

		collapsed_frames(&cs, p, c[i].node, tmp, 0, &t);
		total += (t < STACK_MAX_FRAMES ? t : STACK_MAX_FRAMES) + 1;
	}
	r.n = cs.n;
	r.st = calloc(cs.n ? cs.n : 1, sizeof(*r.st));
	r.frames = calloc(total ? total : 1, sizeof(*r.frames));
	r.labels = calloc(total ? total : 1, sizeof(*r.labels));
	if (!r.st || !r.frames || !r.labels)
		goto out;
	for (size_t i = 0; i < cs.n; i++) {
		size_t nf = collapsed_frames(&cs, p, c[i].node, tmp, STACK_MAX_FRAMES, NULL);
		struct wstack *st = &r.st[i];

		st->frames = &r.frames[pos];
		st->weight = o->weight_ns ? c[i].weight : c[i].samples;
		st->gil_held = o->weight_ns ? c[i].gil_weight[0] : c[i].gil_samples[0];
		st->gil_free = o->weight_ns ? c[i].gil_weight[1] : c[i].gil_samples[1];
		if (!o->no_comm) {
			const char *comm = profile__str(p, c[i].comm);

			r.frames[pos++] =
			    (struct wstack_frame){ *comm ? comm : "[unknown]", FRAME_SPECIAL };
			st->n++;
		}
		for (size_t k = 0; k < nf; k++, st->n++) {
			const char *l = frame_label(p, tmp[k], o->lines, buf, sizeof(buf));

			if (l == buf) {
				r.labels[r.nl] = strdup(buf);
				if (!r.labels[r.nl])
					goto out;
				l = r.labels[r.nl++];
			}
			r.frames[pos++] =
			    (struct wstack_frame){ l, tmp[k]->kind, frame_file(p, tmp[k]) };
		}
	}
	*out = r;
	memset(&r, 0, sizeof(r));
	err = 0;
out:
	view_stacks_free(&r);
	collapsed_set__free(&cs);
	free(tmp);
	return err;
}

static bool has_python(const struct view_stacks *v)
{
	for (size_t i = 0; i < v->n; i++)
		for (uint32_t k = 0; k < v->st[i].n; k++)
			if (v->st[i].frames[k].kind == FRAME_PYTHON)
				return true;
	return false;
}

int flamegraph_svg_write(struct sink *out, const struct profile *p, const struct svg_opts *o)
{
	/* The control's order; vs[] and fv[] follow it. */
	static const enum stack_view order[] = { VIEW_PYTHON, VIEW_MIXED, VIEW_NATIVE };
	enum stack_view open = o->stacks.view;
	struct view_stacks vs[3] = { 0 };
	struct fg_view fv[3];
	size_t nv = 1, first = 1;
	int err;

	/* Whether there are Python frames to switch is seen in the mixed view. */
	err = build_stacks(p, &o->stacks, o->all_views ? VIEW_MIXED : open, &vs[1]);
	if (!err && o->all_views && has_python(&vs[1])) {
		err = build_stacks(p, &o->stacks, VIEW_PYTHON, &vs[0]);
		if (!err)
			err = build_stacks(p, &o->stacks, VIEW_NATIVE, &vs[2]);
		nv = 3;
	} else if (!err && o->all_views && open != VIEW_MIXED) {
		view_stacks_free(&vs[1]);
		err = build_stacks(p, &o->stacks, open, &vs[1]);
	}
	if (err)
		goto out;
	for (size_t i = 0; i < 3; i++) {
		fv[i] = (struct fg_view){ view_name(order[i]), vs[i].st, vs[i].n };
		if (nv == 3 && order[i] == open)
			first = i;
	}
	err = nv == 3 ? flamegraph_write_svg_views(out, fv, 3, first, &o->fg)
		      : flamegraph_write_svg(out, vs[1].st, vs[1].n, &o->fg);
out:
	for (size_t i = 0; i < 3; i++)
		view_stacks_free(&vs[i]);
	return err;
}
