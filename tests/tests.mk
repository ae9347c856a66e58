# Test binaries and the test and demo runs (included by the top-level Makefile).
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUTPUT)/unit/%,$(UNIT_SRCS))
WORKLOAD_CFLAGS := $(TEST_CFLAGS) -I$(CUDA_HOME)/include
CUDART_LINK = -L$(CUDART_DIR) -l:libcudart.so.13 -Wl,-rpath,$(CUDART_DIR)
WORKLOADS := $(OUTPUT)/workloads/cuda_calls $(OUTPUT)/workloads/ioread $(OUTPUT)/workloads/spinsleep \
	$(OUTPUT)/workloads/ratecalls $(OUTPUT)/workloads/hostile_names
WORKLOADS += $(OUTPUT)/workloads/threads $(OUTPUT)/workloads/readdev $(OUTPUT)/workloads/fileread \
	$(OUTPUT)/workloads/callsites $(OUTPUT)/workloads/nccl_calls $(OUTPUT)/workloads/hostile_files
HANDSHAKE := tests/workloads/handshake.h
GPUSIM_LIB := $(OUTPUT)/gpusim/libcudart.so.13

$(OUTPUT)/unit $(OUTPUT)/workloads:
	mkdir -p $@

# Unit tests run under AddressSanitizer and UndefinedBehaviorSanitizer.
$(OUTPUT)/unit/test_%: tests/unit/test_%.c tests/unit/check.h $(SAN_LIBS) | $(OUTPUT)/unit
	$(CC) $(CFLAGS_COMMON) -O1 $(SAN_FLAGS) -MMD -MP $< $(SAN_LIBS) -lbpf -lelf -lz -lm -pthread -o $@
-include $(wildcard $(OUTPUT)/unit/*.d)

$(OUTPUT)/workloads/cuda_calls: tests/workloads/cuda_calls.c $(HANDSHAKE) | $(OUTPUT)/workloads $(if $(CROSS),$(GPUSIM_LIB))
	$(CC) $(WORKLOAD_CFLAGS) $< $(CUDART_LINK) -o $@

# One function called N times under a uprobe, each result checked (arm64 probe safety).
WORKLOADS += $(OUTPUT)/workloads/probe_stress
$(OUTPUT)/workloads/probe_stress: tests/workloads/probe_stress.c | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) -fno-omit-frame-pointer $< -o $@

# CUDA calls under a seccomp filter shaped like Docker's default profile (which lacks uretprobe, 335).
WORKLOADS += $(OUTPUT)/workloads/seccomp_cuda
$(OUTPUT)/workloads/seccomp_cuda: tests/workloads/seccomp_cuda.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(WORKLOAD_CFLAGS) $< $(CUDART_LINK) -o $@

$(OUTPUT)/workloads/nccl_calls: tests/workloads/nccl_calls.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(WORKLOAD_CFLAGS) $< -L$(CUDA_HOME)/lib64 -l:libnccl.so.2 -Wl,-rpath,$(CUDA_HOME)/lib64 -o $@

# Frame pointers and no inlining, so each named function's calls return into it.
$(OUTPUT)/workloads/callsites: tests/workloads/callsites.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(WORKLOAD_CFLAGS) -fno-omit-frame-pointer -fno-optimize-sibling-calls $< $(CUDART_LINK) -o $@

$(OUTPUT)/workloads/ratecalls: tests/workloads/ratecalls.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(WORKLOAD_CFLAGS) -pthread $< $(CUDART_LINK) -o $@

$(OUTPUT)/workloads/hostile_names: tests/workloads/hostile_names.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(WORKLOAD_CFLAGS) -pthread $< $(CUDART_LINK) -o $@

$(OUTPUT)/workloads/ioread: tests/workloads/ioread.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) $< -o $@

$(OUTPUT)/workloads/spinsleep: tests/workloads/spinsleep.c | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) -pthread $< -o $@

$(OUTPUT)/workloads/threads: tests/workloads/threads.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) -pthread $< -o $@

$(OUTPUT)/workloads/readdev: tests/workloads/readdev.c | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) $< -o $@

$(OUTPUT)/workloads/fileread: tests/workloads/fileread.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) $< -o $@

$(OUTPUT)/workloads/hostile_files: tests/workloads/hostile_files.c | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) $< -o $@

# A shared-libpython interpreter (tests/workloads/pyshared.c) from the distribution's libpython3.X.so
# (tools/setup-deps.sh installs it), as the soname its python3 names.
PYSHARED_LIB := $(shell /usr/bin/python3 -c 'import sysconfig as s; print(s.get_config_var("LIBDIR") + "/" + s.get_config_var("INSTSONAME"))' 2>/dev/null)
WORKLOADS += $(OUTPUT)/workloads/pyshared/python3
$(OUTPUT)/workloads/pyshared/python3: tests/workloads/pyshared.c | $(OUTPUT)/workloads
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< $(PYSHARED_LIB) -o $@

# The fault matrix's hangs and holds: a path replaced under a mapped runtime, a
# dlopen loop, a command held by a linked library's constructor, many CUDA processes.
HANG_WORKLOADS := $(OUTPUT)/workloads/overmount $(OUTPUT)/workloads/dlopen_loop $(OUTPUT)/workloads/holdcmd \
	$(OUTPUT)/workloads/cudafleet
WORKLOADS += $(HANG_WORKLOADS)

# A fork storm of short CUDA-using children, each timing its own start (the fork-storm test).
WORKLOADS += $(OUTPUT)/workloads/forkstorm
$(OUTPUT)/workloads/forkstorm: tests/workloads/forkstorm.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(WORKLOAD_CFLAGS) $< $(CUDART_LINK) -o $@

$(OUTPUT)/workloads/overmount: tests/workloads/overmount.c | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) $< -o $@

$(OUTPUT)/workloads/dlopen_loop: tests/workloads/dlopen_loop.c $(HANDSHAKE) | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) -pthread $< -o $@

$(OUTPUT)/workloads/cudafleet: tests/workloads/cudafleet.c | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) $< -o $@

$(OUTPUT)/workloads/libholdctor.so: tests/workloads/holdctor.c | $(OUTPUT)/workloads
	$(CC) $(TEST_CFLAGS) -fPIC -shared $< -o $@

$(OUTPUT)/workloads/holdcmd: tests/workloads/holdcmd.c $(OUTPUT)/workloads/libholdctor.so
	$(CC) $(TEST_CFLAGS) $< -L$(OUTPUT)/workloads -lholdctor -Wl,-rpath,$(abspath $(OUTPUT)/workloads) -o $@

GPUSIM_TEST := $(OUTPUT)/tests/test_gpusim
GPUSIM_ASAN_TEST := $(OUTPUT)/tests/test_gpusim-asan
GPUSIM_ASAN_LIB := $(OUTPUT)/gpusim-asan/libcudart.so.13
TRAIN := $(OUTPUT)/workloads/train
SIM_TESTS := "env LD_LIBRARY_PATH=$(OUTPUT)/gpusim $(GPUSIM_TEST)" \
	"env ASAN_OPTIONS=detect_leaks=1 LD_LIBRARY_PATH=$(OUTPUT)/gpusim-asan $(GPUSIM_ASAN_TEST)" \
	"tests/workloads/check-scenarios.sh $(TRAIN) $(OUTPUT)/gpusim $(OUTPUT)/truth"
LAYOUT_TEST := python3 tests/unit/test_layout.py
MANPAGE_TEST := python3 tests/unit/test_manpage.py
DOCS_TEST := python3 tests/unit/test_docs.py
INTEGRATION := python3 tests/integration/test_dlbpf.py
SCENARIOS := python3 tests/integration/test_scenarios.py
FILES_TESTS := python3 tests/integration/test_files.py
NET_TESTS := python3 tests/integration/test_net.py
include tests/workloads/coverage.mk
include tests/workloads/paths.mk
include tests/fuzz/fuzz.mk
TRACE_TESTS := python3 tests/integration/test_trace.py
MODES_TESTS := python3 tests/integration/test_modes.py
BUDGET_TESTS := python3 tests/integration/test_budget.py
FAULT_TESTS := python3 tests/integration/test_faults.py
FLIGHT_TESTS := python3 tests/integration/test_flight.py
HTML_TESTS := python3 tests/integration/test_html.py
METRICS_TESTS := python3 tests/integration/test_metrics.py
RECORDING_TESTS := python3 tests/integration/test_recording.py
CALLSITE_TESTS := python3 tests/integration/test_callsites.py
PYFRAME_TESTS := python3 tests/integration/test_pyframes.py
LINEAGE_TESTS := python3 tests/integration/test_lineage.py
RANKS_TESTS := python3 tests/integration/test_ranks.py
STEPLEARN_TESTS := python3 tests/integration/test_steplearn.py
KERNEL_TESTS := python3 tests/integration/test_kernel_features.py
FLEET_TESTS := python3 tests/integration/test_fleet.py
FORKSTORM_TESTS := python3 tests/integration/test_forkstorm.py
NOCUDA_TESTS := python3 tests/integration/test_nocuda.py
TORCH_LINEAGE_TESTS := python3 tests/integration/test_torch_lineage.py
PYSTEPS_TESTS := python3 tests/integration/test_pysteps.py
SPAWN_TESTS := python3 tests/integration/test_spawn.py
TORCHJOB_TESTS := python3 tests/integration/test_torch_job.py
TORCH_LINES_TESTS := python3 tests/integration/test_torch_lines.py
# The release executable (make dist-arch: this machine's) in a root holding nothing else.
DIST_TESTS := python3 tests/integration/test_dist.py

# dlbpf itself: the man page, completion and documents tests read its --help.
test-unit: $(UNIT_BINS) dlbpf
	@tests/run-tests.sh $(UNIT_BINS) "$(LAYOUT_TEST)" "$(MANPAGE_TEST)" "$(DOCS_TEST)"

test-integration: dlbpf $(WORKLOADS) $(GPUSIM_LIB) $(GPUSIM_NCCL) $(GPUSIM_DRIVER) $(TRAIN)
	@tests/run-tests.sh "$(INTEGRATION)" "$(SCENARIOS)" "$(FILES_TESTS)"

# Every suite, each reporting "N passed, N failed"; dlbpf's checks are counted apart from the
# simulator's and the workloads' own (--self), and the last line is dlbpf's total.
test-all: dlbpf $(UNIT_BINS) $(WORKLOADS) $(GPUSIM_LIB) $(GPUSIM_NCCL) $(GPUSIM_DRIVER) $(GPUSIM_TEST) $(GPUSIM_ASAN_LIB) \
		$(GPUSIM_ASAN_TEST) $(TRAIN) $(COVERAGE_BINS) fuzz-build dist-arch
	@tests/run-tests.sh $(UNIT_BINS) "$(LAYOUT_TEST)" "$(MANPAGE_TEST)" "$(DOCS_TEST)" --self $(SIM_TESTS) --dlbpf "$(INTEGRATION)" "$(SCENARIOS)" "$(FILES_TESTS)" "$(NET_TESTS)" \
		"$(COVERAGE_TESTS)" "$(TRACE_TESTS)" "$(MODES_TESTS)" "$(BUDGET_TESTS)" "$(FLIGHT_TESTS)" "$(FAULT_TESTS)" \
		"$(HTML_TESTS)" "$(METRICS_TESTS)" "$(RECORDING_TESTS)" "$(CALLSITE_TESTS)" "$(PYFRAME_TESTS)" \
		"$(LINEAGE_TESTS)" "$(STEPLEARN_TESTS)" "$(RANKS_TESTS)" "$(KERNEL_TESTS)" "$(FLEET_TESTS)" "$(FORKSTORM_TESTS)" \
		"$(NOCUDA_TESTS)" "$(PYSTEPS_TESTS)" "$(SPAWN_TESTS)" "$(TORCHJOB_TESTS)" "$(TORCH_LINEAGE_TESTS)" \
		"$(TORCH_LINES_TESTS)" "$(DIST_TESTS)" $(FUZZ_TESTS)

# Every integration suite again, with dlbpf under AddressSanitizer and UndefinedBehaviorSanitizer:
# a report aborts dlbpf, and the test that ran it fails. Not in test-all: it doubles the time.
test-asan: $(ASAN_DLBPF) dlbpf $(WORKLOADS) $(GPUSIM_LIB) $(GPUSIM_NCCL) $(GPUSIM_DRIVER) $(TRAIN) $(COVERAGE_BINS)
	@DLBPF_BIN=$(abspath $(ASAN_DLBPF)) ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
		tests/run-tests.sh --dlbpf "$(INTEGRATION)" "$(SCENARIOS)" "$(FILES_TESTS)" "$(NET_TESTS)" "$(COVERAGE_TESTS)" \
		"$(TRACE_TESTS)" "$(MODES_TESTS)" "$(BUDGET_TESTS)" "$(FLIGHT_TESTS)" "$(FAULT_TESTS)" "$(HTML_TESTS)" \
		"$(METRICS_TESTS)" "$(RECORDING_TESTS)" "$(CALLSITE_TESTS)" "$(PYFRAME_TESTS)" "$(LINEAGE_TESTS)" \
		"$(STEPLEARN_TESTS)" "$(RANKS_TESTS)" "$(KERNEL_TESTS)" "$(FLEET_TESTS)" "$(FORKSTORM_TESTS)" \
		"$(NOCUDA_TESTS)" "$(PYSTEPS_TESTS)" "$(SPAWN_TESTS)" "$(TORCHJOB_TESTS)" "$(TORCH_LINEAGE_TESTS)" \
		"$(TORCH_LINES_TESTS)"

demo-run: dlbpf $(GPUSIM_LIB) $(GPUSIM_NCCL) $(GPUSIM_DRIVER) $(TRAIN)
	LD_LIBRARY_PATH=$(OUTPUT)/gpusim ./dlbpf -- $(TRAIN) --scenario input

# test_glibctsd's glibcs: a layout BPF reads (keys' first block at 2000 - 32 * 16), one it does
# not (24-byte entries), and a library without libthread_db's descriptors.
GLIBC_FAKES := $(OUTPUT)/unit/fake-glibc-1488.so $(OUTPUT)/unit/fake-glibc-entry24.so $(OUTPUT)/unit/fake-glibc-none.so
$(OUTPUT)/unit/fake-glibc-1488.so: tests/unit/fake_glibc.c | $(OUTPUT)/unit
	$(CC) -shared -fPIC -DDESCRIPTORS -DSPECIFIC=2000 -DDATA=8 -DENTRY=16 $< -o $@
$(OUTPUT)/unit/fake-glibc-entry24.so: tests/unit/fake_glibc.c | $(OUTPUT)/unit
	$(CC) -shared -fPIC -DDESCRIPTORS -DSPECIFIC=2000 -DDATA=8 -DENTRY=24 $< -o $@
$(OUTPUT)/unit/fake-glibc-none.so: tests/unit/fake_glibc.c | $(OUTPUT)/unit
	$(CC) -shared -fPIC $< -o $@
$(OUTPUT)/unit/test_glibctsd: $(GLIBC_FAKES)
