// SPDX-License-Identifier: MIT
/*
 * DWARF lookups: address -> CU -> function DIE -> chain of inlined
 * subroutines, plus source lines. We index CU ranges ourselves (clang emits
 * no .debug_aranges) and index each CU's functions on first use, so a lookup
 * descends only into the one function that holds the address rather than
 * walking the whole CU as dwarf_getscopes does.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "sym/sym_internal.h"
#include "util/log.h"
#include "util/vec.h"

#define MAX_DIE_DEPTH 64 /* hostile DWARF must not recurse us off the stack */
#define MAX_INLINE 64
#define SCAN_BACK 16
/*
 * Work one lookup may do walking a function's blocks and inlined calls: DIEs
 * visited plus range-list entries read. A real function's chain costs tens to
 * a few thousand; hostile DWARF that points thousands of blocks at one long
 * range list would otherwise cost millions per lookup.
 */
#define RESOLVE_BUDGET 100000

struct dw_range {
	uint64_t lo, hi; /* DWARF addresses */
	size_t idx;	 /* CU index, or function index within a CU */
};

struct dw_cu {
	Dwarf_Die die;
	Dwarf_Die *funcs; /* the DIEs that dw_cu.ranges point at */
	struct dw_range *ranges;
	size_t nfuncs, nranges, cap_funcs, cap_ranges;
	bool indexed;
	bool deep; /* indexed down into function bodies too */
};

struct dw_index {
	Dwarf *dw;
	uint64_t bias; /* DWARF address = module address - bias */
	struct dw_cu *cus;
	size_t ncus, cap_cus;
	struct dw_range *ranges;
	size_t nranges, cap_ranges;
	/*
	 * Address ranges the index may still hold. Real DWARF has about one range
	 * per function plus the entries of its range lists, so the budget is
	 * linear in the sizes of the DWARF sections; many DIEs naming one long
	 * range list (ranges = DIEs x entries) run out of it instead of memory.
	 */
	size_t range_budget;
	bool budget_warned;
};

/* Returns 0, -ENOMEM, or -E2BIG when the index's range budget is spent. */
static int push_range(struct dw_index *x, struct dw_range **r, size_t *n, size_t *cap, uint64_t lo,
		      uint64_t hi, size_t idx)
{
	/* Functions dropped by the linker keep their DWARF at 0 or at a tombstone. */
	if (lo == 0 || lo >= hi || lo >= (uint64_t)-2)
		return 0;
	if (!x->range_budget)
		return -E2BIG;
	x->range_budget--;
	if (arr_grow(*r, *cap, *n + 1))
		return -ENOMEM;
	(*r)[*n].lo = lo;
	(*r)[*n].hi = hi;
	(*r)[*n].idx = idx;
	(*n)++;
	return 0;
}

static int range_cmp(const void *pa, const void *pb)
{
	const struct dw_range *a = pa, *b = pb;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return a->hi < b->hi ? -1 : a->hi > b->hi;
}

/* The innermost (latest-starting) range covering addr, or NULL. */
static const struct dw_range *range_find(const struct dw_range *r, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	long i, stop;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	stop = (long)lo - SCAN_BACK;
	for (i = (long)lo - 1; i >= 0 && i >= stop; i--) {
		if (addr < r[i].hi)
			return &r[i];
	}
	return NULL;
}

/* Adds every address range of die; returns how many, -ENOMEM or -E2BIG (budget spent). */
static int add_die_ranges(struct dw_index *x, Dwarf_Die *die, struct dw_range **r, size_t *n,
			  size_t *cap, size_t idx)
{
	Dwarf_Addr base, start, end;
	ptrdiff_t off = 0;
	int count = 0, err;

	while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) {
		err = push_range(x, r, n, cap, start, end, idx);
		if (err)
			return err;
		count++;
	}
	return count;
}

static bool is_block(int tag)
{
	return tag == DW_TAG_lexical_block || tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

static bool is_container(int tag)
{
	return tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
	       tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_module;
}

/*
 * Collects the functions with code under parent, through namespaces and
 * classes. deep also looks inside functions and blocks, where GCC puts the
 * definitions of lambdas and nested functions: slower, so done only for a
 * CU where the shallow index missed an address.
 */
static int index_funcs(struct dw_index *x, struct dw_cu *cu, Dwarf_Die *parent, int depth,
		       bool deep)
{
	Dwarf_Die child;
	int n, tag;

	if (depth > MAX_DIE_DEPTH || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		tag = dwarf_tag(&child);
		if (tag == DW_TAG_subprogram) {
			if (arr_grow(cu->funcs, cu->cap_funcs, cu->nfuncs + 1))
				return -ENOMEM;
			cu->funcs[cu->nfuncs] = child;
			n = add_die_ranges(x, &child, &cu->ranges, &cu->nranges, &cu->cap_ranges,
					   cu->nfuncs);
			if (n < 0)
				return n;
			if (n > 0)
				cu->nfuncs++;
		}
		if (is_container(tag) || (deep && (tag == DW_TAG_subprogram || is_block(tag) ||
						   tag == DW_TAG_inlined_subroutine))) {
			n = index_funcs(x, cu, &child, depth + 1, deep);
			if (n < 0)
				return n;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

/* The budget ran out: keep what was indexed, say so once. */
static int budget_spent(struct dw_index *x, int err)
{
	if (err != -E2BIG)
		return err;
	if (!x->budget_warned)
		log_warn("DWARF names more address ranges than its size can hold: indexing stopped, "
			 "some functions may go unnamed");
	x->budget_warned = true;
	return 0;
}

static int index_cu(struct dw_index *x, struct dw_cu *cu, bool deep)
{
	int err;

	if (cu->indexed && (cu->deep || !deep))
		return 0;
	/* A deep index replaces the shallow one: its ranges go back to the budget. */
	x->range_budget += cu->nranges;
	cu->nfuncs = cu->nranges = 0;
	err = budget_spent(x, index_funcs(x, cu, &cu->die, 0, deep));
	if (err)
		return err;
	if (cu->nranges)
		qsort(cu->ranges, cu->nranges, sizeof(*cu->ranges), range_cmp);
	cu->indexed = true;
	cu->deep = deep;
	return 0;
}

/* One CU: its own ranges, or (when it has none) those of its functions. */
static int add_cu(struct dw_index *x, Dwarf_Die *cudie)
{
	struct dw_cu *cu;
	size_t idx = x->ncus;
	int n;

	if (arr_grow(x->cus, x->cap_cus, x->ncus + 1))
		return -ENOMEM;
	cu = &x->cus[x->ncus++];
	memset(cu, 0, sizeof(*cu));
	cu->die = *cudie;
	n = add_die_ranges(x, cudie, &x->ranges, &x->nranges, &x->cap_ranges, idx);
	if (n)
		return n < 0 ? n : 0;
	n = index_cu(x, cu, false);
	for (size_t i = 0; i < cu->nranges && !n; i++)
		n = push_range(x, &x->ranges, &x->nranges, &x->cap_ranges, cu->ranges[i].lo,
			       cu->ranges[i].hi, idx);
	return n;
}

void dw_index__free(struct dw_index *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->ncus; i++) {
		free(x->cus[i].funcs);
		free(x->cus[i].ranges);
	}
	free(x->cus);
	free(x->ranges);
	free(x);
}

/*
 * A DIE takes more than 2 bytes of .debug_info to carry an address range (an
 * abbrev code and two addresses or a range-list offset), and a range-list
 * entry at least 2 bytes: no real DWARF has more ranges than that, even
 * counting a CU's functions twice when the CU has no ranges of its own.
 */
static size_t range_budget(Dwarf *dw)
{
	static const struct {
		const char *name;
		size_t per_range;
	} secs[] = {
		{ ".debug_info", 2 }, { ".debug_ranges", 2 }, { ".debug_rnglists", 2 },
	};
	Elf *elf = dwarf_getelf(dw);
	size_t shstrndx, budget = 1024;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return budget;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		for (size_t i = 0; i < sizeof(secs) / sizeof(secs[0]); i++) {
			/* The data libdw reads: decompressed when the section was compressed. */
			if (strcmp(name, secs[i].name) || !(d = elf_getdata(scn, NULL)))
				continue;
			budget += d->d_size / secs[i].per_range;
		}
	}
	return budget;
}

struct dw_index *dw_index__new(Dwarf *dw, uint64_t bias)
{
	struct dw_index *x = calloc(1, sizeof(*x));
	Dwarf_CU *cu = NULL, *next;
	Dwarf_Die cudie;
	Dwarf_Half ver;
	uint8_t type;

	if (!x)
		return NULL;
	x->dw = dw;
	x->bias = bias;
	/*
	 * No subdie: asking for it makes libdw open the split unit (.dwo) each
	 * skeleton CU names, a path the file chooses, and scan it.
	 */
	x->range_budget = range_budget(dw);
	while (dwarf_get_units(dw, cu, &next, &ver, &type, &cudie, NULL) == 0) {
		int err;

		cu = next;
		if (type != DW_UT_compile || dwarf_tag(&cudie) != DW_TAG_compile_unit)
			continue; /* type units and dwz partial units hold no code */
		err = budget_spent(x, add_cu(x, &cudie));
		if (err) {
			dw_index__free(x);
			return NULL;
		}
		if (!x->range_budget)
			break;
	}
	if (x->nranges)
		qsort(x->ranges, x->nranges, sizeof(*x->ranges), range_cmp);
	return x;
}

/* --- resolving ------------------------------------------------------------------------ */

/* dwarf_haspc, charging each range-list entry read to *budget; false once it is spent. */
static bool die_has_pc(Dwarf_Die *die, uint64_t addr, long *budget)
{
	Dwarf_Addr base, start, end;
	ptrdiff_t off = 0;

	while (*budget > 0 && (off = dwarf_ranges(die, off, &base, &start, &end)) > 0) {
		(*budget)--;
		if (addr >= start && addr < end)
			return true;
	}
	return false;
}

/*
 * Appends to chain the inlined subroutines under scope that hold addr,
 * outermost first. *budget bounds the work (DIEs and range entries): when it
 * runs out the chain found so far is the answer.
 */
static int inline_chain(Dwarf_Die *scope, uint64_t addr, Dwarf_Die *chain, int n, int depth,
			long *budget)
{
	Dwarf_Die child;
	int tag, m;

	if (depth > MAX_DIE_DEPTH || dwarf_child(scope, &child) != 0)
		return n;
	do {
		if (--(*budget) <= 0)
			return n;
		tag = dwarf_tag(&child);
		if (tag != DW_TAG_inlined_subroutine && !is_block(tag))
			continue;
		if (!die_has_pc(&child, addr, budget)) {
			/* A block without addresses of its own can still hold inlined code. */
			if (is_block(tag) && !dwarf_hasattr(&child, DW_AT_low_pc) &&
			    !dwarf_hasattr(&child, DW_AT_ranges)) {
				m = inline_chain(&child, addr, chain, n, depth + 1, budget);
				if (m > n)
					return m;
			}
			continue;
		}
		if (tag == DW_TAG_inlined_subroutine && n < MAX_INLINE)
			chain[n++] = child;
		return inline_chain(&child, addr, chain, n, depth + 1, budget);
	} while (dwarf_siblingof(&child, &child) == 0);
	return n;
}

/* The function's name: demangled linkage name, else its plain name; malloc'd. */
static char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name = NULL;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr)) {
		name = dwarf_formstring(&attr);
		if (name)
			return sym_demangle(name);
	}
	if (dwarf_attr_integrate(die, DW_AT_name, &attr))
		name = dwarf_formstring(&attr);
	return strdup(name ? name : "??");
}

/* Where an inlined subroutine was called from. */
static void call_site(Dwarf_Die *cudie, Dwarf_Die *inl, const char **file, uint32_t *line)
{
	Dwarf_Attribute attr;
	Dwarf_Files *files;
	Dwarf_Word v;
	size_t nfiles;

	*file = NULL;
	*line = 0;
	if (dwarf_attr(inl, DW_AT_call_line, &attr) && !dwarf_formudata(&attr, &v))
		*line = v > UINT32_MAX ? 0 : (uint32_t)v;
	if (dwarf_attr(inl, DW_AT_call_file, &attr) && !dwarf_formudata(&attr, &v) &&
	    !dwarf_getsrcfiles(cudie, &files, &nfiles) && v < nfiles)
		*file = dwarf_filesrc(files, v, NULL, NULL);
}

/* Frame k of n (0 innermost) from chain[n - 1 - k]; the innermost takes the line table's line. */
static int fill_frame(struct sym_result *out, Dwarf_Die *cudie, Dwarf_Die *chain, int n, int k,
		      Dwarf_Line *line, const char *outer_name)
{
	Dwarf_Die *die = &chain[n - 1 - k];
	const char *file = NULL;
	uint32_t lineno = 0;
	char *name = NULL;
	int err, l;

	if (k == 0 && line) {
		file = dwarf_linesrc(line, NULL, NULL);
		if (!dwarf_lineno(line, &l) && l > 0)
			lineno = (uint32_t)l;
	} else if (k > 0) {
		call_site(cudie, &chain[n - k], &file, &lineno);
	}
	if (k < n - 1 || !outer_name) {
		name = die_name(die);
		if (!name)
			return -ENOMEM;
	}
	err = sym_frame__set(&out->frames[k], name ? name : outer_name, file, lineno, k < n - 1);
	free(name);
	return err;
}

int dw_index__resolve(struct dw_index *x, uint64_t maddr, const char *outer_name,
		      struct sym_result *out)
{
	uint64_t addr = maddr - x->bias;
	const struct dw_range *r, *fr;
	Dwarf_Die chain[MAX_INLINE];
	Dwarf_Line *line;
	struct dw_cu *cu;
	int n = 0, err;

	r = range_find(x->ranges, x->nranges, addr);
	if (!r)
		return -ENOENT;
	cu = &x->cus[r->idx];
	err = index_cu(x, cu, false);
	if (err)
		return err;
	fr = range_find(cu->ranges, cu->nranges, addr);
	if (!fr && !cu->deep) {
		err = index_cu(x, cu, true);
		if (err)
			return err;
		fr = range_find(cu->ranges, cu->nranges, addr);
	}
	if (fr) {
		long budget = RESOLVE_BUDGET;

		chain[0] = cu->funcs[fr->idx];
		n = inline_chain(&chain[0], addr, chain, 1, 0, &budget);
	}
	line = dwarf_getsrc_die(&cu->die, addr);
	if (!n && (!line || !outer_name))
		return -ENOENT;
	if (!n) {
		/* Lines but no function DIE: the symbol's name with the line's place. */
		chain[0] = cu->die;
		n = 1;
	}
	err = sym_result__alloc(out, (uint32_t)n);
	for (int k = 0; k < n && !err; k++) {
		err = fill_frame(out, &cu->die, chain, n, k, line, outer_name);
		if (!err)
			out->n++;
	}
	if (err)
		sym_result__free(out);
	return err;
}
