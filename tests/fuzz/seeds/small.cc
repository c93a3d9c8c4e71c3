// SPDX-License-Identifier: MIT
// Seed ELF for the symbolizer: C++ names (namespaces, templates, operators, lambdas).
#include <cstdio>
#include <vector>

namespace ns {
template <typename T> struct Box {
	T v;
	__attribute__((noinline)) T get() const { return v; }
	bool operator<(const Box &o) const { return v < o.v; }
};

__attribute__((noinline)) int sum(const std::vector<Box<int>> &xs)
{
	int s = 0;
	for (const auto &x : xs)
		s += [&](int k) { return k * 2; }(x.get());
	return s;
}
} // namespace ns

int main()
{
	std::vector<ns::Box<int>> xs{ { 1 }, { 2 }, { 3 } };
	std::printf("%d %d\n", ns::sum(xs), xs[0] < xs[1]);
	return 0;
}
