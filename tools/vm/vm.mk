# GNU make fragment: the kernel matrix (tools/vm). Included by the top-level Makefile.
#   make vmtest          tools/vm/guest-test.sh full  under each of $(VM_KERNELS)
#   make vmtest-smoke    tools/vm/guest-test.sh smoke under each of $(VM_KERNELS)
# Debian's 5.10, 6.1 and 6.12 kernels boot under QEMU (software emulation); host runs
# natively on this machine's kernel. `make test` runs the smoke. See tools/vm/README.md.
VM_KERNELS ?= 5.10 6.1 6.12 host
# Options for tools/vm/run: a 256 MiB ext4 disk at /vmdisk for block-I/O tests.
VM_RUN_ARGS ?= --disk 256
# What the guests run besides ./dlbpf (built here: the guests only run, never build).
VM_PREREQS ?=

vmtest vmtest-smoke: deps
	$(MAKE) --no-print-directory $@-run

# The full suite runs for tens of minutes per emulated kernel: past the runner's default limit.
vmtest-run: dlbpf $(VM_PREREQS)
	VM_RUN_ARGS='$(VM_RUN_ARGS) --timeout 3600' tools/vm/matrix full $(VM_KERNELS)

vmtest-smoke-run: dlbpf $(VM_PREREQS)
	VM_RUN_ARGS='$(VM_RUN_ARGS)' tools/vm/matrix smoke $(VM_KERNELS)

.PHONY: vmtest vmtest-smoke vmtest-run vmtest-smoke-run

# The arm64 matrix (tools/vm/README.md): Debian's arm64 kernels under qemu-system-aarch64 run
# tests/vm/arm64-smoke.sh with the static aarch64 release executable on the cross-built
# simulator and workloads; tests/vm/check-arm64.py judges each guest's output on the host.
VM_ARM64_KERNELS ?= arm64-6.12 arm64-6.1
# Options for tools/vm/run in the arm64 guests (--env ARM64_SCENARIOS=input: that scenario only).
ARM64_RUN_ARGS ?=
ARM64_EXE := $(DIST_DIR)/dlbpf-$(VERSION)-aarch64-linux
ARM64_MAKE := $(MAKE) --no-print-directory ARCH=arm64 CROSS=aarch64-linux-gnu-

# What an arm64 guest runs, built for the ARCH this make builds for.
vm-guest-prereqs: $(DIST_EXE) $(GPUSIM_LIB) $(GPUSIM_NCCL) $(GPUSIM_DRIVER) $(OUTPUT)/workloads/cuda_calls $(TRAIN_BIN) \
	$(OUTPUT)/workloads/probe_stress $(OUTPUT)/workloads/fileread $(OUTPUT)/workloads/callsites \
	$(OUTPUT)/vm/glibc_keys

# glibc's pthread keys as dlbpf finds them and as its BPF reads them (tests/vm/glibc_keys.c).
$(OUTPUT)/vm/glibc_keys: tests/vm/glibc_keys.c $(STAGE_LIBS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $< $(STAGE_LIBS) $(LIBS) -pthread -o $@

vmtest-arm64-smoke: deps
	$(MAKE) --no-print-directory vmtest-arm64-smoke-run

vmtest-arm64-smoke-run:
	$(ARM64_MAKE) vm-guest-prereqs
	@mkdir -p .output/vm; failed=0; for k in $(VM_ARM64_KERNELS); do \
		rm -rf .output/vm/$$k; mkdir -p .output/vm/$$k; echo "=== $$k: tests/vm/arm64-smoke.sh"; \
		if tools/vm/run --out .output/vm/$$k --disk 64 $(ARM64_RUN_ARGS) $$k tests/vm/arm64-smoke.sh $(ARM64_EXE) \
		     > .output/vm/$$k.log 2>&1 && \
		   tests/vm/check-arm64.py .output/vm/$$k; then echo "=== $$k: PASS"; \
		else echo "=== $$k: FAIL (log: .output/vm/$$k.log)"; tail -n 20 .output/vm/$$k.log; failed=$$((failed + 1)); fi; \
	done; [ $$failed = 0 ]

.PHONY: vm-guest-prereqs vmtest-arm64-smoke vmtest-arm64-smoke-run
