#!/bin/bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Are two dlbpf binaries' reports the same, byte for byte? Live traces differ
# run to run, so the comparison is on recordings: every training scenario of
# the GPU simulator (and a few option variants, and a two-rank job) is recorded
# once, then `report` runs from each recording with both binaries in every
# format (text and the log on stderr, JSON, HTML, Perfetto, Chrome JSON; the
# multi-rank report's text, JSON and timelines) and the results are diffed.
#
#   tools/output-diff.sh OLD_DLBPF NEW_DLBPF [DIR]
#
# DIR (default .output/output-diff) keeps the recordings: a second run reuses
# them (delete DIR/rec to record again). Prints the diff; exits 0 when empty.
# Needs root (recording attaches BPF), `make dlbpf .output/workloads/train
# .output/gpusim/libcudart.so.13 .output/gpusim/libnccl.so.2`. --metrics is not comparable here: report
# refuses it, and its unit test (tests/unit/test_metrics.c) pins its text.
set -u
OLD=$(realpath "$1") NEW=$(realpath "$2")
DIR=$(realpath -m "${3:-.output/output-diff}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRAIN=$ROOT/.output/workloads/train
SIM=$ROOT/.output/gpusim
# Sleeping waits, as the recordings compared before the simulator learnt to spin (its default now).
export GPUSIM_SCHEDULE=${GPUSIM_SCHEDULE:-blocking}
SCENARIOS="gpu input disk pageable small-copies sync-copies launch host-cpu contention two-streams comm balanced graph two-gpus"

record() {   # name, dlbpf record options..., --, train options...
	local name=$1
	shift
	[ -s "$DIR/rec/$name.dlbpf" ] && return 0
	local opts=()
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	LD_LIBRARY_PATH=$SIM "$OLD" record -q "${opts[@]}" -o "$DIR/rec/$name.dlbpf" -- "$TRAIN" --quiet "$@" \
		>/dev/null 2>"$DIR/rec/$name.log" || { echo "recording $name failed:"; tail -5 "$DIR/rec/$name.log"; exit 2; }
}

mkdir -p "$DIR/rec"
for s in $SCENARIOS; do
	record "$s" -- --scenario "$s"
done
record stacks --stacks -- --scenario sync-copies
record verbatim --encoding verbatim -- --scenario input
# Two ranks at once, rank 1 the straggler (as tests/integration/test_ranks.py records them).
if [ ! -s "$DIR/rec/rank1.dlbpf" ]; then
	rm -f "$DIR/rec/rank0.dlbpf"
	for k in 0 1; do
		record "rank$k" -- --steps 25 --workers 1 --kernels 4 --kernel-us 1000 \
			--host-cpu-us $((3000 * (k + 1))) --allreduce-kb 65536 --ranks 8 &
	done
	wait
fi

report() {   # bin, out dir, name, report arguments...
	local bin=$1 out=$2 name=$3
	shift 3
	mkdir -p "$out/$name"
	(cd "$out/$name" && "$bin" report "$@" >stdout 2>stderr; echo "exit $?" >>stdout)
}

for side in old new; do
	bin=$OLD
	[ $side = new ] && bin=$NEW
	out=$DIR/$side
	rm -rf "$out"
	for r in "$DIR"/rec/*.dlbpf; do
		n=$(basename "$r" .dlbpf)
		report "$bin" "$out" "$n" "$r" -j s.json --html r.html -o t.pftrace
		report "$bin" "$out" "$n-chrome" "$r" -o t.json
		report "$bin" "$out" "$n-verbose" -v --keep-steps 4 "$r"
	done
	report "$bin" "$out" stepon "$DIR/rec/input.dlbpf" --step-on cudaMemcpy -j s.json
	report "$bin" "$out" ranks "$DIR/rec/rank0.dlbpf" "$DIR/rec/rank1.dlbpf" -j s.json -o t.pftrace
	report "$bin" "$out" ranks-chrome "$DIR/rec/rank0.dlbpf" "$DIR/rec/rank1.dlbpf" -o t.json
done
cd "$DIR" && diff -r old new
