# GNU make fragment: the benchmarks (tools/bench). Included by the top-level
# Makefile; `make bench` builds and runs them. Never part of `make test`:
# benchmarks print ratios and never fail on timing.
BENCH_OUT := $(OUTPUT)/bench
BENCH_ARGS ?=

$(BENCH_OUT):
	mkdir -p $@

$(BENCH_OUT)/ref.bpf.o: tools/bench/ref.bpf.c $(VMLINUX_H) | $(BENCH_OUT)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Iinclude -Ibpf -Ibpf/vmlinux/$(ARCH) -Wall -Werror -c $< -o $@

$(BENCH_OUT)/ref.skel.h: $(BENCH_OUT)/ref.bpf.o
	$(BPFTOOL) gen skeleton $< name ref > $@

$(BENCH_OUT)/reftrace: tools/bench/reftrace.c $(BENCH_OUT)/ref.skel.h $(call stage_lib,capture) $(call stage_lib,base) \
		include/dlbpf/events.h
	$(CC) $(CFLAGS_COMMON) -O2 -I$(BENCH_OUT) $< $(call stage_lib,capture) $(call stage_lib,base) $(LIBS) -o $@

bench: deps
	$(MAKE) --no-print-directory bench-run

bench-run: dlbpf $(BENCH_OUT)/reftrace $(BENCH_OUT)/recenc_bench $(OUTPUT)/workloads/ratecalls $(GPUSIM_LIB) $(TRAIN)
	python3 tools/bench/bench.py $(BENCH_ARGS)

# Table 8: the drain rate, fed by a BPF program run with BPF_PROG_TEST_RUN (drain.bpf.c).
bench-run: $(BENCH_OUT)/drainprod

$(BENCH_OUT)/drain.bpf.o: tools/bench/drain.bpf.c $(BPF_HDRS) | $(BENCH_OUT)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Iinclude -Ibpf -Ibpf/vmlinux/$(ARCH) -Wall -Werror -c $< -o $@

$(BENCH_OUT)/drain.skel.h: $(BENCH_OUT)/drain.bpf.o
	$(BPFTOOL) gen skeleton $< name drain_bpf > $@

# It takes the API id from records/cuda_api.h (a header: nothing to link).
$(BENCH_OUT)/drainprod: tools/bench/drainprod.c $(BENCH_OUT)/drain.skel.h include/dlbpf/events.h \
		user/records/cuda_api.h user/records/cuda_api.def
	$(CC) $(CFLAGS_COMMON) -O2 -I$(BENCH_OUT) $< $(LIBS) -pthread -o $@

# The timeline writers' own benchmark (tools/bench/trace_size.sh): pure stages only.
$(BENCH_OUT)/trace_size: tools/bench/trace_size.c $(call stage_lib,output) $(call stage_lib,analysis) \
		$(call stage_lib,records) $(call stage_lib,base) | $(BENCH_OUT)
	$(CC) $(USER_CFLAGS) $^ -lm -o $@

# Recording encodings: records/s encoded, recorded and replayed, from a real recording (bench.py table 5).
$(BENCH_OUT)/recenc_bench: tools/bench/recenc_bench.c $(call stage_lib,records) $(call stage_lib,base) | $(BENCH_OUT)
	$(CC) $(USER_CFLAGS) $^ -lelf -lz -lm -o $@

# Per-CPU batching of records, producer and collector sides (issue 13's proposal; batchcost.c).
$(BENCH_OUT)/batchcost: tools/bench/batchcost.c $(BENCH_OUT)/drain.skel.h include/dlbpf/events.h
	$(CC) $(CFLAGS_COMMON) -O2 -I$(BENCH_OUT) $< $(LIBS) -o $@

# Table 14: the network source's cost to a receive loop (netloop.c).
bench-run: $(BENCH_OUT)/netloop

$(BENCH_OUT)/netloop: tools/bench/netloop.c | $(BENCH_OUT)
	$(CC) $(CFLAGS_COMMON) -O2 $< -o $@
