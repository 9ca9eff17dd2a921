#!/usr/bin/env bash
# A kind cluster whose worker runs the kubelet with kubestream linked in.
#
#   hack/kind.sh up       build the kubelet (static, for the node image), render
#                         manifests/kind/cluster.yaml and create cluster "kubestream";
#                         then run a pod on the worker and exec into it
#   hack/kind.sh render   print the rendered config (no Docker needed)
#   hack/kind.sh down     delete the cluster
# Needs kind and a Docker engine (not on the development machines here).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KUBE_VERSION=v1.37.2
NAME=kubestream

render() {
	local bin
	bin="$(hack/kube.sh bin)/kubelet-kubestream"
	sed "s#KUBELET_KUBESTREAM#$bin#" manifests/kind/cluster.yaml
}

case "${1:-}" in
render) render ;;
up)
	command -v kind >/dev/null || { echo "kind.sh: kind is not installed" >&2; exit 1; }
	# The node image has its own libc; a static binary runs on any.
	CGO_ENABLED=0 hack/kube.sh kubelet
	render | kind create cluster --name "$NAME" --image "kindest/node:$KUBE_VERSION" --config -
	worker=$(kubectl get nodes -l kubestream.io/kubelet=patched -o jsonpath='{.items[0].metadata.name}')
	kubectl get node "$worker" -o jsonpath='declaredFeatures: {.status.declaredFeatures}{"\n"}'
	kubectl run kubestream-demo --image=busybox --restart=Never \
		--overrides="{\"spec\":{\"nodeName\":\"$worker\"}}" -- sleep 3600
	kubectl wait --for=condition=Ready pod/kubestream-demo --timeout=120s
	kubectl exec kubestream-demo -- sh -c 'echo through kubestream in the kubelet; exit 3' || echo "exit code $?"
	kubectl get --raw "/api/v1/nodes/$worker/proxy/metrics/streaming" | grep '^kubestream_streaming_requests_total'
	;;
down) kind delete cluster --name "$NAME" ;;
*) sed -n '2,9p' "$0" >&2; exit 2 ;;
esac
