// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/sink.h"
#include "options.h"

#define HELP_COLUMN 26 /* where help lines start */

/* A table with its groups flattened: each entry and the offset of the struct it describes. */
struct opt_ref {
	const struct opt *o;
	size_t base;
};

static size_t flatten(const struct opt *t, size_t base, struct opt_ref *out, size_t n)
{
	for (; t->kind != OPT_KIND_END; t++) {
		if (t->kind == OPT_KIND_GROUP) {
			n = flatten(t->group, base + t->off, out, n);
			continue;
		}
		if (out)
			out[n] = (struct opt_ref){ t, base };
		n++;
	}
	return n;
}

static struct opt_ref *flatten_table(const struct opt *table, size_t *n)
{
	struct opt_ref *refs;

	*n = flatten(table, 0, NULL, 0);
	refs = calloc(*n + 1, sizeof(*refs));
	if (refs)
		flatten(table, 0, refs, 0);
	return refs;
}

static bool takes_arg(const struct opt *o)
{
	if (o->kind == OPT_KIND_FUNC)
		return o->arg != NULL;
	return o->kind != OPT_KIND_SET && o->kind != OPT_KIND_COUNT;
}

const char *opt_display(const struct opt *o, char *buf, size_t len)
{
	if (o->short_name)
		snprintf(buf, len, "-%c/--%s", o->short_name, o->name);
	else
		snprintf(buf, len, "--%s", o->name);
	return buf;
}

/* "a, b or c" */
static void choice_list(const struct opt_choice *c, const char *sep, const char *last, char *buf,
			size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; c[i].name && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%s",
				!i ? "" : c[i + 1].name ? sep : last, c[i].name);
}

static int bad_value(const struct opt *o, const char *arg)
{
	char name[64], range[256];

	if (o->expect)
		snprintf(range, sizeof(range), "%s", o->expect);
	else if (o->kind == OPT_KIND_UINT)
		snprintf(range, sizeof(range), "%llu..%llu", (unsigned long long)o->min,
			 (unsigned long long)o->max);
	else if (o->kind == OPT_KIND_INT)
		snprintf(range, sizeof(range), "%lld..%lld", (long long)o->smin,
			 (long long)o->smax);
	else if (o->kind == OPT_KIND_DOUBLE && o->dmax >= DBL_MAX)
		snprintf(range, sizeof(range), "%s %g", o->above ? ">" : ">=", o->dmin);
	else if (o->kind == OPT_KIND_DOUBLE)
		snprintf(range, sizeof(range), "%s%g..%g", o->above ? "above " : "", o->dmin,
			 o->dmax);
	else if (o->kind == OPT_KIND_CHOICE)
		choice_list(o->choices, ", ", " or ", range, sizeof(range));
	else
		snprintf(range, sizeof(range), "%s", o->arg ? o->arg : "?");
	log_err("invalid %s '%s' (expected %s)", opt_display(o, name, sizeof(name)), arg, range);
	return -EINVAL;
}

static void store_int(void *field, size_t size, uint64_t v)
{
	switch (size) {
	case 1:
		*(uint8_t *)field = v;
		break;
	case 2:
		*(uint16_t *)field = v;
		break;
	case 4:
		*(uint32_t *)field = v;
		break;
	default:
		*(uint64_t *)field = v;
	}
}

static uint64_t load_int(const void *field, size_t size)
{
	switch (size) {
	case 1:
		return *(const uint8_t *)field;
	case 2:
		return *(const uint16_t *)field;
	case 4:
		return *(const uint32_t *)field;
	default:
		return *(const uint64_t *)field;
	}
}

static int parse_uint(const struct opt *o, const char *arg, void *field)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || *arg == '-' || v < o->min || v > o->max)
		return bad_value(o, arg);
	store_int(field, o->size, v);
	return 0;
}

static int parse_int(const struct opt *o, const char *arg, void *field)
{
	long long v;
	char *end;

	errno = 0;
	v = strtoll(arg, &end, 10);
	if (errno || end == arg || *end || v < o->smin || v > o->smax)
		return bad_value(o, arg);
	store_int(field, o->size, (uint64_t)v);
	return 0;
}

static int parse_double(const struct opt *o, const char *arg, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (o->suffix && end != arg && !strcmp(end, o->suffix))
		end += strlen(end);
	if (errno || end == arg || *end || !isfinite(v) || v < o->dmin || v > o->dmax ||
	    (o->above && v == o->dmin))
		return bad_value(o, arg);
	*out = v;
	return 0;
}

static int parse_choice(const struct opt *o, const char *arg, void *field)
{
	for (const struct opt_choice *c = o->choices; c->name; c++) {
		if (!strcmp(arg, c->name)) {
			store_int(field, o->size, (uint64_t)(int64_t)c->val);
			return 0;
		}
	}
	return bad_value(o, arg);
}

static int append(const struct opt *o, const char *arg, void *base, void *field)
{
	size_t *n = (size_t *)((char *)base + o->count_off);
	char name[64];

	if (*n >= o->max_items) {
		log_err("too many %s options (at most %zu)", opt_display(o, name, sizeof(name)),
			o->max_items);
		return -EINVAL;
	}
	((const char **)field)[(*n)++] = arg;
	return 0;
}

/* base: the struct the option's table describes. */
static int apply(const struct opt *o, const char *arg, void *base)
{
	void *field = (char *)base + o->off;
	int err;

	if (arg && o->check && (err = o->check(o, arg)))
		return err;
	if (o->then)
		*(bool *)((char *)base + o->then - 1) = true;
	if (!arg && o->optional && o->kind != OPT_KIND_FUNC) {
		store_int(field, o->size, (uint64_t)o->val);
		return 0;
	}
	switch (o->kind) {
	case OPT_KIND_SET:
		store_int(field, o->size, (uint64_t)o->val);
		return 0;
	case OPT_KIND_COUNT:
		store_int(field, o->size, load_int(field, o->size) + 1);
		return 0;
	case OPT_KIND_UINT:
		return parse_uint(o, arg, field);
	case OPT_KIND_INT:
		return parse_int(o, arg, field);
	case OPT_KIND_DOUBLE:
		return parse_double(o, arg, field);
	case OPT_KIND_STRING:
		*(const char **)field = arg;
		return 0;
	case OPT_KIND_CHOICE:
		return parse_choice(o, arg, field);
	case OPT_KIND_LIST:
		return append(o, arg, base, field);
	case OPT_KIND_FUNC:
		return o->fn(o, arg, field);
	default:
		return -EINVAL;
	}
}

/* getopt_long's tables: long options return 256 + their index, short ones their letter. */
static int getopt_tables(const struct opt_ref *refs, size_t n, unsigned flags,
			 struct option **longopts, char **shortopts)
{
	struct option *lo = calloc(n + 2, sizeof(*lo));
	char *so = malloc(3 * n + 4), *p = so;

	if (!lo || !so) {
		free(lo);
		free(so);
		log_err("out of memory");
		return -ENOMEM;
	}
	if (flags & OPT_IN_ORDER)
		*p++ = '+';
	for (size_t i = 0; i < n; i++) {
		const struct opt *o = refs[i].o;
		int has = !takes_arg(o) ? no_argument
			  : o->optional ? optional_argument
					: required_argument;

		lo[i] = (struct option){ o->name, has, NULL, 256 + (int)i };
		if (!o->short_name)
			continue;
		*p++ = o->short_name;
		if (has != no_argument)
			*p++ = ':';
		if (has == optional_argument)
			*p++ = ':';
	}
	lo[n] = (struct option){ "help", no_argument, NULL, 'h' };
	strcpy(p, "h");
	*longopts = lo;
	*shortopts = so;
	return 0;
}

static const struct opt_ref *find_short(const struct opt_ref *refs, size_t n, int c)
{
	for (size_t i = 0; i < n; i++)
		if (refs[i].o->short_name == c)
			return &refs[i];
	return NULL;
}

int opt_parse(const struct opt *table, unsigned flags, const char *cmd, int argc, char **argv,
	      void *base, int *first_arg)
{
	struct option *longopts = NULL;
	char *shortopts = NULL;
	const struct opt_ref *r;
	struct opt_ref *refs;
	size_t n;
	int c, err;

	refs = flatten_table(table, &n);
	if (!refs) {
		log_err("out of memory");
		return -ENOMEM;
	}
	err = getopt_tables(refs, n, flags, &longopts, &shortopts);
	optind = 0; /* 0, not 1: glibc then resets its internal state between parses */
	opterr = 0;
	while (!err && (c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		if (c == 'h') {
			err = 1;
			break;
		}
		r = c >= 256 && (size_t)c < 256 + n ? &refs[c - 256] : find_short(refs, n, c);
		if (c == '?' || c == ':' || !r) {
			log_err("%s: unknown option or missing argument '%s' (see eprof %s --help)",
				cmd, argv[optind - 1], cmd);
			err = -EINVAL;
			break;
		}
		if (apply(r->o, optarg, (char *)base + r->base))
			err = -EINVAL;
	}
	*first_arg = optind;
	free(longopts);
	free(shortopts);
	free(refs);
	return err;
}

static void arg_text(const struct opt *o, char *buf, size_t len)
{
	char list[256];
	const char *a = o->arg;

	buf[0] = '\0';
	if (!takes_arg(o))
		return;
	if (!a && o->choices) {
		choice_list(o->choices, "|", "|", list, sizeof(list));
		a = list;
	}
	snprintf(buf, len, o->optional ? "[=%s]" : " %s", a ? a : "ARG");
}

static void help_line(struct sink *out, char short_name, const char *name, const char *arg,
		      const char *help)
{
	char left[128];
	int w;

	if (short_name)
		w = snprintf(left, sizeof(left), "  -%c, --%s%s", short_name, name, arg);
	else
		w = snprintf(left, sizeof(left), "      --%s%s", name, arg);
	/* A name too long for the column gets its help on the next line. */
	if (w > HELP_COLUMN - 2)
		sink_printf(out, "%s\n%*s", left, HELP_COLUMN, "");
	else
		sink_printf(out, "%-*s", HELP_COLUMN, left);
	while (help) {
		const char *nl = strchr(help, '\n');

		sink_printf(out, "%.*s\n", nl ? (int)(nl - help) : (int)strlen(help), help);
		help = nl ? nl + 1 : NULL;
		if (help)
			sink_printf(out, "%*s", HELP_COLUMN, "");
	}
}

int opt_help(const struct opt *table, struct sink *out)
{
	size_t n;
	struct opt_ref *refs = flatten_table(table, &n);
	char arg[300];

	if (!refs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		arg_text(refs[i].o, arg, sizeof(arg));
		help_line(out, refs[i].o->short_name, refs[i].o->name, arg, refs[i].o->help);
	}
	help_line(out, 'h', "help", "", "this help");
	free(refs);
	return out->err;
}

static int entry_check(const struct opt *o)
{
	bool num = o->kind == OPT_KIND_SET || o->kind == OPT_KIND_COUNT ||
		   o->kind == OPT_KIND_UINT || o->kind == OPT_KIND_INT ||
		   o->kind == OPT_KIND_CHOICE;
	uint64_t lim = o->size >= 8 ? UINT64_MAX : (1ull << (8 * o->size)) - 1;

	if (!o->name || !*o->name || !o->help)
		return -EINVAL;
	if (num && o->size != 1 && o->size != 2 && o->size != 4 && o->size != 8)
		return -EINVAL;
	if (o->kind == OPT_KIND_UINT && (o->min > o->max || o->max > lim))
		return -EINVAL;
	if (o->kind == OPT_KIND_INT && o->smin > o->smax)
		return -EINVAL;
	if (o->kind == OPT_KIND_SET && (uint64_t)o->val > lim)
		return -EINVAL;
	if (o->kind == OPT_KIND_DOUBLE && (o->size != sizeof(double) || !(o->dmin <= o->dmax)))
		return -EINVAL;
	if ((o->kind == OPT_KIND_STRING || o->kind == OPT_KIND_LIST) && !o->arg)
		return -EINVAL;
	if (o->kind == OPT_KIND_STRING && o->size != sizeof(char *))
		return -EINVAL;
	if (o->kind == OPT_KIND_CHOICE && (!o->choices || !o->choices[0].name))
		return -EINVAL;
	if (o->kind == OPT_KIND_LIST && !o->max_items)
		return -EINVAL;
	if (o->kind == OPT_KIND_FUNC && !o->fn)
		return -EINVAL;
	if (o->optional &&
	    (!takes_arg(o) || o->kind == OPT_KIND_LIST || o->kind == OPT_KIND_STRING))
		return -EINVAL;
	return 0;
}

int opt_table_check(const struct opt *table)
{
	size_t n;
	struct opt_ref *refs = flatten_table(table, &n);
	const char *bad = NULL;

	if (!refs)
		return -ENOMEM;
	for (size_t i = 0; i < n && !bad; i++) {
		const struct opt *o = refs[i].o;

		if (entry_check(o) || !strcmp(o->name, "help") || o->short_name == 'h')
			bad = o->name ? o->name : "(no name)";
		for (size_t j = 0; j < i && !bad; j++)
			if (!strcmp(refs[j].o->name, o->name) ||
			    (o->short_name && refs[j].o->short_name == o->short_name))
				bad = o->name;
	}
	free(refs);
	if (bad) {
		log_err("option table: --%s is malformed or defined twice", bad);
		return -EINVAL;
	}
	return 0;
}
