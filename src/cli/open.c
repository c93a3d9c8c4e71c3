// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "../format/format.h"
#include "../sym/symbolize.h"
#include "../sym/symbolizer.h"
#include "../util/log.h"
#include "open.h"

int profile_open(const char *path, struct profile **out)
{
	struct symbolizer_opts so = { .want_lines = true };
	struct symbolize_stats st;
	struct read_info info;
	struct symbolizer *sym;
	int err;

	err = eprof_read_file(path, out, &info);
	if (err) {
		log_err("failed to read '%s': %s", path, info.error);
		return err;
	}
	if (!info.complete)
		log_warn("'%s' is incomplete (recorder stopped early): read %u chunks, %" PRIu64
			 " trailing bytes lost",
			 path, info.chunks, info.bytes_lost);
	if (info.has_symbols)
		return 0;
	/* No symbols chunk: name what we can from the binaries still on this machine. */
	sym = symbolizer__new(&so);
	if (!sym)
		return 0;
	err = symbolize_profile(*out, sym, NULL, NULL, &st);
	symbolizer__free(sym);
	if (err) {
		log_err("failed to symbolize '%s': %s", path, strerror(-err));
		profile__free(*out);
		*out = NULL;
		return err;
	}
	(*out)->stats[STAT_UNKNOWN_FRAMES] = st.unknown;
	if (st.objects_missing)
		log_warn("%" PRIu64 " binaries of this record are gone or changed: their frames stay unnamed",
			 st.objects_missing);
	return 0;
}
