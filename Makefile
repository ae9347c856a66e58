# dlbpf — build, test and demo. `make` builds ./dlbpf; `make test` installs
# dependencies, builds and runs every test; `make demo` traces a bundled workload.
OUTPUT := .output
CLANG ?= clang
BPFTOOL ?= bpftool
CC ?= cc
CUDA_HOME ?= /usr/local/cuda
ARCH := x86

CFLAGS_COMMON := -std=gnu11 -g -Wall -Wextra -Werror -Iinclude -Iuser -I$(OUTPUT)
CFLAGS ?= -O2
USER_CFLAGS := $(CFLAGS_COMMON) $(CFLAGS)
LIBS := $(shell pkg-config --libs libbpf libelf zlib 2>/dev/null || echo -lbpf -lelf -lz) -lm
TEST_CFLAGS := -std=gnu11 -g -O2 -Wall -Wextra -Werror
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# maps.bpf.o first: libbpf 1.4's linker resolves extern maps only after their definition.
BPF_SRCS := bpf/maps.bpf.c $(filter-out bpf/maps.bpf.c,$(wildcard bpf/*.bpf.c))
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_HDRS := $(wildcard bpf/*.bpf.h) bpf/vmlinux.h $(wildcard include/dlbpf/*.h)

USER_SRCS := $(wildcard user/*.c)
USER_HDRS := $(wildcard user/*.h) user/cuda_api.def include/dlbpf/events.h
# Everything but main.c and the BPF-facing parts: what unit tests link against.
PURE_SRCS := user/stream.c user/cuda_api.c user/procfs.c user/elfsym.c user/summary.c user/json.c \
	user/report.c user/report_diag.c user/log.c user/breakdown.c user/steps.c user/correlate.c \
	user/diagnose.c user/record.c user/correlate_learn.c \
	user/discover.c user/demangle.c user/pcie.c \
	user/pbwriter.c user/perfetto.c user/trace.c user/trace_json.c

.PHONY: all test demo deps clean test-unit test-integration bench bench-run
.DELETE_ON_ERROR:

all: dlbpf

$(OUTPUT) $(OUTPUT)/bpf $(OUTPUT)/tests:
	mkdir -p $@

$(OUTPUT)/bpf/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) | $(OUTPUT)/bpf
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Iinclude -Ibpf -Wall -Werror -c $< -o $@

$(OUTPUT)/dlbpf.bpf.o: $(BPF_OBJS)
	$(BPFTOOL) gen object $@ $^

$(OUTPUT)/dlbpf.skel.h: $(OUTPUT)/dlbpf.bpf.o
	$(BPFTOOL) gen skeleton $< name dlbpf > $@

dlbpf: $(USER_SRCS) $(USER_HDRS) $(OUTPUT)/dlbpf.skel.h
	$(CC) $(USER_CFLAGS) $(USER_SRCS) $(LIBS) -pthread -o $@

# --- tests -----------------------------------------------------------------
-include tests/gpusim/gpusim.mk
-include tests/workloads/train.mk
include tests/tests.mk
include tools/bench/bench.mk

deps:
	@tools/setup-deps.sh

test: deps
	$(MAKE) --no-print-directory test-all

demo: deps
	$(MAKE) --no-print-directory demo-run

clean:
	rm -rf $(OUTPUT) dlbpf
