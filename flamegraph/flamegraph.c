// SPDX-License-Identifier: MIT
/*
 * Interactive SVG flamegraph.
 *
 * The file holds two things: a static picture of the frames at least a pixel
 * wide (so the SVG still shows something where scripts do not run, e.g. in an
 * <img>), and a compact JSON model of the widest FG_MODEL_MAX frames that
 * flamegraph.js draws from. Zooming re-lays out the model in the browser, so
 * frames too narrow for the first picture appear once zoomed in.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fg_internal.h"
#include "util/json.h"
#include "util/sink.h"
#include "util/utf8.h"

extern const unsigned char asset_flamegraph_js[];
extern const size_t asset_flamegraph_js_len;

const char *flamegraph_script(size_t *len)
{
	*len = asset_flamegraph_js_len;
	return (const char *)asset_flamegraph_js;
}
extern const unsigned char asset_flamegraph_css[];
extern const size_t asset_flamegraph_css_len;

struct fg_ctx {
	struct sink *out;
	struct fg_opts o; /* defaults filled in */
	struct fg_tree t;
	double plot_w;	     /* px across which the root spans */
	uint64_t static_min; /* narrowest weight in the static picture */
	bool static_cut;     /* too many frames: only those ranking above static_bar */
	struct fg_key static_bar;
	uint32_t rows;	     /* rows of the static picture */
	unsigned height;
	unsigned kinds_seen; /* bit per frame kind in the static picture (of every view) */
	/* Several views: their names, and their trees but the open one's, which is t. */
	const struct fg_view *views;
	size_t nv, open;
	struct fg_tree *more; /* nv entries; more[open] stays empty */
};

static const char *const kind_names[FG_KIND_N] = { "user", "kernel", "JIT", "unknown", "special",
							  "Python" };

/* Names and titles are one line each in the picture: a newline in one is a space. */
static void xml_str(struct sink *s, const char *str)
{
	sink_xml_text(s, str, strlen(str), SINK_XML_LINE);
}

static double frame_px(const struct fg_ctx *c, uint64_t w)
{
	return (double)w / (double)c->t.total * c->plot_w;
}

static int cmp_key_best_first(const void *a, const void *b)
{
	const struct fg_key *x = a, *y = b;

	return fg_key_worse(*x, *y) ? 1 : fg_key_worse(*y, *x) ? -1 : 0;
}

static bool is_static(const struct fg_ctx *c, const struct fg_node *nd)
{
	struct fg_key k = { nd->w, nd->depth };

	return nd->w >= c->static_min && (!c->static_cut || fg_key_worse(c->static_bar, k));
}

/*
 * The static picture holds the frames at least FG_MIN_PX wide, at most
 * FG_DRAW_MAX of them: the best ranked (see fg_key), a connected tree.
 */
static int pick_static(struct fg_ctx *c)
{
	uint64_t min_w = (uint64_t)ceil((double)c->t.total * FG_MIN_PX / c->plot_w - 1e-9);
	struct fg_key *keys;
	size_t n = 0;

	c->static_min = min_w ? min_w : 1;
	for (size_t i = 0; i < c->t.n_nodes; i++)
		n += c->t.nodes[i].w >= c->static_min;
	if (n > FG_DRAW_MAX) {
		keys = malloc(n * sizeof(*keys));
		if (!keys)
			return -ENOMEM;
		n = 0;
		for (size_t i = 0; i < c->t.n_nodes; i++) {
			if (c->t.nodes[i].w >= c->static_min)
				keys[n++] = (struct fg_key){ c->t.nodes[i].w, c->t.nodes[i].depth };
		}
		qsort(keys, n, sizeof(*keys), cmp_key_best_first);
		c->static_cut = true;
		c->static_bar = keys[FG_DRAW_MAX];
		free(keys);
	}
	c->rows = 1;
	for (size_t i = 0; i < c->t.n_nodes; i++) {
		const struct fg_node *nd = &c->t.nodes[i];

		if (!is_static(c, nd))
			continue;
		if (nd->depth + 1 > c->rows)
			c->rows = nd->depth + 1;
		if (i)
			c->kinds_seen |= 1u << c->t.names[nd->name].kind;
	}
	return 0;
}

/* Coloured by the GIL share: asked for, and there are GIL weights to colour by. */
static bool gil_mode(const struct fg_ctx *c)
{
	return c->o.gil_colors && c->t.has_gil && !c->o.differential;
}

/* The tree of view i (the one tree without views). */
static const struct fg_tree *view_tree(const struct fg_ctx *c, size_t i)
{
	return i == c->open ? &c->t : &c->more[i];
}

/*
 * The rows of another view's first drawing (its frames at least FG_MIN_PX wide); with kinds,
 * their frame kinds are added to it (the legend is the same for every view).
 */
static uint32_t view_rows(const struct fg_ctx *c, const struct fg_tree *t, unsigned *kinds)
{
	uint64_t min_w = (uint64_t)ceil((double)t->total * FG_MIN_PX / c->plot_w - 1e-9);
	uint32_t rows = 1;

	for (size_t i = 1; i < t->n_nodes; i++) {
		const struct fg_node *nd = &t->nodes[i];

		if (nd->w < (min_w ? min_w : 1))
			continue;
		if (nd->depth + 1 > rows)
			rows = nd->depth + 1;
		if (kinds)
			*kinds |= 1u << t->names[nd->name].kind;
	}
	return rows;
}

static double row_y(const struct fg_ctx *c, uint32_t depth)
{
	if (c->o.inverted)
		return FG_HEADER_H + (double)depth * FG_FRAME_H;
	return FG_HEADER_H + (double)(c->rows - 1 - depth) * FG_FRAME_H;
}

/* --- document head ------------------------------------------------------------ */

static void write_head(struct fg_ctx *c)
{
	struct sink *s = c->out;
	unsigned w = c->o.width;

	sink_puts(s, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	sink_printf(s,
		    "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%u\" "
		    "height=\"%u\" viewBox=\"0 0 %u %u\" class=\"eprof-fg%s%s%s\">\n",
		    w, c->height, w, c->height, c->o.differential ? " diff" : "",
		    c->o.inverted ? " inverted" : "", gil_mode(c) ? " gil" : "");
	sink_puts(s, "<title>");
	xml_str(s, c->o.title);
	sink_puts(s, "</title>\n<style><![CDATA[\n");
	sink_write(s, asset_flamegraph_css, asset_flamegraph_css_len);
	sink_puts(s, "]]></style>\n<defs><linearGradient id=\"fg-bg-fill\" x1=\"0\" y1=\"0\" x2=\"0\" "
		     "y2=\"1\"><stop offset=\"0\" stop-color=\"#f8f8f8\"/><stop offset=\"1\" "
		     "stop-color=\"#ebebef\"/></linearGradient></defs>\n");
	sink_puts(s, "<rect id=\"fg-bg\" class=\"bg\" x=\"0\" y=\"0\" width=\"100%\" "
		     "height=\"100%\" fill=\"url(#fg-bg-fill)\"/>\n");
}

/* Cuts str to about max_chars characters with a ".." tail, writing it escaped. */
static void write_cut(struct sink *s, const char *str, size_t len, size_t max_chars)
{
	size_t chars, bytes;

	utf8_prefix(str, len, SIZE_MAX, &chars);
	if (chars <= max_chars) {
		sink_xml_text(s, str, len, SINK_XML_LINE);
		return;
	}
	bytes = utf8_prefix(str, len, max_chars > 2 ? max_chars - 2 : 0, NULL);
	sink_xml_text(s, str, bytes, SINK_XML_LINE);
	sink_puts(s, "..");
}

/* The frame kinds, or the change against the base of a differential graph. */
static void write_kind_legend(struct fg_ctx *c)
{
	static const char *const diff_names[] = { "grew", "shrank", "unchanged" };
	static const uint32_t diff_rgb[] = { 0xde2d26, 0x2e6ed6, 0xffffff };
	double x = FG_PAD_X;

	sink_printf(c->out, "<g id=\"fg-legend-kind\" class=\"legend\"%s>",
		    gil_mode(c) ? " display=\"none\"" : "");
	for (unsigned k = 0; k < (c->o.differential ? 3u : FG_KIND_N); k++) {
		const char *label = c->o.differential ? diff_names[k] : kind_names[k];
		uint32_t rgb = c->o.differential ? diff_rgb[k] : fg_name_rgb("", 0, k);

		if (!c->o.differential && !(c->kinds_seen & (1u << k)))
			continue;
		sink_printf(c->out,
			    "<rect x=\"%.0f\" y=\"55\" width=\"10\" height=\"10\" fill=\"#%06x\"/>"
			    "<text x=\"%.0f\" y=\"64\">%s</text>",
			    x, rgb, x + 14, label);
		x += 14 + strlen(label) * 7.0 + 16;
	}
	if (c->o.differential)
		sink_puts(c->out, "<text x=\"280\" y=\"64\">colour: change against the base "
				  "profile</text>");
	sink_puts(c->out, "</g>\n");
}

/* The GIL colours: the share of a frame's Python samples whose thread held the GIL. */
static void write_gil_legend(struct fg_ctx *c)
{
	static const char *const labels[] = { "GIL held", "half", "GIL not held",
					      "no Python samples" };
	const uint64_t held[] = { 1, 1, 0, 0 }, free[] = { 0, 1, 1, 0 };
	double x = FG_PAD_X;

	sink_printf(c->out, "<g id=\"fg-legend-gil\" class=\"legend\"%s>",
		    gil_mode(c) ? "" : " display=\"none\"");
	for (unsigned k = 0; k < 4; k++) {
		sink_printf(c->out,
			    "<rect x=\"%.0f\" y=\"55\" width=\"10\" height=\"10\" fill=\"#%06x\"/>"
			    "<text x=\"%.0f\" y=\"64\">%s</text>",
			    x, fg_gil_rgb(held[k], free[k]), x + 14, labels[k]);
		x += 14 + strlen(labels[k]) * 6.0 + 16;
	}
	sink_puts(c->out, "</g>\n");
}

/* "View: python · mixed · native", the open one marked, left of the other toggles. */
static void write_view_control(struct fg_ctx *c)
{
	int right = c->o.width - FG_PAD_X - 110 - (c->t.has_gil && !c->o.differential ? 120 : 0);

	sink_printf(c->out,
		    "<text id=\"fg-views\" class=\"views\" x=\"%d\" y=\"64\" "
		    "text-anchor=\"end\">View:",
		    right);
	for (size_t i = 0; i < c->nv; i++) {
		sink_printf(c->out, "%s<tspan class=\"ctl small%s\" data-view=\"%zu\">",
			    i ? " \xc2\xb7 " : " ", i == c->open ? " on" : "", i);
		xml_str(c->out, c->views[i].name);
		sink_puts(c->out, "</tspan>");
	}
	sink_puts(c->out, "</text>");
}

/*
 * Title, legend and controls, in a group drawn over the frames: the script keeps it at the
 * top of the window while a tall graph scrolls under it.
 */
static void write_header(struct fg_ctx *c)
{
	struct sink *s = c->out;
	double mid = c->o.width / 2.0;
	/* leave room for the controls on either side of the title (narrow widths: 10 chars) */
	double chars = (c->o.width - 2.0 * (FG_PAD_X + 260)) / 9.5;
	size_t room = chars > 10 ? (size_t)chars : 10;

	sink_printf(s, "<g id=\"fg-head\"><rect class=\"band\" x=\"0\" y=\"0\" width=\"%u\" "
		       "height=\"%d\"/>\n", c->o.width, FG_HEADER_H - 2);
	sink_printf(s, "<text id=\"fg-title\" class=\"title\" x=\"%.1f\" y=\"26\">", mid);
	write_cut(s, c->o.title, strlen(c->o.title), room > 10 ? room : 10);
	sink_puts(s, "</text>\n");
	if (c->o.subtitle && *c->o.subtitle) {
		sink_printf(s, "<text id=\"fg-subtitle\" class=\"subtitle\" x=\"%.1f\" y=\"45\">",
			    mid);
		write_cut(s, c->o.subtitle, strlen(c->o.subtitle),
			  (size_t)((c->o.width - 2.0 * FG_PAD_X) / 6.8));
		sink_puts(s, "</text>\n");
	}
	if (c->t.total && (c->o.differential || __builtin_popcount(c->kinds_seen) > 1 ||
			   gil_mode(c)))
		write_kind_legend(c);
	if (c->t.total && c->t.has_gil && !c->o.differential)
		write_gil_legend(c);
	/* Controls need the script: hidden until it runs. */
	sink_printf(s,
		    "<g id=\"fg-controls\" display=\"none\">"
		    "<text id=\"fg-reset\" class=\"ctl\" x=\"%d\" y=\"26\" visibility=\"hidden\">"
		    "Reset Zoom</text>"
		    "<text id=\"fg-search-btn\" class=\"ctl\" x=\"%d\" y=\"26\">Search</text>"
		    "<foreignObject x=\"%d\" y=\"10\" width=\"200\" height=\"24\">"
		    "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"fg-search\" "
		    "type=\"search\" placeholder=\"regex or text (Ctrl-F)\" spellcheck=\"false\" "
		    "autocomplete=\"off\"/></foreignObject>",
		    FG_PAD_X, c->o.width - FG_PAD_X - 252, c->o.width - FG_PAD_X - 200);
	/* on the legend's line, at the right: flip the graph, colour by the GIL */
	sink_printf(s,
		    "<text id=\"fg-flip\" class=\"ctl small\" x=\"%d\" y=\"64\" "
		    "text-anchor=\"end\">%s</text>",
		    c->o.width - FG_PAD_X, c->o.inverted ? "Root at bottom" : "Root at top");
	if (c->t.has_gil && !c->o.differential)
		sink_printf(s,
			    "<text id=\"fg-gil\" class=\"ctl small\" x=\"%d\" y=\"64\" "
			    "text-anchor=\"end\">%s</text>",
			    c->o.width - FG_PAD_X - 110,
			    gil_mode(c) ? "Colour by kind" : "Colour by GIL");
	if (c->nv > 1)
		write_view_control(c);
	sink_puts(s, "</g></g>\n");
}

static void write_footer(struct fg_ctx *c)
{
	unsigned y = c->height - 10;

	sink_printf(c->out,
		    "<g id=\"fg-foot\"><rect class=\"band\" x=\"0\" y=\"%u\" width=\"%u\" "
		    "height=\"%d\"/>\n"
		    "<text id=\"fg-status\" class=\"status\" x=\"%d\" y=\"%u\"> </text>\n"
		    "<text id=\"fg-matched\" class=\"status matched\" x=\"%d\" y=\"%u\"> </text>"
		    "</g>\n",
		    c->height - FG_FOOTER_H + 4, c->o.width, FG_FOOTER_H - 4, FG_PAD_X, y,
		    c->o.width - FG_PAD_X, y);
}

/* --- static picture ------------------------------------------------------------ */

static void write_weight_title(struct fg_ctx *c, const struct fg_node *nd)
{
	char a[48], b[48], d[48];
	uint64_t delta;

	fg_fmt_weight(a, sizeof(a), c->o.unit, nd->w);
	sink_printf(c->out, " (%s, %.2f%%", a, 100.0 * nd->w / c->t.total);
	if (c->o.differential) {
		delta = nd->w > nd->base ? nd->w - nd->base : nd->base - nd->w;
		fg_fmt_weight(b, sizeof(b), c->o.unit, nd->base);
		fg_fmt_weight(d, sizeof(d), c->o.unit, delta);
		sink_printf(c->out, "; base %s, delta %s%s", b, nd->w >= nd->base ? "+" : "-", d);
		if (nd->base)
			sink_printf(c->out, " (%+.2f%%)",
				    100.0 * ((double)nd->w - (double)nd->base) / nd->base);
	}
	sink_puts(c->out, ")");
}

/*
 * A frame of the static picture. Only labelled frames get a <title>: the
 * picture matters where scripts do not run, and there (an <img>) nothing
 * shows tooltips; thousands of titles for slivers would only add megabytes.
 */
static void write_static_frame(struct fg_ctx *c, const struct fg_node *nd)
{
	const struct fg_name *nm = &c->t.names[nd->name];
	struct sink *s = c->out;
	double x = FG_PAD_X + frame_px(c, nd->x), w = frame_px(c, nd->w);
	double y = row_y(c, nd->depth), fit = (w - 2 * FG_LABEL_PAD) / FG_CHAR_W;
	uint32_t rgb = gil_mode(c)				 ? fg_gil_rgb(nd->gil_held, nd->gil_free)
		       : c->o.differential && nd != c->t.nodes ? fg_diff_rgb(nd->w, nd->base)
							      : nm->rgb;

	if (fit >= 3) {
		sink_puts(s, "<g><title>");
		sink_xml_text(s, nm->s, nm->len, SINK_XML_LINE);
		write_weight_title(c, nd);
		if (nm->file) {
			sink_puts(s, "\n");
			xml_str(s, nm->file);
		}
		sink_puts(s, "</title>");
	}
	sink_printf(s, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"#%06x\"/>",
		    x, y, w, FG_FRAME_H - 1, rgb);
	if (fit >= 3) {
		sink_printf(s, "<text x=\"%.1f\" y=\"%.1f\">", x + FG_LABEL_PAD, y + 11.5);
		write_cut(s, nm->s, nm->len, (size_t)fit);
		sink_puts(s, "</text></g>");
	}
	sink_puts(s, "\n");
}

static void write_static(struct fg_ctx *c)
{
	sink_printf(c->out, "<g id=\"fg-frames\" class=\"frames\" font-family=\"monospace\" "
			    "font-size=\"%d\">\n",
		    FG_FONT_PX);
	for (size_t i = 0; i < c->t.n_nodes; i++) {
		if (is_static(c, &c->t.nodes[i]))
			write_static_frame(c, &c->t.nodes[i]);
	}
	sink_puts(c->out, "</g>\n");
}

/* --- model for the script ------------------------------------------------------ */

static void put_sink(void *s, const void *p, size_t n)
{
	sink_write(s, p, n);
}

/* The model sits in a <script> (CDATA in the SVG): JSON_SCRIPT keeps it from ending there. */
static void write_json_str(struct sink *s, const char *str, size_t len)
{
	sink_puts(s, "\"");
	json_escape_n(str, len, JSON_SCRIPT, put_sink, s);
	sink_puts(s, "\"");
}

/* The tooltips' source files of the names (Python frames), when any name has one. */
static int write_files(struct fg_ctx *c, const struct fg_name **names, size_t n)
{
	struct sink *s = c->out;
	bool any = false;
	size_t i;

	for (i = 0; i < n && !any; i++)
		any = names[i]->file;
	if (!any)
		return s->err;
	sink_puts(s, ",\n\"files\":[");
	for (i = 0; i < n; i++) {
		if (i)
			sink_puts(s, ",");
		if (names[i]->file)
			write_json_str(s, names[i]->file, strlen(names[i]->file));
		else
			sink_puts(s, "0");
	}
	return sink_puts(s, "]");
}

/* A name one view's frames use, on its way into the table the views share. */
struct name_ref {
	const struct fg_name *nm;
	uint32_t view, id;
};

static int cmp_name_ref(const void *a, const void *b)
{
	const struct name_ref *x = a, *y = b;
	int r = fg_name_cmp(x->nm, y->nm);

	if (r)
		return r;
	if (x->view != y->view)
		return x->view < y->view ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * The names the frames of every view use, in one table sorted as a tree's (one view: its
 * names in its order), the root's "all" first: maps[v][id in view v's tree] = the index in
 * *out (UINT32_MAX: unused). Returns how many names, or -ENOMEM.
 */
static int64_t share_names(const struct fg_ctx *c, uint32_t **maps, const struct fg_name ***out)
{
	const struct fg_name **names;
	struct name_ref *refs;
	size_t nref = 0, n = 0;

	for (size_t v = 0; v < c->nv; v++) {
		const struct fg_tree *t = view_tree(c, v);

		for (size_t i = 0; i < t->n_names; i++)
			maps[v][i] = UINT32_MAX;
		for (size_t i = 0; i < t->n_nodes; i++)
			maps[v][t->nodes[i].name] = 0;
		for (size_t i = 1; i < t->n_names; i++)
			nref += !maps[v][i];
	}
	refs = malloc((nref ? nref : 1) * sizeof(*refs));
	names = malloc((nref + 1) * sizeof(*names));
	if (!refs || !names) {
		free(refs);
		free(names);
		return -ENOMEM;
	}
	nref = 0;
	for (size_t v = 0; v < c->nv; v++) {
		const struct fg_tree *t = view_tree(c, v);

		for (size_t i = 1; i < t->n_names; i++)
			if (!maps[v][i])
				refs[nref++] = (struct name_ref){ &t->names[i], v, i };
	}
	qsort(refs, nref, sizeof(*refs), cmp_name_ref);
	names[n++] = &c->t.names[0];
	for (size_t k = 0; k < nref; k++) {
		if (n == 1 || fg_name_cmp(names[n - 1], refs[k].nm))
			names[n++] = refs[k].nm;
		else if (!names[n - 1]->file)
			names[n - 1] = refs[k].nm; /* the same name and colour, maybe with a file */
		maps[refs[k].view][refs[k].id] = n - 1;
	}
	free(refs);
	*out = names;
	return n;
}

static int write_names(struct fg_ctx *c, const struct fg_name **names, size_t n)
{
	struct sink *s = c->out;

	sink_puts(s, ",\n\"names\":[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			sink_puts(s, ",");
		write_json_str(s, names[i]->s, names[i]->len);
	}
	sink_puts(s, "],\n\"kinds\":\"");
	for (size_t i = 0; i < n; i++)
		sink_printf(s, "%u", names[i]->kind);
	sink_puts(s, "\",\n\"colors\":\"");
	for (size_t i = 0; i < n; i++)
		sink_printf(s, "%06x", names[i]->rgb);
	sink_puts(s, "\"");
	return write_files(c, names, n);
}

/*
 * Frames in preorder as flat integers: depth, name, gap, weight, self[, base][, gil held,
 * gil not held], weights divided by the scale. gap is the weight of the dropped siblings
 * between this frame and the previous kept one, so positions are exact.
 */
static int write_frames(struct fg_ctx *c, const struct fg_tree *t, const uint32_t *map)
{
	uint64_t *next = calloc(t->max_depth + 2, sizeof(*next)), k = t->scale;
	char buf[128];

	if (!next)
		return -ENOMEM;
	sink_printf(c->out, ",\n\"nf\":%d,\n\"frames\":[", 5 + c->o.differential + 2 * t->has_gil);
	for (size_t i = 0; i < t->n_nodes; i++) {
		const struct fg_node *nd = &t->nodes[i];
		int n = snprintf(buf, sizeof(buf), "%s%u,%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64,
				 i ? (i % 8 ? "," : ",\n") : "", nd->depth, map[nd->name],
				 (nd->x - next[nd->depth]) / k, nd->w / k, nd->self / k);

		sink_write(c->out, buf, n);
		if (c->o.differential)
			sink_printf(c->out, ",%" PRIu64, nd->base / k);
		if (t->has_gil)
			sink_printf(c->out, ",%" PRIu64 ",%" PRIu64, nd->gil_held / k,
				    nd->gil_free / k);
		next[nd->depth] = nd->x + nd->w;
		next[nd->depth + 1] = nd->x;
	}
	free(next);
	return sink_puts(c->out, "]");
}

/*
 * "view" names the open view, whose frames are the ones above; "views" lists every view in
 * the control's order, each but the open one with its own frames and what goes with them.
 */
static int write_views(struct fg_ctx *c, uint32_t **maps)
{
	struct sink *s = c->out;
	int err = 0;

	sink_puts(s, ",\n\"view\":");
	write_json_str(s, c->views[c->open].name, strlen(c->views[c->open].name));
	sink_puts(s, ",\n\"views\":[");
	for (size_t v = 0; v < c->nv && !err; v++) {
		const struct fg_tree *t = view_tree(c, v);

		sink_puts(s, v ? ",\n{\"name\":" : "{\"name\":");
		write_json_str(s, c->views[v].name, strlen(c->views[v].name));
		if (v != c->open) {
			sink_printf(s,
				    ",\"total\":%" PRIu64 ",\"scale\":%" PRIu64
				    ",\"rows\":%u,\"gil\":%d",
				    t->total, t->scale, view_rows(c, t, NULL),
				    t->has_gil && !c->o.differential);
			err = write_frames(c, t, maps[v]);
		}
		sink_puts(s, "}");
	}
	sink_puts(s, "]");
	return err ? err : s->err;
}

static int write_data(struct fg_ctx *c)
{
	struct sink *s = c->out;
	uint32_t **maps = calloc(c->nv, sizeof(*maps));
	const struct fg_name **names = NULL;
	int64_t nn = -ENOMEM;
	int err = 0;

	for (size_t v = 0; maps && v < c->nv; v++) {
		const struct fg_tree *t = view_tree(c, v);

		maps[v] = malloc((t->n_names ? t->n_names : 1) * sizeof(**maps));
		if (!maps[v])
			goto out;
	}
	if (maps)
		nn = share_names(c, maps, &names);
	if (nn < 0)
		goto out;
	sink_puts(s, "<script type=\"application/json\" id=\"fg-data\">{\"version\":1,\"unit\":");
	write_json_str(s, c->o.unit, strlen(c->o.unit));
	sink_printf(s,
		    ",\"diff\":%d,\"inverted\":%d,\"gil\":%d,\"gilColors\":%d,\n\"layout\":{\"width\":%u,\"padX\":%d,"
		    "\"frameH\":%d,\"headerH\":%d,\"footerH\":%d,\"fontPx\":%d,\"labelPad\":%.1f,"
		    "\"minPx\":%.2f,\"maxDraw\":%d,\"rows\":%u},\n\"total\":%" PRIu64
		    ",\"baseTotal\":%" PRIu64 ",\"scale\":%" PRIu64,
		    c->o.differential, c->o.inverted, c->t.has_gil && !c->o.differential,
		    gil_mode(c), c->o.width, FG_PAD_X, FG_FRAME_H,
		    FG_HEADER_H, FG_FOOTER_H, FG_FONT_PX, FG_LABEL_PAD, FG_MIN_PX, FG_DRAW_MAX,
		    c->rows, c->t.total, c->t.base_total, c->t.scale);
	err = write_names(c, names, (size_t)nn);
	if (!err)
		err = write_frames(c, &c->t, maps[c->open]);
	if (!err && c->nv > 1)
		err = write_views(c, maps);
	/* flamegraph_script() is what this writes: the HTML export hashes it. */
	sink_puts(s, "}</script>\n<script type=\"text/javascript\"><![CDATA[\n");
	sink_write(s, asset_flamegraph_js, asset_flamegraph_js_len);
	sink_puts(s, "]]></script>\n");
out:
	for (size_t v = 0; maps && v < c->nv; v++)
		free(maps[v]);
	free(maps);
	free(names);
	return nn < 0 ? (int)nn : err;
}

/* --- entry --------------------------------------------------------------------- */

static void fill_opts(struct fg_opts *o, const struct fg_opts *in)
{
	if (in)
		*o = *in;
	else
		memset(o, 0, sizeof(*o));
	if (!o->title || !*o->title)
		o->title = o->differential ? "Differential flame graph" : "Flame graph";
	if (!o->unit || !*o->unit)
		o->unit = "samples";
	if (!o->width)
		o->width = FG_DEFAULT_WIDTH;
	if (o->width < FG_MIN_WIDTH)
		o->width = FG_MIN_WIDTH;
	if (o->width > FG_MAX_WIDTH)
		o->width = FG_MAX_WIDTH;
}

static void write_empty(struct fg_ctx *c)
{
	c->rows = 3;
	c->height = FG_HEADER_H + c->rows * FG_FRAME_H + FG_FOOTER_H;
	write_head(c);
	write_header(c);
	sink_printf(c->out,
		    "<text id=\"fg-empty\" class=\"empty\" x=\"%.1f\" y=\"%d\">no samples</text>\n",
		    c->o.width / 2.0, FG_HEADER_H + 2 * FG_FRAME_H);
	write_footer(c);
}

int flamegraph_write_svg(struct sink *out, const struct wstack *stacks, size_t n,
			 const struct fg_opts *opts)
{
	struct fg_view v = { "", stacks, n };

	return flamegraph_write_svg_views(out, &v, 1, 0, opts);
}

int flamegraph_write_svg_views(struct sink *out, const struct fg_view *views, size_t nviews,
			       size_t open, const struct fg_opts *opts)
{
	struct fg_ctx c = { .out = out, .views = views, .nv = nviews, .open = open };
	int err = 0;

	if (!out || !views || open >= nviews)
		return -EINVAL;
	for (size_t i = 0; i < nviews; i++)
		if (views[i].n && !views[i].stacks)
			return -EINVAL;
	fill_opts(&c.o, opts);
	c.plot_w = c.o.width - 2.0 * FG_PAD_X;
	c.more = calloc(nviews, sizeof(*c.more));
	if (!c.more)
		return -ENOMEM;
	err = fg_tree_build(&c.t, views[open].stacks, views[open].n, FG_MODEL_MAX);
	for (size_t i = 0; i < nviews && !err; i++)
		if (i != open)
			err = fg_tree_build(&c.more[i], views[i].stacks, views[i].n, FG_MODEL_MAX);
	if (err)
		goto out;
	if (!c.t.total) {
		write_empty(&c);
		goto done;
	}
	err = pick_static(&c);
	if (err)
		goto out;
	for (size_t i = 0; i < nviews; i++)
		if (i != open)
			view_rows(&c, &c.more[i], &c.kinds_seen);
	c.height = FG_HEADER_H + c.rows * FG_FRAME_H + FG_FOOTER_H;
	write_head(&c);
	/* the frames first: the header and footer are drawn over them when they scroll */
	write_static(&c);
	write_header(&c);
	write_footer(&c);
	err = write_data(&c);
	if (err)
		goto out;
done:
	sink_puts(out, "</svg>\n");
	err = out->err;
out:
	fg_tree_free(&c.t);
	for (size_t i = 0; i < nviews; i++)
		fg_tree_free(&c.more[i]);
	free(c.more);
	return err;
}
