// SPDX-License-Identifier: MIT
/*
 * Merging stacks into the flamegraph tree.
 *
 * Frames are interned to (name, kind) ids ranked in name order, the stacks
 * are sorted as id sequences, and the tree is then built in one pass in
 * preorder: a node's subtree is complete as soon as a later stack leaves it.
 * At that moment a node too narrow to ever be kept is dropped together with
 * its subtree (it lies at the end of the array), so memory follows what is
 * kept, not the number of input frames.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fg_internal.h"
#include "util/vec.h"

struct interner {
	struct fg_name *names;
	uint64_t *hashes;
	size_t n, cap, cap_hashes;
	uint32_t *slots; /* name index + 1; 0 is empty */
	size_t mask;
};

struct stack_ref {
	const uint32_t *ids;
	uint32_t n;
	uint64_t w, base, gil_held, gil_free;
};

struct open_node {
	uint32_t node;
	uint64_t child_w; /* weight of the children closed so far */
};

struct builder {
	struct fg_node *nodes;
	size_t n, cap;
	struct open_node *path; /* path[0] is the root */
	uint32_t depth;		/* index of the innermost open node */
	struct fg_key *heap;	/* the best closed nodes seen so far */
	size_t heap_n, heap_k;
};

static uint64_t name_hash(const char *s, size_t len, unsigned kind)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ kind;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h ^ (h >> 29);
}

static size_t name_len(const char *s)
{
	size_t len = strnlen(s, FG_NAME_MAX + 1);

	if (len <= FG_NAME_MAX)
		return len;
	len = FG_NAME_MAX;
	while (len && ((unsigned char)s[len] & 0xc0) == 0x80)
		len--;
	return len;
}

static int interner_grow_slots(struct interner *in)
{
	size_t cap = in->mask ? (in->mask + 1) * 2 : 1024;
	uint32_t *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < in->n; i++) {
		size_t j = in->hashes[i] & (cap - 1);

		while (slots[j])
			j = (j + 1) & (cap - 1);
		slots[j] = i + 1;
	}
	free(in->slots);
	in->slots = slots;
	in->mask = cap - 1;
	return 0;
}

static int interner_push(struct interner *in, const struct wstack_frame *f, size_t len,
			 unsigned kind, uint64_t h)
{
	if (arr_grow(in->names, in->cap, in->n + 1) ||
	    arr_grow(in->hashes, in->cap_hashes, in->n + 1))
		return -ENOMEM;
	in->names[in->n] =
	    (struct fg_name){ .s = f->name, .len = len, .kind = kind, .file = f->file };
	in->hashes[in->n] = h;
	return in->n++;
}

/* Returns the id of (s, kind), adding it if new, or -ENOMEM. */
static int64_t intern(struct interner *in, const struct wstack_frame *f)
{
	const char *s = f->name;
	unsigned kind = f->kind;
	size_t len, j;
	uint64_t h;
	int err;

	if (!s || !*s)
		s = "[unknown]";
	if (kind >= FG_KIND_N)
		kind = FG_KIND_UNKNOWN;
	len = name_len(s);
	h = name_hash(s, len, kind);
	if ((in->n + 1) * 2 > in->mask) {
		err = interner_grow_slots(in);
		if (err)
			return err;
	}
	for (j = h & in->mask; in->slots[j]; j = (j + 1) & in->mask) {
		const struct fg_name *e = &in->names[in->slots[j] - 1];

		if (in->hashes[in->slots[j] - 1] == h && e->len == len && e->kind == kind &&
		    !memcmp(e->s, s, len))
			return in->slots[j] - 1;
	}
	err = interner_push(in, &(struct wstack_frame){ s, 0, f->file }, len, kind, h);
	if (err < 0)
		return err;
	in->slots[j] = err + 1;
	return err;
}

int fg_name_cmp(const struct fg_name *a, const struct fg_name *b)
{
	int c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);

	if (c)
		return c;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return (int)a->kind - (int)b->kind;
}

static int cmp_name_qsort(const void *a, const void *b)
{
	return fg_name_cmp(a, b);
}

/*
 * Sorts the interned names; rank[old id] becomes the new id. Id 0 is kept
 * for the root's "all", so ranks start at 1.
 */
static int rank_names(struct interner *in, struct fg_tree *t, uint32_t **rank_out)
{
	struct fg_name *sorted = malloc((in->n + 1) * sizeof(*sorted));
	uint32_t *rank = malloc((in->n ? in->n : 1) * sizeof(*rank));

	if (!sorted || !rank) {
		free(sorted);
		free(rank);
		return -ENOMEM;
	}
	/* Stash the old id in rgb while sorting; the colour is computed below. */
	for (size_t i = 0; i < in->n; i++) {
		sorted[i + 1] = in->names[i];
		sorted[i + 1].rgb = i;
	}
	qsort(sorted + 1, in->n, sizeof(*sorted), cmp_name_qsort);
	sorted[0] = (struct fg_name){ .s = "all", .len = 3, .kind = FG_KIND_SPECIAL };
	for (size_t i = 0; i <= in->n; i++) {
		if (i)
			rank[sorted[i].rgb] = i;
		sorted[i].rgb = fg_name_rgb(sorted[i].s, sorted[i].len, sorted[i].kind);
	}
	sorted[0].rgb = FG_ROOT_RGB;
	t->names = sorted;
	t->n_names = in->n + 1;
	*rank_out = rank;
	return 0;
}

static int cmp_stack(const void *pa, const void *pb)
{
	const struct stack_ref *a = pa, *b = pb;
	uint32_t n = a->n < b->n ? a->n : b->n;

	for (uint32_t i = 0; i < n; i++) {
		if (a->ids[i] != b->ids[i])
			return a->ids[i] < b->ids[i] ? -1 : 1;
	}
	return a->n < b->n ? -1 : a->n > b->n;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t r = a % b;

		a = b;
		b = r;
	}
	return a;
}

/* --- streaming construction ------------------------------------------------ */

/* The heap keeps the heap_k best keys of the closed nodes; heap[0] is the worst of them. */
static void heap_offer(struct builder *b, struct fg_key k)
{
	struct fg_key *h = b->heap;
	size_t i;

	if (b->heap_n < b->heap_k) {
		for (i = b->heap_n++; i && fg_key_worse(k, h[(i - 1) / 2]); i = (i - 1) / 2)
			h[i] = h[(i - 1) / 2];
		h[i] = k;
		return;
	}
	if (!fg_key_worse(h[0], k))
		return;
	for (i = 0;;) {
		size_t c = 2 * i + 1;

		if (c >= b->heap_n)
			break;
		if (c + 1 < b->heap_n && fg_key_worse(h[c + 1], h[c]))
			c++;
		if (!fg_key_worse(h[c], k))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = k;
}

/* True when a node of key k can no longer be among the kept ones. */
static bool hopeless(const struct builder *b, struct fg_key k)
{
	return !k.w || (b->heap_k && b->heap_n == b->heap_k && fg_key_worse(k, b->heap[0]));
}

static void close_top(struct builder *b)
{
	struct open_node *o = &b->path[b->depth];
	struct fg_key k = { b->nodes[o->node].w, b->depth };

	b->path[b->depth - 1].child_w += k.w;
	if (b->heap_k)
		heap_offer(b, k);
	if (hopeless(b, k))
		b->n = o->node; /* drops the node and its subtree, which follow it */
	b->depth--;
}

static int open_child(struct builder *b, uint32_t name)
{
	struct open_node *p = &b->path[b->depth];
	struct fg_node *nd;

	if (arr_grow(b->nodes, b->cap, b->n + 1))
		return -ENOMEM;
	nd = &b->nodes[b->n];

	*nd = (struct fg_node){
		.x = b->nodes[p->node].x + p->child_w,
		.name = name,
		.parent = p->node,
		.depth = b->depth + 1,
	};
	b->depth++;
	b->path[b->depth] = (struct open_node){ .node = b->n++ };
	return 0;
}

static int add_stack(struct builder *b, const struct stack_ref *s, uint32_t common)
{
	int err;

	while (b->depth > common)
		close_top(b);
	for (uint32_t d = common; d < s->n; d++) {
		err = open_child(b, s->ids[d]);
		if (err)
			return err;
	}
	for (uint32_t d = 0; d <= s->n; d++) {
		struct fg_node *nd = &b->nodes[b->path[d].node];

		nd->w += s->w;
		nd->base += s->base;
		nd->gil_held += s->gil_held;
		nd->gil_free += s->gil_free;
	}
	b->nodes[b->path[s->n].node].self += s->w;
	return 0;
}

static uint32_t common_prefix(const struct stack_ref *a, const struct stack_ref *b)
{
	uint32_t i = 0;

	while (i < a->n && i < b->n && a->ids[i] == b->ids[i])
		i++;
	return i;
}

/* Keeps the root and the nodes ranking above worst (all when !cut), remapping parents. */
static int compact(struct fg_tree *t, struct builder *b, bool cut, struct fg_key worst)
{
	uint32_t *map = malloc(b->n * sizeof(*map));
	size_t n = 0;

	if (!map)
		return -ENOMEM;
	for (size_t i = 0; i < b->n; i++) {
		struct fg_node nd = b->nodes[i];
		struct fg_key k = { nd.w, nd.depth };

		if (i && (!nd.w || (cut && !fg_key_worse(worst, k))))
			continue;
		nd.parent = i ? map[nd.parent] : 0;
		map[i] = n;
		b->nodes[n++] = nd;
		if (nd.depth > t->max_depth)
			t->max_depth = nd.depth;
	}
	free(map);
	t->nodes = b->nodes;
	t->n_nodes = n;
	b->nodes = NULL;
	return 0;
}

static int build_nodes(struct fg_tree *t, struct stack_ref *refs, size_t n, uint32_t max_n,
		       size_t max_nodes)
{
	/* one more than kept: the worst of them is the bar to clear */
	struct builder b = { .cap = 1024, .heap_k = max_nodes ? max_nodes + 1 : 0 };
	bool cut;
	int err = -ENOMEM;

	b.nodes = calloc(b.cap, sizeof(*b.nodes));
	b.path = calloc((size_t)max_n + 1, sizeof(*b.path));
	b.heap = malloc((b.heap_k ? b.heap_k : 1) * sizeof(*b.heap));
	if (!b.nodes || !b.path || !b.heap)
		goto out;
	b.n = 1; /* the root, all zero */
	for (size_t i = 0; i < n; i++) {
		err = add_stack(&b, &refs[i], i ? common_prefix(&refs[i - 1], &refs[i]) : 0);
		if (err)
			goto out;
	}
	while (b.depth)
		close_top(&b);
	t->total = b.nodes[0].w;
	t->base_total = b.nodes[0].base;
	cut = b.heap_k && b.heap_n == b.heap_k;
	err = compact(t, &b, cut, cut ? b.heap[0] : (struct fg_key){ 0 });
out:
	free(b.nodes);
	free(b.path);
	free(b.heap);
	return err;
}

/* --- entry ------------------------------------------------------------------- */

/* Interns every frame; ids[] receives each stack's ids back to back. */
static int intern_all(struct interner *in, const struct wstack *stacks, size_t n, uint32_t *ids)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < stacks[i].n; j++) {
			int64_t id = intern(in, &stacks[i].frames[j]);

			if (id < 0)
				return id;
			ids[k++] = id;
		}
	}
	return 0;
}

/* Renames the ids to ranks and lists the stacks that weigh something. */
static void make_refs(const struct wstack *stacks, size_t n, uint32_t *ids, const uint32_t *rank,
		      struct stack_ref *refs, size_t *n_refs, uint64_t *scale, uint32_t *max_n,
		      bool *has_gil)
{
	size_t k = 0, m = 0;
	uint64_t g = 0;

	for (size_t i = 0; i < n; i++) {
		const struct wstack *s = &stacks[i];

		for (uint32_t j = 0; j < s->n; j++)
			ids[k + j] = rank[ids[k + j]];
		if (s->weight || s->base) {
			/* GIL weights are parts of the weight: never more than it */
			uint64_t held = s->gil_held < s->weight ? s->gil_held : s->weight;
			uint64_t free = s->gil_free < s->weight - held ? s->gil_free : s->weight - held;

			refs[m++] = (struct stack_ref){ ids + k, s->n, s->weight, s->base, held, free };
			g = gcd64(gcd64(gcd64(gcd64(g, s->weight), s->base), held), free);
			*has_gil |= held || free;
			if (s->n > *max_n)
				*max_n = s->n;
		}
		k += s->n;
	}
	*n_refs = m;
	*scale = g ? g : 1;
}

int fg_tree_build(struct fg_tree *t, const struct wstack *stacks, size_t n, size_t max_nodes)
{
	struct interner in = { 0 };
	struct stack_ref *refs = NULL;
	uint32_t *ids = NULL, *rank = NULL, max_n = 0;
	size_t n_frames = 0, n_refs = 0;
	int err = -ENOMEM;

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < n; i++) {
		if (stacks[i].n && !stacks[i].frames)
			return -EINVAL;
		n_frames += stacks[i].n;
	}
	ids = malloc((n_frames ? n_frames : 1) * sizeof(*ids));
	refs = malloc((n ? n : 1) * sizeof(*refs));
	if (!ids || !refs)
		goto out;
	err = intern_all(&in, stacks, n, ids);
	if (!err)
		err = rank_names(&in, t, &rank);
	if (err)
		goto out;
	make_refs(stacks, n, ids, rank, refs, &n_refs, &t->scale, &max_n, &t->has_gil);
	qsort(refs, n_refs, sizeof(*refs), cmp_stack);
	err = build_nodes(t, refs, n_refs, max_n, max_nodes);
out:
	free(in.names);
	free(in.hashes);
	free(in.slots);
	free(ids);
	free(refs);
	free(rank);
	if (err)
		fg_tree_free(t);
	return err;
}

void fg_tree_free(struct fg_tree *t)
{
	free(t->names);
	free(t->nodes);
	memset(t, 0, sizeof(*t));
}
