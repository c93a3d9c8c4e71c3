// SPDX-License-Identifier: MIT
/* output/units: durations and byte counts as the report, regions and diff print them. */
#include <math.h>

#include "test_util.h"
#include "output/units.h"

static const char *ns_str(uint64_t ns)
{
	static char b[32];

	fmt_ns(b, sizeof(b), ns);
	return b;
}

static const char *bytes_str(double v)
{
	static char b[32];

	fmt_bytes(b, sizeof(b), v);
	return b;
}

static void test_durations(void **state)
{
	char b[32];

	assert_string_equal(ns_str(0), "0 ns");
	assert_string_equal(ns_str(999), "999 ns");
	assert_string_equal(ns_str(1000), "1.0 us");
	assert_string_equal(ns_str(7849), "7.8 us");
	assert_string_equal(ns_str(4560000), "4.56 ms");
	assert_string_equal(ns_str(1234567890), "1.23 s");
	assert_string_equal(ns_str(UINT64_MAX), "18446744073.71 s");
	/* the regions table: a mean with a fraction, two decimals in microseconds */
	assert_string_equal(fmt_dur(b, sizeof(b), 12.6, 2), "13 ns");
	assert_string_equal(fmt_dur(b, sizeof(b), 999.4, 2), "999 ns");
	assert_string_equal(fmt_dur(b, sizeof(b), 7849.0, 2), "7.85 us");
	assert_string_equal(fmt_dur(b, sizeof(b), 12345678.0, 2), "12.35 ms");
	assert_string_equal(fmt_dur(b, sizeof(b), 3e9, 2), "3.00 s");
	/* cut to the buffer, NUL-terminated */
	assert_string_equal(fmt_dur(b, 4, 3e9, 2), "3.0");
}

static void test_bytes(void **state)
{
	char b[32];

	assert_string_equal(bytes_str(0), "0 B");
	assert_string_equal(bytes_str(1023), "1023 B");
	assert_string_equal(bytes_str(1024), "1.00 KiB");
	assert_string_equal(bytes_str(1536), "1.50 KiB");
	assert_string_equal(bytes_str(1048576.0 * 2), "2.00 MiB");
	assert_string_equal(bytes_str(1073741824.0 * 3), "3.00 GiB");
	assert_string_equal(bytes_str(1099511627776.0 * 5), "5.00 TiB");
	assert_string_equal(bytes_str(1099511627776.0 * 2048), "2048.00 TiB");
	/* a change that shrank: scaled by its size, with its sign */
	assert_string_equal(bytes_str(-1536), "-1.50 KiB");
	assert_string_equal(bytes_str(-100), "-100 B");
	/* the diff's tables: one decimal in KiB, two above */
	assert_string_equal(fmt_bytes_kib(b, sizeof(b), 1536, 1), "1.5 KiB");
	assert_string_equal(fmt_bytes_kib(b, sizeof(b), -150323, 1), "-146.8 KiB");
	assert_string_equal(fmt_bytes_kib(b, sizeof(b), 1289748, 1), "1.23 MiB");
	assert_string_equal(fmt_bytes_kib(b, sizeof(b), 1048575, 1), "1024.0 KiB");
}

static void test_counts(void **state)
{
	char b[32];

	fmt_count(b, sizeof(b), 0);
	assert_string_equal(b, "0");
	fmt_count(b, sizeof(b), 1234567);
	assert_string_equal(b, "1,234,567");
	fmt_count(b, sizeof(b), UINT64_MAX);
	assert_string_equal(b, "18,446,744,073,709,551,615");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_counts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
