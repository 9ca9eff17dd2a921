#!/usr/bin/env bash
# kubectl through a real kube-apiserver to kubestream (e2e/apiserver_test.go):
# builds kube-apiserver, kubectl and etcd v1.37.2 once (hack/kube.sh), then
# runs the test with kubestream on each runtime given:
#
#   hack/apiserver-e2e.sh              the embedded reference runtime and containerd 2.4
#   hack/apiserver-e2e.sh ref          one of them (ref, 2.4 or 1.6)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export GOFLAGS=-buildvcs=false

hack/kube.sh install
KUBESTREAM_KUBE_BIN=$(hack/kube.sh bin)
export KUBESTREAM_KUBE_BIN
runtimes=("$@")
[ ${#runtimes[@]} -gt 0 ] || runtimes=(ref 2.4)
for r in "${runtimes[@]}"; do
	echo "== kubectl -> kube-apiserver -> kubestream -> $r"
	if [ "$r" = ref ]; then
		go test -tags apiserver -run '^TestAPIServer$' -count=1 -timeout 15m ./e2e/
		continue
	fi
	hack/containerd.sh install
	dir=$(mktemp -d /tmp/kubestream-containerd-XXXXXX)
	trap 'hack/containerd.sh down "$dir"' EXIT
	hack/containerd.sh up "$r" "$dir" 2> >(grep -v DEPRECATION >&2)
	(source "$dir/env" && go test -tags apiserver -run '^TestAPIServer$' -count=1 -timeout 15m ./e2e/) ||
		{ tail -30 "$dir/containerd.log" >&2; exit 1; }
	hack/containerd.sh down "$dir"
	trap - EXIT
done
