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
# Its port-forward case is skipped: it first fetches a web page from the
# pod's IP, and the e2e containerd's CNI is loopback-only (a pod has no
# address the host can reach). The other three streaming cases run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export GOFLAGS=-buildvcs=false
CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}
CRITEST=$CACHE/critest-v1.37.0/bin/critest
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

variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(2.4-ws 2.4)
for v in "${variants[@]}"; do
	dir=$(mktemp -d /tmp/kubestream-containerd-XXXXXX)
	reg=
	cleanup() { [ -z "$reg" ] || kill "$reg" 2>/dev/null || true; hack/containerd.sh down "$dir"; }
	trap cleanup EXIT
	hack/containerd.sh up "$v" "$dir" 2> >(grep -v DEPRECATION >&2)
	source "$dir/env"
	go run ./hack/tools/ociimage -busybox /bin/busybox -name critest/busybox:1 -out "$dir/critest-busybox.tar"
	go build -o "$dir/registry" ./hack/tools/registry
	"$dir/registry" busybox="$dir/critest-busybox.tar" >"$dir/registry.out" &
	reg=$!
	for _ in $(seq 1 50); do grep -q READY "$dir/registry.out" 2>/dev/null && break; sleep 0.1; done
	addr=$(awk '/READY/{print $2}' "$dir/registry.out")
	cat >"$dir/images.yaml" <<IMAGES
defaultTestContainerImage: $addr/e2e-test-images/busybox:1.29-2
webServerTestImage: $addr/e2e-test-images/busybox:1.29-2
IMAGES
	echo "== critest streaming over WebSockets against containerd $v"
	rc=0
	"$CRITEST" --runtime-endpoint "$KUBESTREAM_CONTAINERD_ENDPOINT" --image-endpoint "$KUBESTREAM_CONTAINERD_ENDPOINT" \
		-test-images-file "$dir/images.yaml" -websocket-exec -websocket-attach -websocket-portforward \
		-ginkgo.focus 'Streaming' -ginkgo.skip 'portforward' -ginkgo.no-color >"$dir/critest.log" 2>&1 || rc=$?
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
