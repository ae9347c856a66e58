// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Real-world coverage without root: which files are probed, trampolines, new layouts, demangling, nesting. */
#include <string.h>
#include "check.h"
#include "records/cuda_api.h"
#include "capture/demangle.h"
#include "capture/discover.h"
#include "analysis/summary.h"

static void test_lib_kinds(void)
{
	CHECK(dl_lib_kind_by_name("/usr/local/cuda/lib64/libcudart.so.13") == DL_LIB_RUNTIME, "libcudart");
	CHECK(dl_lib_kind_by_name("/x/site-packages/nvidia/cu13/lib/libcudart-abcd1234.so.13") == DL_LIB_RUNTIME,
	      "renamed wheel runtime");
	CHECK(dl_lib_kind_by_name("/usr/lib/x86_64-linux-gnu/libcuda.so.1") == DL_LIB_DRIVER, "libcuda.so.1");
	CHECK(dl_lib_kind_by_name("/usr/lib/libcuda.so.580.65.06") == DL_LIB_DRIVER, "versioned libcuda");
	CHECK(dl_lib_kind_by_name("/usr/lib/libcudnn.so.9") == DL_LIB_NONE, "libcudnn is not the driver");
	CHECK(dl_lib_kind_by_name("/usr/lib/libcudadebugger.so.1") == DL_LIB_NONE, "libcudadebugger");
	CHECK(dl_lib_kind_by_name("/usr/lib/x86_64-linux-gnu/libc.so.6") == DL_LIB_LOADER, "libc");
	CHECK(dl_lib_kind_by_name("/usr/lib/x86_64-linux-gnu/libcrypt.so.1") == DL_LIB_NONE, "libcrypt");
	CHECK(dl_lib_kind_by_name("/usr/local/cuda/lib64/libnccl.so.2") == DL_LIB_NCCL, "libnccl.so.2");
	CHECK(dl_lib_kind_by_name("/x/site-packages/nvidia/nccl/lib/libnccl.so.2.28.9") == DL_LIB_NCCL, "versioned");
	CHECK(dl_lib_kind_by_name("/usr/lib/libnccl-net.so") == DL_LIB_NONE, "an NCCL network plugin is not NCCL");
}

static void test_trampolines(void)
{
	/* __cudaLaunchKernel in libcudart.so.13 at 0x229a0: push rbp; mov rsp,rbp; pop rbp; jmp 0x74370 */
	const uint8_t tramp[] = { 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xe9, 0xc6, 0x19, 0x05, 0x00 };
	const uint8_t endbr_jmp8[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0xeb, 0xf0 };
	const uint8_t body[] = { 0x55, 0x48, 0x89, 0xe5, 0x41, 0x55, 0x41, 0x54 };
	uint64_t t = 0;

	CHECK(dl_trampoline_target(tramp, sizeof(tramp), 0x229a0, &t), "trampoline not seen");
	CHECK_EQ_U64(t, 0x74370);
	CHECK(dl_trampoline_target(endbr_jmp8, sizeof(endbr_jmp8), 0x1000, &t), "endbr64; jmp rel8");
	CHECK_EQ_U64(t, 0x1000 + 6 - 16);
	CHECK(!dl_trampoline_target(body, sizeof(body), 0x1000, &t), "a real function taken for a trampoline");
	CHECK(!dl_trampoline_target(tramp, 5, 0x1000, &t), "truncated code");
}

static void test_trampolines_aarch64(void)
{
	/* bti c; b .-0x40 (aarch64-linux-gnu-as: 5f 24 03 d5, f0 ff ff 17); b .+0x1234 */
	const uint8_t bti_b[] = { 0x5f, 0x24, 0x03, 0xd5, 0xf0, 0xff, 0xff, 0x17 };
	const uint8_t b_fwd[] = { 0x8d, 0x04, 0x00, 0x14 };
	/* stp x29, x30, [sp, #-16]!; mov x29, sp: a function with a body */
	const uint8_t body[] = { 0xfd, 0x7b, 0xbf, 0xa9, 0xfd, 0x03, 0x00, 0x91 };
	/* bl: a call, not a tail jump */
	const uint8_t bl[] = { 0x8d, 0x04, 0x00, 0x94 };
	uint64_t t = 0;

	CHECK(dl_trampoline_target_aarch64(bti_b, sizeof(bti_b), 0x2000, &t), "bti c; b not seen");
	CHECK_EQ_U64(t, 0x2000 + 4 - 0x40);
	CHECK(dl_trampoline_target_aarch64(b_fwd, sizeof(b_fwd), 0x2000, &t), "b not seen");
	CHECK_EQ_U64(t, 0x2000 + 0x1234);
	CHECK(!dl_trampoline_target_aarch64(body, sizeof(body), 0x2000, &t), "a real function taken for a trampoline");
	CHECK(!dl_trampoline_target_aarch64(bl, sizeof(bl), 0x2000, &t), "a call taken for a trampoline");
	CHECK(!dl_trampoline_target_aarch64(bti_b, 6, 0x2000, &t), "truncated code");
}

/* Encodings from aarch64-linux-gnu-as -march=armv8.5-a, classes as decode-insn.c gives them. */
static void test_a64_probe_step(void)
{
	const struct {
		uint32_t insn;
		enum dl_a64_probe_step want;
		const char *what;
	} c[] = {
		{ 0x14000002, DL_A64_SIMULATED, "b" },		{ 0x94000002, DL_A64_SIMULATED, "bl" },
		{ 0x54000041, DL_A64_SIMULATED, "b.ne" },	{ 0xb4000040, DL_A64_SIMULATED, "cbz x0" },
		{ 0x37180041, DL_A64_SIMULATED, "tbnz w1" },	{ 0x90000000, DL_A64_SIMULATED, "adrp x0" },
		{ 0x10000001, DL_A64_SIMULATED, "adr x1" },	{ 0xd65f03c0, DL_A64_SIMULATED, "ret" },
		{ 0xd61f0200, DL_A64_SIMULATED, "br x16" },	{ 0xd63f0060, DL_A64_SIMULATED, "blr x3" },
		{ 0xd503201f, DL_A64_NOP, "nop" },
		{ 0xa9bf7bfd, DL_A64_STEPPED, "stp x29, x30, [sp, #-16]!" },
		{ 0xd10083ff, DL_A64_STEPPED, "sub sp, sp, #32" },
		{ 0x910003fd, DL_A64_STEPPED, "mov x29, sp" },	{ 0xd503233f, DL_A64_STEPPED, "paciasp" },
		{ 0xd503245f, DL_A64_STEPPED, "bti c" },	{ 0xd503237f, DL_A64_STEPPED, "pacibsp" },
		{ 0xf90007e0, DL_A64_STEPPED, "str x0, [sp, #8]" },
		{ 0xd5033bbf, DL_A64_STEPPED, "dmb ish" },
		{ 0x58000040, DL_A64_REJECTED, "ldr x0, literal" },
		{ 0xc85f7c20, DL_A64_REJECTED, "ldxr x0, [x1]" },
		{ 0xd4000001, DL_A64_REJECTED, "svc #0" },	{ 0xd53bd040, DL_A64_REJECTED, "mrs x0, tpidr_el0" },
		{ 0xd503203f, DL_A64_REJECTED, "yield" },	{ 0xd69f03e0, DL_A64_REJECTED, "eret" },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		CHECK(dl_a64_probe_step(c[i].insn) == c[i].want, c[i].what);
}

static struct dl_cuda_ev ev(enum dl_api_id api)
{
	struct dl_cuda_ev e;

	memset(&e, 0, sizeof(e));
	e.h.size = sizeof(e);
	e.h.kind = DL_EV_CUDA;
	e.h.tgid = 7;
	e.h.tid = 7;
	e.api = api;
	return e;
}

static void test_layouts(void)
{
	struct dl_cuda_ev e = ev(DL_API_CU_LAUNCH);
	struct dl_call c;

	/* cuLaunchKernel(f, 2,3,4, 32,2, [1, 128, stream]) */
	e.arg[0] = 0xf00d;
	e.arg[1] = 2, e.arg[2] = 3, e.arg[3] = 4, e.arg[4] = 32, e.arg[5] = 2;
	e.arg[6] = 1 | (0xffull << 32), e.arg[7] = 128, e.out = 0x5151;
	CHECK(dl_call_decode(&e, &c) == 0, "decode");
	CHECK(c.grid[0] == 2 && c.grid[1] == 3 && c.grid[2] == 4, "cu grid");
	CHECK(c.block[0] == 32 && c.block[1] == 2 && c.block[2] == 1, "cu block %u", c.block[2]);
	CHECK_EQ_U64(c.shmem, 128);
	CHECK_EQ_U64(c.stream, 0x5151);
	CHECK(dl_api_cookie(c.api) & DL_COOKIE_STACK3, "cuLaunchKernel needs three stack slots");
	CHECK(dl_api_cookie(c.api) & DL_COOKIE_DRIVER, "cuLaunchKernel is a driver API");
	CHECK(dl_api_entry_only(c.api), "launches are entry-only");

	/* cudaLaunchKernelExC: the config struct copied into arg[3..7] */
	e = ev(DL_API_LAUNCH_EXC);
	e.arg[1] = 0x401000;
	e.arg[3] = 5 | (6ull << 32);
	e.arg[4] = 7 | (8ull << 32);
	e.arg[5] = 9 | (2ull << 32);
	e.arg[6] = 256;
	e.arg[7] = 0x4321;
	CHECK(dl_call_decode(&e, &c) == 0, "decode");
	CHECK_EQ_U64(c.func, 0x401000);
	CHECK(c.grid[0] == 5 && c.grid[1] == 6 && c.grid[2] == 7, "exc grid");
	CHECK(c.block[0] == 8 && c.block[1] == 9 && c.block[2] == 2, "exc block");
	CHECK_EQ_U64(c.shmem, 256);
	CHECK_EQ_U64(c.stream, 0x4321);
	CHECK(!(dl_api_cookie(c.api) & DL_COOKIE_DRIVER), "cudaLaunchKernelExC is a runtime API");

	/* __cudaGetKernel(&handle, hostFun): handle read at return */
	e = ev(DL_API_GET_KERNEL_STUB);
	e.arg[0] = 0x7ffd0000;
	e.arg[1] = 0x402000;
	e.out = 0x55aa0000;
	CHECK(dl_call_decode(&e, &c) == 0, "decode");
	CHECK_EQ_U64(c.func, 0x55aa0000);
	CHECK_EQ_U64(c.host, 0x402000);
	CHECK(dl_api_cookie(c.api) & DL_COOKIE_OUTPTR, "handle read at return");

	e = ev(DL_API_CU_DTOH_ASYNC_V2);
	e.arg[0] = 0x1000, e.arg[1] = 0x700000000ull, e.arg[2] = 77, e.arg[3] = 0x5151;
	CHECK(dl_call_decode(&e, &c) == 0, "decode");
	CHECK(c.dir == DL_DIR_D2H && c.bytes == 77 && c.async && c.stream == 0x5151, "cuMemcpyDtoHAsync");
	CHECK(dl_api_by_name("dlopen")->cls == DL_CLS_LOADER, "dlopen is the loader");
	CHECK(dl_api_cookie(dl_api_by_name("dlopen")) & DL_COOKIE_LOADER, "loader cookie");
}

static void test_driver_inside_runtime(void)
{
	struct dl_summary s;
	struct dl_stream st = {};
	struct dl_cuda_ev outer = ev(DL_API_MEMCPY), inner = ev(DL_API_CU_HTOD_V2), direct = ev(DL_API_CU_HTOD_V2);
	struct dl_proc *p;

	dl_summary_init(&s);
	dl_stream_add(&st, dl_summary_sink, &s);
	outer.arg[2] = inner.arg[2] = 1000, outer.arg[3] = 1;
	inner.depth = 1;
	direct.arg[2] = 500;
	dl_stream_emit(&st, &inner, sizeof(inner));
	dl_stream_emit(&st, &outer, sizeof(outer));
	dl_stream_emit(&st, &direct, sizeof(direct));
	p = dl_summary_find(&s, 7);
	CHECK(p, "process");
	CHECK_EQ_U64(p->calls[DL_API_MEMCPY].count, 1);
	CHECK_EQ_U64(p->calls[DL_API_CU_HTOD_V2].count, 1);
	CHECK_EQ_U64(p->driver_inner, 1);
	CHECK_EQ_U64(p->copies[DL_DIR_H2D].count, 2);
	CHECK_EQ_U64(p->copies[DL_DIR_H2D].bytes, 1500);
	dl_summary_free(&s);
	dl_stream_free(&st);
}

static void test_demangle(void)
{
	char buf[256];

	CHECK(!dl_demangle("plain_c_name", buf, sizeof(buf)) && !strcmp(buf, "plain_c_name"), "C name kept");
	if (!dl_demangle_available()) {
		CHECK(!dl_demangle("_Z5plainPi", buf, sizeof(buf)) && !strcmp(buf, "_Z5plainPi"), "kept mangled");
		return;
	}
	CHECK(dl_demangle("_ZN2nn4reluEPfi", buf, sizeof(buf)) && !strcmp(buf, "nn::relu(float*, int)"), "%s", buf);
	CHECK(dl_demangle("_Z5scaleIfEvPT_S0_", buf, sizeof(buf)) && !strcmp(buf, "void scale<float>(float*, float)"),
	      "%s", buf);
	CHECK(!dl_demangle("_Znot-valid", buf, sizeof(buf)) && !strcmp(buf, "_Znot-valid"), "invalid kept");
	dl_demangle("_ZN2nn4reluEPfi", buf, 6);
	CHECK(!strcmp(buf, "nn::r"), "truncated safely: %s", buf);
}

int main(void)
{
	test_lib_kinds();
	test_trampolines();
	test_trampolines_aarch64();
	test_a64_probe_step();
	test_layouts();
	test_driver_inside_runtime();
	test_demangle();
	return check_report("test_coverage");
}
