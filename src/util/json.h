/* SPDX-License-Identifier: MIT */
/*
 * JSON writer on a sink: objects, arrays, keys, the commas between members, string
 * escaping with UTF-8 repair, and numbers. Every JSON output of eprof goes through it.
 *
 * Layout is the caller's: items follow each other on one line (", " and ": ", or "," and
 * ":" with JSON_COMPACT) until json_break() asks for a new line, so a writer can keep a
 * format that puts a few members per line and one array element per line.
 *
 *	struct json j;
 *
 *	json_init(&j, out, 0);
 *	json_obj(&j);
 *	json_break(&j, 2);
 *	json_kv_u64(&j, "version", 1);		{
 *	json_kv_str(&j, "name", name);		  "version": 1, "name": "x",
 *	json_arr_open(&j, 2, "list");		  "list": [1, 2]
 *	json_u64(&j, 1);			}
 *	json_u64(&j, 2);
 *	json_arr_end(&j);
 *	json_obj_close(&j, 0);
 *	err = json_flush(&j);
 *
 * The writer buffers up to JSON_BUF bytes and writes them to the sink when the buffer is
 * full and on json_flush(); while one is open on a sink, write to that sink through it or
 * flush it first. A document on a sink ends with a newline after its top-level object or
 * array.
 */
#ifndef EPROF_JSON_H
#define EPROF_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct sink;

#define JSON_BUF 4096
#define JSON_MAX_DEPTH 64

enum json_flags {
	JSON_COMPACT = 1 << 0, /* "," and ":" between items instead of ", " and ": " */
	/*
	 * Strings that may sit in an HTML <script> or an XML CDATA section: '<', '>' and '&'
	 * as \u escapes (no "</script>", "<!--" or "]]>"), U+FFFE and U+FFFF too.
	 */
	JSON_SCRIPT = 1 << 1,
};

struct json {
	struct sink *out; /* NULL: the text stays in buf (json_text) */
	unsigned flags;
	int err;	     /* first error, sticky: -EINVAL misnested, -ENOSPC buf full */
	int depth;	     /* containers open */
	int brk;	     /* indent of the line break before the next item, or -1 */
	bool after_key;	     /* a key was written: its value comes next */
	uint64_t has_items;  /* bit d: the container at depth d + 1 has an item */
	uint64_t is_obj;     /* bit d: the container at depth d + 1 is an object */
	uint64_t flushed;    /* bytes handed to the sink */
	size_t len;
	char buf[JSON_BUF];
};

/* A writer of one document on out (NULL: into the writer's buffer, see json_text). */
void json_init(struct json *j, struct sink *out, unsigned flags);
/*
 * A writer that continues an object opened on out by another writer, after its first
 * members: a section of a larger document. Its keys start with a comma; it must not
 * close that object.
 */
void json_init_members(struct json *j, struct sink *out, unsigned flags);
/* Writes what is buffered to the sink; returns the writer's first error, or the sink's. */
int json_flush(struct json *j);
/* The text of a writer without a sink, NUL-terminated ("" after an error). */
const char *json_text(struct json *j);
/* Bytes written so far (handed to the sink, and buffered). */
static inline uint64_t json_bytes(const struct json *j)
{
	return j->flushed + j->len;
}

/* The next key, value or closing bracket starts a new line, indented by indent spaces. */
void json_break(struct json *j, int indent);

void json_obj(struct json *j);
void json_obj_end(struct json *j);
void json_arr(struct json *j);
void json_arr_end(struct json *j);
void json_key(struct json *j, const char *key);
/*
 * An object or array opened as the next item: after a line break indented by indent spaces
 * (none when indent < 0), under key (NULL: an array element, or the top-level value). The
 * close functions end one after such a line break.
 */
void json_obj_open(struct json *j, int indent, const char *key);
void json_arr_open(struct json *j, int indent, const char *key);
void json_obj_close(struct json *j, int indent);
void json_arr_close(struct json *j, int indent);

/* Values. A NULL string is null; a number that is not finite (inf, NaN) is null too. */
void json_str(struct json *j, const char *s);
void json_u64(struct json *j, uint64_t v);
void json_i64(struct json *j, int64_t v);
void json_f(struct json *j, double v, int decimals); /* printf's "%.*f" */
void json_g(struct json *j, double v, int digits);   /* printf's "%.*g" */
void json_bool(struct json *j, bool v);
void json_null(struct json *j);

/*
 * A string written in parts: json_str_begin(), then json_str_add() for each part, then
 * json_str_end(); the parts are escaped as one string.
 */
void json_str_begin(struct json *j);
void json_str_add(struct json *j, const char *s);
void json_str_end(struct json *j);

/*
 * A value given as JSON text, written as is (the caller vouches for it), and bytes that
 * continue it (a value written in pieces). For output that renders parts of its values
 * once and repeats them.
 */
void json_raw(struct json *j, const void *text, size_t len);
void json_put_slow(struct json *j, const void *p, size_t n);
static inline void json_put(struct json *j, const void *p, size_t n)
{
	if (n < JSON_BUF - j->len) {
		memcpy(j->buf + j->len, p, n);
		j->len += n;
	} else {
		json_put_slow(j, p, n);
	}
}

/* key: value. */
void json_kv_str(struct json *j, const char *key, const char *s);
void json_kv_u64(struct json *j, const char *key, uint64_t v);
void json_kv_i64(struct json *j, const char *key, int64_t v);
void json_kv_f(struct json *j, const char *key, double v, int decimals);
void json_kv_bool(struct json *j, const char *key, bool v);
void json_kv_null(struct json *j, const char *key);

/* The decimal digits of v into buf (21 bytes or more), no NUL; returns how many. */
size_t json_fmt_u64(char *buf, uint64_t v);

/*
 * The body of a JSON string (no quotes) through put: quotes, backslashes and control
 * characters escaped, each byte that is not valid UTF-8 replaced by U+FFFD.
 */
void json_escape(const char *s, void (*put)(void *ctx, const void *p, size_t n), void *ctx);
/* The same for len bytes of s (a NUL among them is \u0000), with JSON_SCRIPT in flags. */
void json_escape_n(const char *s, size_t len, unsigned flags,
		   void (*put)(void *ctx, const void *p, size_t n), void *ctx);

#endif
