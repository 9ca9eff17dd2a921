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
#                            (server.go.patch laid over k8s.io/kubernetes)
#                            into that directory as kubelet-kubestream[-V]
#   hack/kube.sh kubelet-stock [V]  the same version's stock kubelet, as kubelet-stock[-V]
#   hack/kube.sh bin         print that directory
#   hack/kube.sh src         copy k8s.io/kubernetes v1.37.2 into hack/kube/_kubernetes,
#                            which this module builds from (the e2e binary too)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KUBE_VERSION=v1.37.2
CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}
BIN=$CACHE/kube-$KUBE_VERSION/bin
SRC=$ROOT/hack/kube/_kubernetes
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

install() { src; build k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl ./etcd; }

cluster() {
	install
	build k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
}

# The kubelet v1.37.2 is built from this module: the stock one is
# k8s.io/kubernetes/cmd/kubelet, the one with kubestream linked in is
# ./kubelet with server.go.patch laid over pkg/kubelet/server/server.go by
# -overlay. Both are static with the control plane's flags, so the packages
# they share with it and with each other are compiled once; the overlay
# changes only pkg/kubelet/server and what imports it. Another version V is built from
# hack/kube/kubelet-V, its own module, whose k8s.io/kubernetes is a copy
# with the patch applied (the module's own server.go.patch where its
# context differs, as v1.35.4's does; _kubernetes, remade when the patch
# changes), static too: a different version shares little with v1.37.2's
# packages, but std and the dependencies of the same version are compiled
# once. The kubestream kubelets link this checkout, so they are built
# every time (incrementally): kubelet-kubestream[-V], kubelet-stock[-V].
kubelet() {
	local version=${1:-$KUBE_VERSION} stock=${2:-0} name
	mkdir -p "$BIN"
	local v=k8s.io/component-base/version minor
	minor=$(echo "$version" | cut -d. -f2)
	local ld="-s -w -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
	if [ "$version" = "$KUBE_VERSION" ]; then
		src
		cd "$ROOT/hack/kube"
		if [ "$stock" = 1 ]; then
			log "building the stock kubelet $version (a minute when the patched one is cached)"
			CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/kubelet-stock" k8s.io/kubernetes/cmd/kubelet
			return
		fi
		log "building the kubelet $version with kubestream (minutes cold, seconds when cached)"
		CGO_ENABLED=0 go build -trimpath -overlay "$(overlay)" -ldflags "$ld" -o "$BIN/kubelet-kubestream" ./kubelet
		return
	fi
	local mod=$ROOT/hack/kube/kubelet-$version patch=$ROOT/hack/kube/kubelet/server.go.patch k8s stamp
	name=kubelet-kubestream-$version
	[ -f "$mod/go.mod" ] || { log "no module builds the kubelet $version (want $mod)"; exit 1; }
	[ -f "$mod/server.go.patch" ] && patch=$mod/server.go.patch
	stamp=$(sha256sum <"$patch" | cut -c1-16)
	if [ "$(cat "$mod/_kubernetes/.kubestream-patch" 2>/dev/null)" != "$stamp" ]; then
		k8s=$(cd /tmp && go mod download -json k8s.io/kubernetes@$version | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
		[ -d "$k8s" ] || { log "k8s.io/kubernetes@$version not downloaded"; exit 1; }
		rm -rf "$mod/_kubernetes"
		cp -r "$k8s" "$mod/_kubernetes"
		chmod -R u+w "$mod/_kubernetes"
		(cd "$mod/_kubernetes" && git apply "$patch")
		echo "$stamp" >"$mod/_kubernetes/.kubestream-patch"
	fi
	cd "$mod"
	if [ "$stock" = 1 ]; then
		# upstream's cmd/kubelet from the same copy: the hook is never set,
		# so this is the stock kubelet of that version.
		log "building the stock kubelet $version (a minute when the patched one is cached)"
		CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/kubelet-stock-$version" k8s.io/kubernetes/cmd/kubelet
		return
	fi
	log "building the kubelet $version with kubestream (5 minutes cold, seconds when cached)"
	CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/$name" .
}

# overlay prints the -overlay file that lays server.go.patch over the copy's
# pkg/kubelet/server/server.go (remade each time: it names this checkout).
overlay() {
	local dir=$ROOT/_output/kubelet-overlay file=pkg/kubelet/server/server.go
	rm -rf "$dir" && mkdir -p "$dir/$(dirname "$file")"
	cp "$SRC/$file" "$dir/$file"
	(cd "$dir" && git apply "$ROOT/hack/kube/kubelet/server.go.patch")
	printf '{"Replace": {"%s": "%s"}}\n' "$SRC/$file" "$dir/$file" >"$dir/overlay.json"
	echo "$dir/overlay.json"
}

# src makes hack/kube/_kubernetes, the copy of k8s.io/kubernetes this module
# builds from (go.mod replaces the module with it): Go refuses an -overlay
# of a file in its module cache, and one copy keeps everything built from
# this module sharing its packages.
src() {
	local tmp k8s
	[ "$(cat "$SRC/.kubestream-version" 2>/dev/null)" = "$KUBE_VERSION" ] && return
	k8s=$(cd /tmp && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -d "$k8s" ] || { log "k8s.io/kubernetes@$KUBE_VERSION not downloaded"; exit 1; }
	tmp=$(mktemp -d "$SRC.XXXXXX")
	cp -r "$k8s/." "$tmp"
	chmod -R u+w "$tmp"
	echo "$KUBE_VERSION" >"$tmp/.kubestream-version"
	rm -rf "$SRC"
	mv -T "$tmp" "$SRC" 2>/dev/null || rm -rf "$tmp" # another caller won
}

case "${1:-}" in
install) install ;;
cluster) cluster ;;
kubelet) kubelet "${2:-}" ;;
kubelet-stock) kubelet "${2:-}" 1 ;;
src) src ;;
bin) echo "$BIN" ;;
*) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
