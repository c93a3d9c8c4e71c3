// SPDX-License-Identifier: MIT
/*
 * Demangling and parameter stripping. Names are shown the way `perf report`
 * shows them: the function name without its parameter list, its trailing
 * qualifiers or a template function's return type.
 */
#include <ctype.h>
#include <errno.h>
#include <libiberty/demangle.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sym/symbolizer.h"
#include "util/buf.h"

/* Longer mangled names are not worth the demangler's time (and stack). */
#define MAX_MANGLED_LEN 16384
/*
 * libiberty refuses names past 1,024 bytes unless its recursion limit is lifted
 * (DMGL_NO_RECURSE_LIMIT): CUTLASS and flash-attention kernels have such names. Parsing
 * recurses at most once per input byte, so those run on a thread of this much stack.
 */
#define LONG_MANGLED_LEN 1000
#define LONG_STACK (64u << 20)
/*
 * Substitutions make demangled names grow exponentially with nesting: 280
 * mangled bytes can ask for 16 MB of output (and __cxa_demangle would build
 * all of it). Real names stay far below this; a longer one is shown mangled.
 */
#define MAX_DEMANGLED_LEN (256u << 10)

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && !memcmp(s + len - n, suffix, n);
}

static bool is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

/* Index of the '(' matching the ')' at close, or -1 when unbalanced. */
static long match_open(const char *s, long close)
{
	int depth = 0;

	for (long i = close; i >= 0; i--) {
		if (s[i] == ')')
			depth++;
		else if (s[i] == '(' && --depth == 0)
			return i;
	}
	return -1;
}

/* Length of the operator token after "operator" at s[0] ("operator<" -> 9), or 0. */
static size_t operator_len(const char *s, size_t i)
{
	static const char sym_chars[] = "<>=!+-*/%^&|~,";
	size_t j;

	if (strncmp(s + i, "operator", 8) || (i > 0 && is_ident(s[i - 1])) || is_ident(s[i + 8]))
		return 0;
	j = i + 8;
	if (!strncmp(s + j, "()", 2) || !strncmp(s + j, "[]", 2))
		return 10;
	while (s[j] && strchr(sym_chars, s[j]))
		j++;
	return j - i;
}

/*
 * Start of the name in s[0, len) when a template function's return type
 * precedes it ("std::vector<int> make<int>" -> 17), else 0.
 */
static size_t skip_return_type(const char *s, size_t len)
{
	int paren = 0, angle = 0, other = 0;
	bool last_closed_angle = false, seen_operator = false;
	long space = -1;

	for (size_t i = 0; i < len; i++) {
		size_t op = operator_len(s, i);

		if (op) {
			if (!paren && !angle && !other)
				seen_operator = true;
			last_closed_angle = false;
			i += op - 1;
			continue;
		}
		last_closed_angle = false;
		switch (s[i]) {
		case '(':
			paren++;
			break;
		case ')':
			paren--;
			break;
		case '{':
		case '[':
			other++;
			break;
		case '}':
		case ']':
			other--;
			break;
		case '<':
			angle++;
			break;
		case '>':
			angle--;
			last_closed_angle = true;
			break;
		case ' ':
			if (!paren && !angle && !other && !seen_operator)
				space = (long)i;
			break;
		}
		if (paren < 0 || angle < 0 || other < 0)
			return 0; /* unbalanced: leave it alone */
	}
	if (!last_closed_angle || paren || angle || other || space < 0)
		return 0;
	return (size_t)space + 1;
}

static const char *const qualifiers[] = {
    " const", " volatile", " &&", " &", " noexcept", " transaction_safe", " throw()",
};

/* Strips s[0, len) to the bare name; returns its [*start, end) bounds or false. */
static bool strip_range(const char *s, size_t len, size_t *start, size_t *end, int depth)
{
	bool again = true;
	long open;

	while (again) {
		again = false;
		while (len && s[len - 1] == ' ')
			len--;
		for (size_t i = 0; i < sizeof(qualifiers) / sizeof(qualifiers[0]); i++) {
			if (ends_with(s, len, qualifiers[i])) {
				len -= strlen(qualifiers[i]);
				again = true;
			}
		}
	}
	if (!len || s[len - 1] != ')' || depth > 8)
		return false;
	/* Already bare: the final "()" is the operator's own name. */
	if (ends_with(s, len, "operator()") && operator_len(s, len - 10) == 10)
		return false;
	open = match_open(s, (long)len - 1);
	if (open <= 0)
		return false;
	if (s[open - 1] == ')' && !ends_with(s, (size_t)open, "operator()")) {
		/* "ret (*name(args))(args)": the name sits inside the group. */
		long q = match_open(s, open - 1);
		size_t skip;

		if (q < 0)
			return false;
		skip = (size_t)q + 1;
		while (skip < (size_t)open - 1 && strchr("*& ", s[skip]))
			skip++;
		if (!strip_range(s + skip, (size_t)open - 1 - skip, start, end, depth + 1))
			return false;
		*start += skip;
		*end += skip;
		return true;
	}
	if (s[open - 1] == ' ')
		return false; /* not a parameter list after a name */
	*end = (size_t)open;
	*start = skip_return_type(s, *end);
	return true;
}

void sym_strip_params(char *name)
{
	size_t len, start, end, suffix_len = 0;
	char *clone;

	if (!name)
		return;
	len = strlen(name);
	/* GCC clone suffixes ("[clone .cold]") stay: perf shows them too. */
	clone = strstr(name, " [clone ");
	if (clone && len && name[len - 1] == ']') {
		suffix_len = len - (size_t)(clone - name);
		len = (size_t)(clone - name);
	}
	if (!strip_range(name, len, &start, &end, 0))
		return;
	memmove(name, name + start, end - start);
	memmove(name + (end - start), name + len, suffix_len);
	name[end - start + suffix_len] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* A Rust legacy name ends with "::h" and 16 hex digits (its hash). */
static bool rust_hash_suffix(const char *s, size_t len)
{
	if (len < 19 || strncmp(s + len - 19, "::h", 3))
		return false;
	for (size_t i = len - 16; i < len; i++) {
		if (hexval(s[i]) < 0)
			return false;
	}
	return true;
}

static const struct {
	const char *code;
	char c;
} rust_escapes[] = {
    {"$SP$", '@'}, {"$BP$", '*'}, {"$RF$", '&'}, {"$LT$", '<'},
    {"$GT$", '>'}, {"$LP$", '('}, {"$RP$", ')'}, {"$C$", ','},
};

/* Decodes Rust legacy escapes in place ("$LT$" -> '<', ".." -> "::", "$u20$" -> ' '). */
static void rust_unescape(char *s)
{
	char *w = s;

	for (const char *r = s; *r;) {
		size_t i, n = sizeof(rust_escapes) / sizeof(rust_escapes[0]);

		/* A path component that starts with '$' was written "_$". */
		if (r[0] == '_' && r[1] == '$' && (r == s || (r > s + 1 && r[-1] == ':'))) {
			r++;
			continue;
		}

		for (i = 0; i < n; i++) {
			size_t l = strlen(rust_escapes[i].code);

			if (!strncmp(r, rust_escapes[i].code, l)) {
				*w++ = rust_escapes[i].c;
				r += l;
				break;
			}
		}
		if (i < n)
			continue;
		if (r[0] == '$' && r[1] == 'u' && hexval(r[2]) >= 0 && hexval(r[3]) >= 0 &&
		    r[4] == '$') {
			int c = hexval(r[2]) * 16 + hexval(r[3]);

			*w++ = c ? (char)c : '?';
			r += 5;
		} else if (r[0] == '.' && r[1] == '.') {
			*w++ = ':';
			*w++ = ':';
			r += 2;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

/* The demangler's output, built piece by piece with a cap. */
struct dm_out {
	struct buf b;
	jmp_buf stop;
};

static void dm_put(const char *piece, size_t n, void *opaque)
{
	struct dm_out *o = opaque;

	if (n > MAX_DEMANGLED_LEN - o->b.len)
		longjmp(o->stop, 1);
	buf_put(&o->b, piece, n);
	if (o->b.err)
		longjmp(o->stop, 1);
}

/*
 * The callback form of the demangler (the same code as __cxa_demangle) keeps
 * its working state on the stack and allocates nothing, so leaving it with
 * longjmp once the output passes the cap leaks nothing. Returns the name, or
 * NULL when it is not a valid mangled name, too long, or memory ran out.
 */
static char *demangle_capped(struct dm_out *o, const char *mangled, int flags)
{
	if (setjmp(o->stop) ||
	    !cplus_demangle_v3_callback(mangled, DMGL_PARAMS | DMGL_TYPES | flags, dm_put, o) ||
	    !o->b.len)
		goto fail;
	buf_u8(&o->b, 0); /* the terminating NUL */
	if (!o->b.err)
		return (char *)o->b.data;
fail:
	buf_free(&o->b);
	return NULL;
}

struct long_job {
	struct dm_out *o;
	const char *mangled;
	char *out;
};

static void *demangle_long_thread(void *arg)
{
	struct long_job *j = arg;

	j->out = demangle_capped(j->o, j->mangled, DMGL_NO_RECURSE_LIMIT);
	return NULL;
}

/* A name past libiberty's own limit: without the limit, on a thread with a large stack. */
static char *demangle_long(struct dm_out *o, const char *mangled)
{
	struct long_job j = {o, mangled, NULL};
	pthread_attr_t attr;
	pthread_t t;
	int err;

	if (pthread_attr_init(&attr))
		return NULL;
	err = pthread_attr_setstacksize(&attr, LONG_STACK) ||
	      pthread_create(&t, &attr, demangle_long_thread, &j);
	pthread_attr_destroy(&attr);
	if (err)
		return NULL;
	pthread_join(t, NULL);
	return j.out;
}

/* Demangles base (no version suffix); returns a malloc'd name or NULL on ENOMEM. */
static char *demangle_base(const char *base)
{
	struct dm_out out = { 0 };
	char *d = NULL;
	size_t len;

	len = strlen(base);
	if (!strncmp(base, "_Z", 2) && len < LONG_MANGLED_LEN)
		d = demangle_capped(&out, base, 0);
	else if (!strncmp(base, "_Z", 2) && len < MAX_MANGLED_LEN)
		d = demangle_long(&out, base);
	if (!d)
		return strdup(base);
	len = strlen(d);
	if (rust_hash_suffix(d, len)) {
		d[len - 19] = '\0';
		rust_unescape(d);
	} else {
		sym_strip_params(d);
	}
	return d;
}

char *sym_demangle(const char *mangled)
{
	const char *at;
	char *base, *d, *out;
	bool plt;

	if (!mangled) {
		errno = EINVAL;
		return NULL;
	}
	/* "memcpy@GLIBC_2.14" and "foo@@VER" lose the version; "foo@plt" stays as perf shows it. */
	at = strchr(mangled, '@');
	if (!at || at == mangled)
		return demangle_base(mangled);
	plt = !strcmp(at, "@plt");
	base = strndup(mangled, (size_t)(at - mangled));
	if (!base)
		return NULL;
	d = demangle_base(base);
	free(base);
	if (!d || !plt)
		return d;
	out = malloc(strlen(d) + sizeof("@plt"));
	if (out) {
		strcpy(out, d);
		strcat(out, "@plt");
	}
	free(d);
	return out;
}
