/* SPDX-License-Identifier: MIT */
/*
 * Option tables. A command declares each option once, as one line of a table: its names,
 * its argument, where the value goes (a field of the command's options struct, by offsetof)
 * or which handler takes it, and its help line. getopt_long's tables, the parsing with its
 * error messages, and --help are all made from that table.
 *
 *   static const struct opt report_opts[] = {
 *           OPT_CHOICE("sort", 0, struct report_cli, r.hot.sort, sorts, "order of the table"),
 *           OPT_UINT("limit", 0, "N", struct report_cli, r.limit, 0, 10000000, "rows to show"),
 *           OPT_FLAG("json", 0, struct report_cli, r.json, "machine-readable output"),
 *           OPT_GROUP(struct report_cli, r.hot.filter, cli_filter_opts),
 *           OPT_END,
 *   };
 *
 * Every macro takes optional designated initializers last, for what few options need:
 * OPT_ALSO(st, flag) (a bool also set when the option is given), .optional = true with
 * .val (--mem[=BYTES]: the value stored without an argument), .expect (what the error
 * message says is accepted, instead of the range), .check (validates an argument first).
 */
#ifndef EPROF_CLI_OPTIONS_H
#define EPROF_CLI_OPTIONS_H

#include <float.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sink;

enum opt_kind {
	OPT_KIND_END = 0,
	OPT_KIND_SET,	 /* no argument: stores .val (a flag stores 1 into a bool) */
	OPT_KIND_COUNT,	 /* no argument: adds 1 (-v -v) */
	OPT_KIND_UINT,	 /* decimal in [.min, .max], into an unsigned field of 1 to 8 bytes */
	OPT_KIND_INT,	 /* signed decimal in [.smin, .smax] */
	OPT_KIND_DOUBLE, /* finite number in [.dmin, .dmax] (above .dmin with .above) */
	OPT_KIND_STRING, /* const char *, pointing into argv */
	OPT_KIND_CHOICE, /* one name of .choices: stores its value */
	OPT_KIND_LIST,	 /* repeatable: appends to a const char *array[], its count at .count_off */
	OPT_KIND_FUNC,	 /* .fn(opt, arg, field) does the rest */
	OPT_KIND_GROUP,	 /* the options of .group, over the struct at this field */
};

struct opt_choice {
	const char *name;
	int val;
};

struct opt {
	const char *name; /* long name, without "--" */
	char short_name;  /* 0: none */
	enum opt_kind kind;
	const char *arg; /* the argument's name in --help; NULL: none (choices: the list) */
	bool optional;	 /* --name[=ARG]: given without its argument, .val is stored */
	size_t off, size; /* the field, in the struct this table describes */
	size_t then;	  /* 1 + offset of a bool also set when the option is given; 0: none */
	int64_t val;	  /* OPT_KIND_SET, and an omitted optional argument */
	uint64_t min, max;
	int64_t smin, smax;
	double dmin, dmax;
	bool above;	     /* OPT_KIND_DOUBLE: strictly above .dmin */
	const char *suffix;  /* OPT_KIND_DOUBLE: a unit the argument may end with ("%") */
	const struct opt_choice *choices; /* ends with { NULL } */
	size_t count_off, max_items;	  /* OPT_KIND_LIST: size_t count, the array's length */
	int (*check)(const struct opt *o, const char *arg); /* 0 or -EINVAL (logged) */
	int (*fn)(const struct opt *o, const char *arg, void *field); /* 0 or -errno (logged) */
	const struct opt *group;
	const char *expect; /* the accepted values, for the error message */
	const char *help;   /* '\n' starts a continuation line */
};

#define OPT_FIELD(st, f) .off = offsetof(st, f), .size = sizeof(((st *)0)->f)
#define OPT_ALSO(st, f) .then = offsetof(st, f) + 1

#define OPT_END { .kind = OPT_KIND_END }
#define OPT_FLAG(l, s, st, f, h, ...)                                                              \
	{ .name = l, .short_name = s, .kind = OPT_KIND_SET, .val = 1, OPT_FIELD(st, f), .help = h, \
	  __VA_ARGS__ }
#define OPT_SET(l, s, st, f, v, h, ...)                                                            \
	{ .name = l, .short_name = s, .kind = OPT_KIND_SET, .val = v, OPT_FIELD(st, f), .help = h, \
	  __VA_ARGS__ }
#define OPT_COUNT(l, s, st, f, h, ...)                                                             \
	{ .name = l, .short_name = s, .kind = OPT_KIND_COUNT, OPT_FIELD(st, f), .help = h,         \
	  __VA_ARGS__ }
#define OPT_UINT(l, s, a, st, f, lo, hi, h, ...)                                                   \
	{ .name = l, .short_name = s, .kind = OPT_KIND_UINT, .arg = a, OPT_FIELD(st, f),           \
	  .min = lo, .max = hi, .help = h, __VA_ARGS__ }
#define OPT_INT(l, s, a, st, f, lo, hi, h, ...)                                                    \
	{ .name = l, .short_name = s, .kind = OPT_KIND_INT, .arg = a, OPT_FIELD(st, f),            \
	  .smin = lo, .smax = hi, .help = h, __VA_ARGS__ }
#define OPT_DOUBLE(l, s, a, st, f, lo, hi, h, ...)                                                 \
	{ .name = l, .short_name = s, .kind = OPT_KIND_DOUBLE, .arg = a, OPT_FIELD(st, f),         \
	  .dmin = lo, .dmax = hi, .help = h, __VA_ARGS__ }
#define OPT_STRING(l, s, a, st, f, h, ...)                                                         \
	{ .name = l, .short_name = s, .kind = OPT_KIND_STRING, .arg = a, OPT_FIELD(st, f),         \
	  .help = h, __VA_ARGS__ }
#define OPT_CHOICE(l, s, st, f, ch, h, ...)                                                        \
	{ .name = l, .short_name = s, .kind = OPT_KIND_CHOICE, OPT_FIELD(st, f), .choices = ch,    \
	  .help = h, __VA_ARGS__ }
#define OPT_LIST(l, s, a, st, f, n, h, ...)                                                        \
	{ .name = l, .short_name = s, .kind = OPT_KIND_LIST, .arg = a, OPT_FIELD(st, f),           \
	  .count_off = offsetof(st, n),                                                            \
	  .max_items = sizeof(((st *)0)->f) / sizeof(((st *)0)->f[0]), .help = h, __VA_ARGS__ }
/* The handler gets the whole struct the table describes. */
#define OPT_FUNC(l, s, a, handler, h, ...)                                                         \
	{ .name = l, .short_name = s, .kind = OPT_KIND_FUNC, .arg = a, .fn = handler, .help = h,   \
	  __VA_ARGS__ }
#define OPT_GROUP(st, f, g) { .kind = OPT_KIND_GROUP, OPT_FIELD(st, f), .group = g }
/* The options of g, over the same struct as this table. */
#define OPT_INCLUDE(g) { .kind = OPT_KIND_GROUP, .group = g }

enum opt_parse_flags {
	OPT_IN_ORDER = 1 << 0, /* stop at the first non-option ("record CMD -x": -x is CMD's) */
};

/*
 * Parses argv[1..] (argv[0] is the command's name, cmd, which prefixes messages) into base,
 * the struct the table describes. *first_arg gets the index of the first positional
 * argument; the positionals are argv[*first_arg..argc). Returns 0, 1 for -h/--help, or
 * -EINVAL after one logged line.
 */
int opt_parse(const struct opt *table, unsigned flags, const char *cmd, int argc, char **argv,
	      void *base, int *first_arg);

/* One line per option (continuations indented), -h/--help last. 0 or the sink's error. */
int opt_help(const struct opt *table, struct sink *out);

/*
 * The mistakes a table can hold that the compiler does not see: a name or short name used
 * twice, a value or range that does not fit its field, a kind without what it needs. 0, or
 * -EINVAL with the first one logged. The unit tests run it over every command's table.
 */
int opt_table_check(const struct opt *table);

/* "-F/--freq" or "--limit": how messages name an option. */
const char *opt_display(const struct opt *o, char *buf, size_t len);

#endif
