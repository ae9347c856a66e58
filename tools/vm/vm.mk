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
