/* SPDX-License-Identifier: MIT */
/*
 * Named timed regions for eprof, as USDT probes:
 *
 *	#include <eprof/region.h>
 *
 *	EPROF_REGION_BEGIN("load_batch");
 *	...
 *	EPROF_REGION_END("load_batch");
 *
 * Each macro is one nop instruction plus an ELF note (.note.stapsdt,
 * provider "eprof", probes region__begin / region__end, argument 0 the name)
 * while nobody traces; `eprof record` finds the notes in the target's
 * executable and libraries and times every BEGIN..END on its thread. Ends
 * close the innermost open region, so regions nest; the name must be a
 * string that lives until the END (a literal is best), up to 47 bytes.
 *
 * Needs <sys/sdt.h> (Debian/Ubuntu: systemtap-sdt-dev; Fedora:
 * systemtap-sdt-devel). Without it, or with EPROF_REGIONS_DISABLE defined,
 * the macros compile to nothing.
 */
#ifndef EPROF_REGION_H
#define EPROF_REGION_H

#if !defined(EPROF_REGIONS_DISABLE) && defined(__has_include)
#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#define EPROF_REGION_HAVE_SDT 1
#endif
#endif

#ifdef EPROF_REGION_HAVE_SDT
#define EPROF_REGION_BEGIN(name) STAP_PROBE1(eprof, region__begin, (const char *)(name))
#define EPROF_REGION_END(name) STAP_PROBE1(eprof, region__end, (const char *)(name))
#else
#define EPROF_REGION_BEGIN(name) ((void)(name))
#define EPROF_REGION_END(name) ((void)(name))
#endif

#endif
