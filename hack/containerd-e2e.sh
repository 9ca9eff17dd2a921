#!/usr/bin/env bash
# The e2e suite against real containerd, both versions users run: v2.4.2
# (built from the Go module proxy) and Debian's 1.6. Each gets a private
# containerd under a fresh directory, torn down afterwards whatever happens.
#
#   hack/containerd-e2e.sh            both versions, then crictl's WebSocket transport against
#                                     the build with kubestream's runtime-side server (2.4-ws)
#   hack/containerd-e2e.sh 2.4        one
# Sizes as the issue asks: 256 MiB both ways, 20 repetitions of seq.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export GOFLAGS=-buildvcs=false
export KUBESTREAM_LARGE_MB=${KUBESTREAM_LARGE_MB:-256}
export KUBESTREAM_PF_MB=${KUBESTREAM_PF_MB:-256}
export KUBESTREAM_SEQ_REPS=${KUBESTREAM_SEQ_REPS:-20}

hack/containerd.sh install
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(2.4 1.6 2.4-ws)
if [[ " ${versions[*]} " == *" 2.4-ws "* ]]; then
	hack/containerd.sh install-ws
	hack/containerd.sh test-patch
fi
for v in "${versions[@]}"; do
	dir=$(mktemp -d /tmp/kubestream-containerd-XXXXXX)
	trap 'hack/containerd.sh down "$dir"' EXIT
	hack/containerd.sh up "$v" "$dir" 2> >(grep -v DEPRECATION >&2)
	echo "== [${SECONDS}s] e2e against containerd $v"
	# The suite's expectations are a translating node's; against 2.4-ws
	# the node goes direct (the kubelet chain, make test-chain, covers it),
	# so there only crictl's own WebSocket test runs.
	run=()
	[ "$v" != 2.4-ws ] || run=(-run '^(TestCrictlWebSockets|TestCrictlStdinIntoFile)$')
	(source "$dir/env" && go test -tags containerd -count=1 -timeout 30m "${run[@]}" ./e2e/) || { tail -30 "$dir/containerd.log" >&2; exit 1; }
	hack/containerd.sh down "$dir"
	trap - EXIT
done
