// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "sink.h"
#include "utf8.h"

#define BIT(d) (1ull << (d))

void json_init(struct json *j, struct sink *out, unsigned flags)
{
	j->out = out;
	j->flags = flags;
	j->err = 0;
	j->depth = 0;
	j->brk = -1;
	j->after_key = false;
	j->has_items = 0;
	j->is_obj = 0;
	j->flushed = 0;
	j->len = 0;
	j->buf[0] = '\0';
}

void json_init_members(struct json *j, struct sink *out, unsigned flags)
{
	json_init(j, out, flags);

	j->depth = 1;
	j->has_items = BIT(0);
	j->is_obj = BIT(0);
}

static void fail(struct json *j, int err)
{
	if (!j->err)
		j->err = err;
}

static void drain(struct json *j)
{
	if (!j->out || !j->len)
		return;
	sink_write(j->out, j->buf, j->len);
	j->flushed += j->len;
	j->len = 0;
}

void json_put_slow(struct json *j, const void *p, size_t n)
{
	if (!j->out) {
		/* One byte stays free for json_text's NUL. */
		if (n >= JSON_BUF - j->len) {
			fail(j, -ENOSPC);
			return;
		}
		memcpy(j->buf + j->len, p, n);
		j->len += n;
		return;
	}
	drain(j);
	if (n >= JSON_BUF) {
		sink_write(j->out, p, n);
		j->flushed += n;
		return;
	}
	memcpy(j->buf, p, n);
	j->len = n;
}

#define PUT_LIT(j, s) json_put((j), (s), sizeof(s) - 1)

static void put_cb(void *ctx, const void *p, size_t n)
{
	json_put(ctx, p, n);
}

int json_flush(struct json *j)
{
	if (j->out) {
		drain(j);
		return j->err ? j->err : j->out->err;
	}
	return j->err;
}

const char *json_text(struct json *j)
{
	if (j->err)
		return "";
	j->buf[j->len] = '\0';
	return j->buf;
}

void json_break(struct json *j, int indent)
{
	j->brk = indent < 0 ? 0 : indent;
}

static void newline(struct json *j)
{
	static const char spaces[] = "                                ";
	int n = j->brk;

	PUT_LIT(j, "\n");
	while (n > 0) {
		int k = n < (int)sizeof(spaces) - 1 ? n : (int)sizeof(spaces) - 1;

		json_put(j, spaces, k);
		n -= k;
	}
	j->brk = -1;
}

/* What comes before an item: a comma after an earlier one, and a line break or a space. */
static void item(struct json *j, bool key)
{
	int d = j->depth - 1;

	if (j->after_key) {
		if (key)
			fail(j, -EINVAL);
		j->after_key = false;
		return;
	}
	if (d < 0) {
		if (key || j->has_items & BIT(JSON_MAX_DEPTH - 1))
			fail(j, -EINVAL); /* one top-level value */
		j->has_items |= BIT(JSON_MAX_DEPTH - 1);
		return;
	}
	if (!!(j->is_obj & BIT(d)) != key)
		fail(j, -EINVAL); /* a member without a key, or a key in an array */
	if (j->has_items & BIT(d))
		PUT_LIT(j, ",");
	if (j->brk >= 0)
		newline(j);
	else if (j->has_items & BIT(d) && !(j->flags & JSON_COMPACT))
		PUT_LIT(j, " ");
	j->has_items |= BIT(d);
}

static void open_container(struct json *j, bool obj)
{
	item(j, false);
	if (j->depth >= JSON_MAX_DEPTH - 1) {
		fail(j, -EINVAL);
		return;
	}
	json_put(j, obj ? "{" : "[", 1);
	j->has_items &= ~BIT(j->depth);
	j->is_obj = obj ? j->is_obj | BIT(j->depth) : j->is_obj & ~BIT(j->depth);
	j->depth++;
}

static void close_container(struct json *j, bool obj)
{
	int d = j->depth - 1;

	if (d < 0 || j->after_key || !!(j->is_obj & BIT(d)) != obj) {
		fail(j, -EINVAL);
		return;
	}
	if (j->brk >= 0)
		newline(j);
	json_put(j, obj ? "}" : "]", 1);
	j->depth--;
	if (!j->depth && j->out)
		PUT_LIT(j, "\n");
}

void json_obj(struct json *j)
{
	open_container(j, true);
}

void json_obj_end(struct json *j)
{
	close_container(j, true);
}

void json_arr(struct json *j)
{
	open_container(j, false);
}

void json_arr_end(struct json *j)
{
	close_container(j, false);
}

static void open_at(struct json *j, int indent, const char *key, bool obj)
{
	if (indent >= 0)
		json_break(j, indent);
	if (key)
		json_key(j, key);
	open_container(j, obj);
}

void json_obj_open(struct json *j, int indent, const char *key)
{
	open_at(j, indent, key, true);
}

void json_arr_open(struct json *j, int indent, const char *key)
{
	open_at(j, indent, key, false);
}

void json_obj_close(struct json *j, int indent)
{
	if (indent >= 0)
		json_break(j, indent);
	close_container(j, true);
}

void json_arr_close(struct json *j, int indent)
{
	if (indent >= 0)
		json_break(j, indent);
	close_container(j, false);
}

/* What stands for byte p[0] (of a character c bytes long) in a JSON string, or NULL. */
static const char *json_rep(const unsigned char *p, size_t c, unsigned flags, char esc[8])
{
	if (c == 0)
		return "\\ufffd";
	if (c == 3 && flags & JSON_SCRIPT && p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe)
		return p[2] == 0xbe ? "\\ufffe" : "\\uffff"; /* not characters in XML */
	if (c > 1)
		return NULL;
	switch (*p) {
	case '"': return "\\\"";
	case '\\': return "\\\\";
	case '\n': return "\\n";
	case '\r': return "\\r";
	case '\t': return "\\t";
	case '<':
	case '>':
	case '&':
		break;
	default:
		if (*p >= 0x20)
			return NULL;
		snprintf(esc, 8, "\\u%04x", *p);
		return esc;
	}
	if (!(flags & JSON_SCRIPT))
		return NULL;
	snprintf(esc, 8, "\\u%04x", *p); /* no "</script>", "<!--" or "]]>" */
	return esc;
}

void json_escape_n(const char *s, size_t len, unsigned flags,
		   void (*put)(void *ctx, const void *p, size_t n), void *ctx)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t run = 0, o = 0;
	char esc[8];

	while (o < len) {
		unsigned char b = p[o];
		size_t c;
		const char *rep;

		/* most names are printable ASCII */
		if (b >= 0x20 && b < 0x80 && b != '"' && b != '\\' &&
		    (!(flags & JSON_SCRIPT) || (b != '<' && b != '>' && b != '&'))) {
			o++;
			continue;
		}
		c = utf8_char_len(p + o, len - o);
		rep = json_rep(p + o, c, flags, esc);

		if (!rep) {
			o += c;
			continue;
		}
		put(ctx, p + run, o - run);
		put(ctx, rep, strlen(rep));
		o += c ? c : 1;
		run = o;
	}
	put(ctx, p + run, o - run);
}

void json_escape(const char *s, void (*put)(void *ctx, const void *p, size_t n), void *ctx)
{
	json_escape_n(s, strlen(s), 0, put, ctx);
}

static void quoted(struct json *j, const char *s)
{
	PUT_LIT(j, "\"");
	json_escape_n(s, strlen(s), j->flags, put_cb, j);
	PUT_LIT(j, "\"");
}

void json_key(struct json *j, const char *key)
{
	item(j, true);
	quoted(j, key);
	if (j->flags & JSON_COMPACT)
		PUT_LIT(j, ":");
	else
		PUT_LIT(j, ": ");
	j->after_key = true;
}

void json_str(struct json *j, const char *s)
{
	if (!s) {
		json_null(j);
		return;
	}
	item(j, false);
	quoted(j, s);
}

void json_str_begin(struct json *j)
{
	item(j, false);
	PUT_LIT(j, "\"");
}

void json_str_add(struct json *j, const char *s)
{
	json_escape_n(s, strlen(s), j->flags, put_cb, j);
}

void json_str_end(struct json *j)
{
	PUT_LIT(j, "\"");
}

size_t json_fmt_u64(char *buf, uint64_t v)
{
	char tmp[24];
	size_t n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

void json_u64(struct json *j, uint64_t v)
{
	char b[24];

	item(j, false);
	json_put(j, b, json_fmt_u64(b, v));
}

void json_i64(struct json *j, int64_t v)
{
	char b[24];

	item(j, false);
	json_put(j, b, snprintf(b, sizeof(b), "%" PRId64, v));
}

static void number(struct json *j, const char *fmt, int prec, double v)
{
	char b[64];
	int n;

	if (!isfinite(v)) {
		json_null(j);
		return;
	}
	item(j, false);
	n = snprintf(b, sizeof(b), fmt, prec, v);
	if (n < 0 || (size_t)n >= sizeof(b)) { /* %f of 1e300: hundreds of digits */
		char *big = n > 0 ? malloc((size_t)n + 1) : NULL;

		if (!big) {
			fail(j, -ENOMEM);
			return;
		}
		snprintf(big, (size_t)n + 1, fmt, prec, v);
		json_put(j, big, n);
		free(big);
		return;
	}
	json_put(j, b, n);
}

void json_f(struct json *j, double v, int decimals)
{
	number(j, "%.*f", decimals, v);
}

void json_g(struct json *j, double v, int digits)
{
	number(j, "%.*g", digits, v);
}

void json_bool(struct json *j, bool v)
{
	item(j, false);
	if (v)
		PUT_LIT(j, "true");
	else
		PUT_LIT(j, "false");
}

void json_null(struct json *j)
{
	item(j, false);
	PUT_LIT(j, "null");
}

void json_raw(struct json *j, const void *text, size_t len)
{
	item(j, false);
	json_put(j, text, len);
}

void json_kv_str(struct json *j, const char *key, const char *s)
{
	json_key(j, key);
	json_str(j, s);
}

void json_kv_u64(struct json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	json_u64(j, v);
}

void json_kv_i64(struct json *j, const char *key, int64_t v)
{
	json_key(j, key);
	json_i64(j, v);
}

void json_kv_f(struct json *j, const char *key, double v, int decimals)
{
	json_key(j, key);
	json_f(j, v, decimals);
}

void json_kv_bool(struct json *j, const char *key, bool v)
{
	json_key(j, key);
	json_bool(j, v);
}

void json_kv_null(struct json *j, const char *key)
{
	json_key(j, key);
	json_null(j);
}
