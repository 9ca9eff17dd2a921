#!/usr/bin/env bash
# critest v1.37.0 (cri-tools' CRI conformance suite) runs its streaming
# tests over WebSockets (-websocket-exec -websocket-attach
# -websocket-portforward) against containerd v2.4.2 with kubestream's
# runtime-side server (hack/containerd.sh up 2.4-ws), and, to show the
# difference, against stock containerd 2.4, which refuses them.
#
#   hack/critest.sh            both
#   hack/critest.sh 2.4-ws     one
#
# No registry is reachable and critest pulls: the images built here are
# served by hack/tools/registry on loopback and named in -test-images-file.
# Its port-forward case first fetches a page from the pod's IP, so pods get
# addresses on a bridge (the reference CNI plugins, built from the module
# proxy). containerd, the registry, the bridge and critest all run inside a
# network namespace made for the run and deleted after it: no traffic or
# interface reaches the machine's own.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export GOFLAGS=-buildvcs=false
CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}
CRITEST=$CACHE/critest-v1.37.0/bin/critest
CNI=$CACHE/cni-plugins-v1.10.0/bin
log() { echo "critest.sh: $*" >&2; }

hack/containerd.sh install
hack/containerd.sh install-ws
if [ ! -x "$CRITEST" ]; then
	log "building critest v1.37.0 from the Go module proxy (a test binary: go test -c)"
	mod=$(mktemp -d)
	printf 'module critestbuild\n\ngo 1.26\n' >"$mod/go.mod"
	(cd "$mod" && GOFLAGS=-mod=mod go get sigs.k8s.io/cri-tools@v1.37.0 >/dev/null 2>&1 &&
		GOFLAGS=-mod=mod go test -c -o "$CRITEST.tmp" sigs.k8s.io/cri-tools/cmd/critest)
	mv "$CRITEST.tmp" "$CRITEST"
	rm -rf "$mod"
fi
if [ ! -x "$CNI/bridge" ] || [ ! -x "$CNI/host-local" ] || [ ! -x "$CNI/loopback" ]; then
	log "building the CNI plugins v1.10.0 (bridge, host-local, loopback) from the Go module proxy"
	mkdir -p "$CNI"
	(cd /tmp && GOBIN=$CNI go install github.com/containernetworking/plugins/plugins/main/bridge@v1.10.0 \
		github.com/containernetworking/plugins/plugins/ipam/host-local@v1.10.0 \
		github.com/containernetworking/plugins/plugins/main/loopback@v1.10.0)
fi

variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(2.4-ws 2.4)
for v in "${variants[@]}"; do
	dir=$(mktemp -d /tmp/kubestream-containerd-XXXXXX)
	ns=kubestream-critest-$$
	reg=
	cleanup() {
		[ -z "$reg" ] || kill "$reg" 2>/dev/null || true
		hack/containerd.sh down "$dir"
		ip netns del "$ns" 2>/dev/null || true
	}
	trap cleanup EXIT
	# What runs inside is built out here, where the module proxy is.
	mkdir -p "$dir/bin"
	go build -o "$dir/bin/freeport" ./hack/tools/freeport
	go build -o "$dir/bin/registry" ./hack/tools/registry
	go run ./hack/tools/ociimage -busybox /bin/busybox -name critest/busybox:1 -out "$dir/bin/busybox.tar"
	# critest's web server: the image's default command serves a page on 80.
	go run ./hack/tools/ociimage -busybox /bin/busybox -name critest/web:1 -out "$dir/bin/web.tar" \
		-entrypoint 'sh,-c,mkdir -p /www && echo kubestream > /www/index.html && exec httpd -f -p 80 -h /www'
	# The host-network case's image is fixed (gcr.io/k8s-staging-cri-tools/
	# hostnet-nginx-<arch>, a page on port 12003): containerd is told gcr.io
	# is the loopback registry, which serves an image doing that.
	go run ./hack/tools/ociimage -busybox /bin/busybox -name critest/hostnet:1 -out "$dir/bin/hostnet.tar" \
		-entrypoint 'sh,-c,mkdir -p /www && echo kubestream > /www/index.html && exec httpd -f -p 12003 -h /www'
	ip netns add "$ns"
	# nsenter switches the network namespace alone (ip netns exec would
	# remount /sys, hiding the cgroups containerd needs).
	innet() { nsenter --net="/run/netns/$ns" "$@"; }
	ip -n "$ns" link set lo up
	nsenter --net="/run/netns/$ns" "$dir/bin/registry" busybox="$dir/bin/busybox.tar" web="$dir/bin/web.tar" \
		"hostnet-nginx-$(go env GOARCH)=$dir/bin/hostnet.tar" >"$dir/registry.out" 2>&1 &
	reg=$!
	for _ in $(seq 1 50); do grep -q READY "$dir/registry.out" 2>/dev/null && break; sleep 0.1; done
	addr=$(awk '/READY/{print $2}' "$dir/registry.out")
	mkdir -p "$dir/hosts/gcr.io"
	cat >"$dir/hosts/gcr.io/hosts.toml" <<HOSTS
server = "http://$addr"
[host."http://$addr"]
  capabilities = ["pull", "resolve"]
HOSTS
	innet env GOPROXY=off KUBESTREAM_FREEPORT="$dir/bin/freeport" KUBESTREAM_CNI_BRIDGE="$CNI" KUBESTREAM_REGISTRY_HOSTS="$dir/hosts" \
		hack/containerd.sh up "$v" "$dir" 2> >(grep -v DEPRECATION >&2)
	source "$dir/env"
	cat >"$dir/images.yaml" <<IMAGES
defaultTestContainerImage: $addr/e2e-test-images/busybox:1.29-2
webServerTestImage: $addr/e2e-test-images/web:1
IMAGES
	echo "== critest streaming over WebSockets against containerd $v"
	rc=0
	innet "$CRITEST" --runtime-endpoint "$KUBESTREAM_CONTAINERD_ENDPOINT" --image-endpoint "$KUBESTREAM_CONTAINERD_ENDPOINT" \
		-test-images-file "$dir/images.yaml" -websocket-exec -websocket-attach -websocket-portforward \
		-ginkgo.focus 'Streaming' -ginkgo.no-color >"$dir/critest.log" 2>&1 || rc=$?
	grep -E '^(Ran |SUCCESS|FAIL!)|\[FAIL\]|INFO: Unexpected error' "$dir/critest.log" | sort -u || true
	if [ "$v" = 2.4-ws ] && [ "$rc" != 0 ]; then
		tail -60 "$dir/critest.log" >&2
		log "critest's streaming cases failed against containerd with kubestream's server"
		exit 1
	fi
	if [ "$v" != 2.4-ws ] && [ "$rc" = 0 ]; then
		log "stock containerd passed critest's WebSocket streaming cases: expected it to refuse them"
		exit 1
	fi
	cleanup
	trap - EXIT
done
