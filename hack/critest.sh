#!/usr/bin/env bash
# critest v1.37.0 (cri-tools' CRI conformance suite) runs its streaming
# tests over WebSockets (-websocket-exec -websocket-attach
# -websocket-portforward) against containerd v2.4.2 with kubestream's
# runtime-side server (hack/containerd.sh up 2.4-ws), and, to show the
# difference, against stock containerd 2.4, which refuses them.
#
#   hack/critest.sh            both
#   hack/critest.sh 2.4-ws     one
#   hack/critest.sh full       critest's whole suite (its default streaming, and every
#                              other case) against both, side by side: the table in
#                              _output/critest-full/table.md says what the patch changes
#                              (make test-critest-full; docs/upstream-e2e.md)
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

full=0
if [ "${1:-}" = full ]; then
	full=1
	shift
	rm -rf "$ROOT/_output/critest-full"
fi
variants=("$@")

# fullImages writes into $1 the images critest's image cases pull by name
# (gcr.io/k8s-staging-cri-tools/test-image-*) and names them in images for
# the registry: busybox layers with the users and groups the cases read
# back; test-image-1, -2 and -3 differ (the cases want three image IDs).
fullImages() {
	local b=$1 i
	printf 'root:x:0:0:root:/root:/bin/sh\nwww-data:x:33:33:www-data:/var/www:/bin/sh\nuser-defined-in-image:x:1000:1000::/home/user:/bin/sh\n' >"$b/passwd"
	printf 'root:x:0:\nwww-data:x:33:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >"$b/group"
	oci() { go run ./hack/tools/ociimage -busybox /bin/busybox -add "$b/passwd=/etc/passwd" -add "$b/group=/etc/group" "$@"; }
	oci -name critest/plain:1 -out "$b/plain.tar"
	images+=("test-image-latest=$b/plain.tar" "test-image-tag=$b/plain.tar" "test-image-tags=$b/plain.tar")
	for i in 1 2 3; do
		echo "$i" >"$b/id-$i"
		oci -name "critest/image-$i:1" -out "$b/image-$i.tar" -add "$b/id-$i=/etc/image-id"
		images+=("test-image-$i=$b/image-$i.tar")
	done
	oci -name critest/uid:1 -user 1002 -out "$b/uid.tar"
	oci -name critest/username:1 -user www-data -out "$b/username.tar"
	oci -name critest/uid-group:1 -user 1003:1003 -out "$b/uid-group.tar"
	oci -name critest/username-group:1 -user www-data:www-data -out "$b/username-group.tar"
	oci -name critest/predefined-group:1 -user 1000 -out "$b/predefined-group.tar"
	images+=("test-image-user-uid=$b/uid.tar" "test-image-user-username=$b/username.tar"
		"test-image-user-uid-group=$b/uid-group.tar" "test-image-user-username-group=$b/username-group.tar"
		"test-image-predefined-group=$b/predefined-group.tar")
}
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
	images=()
	if [ "$full" = 1 ]; then
		fullImages "$dir/bin"
	fi
	ip netns add "$ns"
	# nsenter switches the network namespace alone (ip netns exec would
	# remount /sys, hiding the cgroups containerd needs).
	innet() { nsenter --net="/run/netns/$ns" "$@"; }
	ip -n "$ns" link set lo up
	nsenter --net="/run/netns/$ns" "$dir/bin/registry" busybox="$dir/bin/busybox.tar" web="$dir/bin/web.tar" \
		"hostnet-nginx-$(go env GOARCH)=$dir/bin/hostnet.tar" "${images[@]}" >"$dir/registry.out" 2>&1 &
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
	if [ "$full" = 1 ]; then
		echo "== critest's whole suite against containerd $v"
		mkdir -p "$ROOT/_output/critest-full/$v"
		innet "$CRITEST" --runtime-endpoint "$KUBESTREAM_CONTAINERD_ENDPOINT" --image-endpoint "$KUBESTREAM_CONTAINERD_ENDPOINT" \
			-test-images-file "$dir/images.yaml" -ginkgo.no-color -ginkgo.junit-report "$ROOT/_output/critest-full/$v/junit.xml" \
			>"$ROOT/_output/critest-full/$v/critest.log" 2>&1 || true
		grep -E '^(Ran |SUCCESS|FAIL!)' "$ROOT/_output/critest-full/$v/critest.log" || true
		cleanup
		trap - EXIT
		continue
	fi
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
if [ "$full" = 1 ]; then
	go run ./hack/tools/e2etable -dir _output/critest-full -title "critest v1.37.0, the whole suite, against containerd v2.4.2 stock and with kubestream's runtime-side server ($(date -u +%Y-%m-%d))" \
		-stock 2.4 -same 2.4 2.4-ws | tee _output/critest-full/table.md
fi
