#!/usr/bin/env bash
# Builds and runs the trace writer benchmark: bytes per event and events per
# second, Perfetto protobuf vs Chrome JSON. Not a test: it never fails on figures.
#   tools/bench/trace_size.sh [STEPS] [WORKERS] [DIR]
set -eu
cd "$(dirname "$0")/../.."
mkdir -p .output/bench
make -s .output/bench/trace_size
exec .output/bench/trace_size "$@"
