#!/usr/bin/env bash
# kubectl → kube-apiserver → the kubelet v1.37.2 (or KUBESTREAM_KUBELET_VERSION)
# with kubestream linked in →
# containerd 2.4 (e2e/kubelet_test.go). Builds what it needs (hack/kube.sh,
# hack/containerd.sh), then runs the kubelet, its private containerd, the
# control plane and the test's clients inside a network namespace made for
# the run: lo and a veth interface holding the node's address (a kubelet
# refuses a loopback node IP). No traffic leaves that namespace, and what
# the kubelet does to routes and iptables stays in it. Torn down afterwards.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export GOFLAGS=-buildvcs=false
NODE_IP=${KUBESTREAM_NODE_IP:-10.250.0.2}
# 2.4: stock containerd, the node translates. 2.4-ws: containerd with
# kubestream's runtime-side server (hack/containerd.sh install-ws), WebSocket
# on every leg. bench: `make bench-node` (e2e/nodebench_test.go), both
# containerds side by side and the kubelets it compares.
VARIANT=${1:-2.4}
# The kubelet's version: v1.37.2, or another with a module in hack/kube
# (v1.36.3), behind the same v1.37.2 control plane (a skew of one minor).
KUBELET_VERSION=${KUBESTREAM_KUBELET_VERSION:-v1.37.2}
export KUBESTREAM_KUBELET_VERSION=$KUBELET_VERSION KUBESTREAM_KUBELET_BINARY=kubelet-kubestream
[ "$KUBELET_VERSION" = v1.37.2 ] || KUBESTREAM_KUBELET_BINARY=kubelet-kubestream-$KUBELET_VERSION
# KUBESTREAM_KUBELET_STOCK=1: that version's stock kubelet instead, for
# comparison (TestKubeletStock).
TEST=TestKubelet
hack/kube.sh install
if [ "$VARIANT" = bench ]; then
	TEST=TestNodeBench
	hack/kube.sh kubelet
	hack/kube.sh kubelet-stock
	# KUBESTREAM_BENCH_PATHS (e2e/nodebench_test.go) may leave stock-1.35 out.
	paths=${KUBESTREAM_BENCH_PATHS:-stock-1.35}
	[[ ",$paths," != *,stock-1.35,* ]] || hack/kube.sh kubelet-stock v1.35.4
elif [ "${KUBESTREAM_KUBELET_STOCK:-}" = 1 ]; then
	TEST=TestKubeletStock
	KUBESTREAM_KUBELET_BINARY=${KUBESTREAM_KUBELET_BINARY/kubelet-kubestream/kubelet-stock}
	hack/kube.sh kubelet-stock "$KUBELET_VERSION"
else
	hack/kube.sh kubelet "$KUBELET_VERSION"
fi
hack/containerd.sh install
[ "$VARIANT" = 2.4 ] || hack/containerd.sh install-ws
KUBESTREAM_KUBE_BIN=$(hack/kube.sh bin)
export KUBESTREAM_KUBE_BIN
dir=$(mktemp -d /tmp/kubestream-containerd-XXXXXX)
wsdir=$(mktemp -d /tmp/kubestream-containerd-XXXXXX)
ns=kubestream-e2e-$$
# The tests' temporary directories, removed once containerd is down: the
# tests' own cleanups left empty log directories of the kubelet's pods
# behind (the pods outlive each kubelet in containerd), one set per kubelet.
# A short name: the kubelet's sockets live below it.
tmp=$(mktemp -d /tmp/ks-t-XXXXXX)
cleanup() {
	hack/containerd.sh down "$dir" || true
	hack/containerd.sh down "$wsdir" || true
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$tmp" || true
}
trap cleanup EXIT
# Everything the namespace runs is built out here, where the module proxy
# is reachable.
go build -o "$dir/bin/freeport" ./hack/tools/freeport
go test -c -tags kubelet -o "$dir/bin/e2e.test" ./e2e/
ip netns add "$ns"
# nsenter switches the network namespace alone: `ip netns exec` would also
# remount /sys, hiding the cgroup mounts the kubelet needs.
innet() { nsenter --net="/run/netns/$ns" "$@"; }
ip -n "$ns" link set lo up
# A veth pair with both ends inside: node0 holds the node's address (some
# kernels here have no dummy interfaces).
ip -n "$ns" link add node0 type veth peer name node0-peer
ip -n "$ns" addr add "$NODE_IP/24" dev node0
ip -n "$ns" link set node0-peer up
ip -n "$ns" link set node0 up
# The image tool and freeport run inside too; no network is needed for them
# (the module cache holds what they build from).
innet env GOPROXY=off KUBESTREAM_FREEPORT="$dir/bin/freeport" \
	hack/containerd.sh up "${VARIANT/bench/2.4}" "$dir" 2> >(grep -v DEPRECATION >&2)
timeout=15m
if [ "$VARIANT" = bench ]; then
	innet env GOPROXY=off KUBESTREAM_FREEPORT="$dir/bin/freeport" \
		hack/containerd.sh up 2.4-ws "$wsdir" 2> >(grep -v DEPRECATION >&2)
	export KUBESTREAM_BENCH_RUNTIME_WS=unix://$wsdir/containerd.sock
	export KUBESTREAM_BENCH_NODE_OUT=${KUBESTREAM_BENCH_NODE_OUT:-$ROOT/bench/results-node.md}
	timeout=120m
	# A thousand held sessions: a few descriptors each in every process.
	ulimit -n "$(ulimit -Hn)"
fi
# The kubelet owns that containerd; the rest of the e2e fixture keeps the
# reference runtime, so no pod the kubelet does not know of is there.
(
	source "$dir/env"
	export KUBESTREAM_KUBELET_RUNTIME=$KUBESTREAM_CONTAINERD_ENDPOINT
	unset KUBESTREAM_CONTAINERD_ENDPOINT
	export TMPDIR=$tmp
	cd e2e
	innet "$dir/bin/e2e.test" -test.run "^$TEST\$" -test.count=1 -test.timeout $timeout ${KUBESTREAM_TEST_VERBOSE:+-test.v}
) || { tail -30 "$dir/containerd.log" >&2; exit 1; }
