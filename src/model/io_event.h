/* SPDX-License-Identifier: MIT */
/*
 * What the flags of an EVK_IO event (profile.h) mean, as the file stores them: the call
 * (bits 0-3), the kind of file (bits 4-6), and whether the call has a stack. The values are
 * the BPF side's (bpf/eprof_abi.h enum io_call, enum io_file_type), checked in
 * src/record/io.c; readers depend on this header only.
 */
#ifndef EPROF_IO_EVENT_H
#define EPROF_IO_EVENT_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "profile.h"

enum io_ev_call {
	IOC_READ = 1,
	IOC_WRITE,
	IOC_PREAD,
	IOC_PWRITE,
	IOC_READV,
	IOC_WRITEV,
	IOC_PREADV,
	IOC_PWRITEV,
	IOC_RECVFROM,
	IOC_SENDTO,
	IOC_RECVMSG,
	IOC_SENDMSG,
	IOC_SENDFILE,
	IOC_MAX,
};

enum io_ev_type {
	IOT_OTHER = 0,
	IOT_FILE = 1, /* a regular file */
	IOT_PIPE = 2, /* a pipe or FIFO */
	IOT_SOCKET = 3,
	IOT_CHAR = 4, /* a character device: a terminal, /dev/null */
	IOT_BLOCK = 5,
	IOT_DIR = 6,
	IOT_MAX,
};

#define IOEV_CALL(flags) ((flags) & 0xf)
#define IOEV_TYPE(flags) (((flags) >> 4) & 0x7)
#define IOEV_F_NO_STACK 0x100 /* over --io-stack-rate: recorded without a stack */

static inline const char *io_call_name(unsigned call)
{
	static const char *const names[IOC_MAX] = {
	    [IOC_READ] = "read",       [IOC_WRITE] = "write",	 [IOC_PREAD] = "pread64",
	    [IOC_PWRITE] = "pwrite64", [IOC_READV] = "readv",	 [IOC_WRITEV] = "writev",
	    [IOC_PREADV] = "preadv",   [IOC_PWRITEV] = "pwritev", [IOC_RECVFROM] = "recvfrom",
	    [IOC_SENDTO] = "sendto",   [IOC_RECVMSG] = "recvmsg", [IOC_SENDMSG] = "sendmsg",
	    [IOC_SENDFILE] = "sendfile",
	};

	return call < IOC_MAX && names[call] ? names[call] : "?";
}

static inline const char *io_type_name(unsigned type)
{
	static const char *const names[IOT_MAX] = {
	    [IOT_OTHER] = "other", [IOT_FILE] = "file",	  [IOT_PIPE] = "pipe",
	    [IOT_SOCKET] = "socket", [IOT_CHAR] = "chardev", [IOT_BLOCK] = "blockdev",
	    [IOT_DIR] = "dir",
	};

	return type < IOT_MAX ? names[type] : "other";
}

/* Input: reads and receives (sendfile counts as output, to its out_fd). */
static inline bool io_call_is_read(unsigned call)
{
	return call == IOC_READ || call == IOC_PREAD || call == IOC_READV ||
	       call == IOC_PREADV || call == IOC_RECVFROM || call == IOC_RECVMSG;
}

static inline uint64_t ev_io_bytes(const struct event *e)
{
	assert(e->kind == EVK_IO);
	return e->a;
}

static inline uint32_t ev_io_fd(const struct event *e)
{
	assert(e->kind == EVK_IO);
	return (uint32_t)e->b;
}

static inline void ev_set_io(struct event *e, unsigned call, unsigned type, bool no_stack,
			     uint64_t bytes, uint32_t fd)
{
	assert(e->kind == EVK_IO);
	e->flags = (uint16_t)((call & 0xf) | (type & 0x7) << 4 | (no_stack ? IOEV_F_NO_STACK : 0));
	e->a = bytes;
	e->b = fd;
}

#endif
