#!/bin/busybox sh
# PID 1 of the guest that tools/vm/run boots (packed into its initramfs as /init).
# Loads the modules /etc/dlbpf-vm/modules names, mounts the host's / (9p, read-only)
# under a tmpfs overlay, mounts the kernel's file systems inside it, and runs the job
# (/run/dlbpf-vm/job, written by tools/vm/run) chrooted there with the host's bash.
# Its exit status goes to /run/dlbpf-vm/status (a 9p share the runner reads), then the
# guest powers off. Anything that goes wrong before the job is a console line starting
# "dlbpf-vm:" and a power-off without a status, which the runner reports.
/bin/busybox --install -s /bin
export PATH=/bin

say() { echo "dlbpf-vm: $*" > /dev/console; }
fail() { say "error: $*"; sync; poweroff -f; sleep 5; echo o > /proc/sysrq-trigger; }

mkdir -p /proc /sys /dev /mnt/lower /mnt/rw /mnt/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null

# Modules in load order (dependencies first), one path per line; built-in ones are absent.
while read -r ko; do
  [ -n "$ko" ] || continue
  out=$(insmod "/lib/modules/$ko" 2>&1) ||
    case $out in *"File exists"*|*"exists"*) ;; *) say "insmod $ko: $out" ;; esac
done < /etc/dlbpf-vm/modules

MSIZE=262144
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=$MSIZE hostroot /mnt/lower ||
  fail "cannot mount the host's / over 9p"
mount -t tmpfs -o mode=755 tmpfs /mnt/rw
mkdir -p /mnt/rw/upper /mnt/rw/work
mount -t overlay overlay -o lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work /mnt/root ||
  fail "cannot mount the overlay over the host's /"

R=/mnt/root
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs $R/sys/kernel/tracing 2>/dev/null
mount -t bpf bpf $R/sys/fs/bpf 2>/dev/null
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup 2>/dev/null
mount -t tmpfs -o mode=755 tmpfs $R/run
mkdir -p $R/run/dlbpf-vm $R/vmout
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=$MSIZE vmctl $R/run/dlbpf-vm ||
  fail "cannot mount the control share"
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=$MSIZE vmout $R/vmout ||
  fail "cannot mount the output share"

# Console output as the caller's terminal expects it: no CR added before each LF.
stty -F /dev/console -onlcr 2>/dev/null
read -r up _ < /proc/uptime
echo "$up" > $R/run/dlbpf-vm/started

# arm64 guests (dlbpf_vm.shell=busybox): the host's bash is x86-64's, so the job runs under
# this initramfs's busybox, its applets first in PATH (tools/vm/run writes the job so).
shell=/bin/bash
case " $(cat /proc/cmdline) " in
  *" dlbpf_vm.shell=busybox "*)
    mkdir -p $R/run/dlbpf-vm-bin
    cp /bin/busybox $R/run/dlbpf-vm-bin/busybox
    chroot $R /run/dlbpf-vm-bin/busybox --install -s /run/dlbpf-vm-bin
    shell="/run/dlbpf-vm-bin/busybox sh" ;;
esac
chroot $R $shell /run/dlbpf-vm/job < /dev/null > /dev/console 2>&1
rc=$?
read -r up _ < /proc/uptime
echo "$up" > $R/run/dlbpf-vm/ended
echo "$rc" > $R/run/dlbpf-vm/status
sync
umount $R/vmout $R/run/dlbpf-vm 2>/dev/null
poweroff -f
