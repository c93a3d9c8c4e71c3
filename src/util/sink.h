/* SPDX-License-Identifier: MIT */
/*
 * Output sink: every writer (folded, SVG, JSON, trace, pprof) writes through
 * this so tests can write into memory and so write errors are never lost.
 */
#ifndef EPROF_SINK_H
#define EPROF_SINK_H

#include <stddef.h>
#include <stdio.h>

struct sink {
	int (*write)(struct sink *s, const void *buf, size_t len);
	int (*close)(struct sink *s); /* flushes; returns 0 or -errno */
	int err;		      /* first error seen (sticky), 0 or -errno */
	size_t bytes;		      /* bytes accepted so far */
};

/* Writes to an open FILE; close() flushes and checks ferror, and fcloses it if own_file. */
struct sink *sink_file(FILE *f, int own_file);
/*
 * Opens path for writing: "-" means stdout; otherwise a regular file of ours only (created
 * mode, 0600 when 0; O_NOFOLLOW, O_NONBLOCK; truncated). NULL with errno set: EINVAL for a
 * FIFO, device or socket, EPERM for another user's file.
 */
struct sink *sink_open(const char *path, int mode);
/*
 * Text for people (report, top, diff, critical-path): wraps in, and escapes every control
 * byte but '\n' as \xNN (esc.h) on the way. Owns in (closed with it; freed if this fails).
 */
struct sink *sink_text(struct sink *in);
/* Grows a heap buffer; sink_mem_data() returns it NUL-terminated. */
struct sink *sink_mem(void);
const char *sink_mem_data(struct sink *s, size_t *len);

int sink_write(struct sink *s, const void *buf, size_t len);
int sink_puts(struct sink *s, const char *str);
int sink_printf(struct sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
enum sink_xml_flags {
	SINK_XML_LINE = 1 << 0, /* newlines and tabs as spaces: text of one line (a label) */
};
/*
 * Writes str (len bytes) as XML or HTML text or attribute value: '<', '>', '&', '"' and '\''
 * as entities, and U+FFFD for each byte that is not valid UTF-8 and each character XML
 * forbids (a control other than tab and newline, U+FFFE, U+FFFF). Names from targets
 * and files are hostile: everything they hold goes through here or util/json.
 */
int sink_xml_text(struct sink *s, const char *str, size_t len, unsigned flags);
/* sink_xml_text() of a NUL-terminated str, newlines kept. */
int sink_xml_str(struct sink *s, const char *str);
/* Closes and frees; returns the first error seen during the sink's life, or 0. */
int sink_close(struct sink *s);

#endif
