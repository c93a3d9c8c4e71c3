/* SPDX-License-Identifier: MIT */
/*
 * A unix socket no other user can reach, for the channels of libraries eprof puts in its
 * targets (--mem=1's, src/record/mem_chan.c; the CUPTI collector's, src/record/cuda.c): it
 * listens in a directory of its own under /tmp (a random name, as mkdtemp makes it), mode
 * 0700 and owned by the one user whose processes connect, the socket 0600 and theirs too.
 * Any other user gets EACCES at the directory, whatever name /proc/net/unix shows them.
 * docs/security.md.
 */
#ifndef EPROF_SOCKDIR_H
#define EPROF_SOCKDIR_H

#include <sys/types.h>

struct sockdir {
	int lfd;   /* the listening socket (SOCK_SEQPACKET, non-blocking, close-on-exec) */
	int dfd;   /* the directory, however it is renamed later */
	dev_t dev; /* ...and its identity, checked before its name is removed */
	ino_t ino;
	char dir[64];  /* PREFIX-XXXXXX */
	char path[80]; /* PREFIX-XXXXXX/sock: what the connecting processes are told */
};

/*
 * Makes PREFIX-XXXXXX (prefix: "/tmp/eprof-mem-1234", say) and listens on sock in it, both
 * given to uid:gid once the socket is bound. 0, or -errno (nothing is left behind).
 */
int sockdir_listen(struct sockdir *s, const char *prefix, uid_t uid, gid_t gid, int backlog);
/*
 * Stops listening and removes the socket and the directory: the socket through the
 * directory's descriptor (its owner may have renamed it, or put a symlink in its place),
 * the directory only while its name is still that directory. Idempotent; s zeroed is empty.
 */
void sockdir_remove(struct sockdir *s);
/*
 * What recorders killed with SIGKILL left in /tmp: each eprof-mem-PID-XXXXXX and
 * eprof-cupti-PID-XXXXXX directory whose PID is no process, when it is 0700 and holds nothing
 * but its socket, is removed. Links and anything else are left as they are. Once a process.
 */
void sockdir_sweep(void);
void sockdir_init(struct sockdir *s);

#endif
