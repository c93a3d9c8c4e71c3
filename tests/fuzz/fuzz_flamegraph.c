// SPDX-License-Identifier: MIT
/*
 * `eprof flamegraph` (SVG) on untrusted files: the stacks builder of
 * src/output/svg.c and the renderer. The SVG must be UTF-8 without
 * control characters and its embedded data block must be valid JSON.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/profile.h"
#include "output/svg.h"
#include "util/sink.h"

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

static void one(const struct profile *p, const struct svg_opts *o)
{
	struct sink *s = sink_mem();
	const char *out;
	size_t len;

	if (!s)
		return;
	if (!flamegraph_svg_write(s, p, o)) {
		out = sink_mem_data(s, &len);
		check_svg(out, len);
	}
	sink_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile *p = fuzz_read_profile(data, size);
	struct svg_opts o;

	if (!p)
		return 0;
	if (fuzz_stack_frames(p, STACK_MAX_FRAMES) > FUZZ_MAX_OUTPUT_FRAMES) { /* size, not a bug */
		profile__free(p);
		return 0;
	}
	memset(&o, 0, sizeof(o));
	o.fg.title = "CPU flamegraph";
	o.fg.unit = "samples";
	o.fg.width = 1200;
	one(p, &o);
	o.stacks.lines = true;
	o.fg.inverted = true;
	o.stacks.weight_ns = true;
	o.fg.unit = "ns";
	o.fg.width = 200;
	o.fg.title = "fuzz <&> \"title\"";
	one(p, &o);
	o.stacks.no_comm = true;
	o.stacks.lines = false;
	if (p->samples.n)
		o.stacks.filter.pid = p->samples.v[0].pid;
	one(p, &o);
	profile__free(p);
	return 0;
}
