#!/usr/bin/env bash
# Builds and runs the trace writer benchmark: bytes per event and events per
# second, Perfetto protobuf vs Chrome JSON. Not a test: it never fails on figures.
#   tools/bench/trace_size.sh [STEPS] [WORKERS] [DIR]
set -eu
cd "$(dirname "$0")/../.."
mkdir -p .output/bench
srcs="user/stream.c user/cuda_api.c user/summary.c user/json.c user/log.c user/steps.c user/pbwriter.c user/perfetto.c user/trace.c user/trace_json.c"
cc -std=gnu11 -O2 -g -Wall -Wextra -Werror -Iinclude -Iuser tools/bench/trace_size.c $srcs -lm -o .output/bench/trace_size
exec .output/bench/trace_size "$@"
