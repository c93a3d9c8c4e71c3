// SPDX-License-Identifier: MIT
/*
 * `eprof flamegraph` (SVG) on untrusted files: the input builder of
 * src/cmd_flamegraph.c and the renderer. The SVG must be UTF-8 without
 * control characters and its embedded data block must be valid JSON.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"

/* Its static build_fg_input() and write_svg() are what we fuzz. */
#include "cmd_flamegraph.c"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static void check_svg(const char *out, size_t len)
{
	static const char open_tag[] = "<script type=\"application/json\" id=\"fg-data\">";
	const char *a, *b;

	FUZZ_CHECK(strlen(out) == len, "NUL byte in the SVG");
	FUZZ_CHECK(fuzz_utf8_valid(out, len), "SVG is not valid UTF-8");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = out[i];

		FUZZ_CHECK(c >= 0x20 || c == '\n' || c == '\t' || c == '\r',
			   "control character 0x%02x in the SVG at %zu", c, i);
	}
	a = strstr(out, open_tag);
	if (!a && strstr(out, "id=\"fg-empty\"")) /* "no samples": nothing to draw */
		return;
	FUZZ_CHECK(a, "SVG without its data block");
	a += sizeof(open_tag) - 1;
	b = strstr(a, "</script>");
	FUZZ_CHECK(b, "data block not closed");
	FUZZ_CHECK(fuzz_json_valid(a, b - a), "SVG data block is not valid JSON");
}

static void one(const struct profile *p, const struct flamegraph_cli *o)
{
	struct sink *s = sink_mem();
	const char *out;
	size_t len;

	if (!s)
		return;
	if (!write_svg(s, p, o)) {
		out = sink_mem_data(s, &len);
		check_svg(out, len);
	}
	sink_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p = fuzz_read_profile(data, size);
	struct flamegraph_cli o;

	if (!p)
		return 0;
	if (fuzz_stack_frames(p, STACK_MAX_FRAMES) > FUZZ_MAX_OUTPUT_FRAMES) { /* size, not a bug */
		profile__free(p);
		return 0;
	}
	memset(&o, 0, sizeof(o));
	o.width = 1200;
	one(p, &o);
	o.lines = true;
	o.inverted = true;
	o.weight_ns = true;
	o.width = 200;
	o.title = "fuzz <&> \"title\"";
	one(p, &o);
	o.no_comm = true;
	o.lines = false;
	if (p->samples.n)
		o.filter.pid = p->samples.v[0].pid;
	one(p, &o);
	profile__free(p);
	return 0;
}
