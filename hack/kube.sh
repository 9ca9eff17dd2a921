#!/usr/bin/env bash
# The real control plane for the apiserver e2e, built from the Go module proxy
# (no Docker, no download site): kube-apiserver and kubectl v1.37.2 from
# k8s.io/kubernetes, and etcd from its embed package (hack/kube/etcd).
#
#   hack/kube.sh install     build them into ~/.cache/kubestream/kube-v1.37.2/bin
#                            (7-10 minutes cold on 2 cores, seconds when cached)
#   hack/kube.sh cluster     and the rest of a kubeadm cluster, for the kind node image:
#                            kubeadm, kube-controller-manager, kube-scheduler, kube-proxy
#   hack/kube.sh kubelet [V] build the kubelet v1.37.2 (or V, where hack/kube/kubelet-V
#                            exists: v1.36.3, v1.35.4) with kubestream linked in
#                            (server.go.patch applied to a copy of k8s.io/kubernetes)
#                            into that directory as kubelet-kubestream[-V]
#   hack/kube.sh kubelet-stock [V]  the same version's stock kubelet, as kubelet-stock[-V]
#   hack/kube.sh bin         print that directory
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KUBE_VERSION=v1.37.2
CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}
BIN=$CACHE/kube-$KUBE_VERSION/bin
export GOFLAGS=-buildvcs=false

log() { echo "kube.sh: $*" >&2; }

# build builds the named packages of hack/kube's module into $BIN unless
# they were built from the same inputs (the module and the etcd command).
build() {
	local stamp key pkg missing=0
	stamp=$BIN/.built-$(echo "$*" | sha256sum | cut -c1-12)
	key=$( { echo static; cat "$ROOT/hack/kube/go.mod" "$ROOT/hack/kube/go.sum" "$ROOT/hack/kube/etcd/main.go"; } | sha256sum | cut -c1-16)
	for pkg in "$@"; do [ -x "$BIN/$(basename "$pkg")" ] || missing=1; done
	[ "$missing" = 0 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ] && return
	mkdir -p "$BIN"
	# Without these the binaries report v0.0.0-master, and kubectl's version
	# skew warnings and the apiserver's /version would be wrong.
	local v=k8s.io/component-base/version
	local ld="-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean"
	log "building $* ($KUBE_VERSION; minutes cold on 2 cores)"
	# Static, as upstream builds them: the kind node image packs them into
	# images with no C library.
	(cd "$ROOT/hack/kube" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/" "$@")
	echo "$key" >"$stamp"
}

install() { build k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl ./etcd; }

cluster() {
	install
	build k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
}

# The kubelet is built from its own module (hack/kube/kubelet for v1.37.2,
# hack/kube/kubelet-VERSION for another version: the same main.go and patch,
# that version's dependencies), whose k8s.io/kubernetes is a copy with
# server.go.patch applied (the module's own where its context differs, as
# v1.35.4's does; _kubernetes, remade when the patch changes); it
# links this checkout's kubestream, so it is built every time
# (incrementally). The binary is kubelet-kubestream, or
# kubelet-kubestream-VERSION.
kubelet() {
	local version=${1:-$KUBE_VERSION} stock=${2:-0} mod name k8s stamp
	local patch=$ROOT/hack/kube/kubelet/server.go.patch
	if [ "$version" = "$KUBE_VERSION" ]; then
		mod=$ROOT/hack/kube/kubelet name=kubelet-kubestream
	else
		mod=$ROOT/hack/kube/kubelet-$version name=kubelet-kubestream-$version
	fi
	[ -f "$mod/go.mod" ] || { log "no module builds the kubelet $version (want $mod)"; exit 1; }
	[ -f "$mod/server.go.patch" ] && patch=$mod/server.go.patch
	stamp=$(cat "$patch" | sha256sum | cut -c1-16)
	if [ "$(cat "$mod/_kubernetes/.kubestream-patch" 2>/dev/null)" != "$stamp" ]; then
		k8s=$(cd /tmp && go mod download -json k8s.io/kubernetes@$version | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
		[ -d "$k8s" ] || { log "k8s.io/kubernetes@$version not downloaded"; exit 1; }
		rm -rf "$mod/_kubernetes"
		cp -r "$k8s" "$mod/_kubernetes"
		chmod -R u+w "$mod/_kubernetes"
		(cd "$mod/_kubernetes" && git apply "$patch")
		echo "$stamp" >"$mod/_kubernetes/.kubestream-patch"
	fi
	mkdir -p "$BIN"
	local v=k8s.io/component-base/version minor
	minor=$(echo "$version" | cut -d. -f2)
	local ld="-s -w -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
	cd "$mod"
	if [ "$stock" = 1 ]; then
		# upstream's cmd/kubelet from the same copy: the hook is never set,
		# so this is the stock kubelet of that version.
		log "building the stock kubelet $version (a minute when the patched one is cached)"
		go build -trimpath -ldflags "$ld" -o "$BIN/${name/kubelet-kubestream/kubelet-stock}" k8s.io/kubernetes/cmd/kubelet
		return
	fi
	log "building the kubelet $version with kubestream (5 minutes cold, seconds when cached)"
	go build -trimpath -ldflags "$ld" -o "$BIN/$name" .
}

case "${1:-}" in
install) install ;;
cluster) cluster ;;
kubelet) kubelet "${2:-}" ;;
kubelet-stock) kubelet "${2:-}" 1 ;;
bin) echo "$BIN" ;;
*) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
