/* SPDX-License-Identifier: MIT */
/* Internals of the flamegraph renderer: merged tree, colours, text helpers. */
#ifndef EPROF_FG_INTERNAL_H
#define EPROF_FG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flamegraph.h"

struct sink;

/*
 * Layout. The labels use a monospace font so that C (static picture) and JS
 * (interactive view) agree on where a label must be cut.
 */
#define FG_DEFAULT_WIDTH 1200
#define FG_MIN_WIDTH 300
#define FG_MAX_WIDTH 20000
#define FG_PAD_X 10
#define FG_FRAME_H 16	 /* row pitch; the box is one pixel less */
#define FG_HEADER_H 70	 /* title, subtitle, controls */
#define FG_FOOTER_H 30	 /* status line, "Matched" */
#define FG_FONT_PX 12
#define FG_CHAR_W 7.23	 /* 0.6 em of DejaVu Sans Mono / Menlo at 12 px */
#define FG_LABEL_PAD 3.0 /* px of box left of a label */
#define FG_MIN_PX 1.0	 /* narrower frames are not drawn */
#define FG_ROOT_RGB 0xc3c8d2 /* "all": cool grey, apart from the warm grey of special frames */

/* Frames kept in the embedded data (zoom can reveal them) and drawn at once. */
#define FG_MODEL_MAX 60000
#define FG_DRAW_MAX 30000
/* Longest name we embed; longer C++ names are cut (bytes). */
#define FG_NAME_MAX 2048

enum { FG_KIND_USER, FG_KIND_KERNEL, FG_KIND_JIT, FG_KIND_UNKNOWN, FG_KIND_SPECIAL, FG_KIND_PYTHON, FG_KIND_N };

struct fg_name {
	const char *s; /* borrowed from the caller's frames, or a literal */
	uint32_t len;
	uint8_t kind;
	uint32_t rgb;	  /* 0xRRGGBB */
	const char *file; /* NULL, or the tooltip's source file (the first frame's of this name) */
};

struct fg_node {
	uint64_t x;	/* start, in weight units from the left edge */
	uint64_t w;	/* inclusive weight */
	uint64_t self;	/* weight of stacks ending here */
	uint64_t base;	/* differential: inclusive base weight */
	uint64_t gil_held, gil_free; /* inclusive weight of Python samples with / without the GIL */
	uint32_t name;	/* index into fg_tree.names */
	uint32_t parent; /* node index; the root is its own parent */
	uint32_t depth; /* 0 for the root "all" */
};

struct fg_tree {
	struct fg_name *names; /* sorted by (string, kind); names[0] is the root's "all" */
	size_t n_names;
	struct fg_node *nodes; /* preorder, children in name order; nodes[0] is the root */
	size_t n_nodes;
	uint64_t total, base_total;
	uint64_t scale; /* gcd of every input weight: the data stores weights / scale */
	uint32_t max_depth;
	bool has_gil; /* some stack has GIL weights */
};

/*
 * Which frames to keep when there are too many: the widest and, of equally
 * wide ones, the shallowest. A parent always ranks before its children, so
 * the frames ranking above any threshold form a connected tree.
 */
struct fg_key {
	uint64_t w;
	uint32_t depth;
};

static inline bool fg_key_worse(struct fg_key a, struct fg_key b)
{
	return a.w < b.w || (a.w == b.w && a.depth > b.depth);
}

/* The order of fg_tree.names: by string, then kind. */
int fg_name_cmp(const struct fg_name *a, const struct fg_name *b);

/* Merges the stacks and keeps the max_nodes (0: all) best-ranked frames and the root. */
int fg_tree_build(struct fg_tree *t, const struct wstack *stacks, size_t n, size_t max_nodes);
void fg_tree_free(struct fg_tree *t);

/* Colours, deterministic per name. */
uint32_t fg_name_rgb(const char *s, size_t len, unsigned kind);
uint32_t fg_diff_rgb(uint64_t w, uint64_t base);
/* By the share of a frame's Python weight that held the GIL; grey without any. */
uint32_t fg_gil_rgb(uint64_t held, uint64_t free);

/* "1,234 samples", "12.3 ms", "4.50 MiB" into buf; returns buf. */
const char *fg_fmt_weight(char *buf, size_t size, const char *unit, uint64_t v);
/* "1,234" */
const char *fg_fmt_group(char *buf, size_t size, uint64_t v);

#endif
