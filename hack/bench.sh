#!/usr/bin/env bash
# make bench: kubestream's translator side by side with direct SPDY, direct
# SPDY through a byte-copying relay (the ceiling for any translator) and
# upstream's translator (k8s.io/apiserver v0.37), alternated in one run, in
# three processes so each translator's own CPU and memory show (then once
# more in one process). Writes bench/results.md and bench/results.svg (and
# the -inproc pair), the runtime side's and reverse port-forward's tables; pass -profile-dir DIR for pprof
# CPU and alloc profiles of each translator, and any other bench flag
# (go run ./bench -h) after the script's name. Then the Go frame-path
# benchmarks (allocs/op) of the translator package.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=-buildvcs=false
go build -o bin/kubestream-bench ./bench
if [[ " $* " == *" -only runtime "* ]]; then
	exec bin/kubestream-bench -out bench/results-runtime.md "$@"
fi
if [[ " $* " == *" -only reverse "* ]]; then
	exec bin/kubestream-bench -out bench/results-reverse.md "$@"
fi
bin/kubestream-bench -out bench/results.md -svg bench/results.svg "$@"
echo
echo "== the runtime side: kubestream's runtime-side server against cri-streaming's, and the node's whole chain"
bin/kubestream-bench -only runtime -size $((512 << 20)) -out bench/results-runtime.md
echo
echo "== reverse and UDP port-forward beside forward port-forward, one node (kubestream serve on the reference runtime)"
bin/kubestream-bench -only reverse -out bench/results-reverse.md
echo
echo "== the same in one process (client, translators and backend share a Go runtime)"
bin/kubestream-bench -inproc -out bench/results-inproc.md -svg bench/results-inproc.svg "$@"
echo
echo "== frame paths (go test -bench, allocs/op)"
go test -run '^$' -bench . -benchmem ./translator/ | tee bench/frames.txt
