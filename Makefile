# dlbpf — build, test and demo. `make` builds ./dlbpf; `make test` installs
# dependencies, builds and runs every test; `make demo` traces a bundled workload.
OUTPUT := .output
# Plain `make` builds ./dlbpf: the stage libraries' rules below would otherwise come first.
.DEFAULT_GOAL := all
CLANG ?= clang
BPFTOOL ?= bpftool
CC ?= cc
CUDA_HOME ?= /usr/local/cuda
# The target architecture, in the kernel's names (x86, arm64): the machine's unless given.
# A cross build names the toolchain too: make ARCH=arm64 CROSS=aarch64-linux-gnu-
# It builds into .output-ARCH and writes .output-ARCH/dlbpf (./dlbpf stays the machine's).
ARCH ?= $(shell uname -m | sed -e 's/^x86_64$$/x86/' -e 's/^aarch64$$/arm64/')
ifeq ($(filter x86 arm64,$(ARCH)),)
$(error ARCH=$(ARCH): dlbpf builds for x86 and arm64 (bpf/arch.bpf.h))
endif
CROSS ?=
AR ?= ar
PKG_CONFIG ?= pkg-config
ifneq ($(CROSS),)
CC := $(CROSS)gcc
AR := $(CROSS)ar
# Debian's multiarch libraries of the target (tools/setup-deps.sh installs arm64's).
PKG_CONFIG := PKG_CONFIG_LIBDIR=/usr/lib/$(patsubst %-,%,$(CROSS))/pkgconfig:/usr/share/pkgconfig pkg-config
# Headers from the multiarch tree first: the cross toolchain's own (/usr/TRIPLET/include) hold
# an older kernel's UAPI, without what the collector names (BPF_TRACE_UPROBE_MULTI).
CROSS_CFLAGS := -isystem /usr/include/$(patsubst %-,%,$(CROSS)) -isystem /usr/include
OUTPUT := .output-$(ARCH)
DLBPF := $(OUTPUT)/dlbpf
else
DLBPF := dlbpf
endif
# The libcudart the workloads link: the toolkit's, or, cross-built, the simulator's
# (no toolkit of the target's architecture is installed).
CUDART_DIR = $(if $(CROSS),$(OUTPUT)/gpusim,$(CUDA_HOME)/lib64)

CFLAGS_COMMON := -std=gnu11 -g -Wall -Wextra -Werror -Iinclude -Iuser -I$(OUTPUT) $(CROSS_CFLAGS)
CFLAGS ?= -O2
USER_CFLAGS := $(CFLAGS_COMMON) $(CFLAGS)
LIBS := $(shell $(PKG_CONFIG) --libs libbpf libelf zlib 2>/dev/null || echo -lbpf -lelf -lz) -lm
TEST_CFLAGS := -std=gnu11 -g -O2 -Wall -Wextra -Werror $(CROSS_CFLAGS)
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# maps.bpf.o first: libbpf 1.4's linker resolves extern maps only after their definition.
BPF_SRCS := bpf/maps.bpf.c $(filter-out bpf/maps.bpf.c,$(wildcard bpf/*.bpf.c))
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/bpf/%.bpf.o,$(BPF_SRCS))
# One vmlinux.h per architecture, from that architecture's kernel BTF (tools/gen-vmlinux-h).
VMLINUX_H := bpf/vmlinux/$(ARCH)/vmlinux.h
BPF_HDRS := $(wildcard bpf/*.bpf.h) $(VMLINUX_H) $(wildcard include/dlbpf/*.h)

# The collector is built per object (with dependency files) into one static library per
# pipeline stage; dlbpf and the unit tests link the libraries. Link order follows the
# include rule (user/README.md): capture -> output -> analysis -> records -> base.
STAGES := capture output analysis records
# The wiring: main (parse, pick a mode, run it), the session that assembles the pipeline, the live
# run, the multi-rank merger and what they own; the rest of user/*.c is the base every stage may use.
WIRING := main cli session live multirank flightrec
BASE_SRCS := $(filter-out $(patsubst %,user/%.c,$(WIRING)),$(wildcard user/*.c))
stage_srcs = $(wildcard user/$(1)/*.c)
OBJ := $(OUTPUT)/obj
SAN_OBJ := $(OUTPUT)/obj-san
stage_lib = $(OUTPUT)/lib/libdl_$(1).a
san_lib = $(OUTPUT)/lib-san/libdl_$(1).a
LIB_NAMES := $(STAGES) base
STAGE_LIBS := $(foreach s,$(LIB_NAMES),$(call stage_lib,$(s)))
MAIN_OBJS := $(patsubst %,$(OBJ)/%.o,$(WIRING))
# Pure stages for unit tests (no libbpf): output, analysis, records, base, and the
# parts of capture that only read files or compute (the library pulls in what a test uses;
# duty.c's one call into the tracer is the unit test's to provide).
SAN_CAPTURE_SRCS := user/capture/procfs.c user/capture/elfsym.c user/capture/discover.c user/capture/drainpace.c \
	user/capture/demangle.c user/capture/pcie.c user/capture/tfile.c user/capture/duty.c user/capture/budget_plan.c \
	user/capture/symbolize.c user/capture/pyobj.c user/capture/pyversions.c user/capture/glibctsd.c \
	user/capture/seccomp_hazard.c user/capture/probe_sites.c user/capture/cgroup.c

define stage_rules
$(call stage_lib,$(1)): $(patsubst user/%.c,$(OBJ)/%.o,$(2)) | $(OUTPUT)/lib
	rm -f $$@ && $(AR) rcs $$@ $$^
$(call san_lib,$(1)): $(patsubst user/%.c,$(SAN_OBJ)/%.o,$(2)) | $(OUTPUT)/lib-san
	rm -f $$@ && $(AR) rcs $$@ $$^
endef
$(foreach s,$(STAGES),$(eval $(call stage_rules,$(s),$(call stage_srcs,$(s)))))
$(eval $(call stage_rules,base,$(BASE_SRCS)))
$(eval $(call stage_rules,capture-pure,$(SAN_CAPTURE_SRCS)))
SAN_LIBS := $(call san_lib,output) $(call san_lib,analysis) $(call san_lib,capture-pure) \
	$(call san_lib,records) $(call san_lib,base)

$(OUTPUT)/lib $(OUTPUT)/lib-san:
	mkdir -p $@

# capture/ includes the skeleton; the other stages never do (tests/unit/test_layout.py).
$(OBJ)/capture/%.o: user/capture/%.c | $(OUTPUT)/dlbpf.skel.h
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -MMD -MP -c $< -o $@
$(OBJ)/%.o: user/%.c
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -MMD -MP -c $< -o $@
$(SAN_OBJ)/%.o: user/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -O1 $(SAN_FLAGS) -MMD -MP -c $< -o $@
$(MAIN_OBJS): | $(OUTPUT)/dlbpf.skel.h

-include $(shell find $(OBJ) $(SAN_OBJ) -name '*.d' 2>/dev/null)

.PHONY: all test test-fresh demo deps deps-demo clean test-unit test-integration test-asan bench bench-run install uninstall
.DELETE_ON_ERROR:

all: $(DLBPF)

$(OUTPUT) $(OUTPUT)/bpf $(OUTPUT)/tests:
	mkdir -p $@

$(OUTPUT)/bpf/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) | $(OUTPUT)/bpf
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Iinclude -Ibpf -Ibpf/vmlinux/$(ARCH) -Wall -Werror -c $< -o $@

$(OUTPUT)/dlbpf.bpf.o: $(BPF_OBJS)
	$(BPFTOOL) gen object $@ $^

$(OUTPUT)/dlbpf.skel.h: $(OUTPUT)/dlbpf.bpf.o
	$(BPFTOOL) gen skeleton $< name dlbpf > $@

$(DLBPF): $(MAIN_OBJS) $(STAGE_LIBS)
	$(CC) $(USER_CFLAGS) $(MAIN_OBJS) $(STAGE_LIBS) $(LIBS) -pthread -o $@

# The whole collector under the sanitizers, for the integration suites (make test-asan).
ASAN_DLBPF := $(OUTPUT)/dlbpf-asan
$(ASAN_DLBPF): $(wildcard user/*.c user/*/*.c user/*.h user/*/*.h) $(OUTPUT)/dlbpf.skel.h
	$(CC) $(CFLAGS_COMMON) -O1 $(SAN_FLAGS) $(filter %.c,$^) $(LIBS) -pthread -o $@

# The BPF object is inside the binary (the skeleton embeds it): these three files are all.
# bin, not sbin: report needs no root, and a user's PATH often lacks sbin.
PREFIX ?= /usr/local
DESTDIR ?=
INSTALLED_BIN := $(DESTDIR)$(PREFIX)/bin/dlbpf
INSTALLED_MAN := $(DESTDIR)$(PREFIX)/share/man/man8/dlbpf.8
INSTALLED_COMPLETION := $(DESTDIR)$(PREFIX)/share/bash-completion/completions/dlbpf

install: dlbpf
	install -D -m 0755 dlbpf $(INSTALLED_BIN)
	install -D -m 0644 doc/dlbpf.8 $(INSTALLED_MAN)
	install -D -m 0644 tools/dlbpf.bash-completion $(INSTALLED_COMPLETION)

uninstall:
	rm -f $(INSTALLED_BIN) $(INSTALLED_MAN) $(INSTALLED_COMPLETION)

# --- make dist: what a fleet installs ----------------------------------------
# dist/dlbpf-VERSION-MACHINE-linux: one static executable per architecture (the BPF objects
# are inside through the skeleton), linked against Debian's own libbpf.a, libelf.a, libz.a and
# libzstd.a (what libelf.a needs); dist/dlbpf_VERSION_DEBARCH.deb around it (tools/dist/mkdeb),
# checked by lintian; dist/SHA256SUMS. x86_64 is built natively, aarch64 with the cross
# toolchain tools/setup-deps.sh installs; each architecture's objects are its own output's.
VERSION := $(shell sed -n 's/^\#define DLBPF_VERSION "\(.*\)"/\1/p' user/version.h)
DIST_DIR := dist
DIST_MACHINE := $(if $(filter arm64,$(ARCH)),aarch64,x86_64)
DIST_DEBARCH := $(if $(filter arm64,$(ARCH)),arm64,amd64)
DIST_EXE := $(DIST_DIR)/dlbpf-$(VERSION)-$(DIST_MACHINE)-linux
DIST_DEB := $(DIST_DIR)/dlbpf_$(VERSION)_$(DIST_DEBARCH).deb
STATIC_LIBS := $(shell $(PKG_CONFIG) --static --libs libbpf libelf zlib 2>/dev/null || echo -lbpf -lelf -lz -lzstd) -lm
# The cross toolchain of the architecture that is not this machine's.
DIST_OTHER := $(if $(filter x86_64,$(shell uname -m)),ARCH=arm64 CROSS=aarch64-linux-gnu-,ARCH=x86 CROSS=x86_64-linux-gnu-)

.PHONY: dist dist-arch dist-clean
dist: deps
	$(MAKE) --no-print-directory dist-arch
	$(MAKE) --no-print-directory $(DIST_OTHER) dist-arch
	cd $(DIST_DIR) && sha256sum dlbpf-$(VERSION)-*-linux dlbpf_$(VERSION)_*.deb > SHA256SUMS
	@cat $(DIST_DIR)/SHA256SUMS

# One architecture's executable and package (the one ARCH names).
dist-arch: $(DIST_EXE) $(DIST_DEB)

$(DIST_EXE): $(MAIN_OBJS) $(STAGE_LIBS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) -static $(MAIN_OBJS) $(STAGE_LIBS) $(STATIC_LIBS) -pthread -o $@.tmp
	$(CROSS)strip --strip-unneeded --remove-section=.comment --remove-section=.note $@.tmp
	mv $@.tmp $@

$(DIST_DEB): $(DIST_EXE) tools/dist/mkdeb tools/dist/copyright doc/dlbpf.8 tools/dlbpf.bash-completion
	tools/dist/mkdeb $(VERSION) $(DIST_DEBARCH) $(DIST_EXE) $@
	lintian --fail-on error,warning $@

dist-clean:
	rm -rf $(DIST_DIR)

# --- tests -----------------------------------------------------------------
-include tests/gpusim/gpusim.mk
-include tests/workloads/train.mk
include tests/tests.mk
include tools/bench/bench.mk
# The kernel matrix (tools/vm): what its guests run, built here first.
# (and the release executable: the smoke runs it in a root that holds nothing else).
VM_PREREQS := $(WORKLOADS) $(GPUSIM_LIB) $(GPUSIM_NCCL) $(GPUSIM_DRIVER) $(TRAIN) $(COVERAGE_BINS) $(DIST_EXE)
include tools/vm/vm.mk

# What the tests need (everything), and what building dlbpf and running the demo need.
deps:
	@tools/setup-deps.sh test
deps-demo:
	@tools/setup-deps.sh demo

# Every suite on this kernel, then the kernel matrix's smoke on each kernel, then the arm64
# smoke on Debian's arm64 6.12 (tools/vm/README.md; 6.1 is make vmtest-arm64-smoke's), then
# the README's two commands in bare Debian 12 and 13 roots (DLBPF_TEST_FRESH=0 skips them).
test: deps
	$(MAKE) --no-print-directory test-all
	$(MAKE) --no-print-directory vmtest-smoke-run
	$(MAKE) --no-print-directory vmtest-arm64-smoke-run VM_ARM64_KERNELS=arm64-6.12
	$(if $(filter 0,$(DLBPF_TEST_FRESH)),@echo "test-fresh skipped (DLBPF_TEST_FRESH=0)",$(MAKE) --no-print-directory test-fresh)

# tools/fresh-root: setup-deps demo, make demo and setup-deps test in bare bookworm and trixie roots.
FRESH_RELEASES ?= bookworm trixie
test-fresh: deps
	@tools/fresh-root $(FRESH_RELEASES)

demo: deps-demo
	$(MAKE) --no-print-directory demo-run

clean:
	rm -rf $(OUTPUT) dlbpf
