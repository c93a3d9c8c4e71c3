// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esc.h"
#include "sink.h"
#include "utf8.h"
#include "vec.h"

struct file_sink {
	struct sink base;
	FILE *f;
	int own;
};

struct mem_sink {
	struct sink base;
	char *buf;
	size_t len, cap;
};

static int file_write(struct sink *s, const void *buf, size_t len)
{
	struct file_sink *fs = (struct file_sink *)s;

	if (len && fwrite(buf, 1, len, fs->f) != len)
		return errno ? -errno : -EIO;
	return 0;
}

static int file_close(struct sink *s)
{
	struct file_sink *fs = (struct file_sink *)s;
	int err = 0;

	if (fflush(fs->f) || ferror(fs->f))
		err = errno ? -errno : -EIO;
	if (fs->own && fclose(fs->f) && !err)
		err = errno ? -errno : -EIO;
	return err;
}

struct sink *sink_file(FILE *f, int own_file)
{
	struct file_sink *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return NULL;
	fs->base.write = file_write;
	fs->base.close = file_close;
	fs->f = f;
	fs->own = own_file;
	return &fs->base;
}

struct sink *sink_open(const char *path, int mode)
{
	struct sink *s;
	struct stat st;
	FILE *f;
	int fd, e;

	if (!strcmp(path, "-"))
		return sink_file(stdout, 0);
	/*
	 * No O_TRUNC yet: someone else's file must be refused before it is touched. O_NONBLOCK:
	 * a FIFO without a reader fails (ENXIO) instead of hanging here.
	 */
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		  mode ? mode : 0600);
	if (fd < 0) {
		if (errno == ENXIO)
			errno = EINVAL;
		return NULL;
	}
	if (fstat(fd, &st)) {
		e = errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		e = EINVAL; /* a FIFO, a device, a socket */
		goto fail;
	}
	if (st.st_uid != geteuid()) {
		e = EPERM;
		goto fail;
	}
	if (ftruncate(fd, 0)) {
		e = errno;
		goto fail;
	}
	f = fdopen(fd, "w");
	if (!f) {
		e = errno;
		goto fail;
	}
	s = sink_file(f, 1);
	if (!s)
		fclose(f);
	return s;
fail:
	close(fd);
	errno = e;
	return NULL;
}

static int mem_write(struct sink *s, const void *buf, size_t len)
{
	struct mem_sink *ms = (struct mem_sink *)s;

	if (arr_grow(ms->buf, ms->cap, ms->len + len + 1))
		return -ENOMEM;

	memcpy(ms->buf + ms->len, buf, len);
	ms->len += len;
	ms->buf[ms->len] = '\0';
	return 0;
}

static int mem_close(struct sink *s)
{
	struct mem_sink *ms = (struct mem_sink *)s;

	free(ms->buf);
	ms->buf = NULL;
	return 0;
}

struct sink *sink_mem(void)
{
	struct mem_sink *ms = calloc(1, sizeof(*ms));

	if (!ms)
		return NULL;
	ms->base.write = mem_write;
	ms->base.close = mem_close;
	return &ms->base;
}

const char *sink_mem_data(struct sink *s, size_t *len)
{
	struct mem_sink *ms = (struct mem_sink *)s;

	if (len)
		*len = ms->len;
	return ms->buf ? ms->buf : "";
}

/* A text sink: control bytes escaped (esc.h) on their way to the sink it wraps. */
struct text_sink {
	struct sink base;
	struct sink *in;
	char held[4]; /* the start of a UTF-8 sequence the last write ended in */
	size_t nheld;
};

static int text_put(struct text_sink *ts, const char *buf, size_t len, bool more)
{
	char in[1024 + 4], out[4 * sizeof(in)];

	while (len || ts->nheld) {
		size_t take = len < 1024 ? len : 1024, n = ts->nheld + take, used, o;

		memcpy(in, ts->held, ts->nheld);
		memcpy(in + ts->nheld, buf, take);
		buf += take;
		len -= take;
		o = esc_ctl(out, in, n, more || len, &used);
		ts->nheld = n - used; /* at most 3 */
		memcpy(ts->held, in + used, ts->nheld);
		if (sink_write(ts->in, out, o))
			return ts->in->err;
		if (!len)
			break;
	}
	return 0;
}

static int text_write(struct sink *s, const void *buf, size_t len)
{
	return text_put((struct text_sink *)s, buf, len, true);
}

static int text_close(struct sink *s)
{
	struct text_sink *ts = (struct text_sink *)s;
	int err = ts->nheld ? text_put(ts, "", 0, false) : 0;
	int cerr = sink_close(ts->in);

	return err ? err : cerr;
}

struct sink *sink_text(struct sink *in)
{
	struct text_sink *ts;

	if (!in)
		return NULL;
	ts = calloc(1, sizeof(*ts));
	if (!ts) {
		sink_close(in);
		return NULL;
	}
	ts->base.write = text_write;
	ts->base.close = text_close;
	ts->in = in;
	return &ts->base;
}

int sink_write(struct sink *s, const void *buf, size_t len)
{
	int err;

	if (s->err)
		return s->err;
	err = s->write(s, buf, len);
	if (err)
		s->err = err;
	else
		s->bytes += len;
	return err;
}

int sink_puts(struct sink *s, const char *str)
{
	return sink_write(s, str, strlen(str));
}

int sink_printf(struct sink *s, const char *fmt, ...)
{
	char small[512], *big = NULL;
	va_list ap;
	int n, err;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return s->err = -EINVAL;
	if ((size_t)n < sizeof(small))
		return sink_write(s, small, n);
	big = malloc(n + 1);
	if (!big)
		return s->err = -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(big, n + 1, fmt, ap);
	va_end(ap);
	err = sink_write(s, big, n);
	free(big);
	return err;
}

/* What stands for an ASCII byte in XML text, or NULL when it stands for itself. */
static const char *xml_ascii(unsigned char c, unsigned flags)
{
	switch (c) {
	case '<': return "&lt;";
	case '>': return "&gt;";
	case '&': return "&amp;";
	case '"': return "&quot;";
	case '\'': return "&#39;";
	case '\n':
	case '\t': return flags & SINK_XML_LINE ? " " : NULL;
	default: return c < 0x20 ? UTF8_REPLACEMENT : NULL; /* XML allows no other control */
	}
}

int sink_xml_text(struct sink *s, const char *str, size_t len, unsigned flags)
{
	const unsigned char *p = (const unsigned char *)str;
	size_t run = 0, o = 0;

	while (o < len) {
		size_t c = utf8_char_len(p + o, len - o);
		const char *rep;

		if (c == 1)
			rep = xml_ascii(p[o], flags);
		else if (c == 3 && p[o] == 0xef && p[o + 1] == 0xbf && p[o + 2] >= 0xbe)
			rep = UTF8_REPLACEMENT; /* U+FFFE, U+FFFF: not characters in XML */
		else
			rep = c ? NULL : UTF8_REPLACEMENT;
		if (!rep) {
			o += c;
			continue;
		}
		sink_write(s, p + run, o - run);
		sink_puts(s, rep);
		o += c ? c : 1;
		run = o;
	}
	return sink_write(s, p + run, o - run);
}

int sink_xml_str(struct sink *s, const char *str)
{
	return sink_xml_text(s, str, strlen(str), 0);
}

int sink_close(struct sink *s)
{
	int err, cerr;

	if (!s)
		return 0;
	err = s->err;
	cerr = s->close(s);
	free(s);
	return err ? err : cerr;
}
