#!/usr/bin/env bash
# kubectl → kube-apiserver → the kubelet v1.37.2 with kubestream linked in →
# containerd 2.4 (e2e/kubelet_test.go). Builds what it needs (hack/kube.sh,
# hack/containerd.sh), starts a private containerd for the kubelet alone,
# and tears it down afterwards.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export GOFLAGS=-buildvcs=false

hack/kube.sh install
hack/kube.sh kubelet
hack/containerd.sh install
KUBESTREAM_KUBE_BIN=$(hack/kube.sh bin)
export KUBESTREAM_KUBE_BIN
dir=$(mktemp -d /tmp/kubestream-containerd-XXXXXX)
trap 'hack/containerd.sh down "$dir"' EXIT
hack/containerd.sh up 2.4 "$dir" 2> >(grep -v DEPRECATION >&2)
# The kubelet owns that containerd; the rest of the e2e fixture keeps the
# reference runtime, so no pod the kubelet does not know of is there.
(
	source "$dir/env"
	export KUBESTREAM_KUBELET_RUNTIME=$KUBESTREAM_CONTAINERD_ENDPOINT
	unset KUBESTREAM_CONTAINERD_ENDPOINT
	go test -tags kubelet -run '^TestKubelet$' -count=1 -timeout 15m ./e2e/
) || { tail -30 "$dir/containerd.log" >&2; exit 1; }
