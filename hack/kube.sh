#!/usr/bin/env bash
# The real control plane for the apiserver e2e, built from the Go module proxy
# (no Docker, no download site): kube-apiserver and kubectl v1.37.2 from
# k8s.io/kubernetes, and etcd from its embed package (hack/kube/etcd).
#
#   hack/kube.sh install     build them into ~/.cache/kubestream/kube-v1.37.2/bin
#                            (7-10 minutes cold on 2 cores, seconds when cached)
#   hack/kube.sh bin         print that directory
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KUBE_VERSION=v1.37.2
CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}
BIN=$CACHE/kube-$KUBE_VERSION/bin
export GOFLAGS=-buildvcs=false

log() { echo "kube.sh: $*" >&2; }

install() {
	if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kubectl" ] && [ -x "$BIN/etcd" ]; then
		return
	fi
	mkdir -p "$BIN"
	# Without these the binaries report v0.0.0-master, and kubectl's version
	# skew warnings and the apiserver's /version would be wrong.
	local v=k8s.io/component-base/version
	local ld="-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean"
	log "building kube-apiserver, kubectl $KUBE_VERSION and etcd (7-10 minutes cold on 2 cores)"
	cd "$ROOT/hack/kube"
	go build -trimpath -ldflags "$ld" -o "$BIN/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl ./etcd
}

case "${1:-}" in
install) install ;;
bin) echo "$BIN" ;;
*) sed -n '2,9p' "$0" >&2; exit 2 ;;
esac
