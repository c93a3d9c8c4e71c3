// SPDX-License-Identifier: MIT
/*
 * Chunk codecs on real payloads: reads eprof.data files, decompresses their DATA chunks
 * (zlib or zstd, whichever each chunk says) and times compressing and decompressing the
 * same payloads with each candidate codec and level, as ratios to zlib level 1 (the
 * writer's DATA codec of file version 1) measured in the same run. Built and run by
 * codec.py.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include <zstd.h>

struct payload {
	uint8_t *d;
	size_t n;
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint32_t le32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static size_t load(const char *path, struct payload *out, size_t max)
{
	FILE *f = fopen(path, "rb");
	size_t len, off = 24, n = 0;
	uint8_t *d;

	if (!f || fseek(f, 0, SEEK_END) || (long)(len = ftell(f)) < 0) {
		fprintf(stderr, "codec: cannot read %s\n", path);
		exit(1);
	}
	rewind(f);
	d = malloc(len);
	if (!d || fread(d, 1, len, f) != len)
		exit(1);
	fclose(f);
	while (off + 24 <= len && n < max) {
		uint32_t type = le32(d + off + 4), raw = le32(d + off + 8), z = le32(d + off + 12);
		uint32_t codec = le32(d + off + 20);
		uint8_t *o;

		if (off + 24 + z > len)
			break;
		o = malloc(raw + 1);
		if (type == 1 && o) {
			uLongf got = raw;
			int ok = codec == 1 ? ZSTD_decompress(o, raw, d + off + 24, z) == raw
					    : uncompress(o, &got, d + off + 24, z) == Z_OK && got == raw;

			if (ok)
				out[n++] = (struct payload){ o, raw };
			else
				free(o);
		} else {
			free(o);
		}
		off += 24 + z;
	}
	free(d);
	return n;
}

struct result {
	double c_s, d_s;
	size_t zbytes;
};

static struct result run(int zstd, int level, struct payload *p, size_t n, int reps)
{
	size_t cap = 0;
	struct result r = { 0 };
	uint8_t *z, *o;
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_DCtx *dc = ZSTD_createDCtx();

	for (size_t i = 0; i < n; i++) {
		size_t b = ZSTD_compressBound(p[i].n) + compressBound(p[i].n);

		cap = b > cap ? b : cap;
	}
	z = malloc(cap);
	o = malloc(cap);
	for (int k = 0; k < reps; k++) {
		for (size_t i = 0; i < n; i++) {
			double t0 = now(), t1;
			size_t zl;

			if (zstd) {
				zl = ZSTD_compressCCtx(cc, z, cap, p[i].d, p[i].n, level);
			} else {
				uLongf l = cap;

				compress2(z, &l, p[i].d, p[i].n, level);
				zl = l;
			}
			t1 = now();
			if (zstd) {
				ZSTD_decompressDCtx(dc, o, cap, z, zl);
			} else {
				uLongf l = cap;

				uncompress(o, &l, z, zl);
			}
			r.c_s += t1 - t0;
			r.d_s += now() - t1;
			if (k == 0)
				r.zbytes += zl;
			if (memcmp(o, p[i].d, p[i].n)) {
				fprintf(stderr, "codec: round trip differs\n");
				exit(1);
			}
		}
	}
	ZSTD_freeCCtx(cc);
	ZSTD_freeDCtx(dc);
	free(z);
	free(o);
	return r;
}

int main(int argc, char **argv)
{
	static struct payload p[4096];
	static const struct { const char *name; int zstd, level; } codecs[] = {
		{ "zlib 1", 0, 1 }, { "zlib 6", 0, 6 }, { "zstd -1", 1, -1 },
		{ "zstd 1", 1, 1 }, { "zstd 3", 1, 3 }, { "zstd 6", 1, 6 },
	};
	size_t n = 0, raw = 0;
	int reps = 5;
	struct result base;

	for (int i = 1; i < argc; i++)
		n += load(argv[i], p + n, sizeof(p) / sizeof(p[0]) - n);
	for (size_t i = 0; i < n; i++)
		raw += p[i].n;
	if (!n) {
		fprintf(stderr, "codec: no DATA chunks in the files given\n");
		return 1;
	}
	printf("%zu DATA chunks, %.2f MiB raw, %d repetitions\n", n, raw / 1048576.0, reps);
	printf("%-8s %10s %10s %9s %9s %9s %9s\n", "codec", "comp MB/s", "decomp MB/s", "bytes",
	       "size/zl1", "ctime/zl1", "dtime/zl1");
	base = run(0, 1, p, n, reps);
	for (size_t c = 0; c < sizeof(codecs) / sizeof(codecs[0]); c++) {
		struct result r = c == 0 ? base : run(codecs[c].zstd, codecs[c].level, p, n, reps);

		printf("%-8s %10.0f %10.0f %9zu %9.3f %9.3f %9.3f\n", codecs[c].name,
		       raw * reps / r.c_s / 1e6, raw * reps / r.d_s / 1e6, r.zbytes,
		       (double)r.zbytes / base.zbytes, r.c_s / base.c_s, r.d_s / base.d_s);
	}
	return 0;
}
