// SPDX-License-Identifier: MIT
// A program that spends its time in a big library (libLLVM-14, 110 MB, a 9 MB .eh_frame):
// builds, verifies and prints small IR modules through LLVM's C API for SECONDS seconds.
// What recording it costs the recorder shows how unwind tables scale with the library.
//   gcc -O2 tools/bench/llvm_loop.c -ldl -o /tmp/llvm_loop
//   /usr/bin/time -f '%U %S' eprof record -v -F 999 -o /tmp/l.data -- /tmp/llvm_loop 5
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define LIB "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"

typedef void *(*ctx_create_fn)(void);
typedef void *(*mod_create_fn)(const char *, void *);
typedef void *(*int_type_fn)(void *, unsigned);
typedef void *(*fn_type_fn)(void *, void **, unsigned, int);
typedef void *(*add_fn_fn)(void *, const char *, void *);
typedef void *(*append_bb_fn)(void *, void *, const char *);
typedef void *(*builder_fn)(void *);
typedef void (*position_fn)(void *, void *);
typedef void *(*get_param_fn)(void *, unsigned);
typedef void *(*binop_fn)(void *, void *, void *, const char *);
typedef void *(*ret_fn)(void *, void *);
typedef char *(*print_fn)(void *);
typedef void (*dispose_fn)(void *);


int main(int argc, char **argv)
{
	void *h = dlopen(LIB, RTLD_NOW);
	double secs = argc > 1 ? atof(argv[1]) : 5;
	struct timespec t0, t;
	unsigned long n = 0;

	if (!h) {
		fprintf(stderr, "llvm_loop: %s\n", dlerror());
		return 1;
	}
	ctx_create_fn ctx_create = (ctx_create_fn)dlsym(h, "LLVMContextCreate");
	mod_create_fn mod_create = (mod_create_fn)dlsym(h, "LLVMModuleCreateWithNameInContext");
	int_type_fn int_type = (int_type_fn)dlsym(h, "LLVMIntTypeInContext");
	fn_type_fn fn_type = (fn_type_fn)dlsym(h, "LLVMFunctionType");
	add_fn_fn add_fn = (add_fn_fn)dlsym(h, "LLVMAddFunction");
	append_bb_fn append_bb = (append_bb_fn)dlsym(h, "LLVMAppendBasicBlockInContext");
	builder_fn builder = (builder_fn)dlsym(h, "LLVMCreateBuilderInContext");
	position_fn position = (position_fn)dlsym(h, "LLVMPositionBuilderAtEnd");
	get_param_fn get_param = (get_param_fn)dlsym(h, "LLVMGetParam");
	binop_fn add = (binop_fn)dlsym(h, "LLVMBuildAdd");
	binop_fn mul = (binop_fn)dlsym(h, "LLVMBuildMul");
	ret_fn ret = (ret_fn)dlsym(h, "LLVMBuildRet");
	print_fn print = (print_fn)dlsym(h, "LLVMPrintModuleToString");
	dispose_fn free_msg = (dispose_fn)dlsym(h, "LLVMDisposeMessage");
	dispose_fn free_builder = (dispose_fn)dlsym(h, "LLVMDisposeBuilder");
	dispose_fn free_mod = (dispose_fn)dlsym(h, "LLVMDisposeModule");
	dispose_fn free_ctx = (dispose_fn)dlsym(h, "LLVMContextDispose");

	if (!ctx_create || !mod_create || !print || !free_ctx || !mul) {
		fprintf(stderr, "llvm_loop: missing symbols\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		void *ctx = ctx_create(), *m = mod_create("m", ctx), *i64 = int_type(ctx, 64);
		void *params[2] = { i64, i64 }, *b = builder(ctx);
		char name[32];

		for (int f = 0; f < 50; f++) {
			void *fn, *x;

			snprintf(name, sizeof(name), "f%d", f);
			fn = add_fn(m, name, fn_type(i64, params, 2, 0));
			position(b, append_bb(ctx, fn, "entry"));
			x = add(b, get_param(fn, 0), get_param(fn, 1), "s");
			ret(b, mul(b, x, x, "p"));
		}
		free_msg(print(m));
		free_builder(b);
		free_mod(m);
		free_ctx(ctx);
		n++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	printf("%lu modules\n", n);
	return 0;
}
