// SPDX-License-Identifier: MIT
/* A unix socket in a 0700 directory of the connecting user's: see sockdir.h. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sockdir.h"

void sockdir_init(struct sockdir *s)
{
	memset(s, 0, sizeof(*s));
	s->lfd = s->dfd = -1;
}

/*
 * One leftover of a recorder that is gone: its socket, then the directory if that leaves it
 * empty. Nothing is followed: the directory is opened without following a link and must be
 * 0700, only an entry "sock" that is a socket is removed, and the name is removed only while
 * it is still that directory (rmdir fails on anything else put in it).
 */
static void sweep_one(const char *path)
{
	struct stat sb, now;
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (dfd < 0)
		return;
	if (!fstat(dfd, &sb) && (sb.st_mode & 07777) == 0700) {
		struct stat so;

		if (!fstatat(dfd, "sock", &so, AT_SYMLINK_NOFOLLOW) && S_ISSOCK(so.st_mode))
			unlinkat(dfd, "sock", 0);
		if (!fstatat(AT_FDCWD, path, &now, AT_SYMLINK_NOFOLLOW) && S_ISDIR(now.st_mode) &&
		    now.st_dev == sb.st_dev && now.st_ino == sb.st_ino)
			rmdir(path);
	}
	close(dfd);
}

void sockdir_sweep(void)
{
	static const char *const prefixes[] = {"eprof-mem", "eprof-cupti", NULL};
	static atomic_bool done;
	const char *dir = "/tmp";
	struct dirent *de;
	DIR *d;

	if (atomic_exchange(&done, true)) /* once a process: the leftovers are of the past */
		return;
	d = opendir(dir);

	while (d && (de = readdir(d))) {
		for (const char *const *p = prefixes; *p; p++) {
			size_t n = strlen(*p);
			char *end, path[PATH_MAX];
			long pid;

			if (strncmp(de->d_name, *p, n) || de->d_name[n] != '-')
				continue;
			pid = strtol(de->d_name + n + 1, &end, 10);
			/* PREFIX-PID-XXXXXX, PID a process that is gone (a live one may be a reuse
			 * of the number: left alone) */
			if (pid <= 0 || *end != '-' || strlen(end + 1) != 6 || pid > INT32_MAX ||
			    !kill((pid_t)pid, 0) || errno != ESRCH)
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) < (int)sizeof(path))
				sweep_one(path);
		}
	}
	if (d)
		closedir(d);
}

int sockdir_listen(struct sockdir *s, const char *prefix, uid_t uid, gid_t gid, int backlog)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct stat sb;
	int err;

	sockdir_init(s);
	if (snprintf(s->dir, sizeof(s->dir), "%s-XXXXXX", prefix) >= (int)sizeof(s->dir) ||
	    snprintf(s->path, sizeof(s->path), "%s/sock", s->dir) >= (int)sizeof(s->path) ||
	    strlen(s->path) >= sizeof(a.sun_path)) {
		sockdir_init(s);
		return -ENAMETOOLONG;
	}
	/* 0700 and root's until the socket is in it: no one else can put anything there. */
	if (!mkdtemp(s->dir)) {
		err = -errno;
		sockdir_init(s);
		return err;
	}
	snprintf(s->path, sizeof(s->path), "%s/sock", s->dir);
	memcpy(a.sun_path, s->path, strlen(s->path) + 1);
	s->dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dfd < 0 || fstat(s->dfd, &sb))
		goto fail;
	s->dev = sb.st_dev;
	s->ino = sb.st_ino;
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)))
		goto fail;
	/* connect() needs write permission on the socket: its user's only. */
	if (fchmodat(s->dfd, "sock", 0600, 0) ||
	    fchownat(s->dfd, "sock", uid, gid, AT_SYMLINK_NOFOLLOW) || listen(s->lfd, backlog) ||
	    fchown(s->dfd, uid, gid))
		goto fail;
	return 0;
fail:
	err = -errno;
	sockdir_remove(s);
	return err;
}

void sockdir_remove(struct sockdir *s)
{
	struct stat sb;

	if (s->lfd >= 0)
		close(s->lfd);
	s->lfd = -1;
	if (s->dfd >= 0) {
		unlinkat(s->dfd, "sock", 0);
		/* The name may now be the owner's symlink or another directory: not ours to remove.
		 */
		if (!fstatat(AT_FDCWD, s->dir, &sb, AT_SYMLINK_NOFOLLOW) && S_ISDIR(sb.st_mode) &&
		    sb.st_dev == s->dev && sb.st_ino == s->ino)
			rmdir(s->dir);
		close(s->dfd);
	} else if (s->dir[0]) {
		rmdir(s->dir); /* mkdtemp made it; nothing is in it */
	}
	s->dfd = -1;
	s->dir[0] = s->path[0] = '\0';
}
