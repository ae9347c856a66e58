#!/usr/bin/env bash
# Runs dlbpf on a machine with a real GPU, as root: the nvcc-built step loop
# (tools/gpu-check/gpu_train.cu) in three modes and a PyTorch DataLoader loop,
# launched under dlbpf and attached to while running. Each run leaves the
# workload's own truth, dlbpf's JSON, report and recording in one folder;
# compare.py judges them (it needs no GPU: run it wherever the folder is).
#
#   tools/gpu-check/run.sh OUTDIR [DLBPF] [GPU_TRAIN]
#
# DLBPF (words) defaults to ./dlbpf, GPU_TRAIN to a build of gpu_train.cu with nvcc.
set -u
out=${1:?usage: run.sh OUTDIR [DLBPF] [GPU_TRAIN]}
read -r -a dlbpf <<<"${2:-./dlbpf}"   # may name a loader first: ld.so --library-path DIR ./dlbpf
here=$(cd "$(dirname "$0")" && pwd)
gpu_train=${3:-}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1

echo "== machine"
uname -r
nvidia-smi -L || { echo "no GPU: nothing to check"; exit 1; }
ls -l /sys/kernel/btf/vmlinux || { echo "no BTF: dlbpf cannot load"; exit 1; }
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
"${dlbpf[@]}" --version || exit 1
if [ -z "$gpu_train" ]; then
  gpu_train=$out/gpu_train
  nvcc -O2 -arch=sm_90 -o "$gpu_train" "$here/gpu_train.cu" || exit 1
fi

# one traced run: NAME, then the workload's command
traced() {
  local name=$1; shift
  echo "== $name: $*"
  local t0=$(date +%s%N)
  timeout -k 5 180 "${dlbpf[@]}" record -q -o "$out/$name.dlbpf" -j "$out/$name.json" -- "$@" \
    >"$out/$name.stdout" 2>"$out/$name.stderr"
  local rc=$?
  echo "rc $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  tail -n 25 "$out/$name.stdout" | grep -v '^{' ; tail -n 5 "$out/$name.stderr"
}

# the same workload untraced: its own step times are the overhead baseline
untraced() {
  local name=$1; shift
  echo "== $name (untraced): $*"
  timeout -k 5 180 "$@" >"$out/$name.untraced" 2>&1
  echo "rc $?"
}

untraced gpu "$gpu_train" --mode gpu --steps 150
traced gpu "$gpu_train" --mode gpu --steps 150
traced copies "$gpu_train" --mode copies --steps 60 --copies 300
traced streams "$gpu_train" --mode streams --steps 120
traced gpu_short "$gpu_train" --mode gpu --steps 150 --fwd-us 40 --bwd-us 60 --cpu-us 200

py=python3
untraced torch_input $py "$here/torch_train.py" --steps 50 --workers 2 --decode-ms 0.4
traced torch_input $py "$here/torch_train.py" --steps 50 --workers 2 --decode-ms 0.4
traced torch_gpu $py "$here/torch_train.py" --steps 50 --workers 4 --decode-ms 0 --batch 1024 --width 8192

# attach to a job already running (libraries loaded before dlbpf came)
echo "== torch_attach"
$py "$here/torch_train.py" --steps 1500 --workers 2 --decode-ms 0.2 >"$out/torch_attach.stdout" 2>&1 &
job=$!
for _ in $(seq 120); do
  grep -q '^training' "$out/torch_attach.stdout" 2>/dev/null && break
  sleep 0.5
done
sleep 1
timeout -k 5 60 "${dlbpf[@]}" record -q -o "$out/torch_attach.dlbpf" -j "$out/torch_attach.json" -p "$job" -d 4 \
  >"$out/torch_attach.report" 2>"$out/torch_attach.stderr"
echo "rc $?"
tail -n 20 "$out/torch_attach.report"
wait "$job"
echo "job rc $?"
echo "== done"
