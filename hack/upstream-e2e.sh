#!/usr/bin/env bash
# Kubernetes' own e2e tests of the streaming path (hack/upstream-e2e/focus.txt),
# unchanged, against each worker of the kind cluster in turn: ws (kubestream
# on containerd with kubestream's runtime-side server), skew (kubestream in
# the v1.35.4 kubelet on stock containerd), stock (upstream's kubelet),
# crio (kubestream on CRI-O with kubestream's runtime-side server) and
# daemon (upstream's kubelet with kubestream node in front, manifests/node).
#
#   hack/upstream-e2e.sh build    e2e.test and ginkgo v1.37.2 (go test -c
#                                 k8s.io/kubernetes/test/e2e, from hack/kube's
#                                 module), agnhost and the images the cases
#                                 name, cached by their inputs
#   hack/upstream-e2e.sh run      against the running cluster (hack/kind.sh up):
#                                 load the images into every node, then one pass
#                                 per worker, the others cordoned; junit
#                                 reports and the table in _output/upstream-e2e
#   hack/upstream-e2e.sh e2e      hack/kind.sh up, run, down (make test-upstream-e2e)
#   hack/upstream-e2e.sh list     the cases the focus selects (no cluster needed)
#
# No image is pulled: the cases' images are named through KUBE_TEST_REPO_LIST
# under localhost:5000 and preloaded into each node's runtime; a pull of
# anything else goes to the node's own loopback, where nothing listens.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KUBE_VERSION=v1.37.2
CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}
MOD=$ROOT/hack/upstream-e2e
# The module the binaries are built from: the control plane's and the
# kubelets', so the packages they share are compiled once.
KUBE_MOD=$ROOT/hack/kube
OUT=$ROOT/_output/upstream-e2e
KUBECONFIG_KIND=$ROOT/_output/kind/kubeconfig
REPO=localhost:5000
# The cluster's workers, and those a run passes over (UPSTREAM_E2E_FLAVOURS
# picks some; the others stay cordoned through every pass).
WORKERS=(ws skew stock crio daemon)
read -r -a FLAVOURS <<<"${UPSTREAM_E2E_FLAVOURS:-${WORKERS[*]}}"
# ginkgo processes per pass: the cases mostly wait for pods.
PROCS=${UPSTREAM_E2E_PROCS:-6}
# A regular expression of cases to run on the first worker (ws) alone, to
# shorten a run (.ci/run's); the table shows them as left out elsewhere.
FIRST_ONLY=${UPSTREAM_E2E_FIRST_ONLY:-}
export GOFLAGS=-buildvcs=false

log() { echo "upstream-e2e.sh: $*" >&2; }

# at_exit runs its commands when the script exits, last added first.
exits=()
at_exit() { exits=("$1" "${exits[@]}"); }
trap 'for c in "${exits[@]}"; do eval "$c"; done' EXIT

# e2etmp is the TMPDIR of e2e.test and what it runs: its kubectl cases
# leave files there (test-kuberc*, icc-override*, copy-foobar*; ~45 a run),
# so it is a directory of the run's own, removed when the script exits.
e2etmp=""

# key is the hash of what the binaries are built from.
key() { cat "$KUBE_MOD/go.mod" "$KUBE_MOD/go.sum" "$KUBE_MOD/tools/tools.go" | sha256sum | cut -c1-12; }
bindir() { echo "$CACHE/upstream-e2e-$KUBE_VERSION-$(key)"; }
# imagedir is where images() leaves the images, keyed by their recipe too.
imagedir() { echo "$(bindir)/images-$(cat "$0" "$MOD/printenv" hack/tools/ociimage/*.go | sha256sum | cut -c1-12)"; }

# build builds e2e.test, ginkgo and agnhost into bindir, static and with the
# flags hack/kube.sh builds the control plane with, so that the packages
# they share are compiled once.
build() {
	local bin v ld
	bin=$(bindir)
	[ -x "$bin/e2e.test" ] && [ -x "$bin/ginkgo" ] && [ -x "$bin/agnhost" ] && return
	mkdir -p "$bin.tmp"
	v=k8s.io/component-base/version
	ld="-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean"
	log "building e2e.test, ginkgo and agnhost $KUBE_VERSION (minutes cold on 2 cores)"
	hack/kube.sh src
	(cd "$KUBE_MOD" && CGO_ENABLED=0 go test -c -trimpath -ldflags "$ld" -o "$bin.tmp/e2e.test" k8s.io/kubernetes/test/e2e &&
		CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$bin.tmp/" github.com/onsi/ginkgo/v2/ginkgo k8s.io/kubernetes/test/images/agnhost)
	rm -rf "$bin" && mv "$bin.tmp" "$bin"
}

# repolist writes the KUBE_TEST_REPO_LIST file: every registry the e2e
# images name, under localhost:5000 (the key in lower case: a repository's
# path may not have capitals).
repolist() {
	local r
	for r in gcAuthenticatedRegistry promoterE2eRegistry buildImageRegistry gcEtcdRegistry gcRegistry \
		sigStorageRegistry privateRegistry invalidRegistry dockerLibraryRegistry cloudProviderGcpRegistry; do
		echo "$r: $REPO/${r,,}"
	done >"$1"
}

# images writes the images the focused cases run (e2e.test --list-images
# names more, for cases outside the focus) as OCI tarballs into
# $(imagedir): agnhost (its binary on a busybox layer, as upstream's is
# on alpine; the cases name two tags), busybox (Debian's static build) and
# pause (upstream's pause.c, as hack/kind.sh builds it).
images() {
	local bin tool dir list agnhost busybox pause
	bin=$(bindir)
	dir=$(imagedir)
	[ -f "$dir/.done" ] && return
	rm -rf "$bin"/images-*
	tool=$(mktemp -d)
	mkdir -p "$dir"
	repolist "$tool/repos.yaml"
	list=$(KUBE_TEST_REPO_LIST=$tool/repos.yaml "$bin/e2e.test" --list-images)
	busybox=$(grep -m1 "^$REPO/promotere2eregistry/busybox:" <<<"$list")
	pause=$(grep -m1 "^$REPO/gcregistry/pause:" <<<"$list")
	go build -o "$tool/ociimage" ./hack/tools/ociimage
	printf 'root:x:0:0:root:/root:/bin/sh\nuser-defined-in-image:x:1000:1000::/home/user:/bin/sh\n' >"$tool/passwd"
	# Every agnhost tag the cases name (the current one and the previous
	# one) is this agnhost.
	for agnhost in $(grep "^$REPO/promotere2eregistry/agnhost:" <<<"$list"); do
		"$tool/ociimage" -name "$agnhost" -out "$dir/agnhost-${agnhost##*:}.tar" -add "$bin/agnhost=/agnhost" \
			-add "$bin/agnhost=/agnhost-2" -add "$tool/passwd=/etc/passwd" -add "$MOD/printenv=/usr/bin/printenv" -entrypoint /agnhost -cmd pause
	done
	"$tool/ociimage" -name "$busybox" -out "$dir/busybox.tar" -add "$MOD/printenv=/usr/bin/printenv"
	hack/kube.sh src # pause.c is read from hack/kube's copy of Kubernetes
	gcc -Os -static -DVERSION="v${pause##*:}" -o "$tool/pause" \
		"$(cd hack/kube && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
	"$tool/ociimage" -name "$pause" -out "$dir/pause.tar" -add "$tool/pause=/pause" -entrypoint /pause
	rm -rf "$tool"
	touch "$dir/.done"
}

kc() { "$(hack/kube.sh bin)/kubectl" --kubeconfig "$KUBECONFIG_KIND" "$@"; }

# load imports the images into every node's runtime, as the node loads its
# own at boot (hack/kind/images-load: containerd's store, or CRI-O's).
load() {
	local node
	# Streamed in with tar: docker cp writes beneath the node's /tmp, a
	# tmpfs of its own that hides what is copied there.
	for node in $(kc get nodes -o jsonpath='{.items[*].metadata.name}'); do
		tar -C "$(imagedir)" -c . | docker exec -i "$node" sh -c 'd=/var/tmp/upstream-e2e-images; mkdir -p $d && tar -C $d -x &&
			images-load $d; rm -rf $d' 2>&1 | grep -v DEPRECATION >&2 || true
	done
}

# focus turns a list file into ginkgo flags, one per non-comment line.
flags() {
	local flag=$1 file=$2 line
	while IFS= read -r line; do
		case "$line" in '' | '#'*) continue ;; esac
		printf '%s=%s\n' "$flag" "$line"
	done <"$file"
}

# node prints the name of the worker of a flavour.
node() { kc get nodes -l "kubestream.io/flavour=$1" -o jsonpath='{.items[0].metadata.name}'; }

# counters writes a node's ($1) streaming counters into $2/metrics-$3.txt and $2/runtime-$3.txt:
# kubestream's by route (at /metrics/streaming, served by a patched kubelet
# and by kubestream node alike) and the kubelet's own WebSocket one, where
# the node has them, read through the apiserver, and the runtime-side
# server's in containerd or CRI-O, read on the node's address in the
# cluster's own network (hack/kind/files/config.toml, crio.conf), where the
# runtime has it.
counters() {
	local ip
	{
		kc get --raw "/api/v1/nodes/$1/proxy/metrics/streaming" 2>/dev/null | grep '^kubestream_streaming_requests_total'
		kc get --raw "/api/v1/nodes/$1/proxy/metrics" | grep '^kubelet_websocket_streaming_requests_total'
	} >"$2/metrics-$3.txt" || true
	ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1")
	{ curl -sf "http://$ip:1338/v1/metrics" || curl -sf "http://$ip:1338/metrics"; } |
		grep '^kubestream_runtime_streaming_requests_total' >"$2/runtime-$3.txt" || true
}

# pass runs the focused cases with every worker but $1's cordoned, so that
# the cases' pods land on it.
pass() {
	local flavour=$1 target f n bin skip=()
	bin=$(bindir)
	target=$(node "$flavour")
	for f in "${WORKERS[@]}"; do
		n=$(node "$f")
		if [ "$f" = "$flavour" ]; then kc uncordon "$n" >/dev/null; else kc cordon "$n" >/dev/null; fi
	done
	mkdir -p "$OUT/$flavour"
	counters "$target" "$OUT/$flavour" before
	[ "${UPSTREAM_E2E_SLOW:-0}" = 1 ] || mapfile -t skip < <(flags --skip hack/upstream-e2e/skip.txt)
	[ "${UPSTREAM_E2E_SLOW:-0}" = 1 ] && skip=(--skip='\[Serial\]|\[Disruptive\]')
	[ -n "$FIRST_ONLY" ] && [ "$flavour" != "${FLAVOURS[0]}" ] && skip+=(--skip="$FIRST_ONLY")
	log "pass $flavour: the cases on node $target"
	local rc=0
	TMPDIR=$e2etmp KUBE_TEST_REPO_LIST=$OUT/repos.yaml "$bin/ginkgo" --procs="$PROCS" --timeout=40m --no-color \
		--junit-report="$OUT/$flavour/junit.xml" \
		"${focus[@]}" "${skip[@]}" \
		"$bin/e2e.test" -- \
		--kubeconfig="$OUT/kubeconfig" --kubectl-path="$(hack/kube.sh bin)/kubectl" \
		--provider=skeleton --report-dir="$OUT/$flavour" --allowed-not-ready-nodes=0 \
		--non-blocking-taints=node-role.kubernetes.io/control-plane \
		>"$OUT/$flavour/e2e.log" 2>&1 || rc=$?
	tail -n 25 "$OUT/$flavour/e2e.log" | grep -E '^(Ran|PASS|FAIL|Ginkgo ran|Test Suite)|Summarizing|\[FAIL\]' >&2 || true
	counters "$target" "$OUT/$flavour" after
	for f in "${WORKERS[@]}"; do kc uncordon "$(node "$f")" >/dev/null; done
	return 0 # the table decides (a case may fail on every node)
}

run() {
	local f focus=()
	build
	images
	rm -rf "$OUT" && mkdir -p "$OUT"
	e2etmp=$(mktemp -d)
	at_exit 'rm -rf "$e2etmp"'
	repolist "$OUT/repos.yaml"
	# The cases reach the apiserver on the control plane's address in the
	# cluster's own network rather than its published port on loopback:
	# the exec-through-an-HTTP-proxy case skips a loopback server (a proxy
	# is never used for one).
	sed "s#server: https://127.0.0.1:[0-9]*#server: https://$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' kubestream-control-plane):6443#" \
		"$KUBECONFIG_KIND" >"$OUT/kubeconfig"
	load
	mapfile -t focus < <(flags --focus hack/upstream-e2e/focus.txt)
	for f in "${FLAVOURS[@]}"; do pass "$f"; done
	go run ./hack/tools/e2etable -dir "$OUT" -date "$(date -u +%Y-%m-%d)" -first-only "$FIRST_ONLY" "${FLAVOURS[@]}" | tee "$OUT/table.md"
}

# list prints the cases the focus selects and the skips leave, as
# e2e.test --list-tests names them (it ignores ginkgo's filters, so they
# are applied here with grep, whose -E reads these expressions alike).
list() {
	local tmp
	build
	tmp=$(mktemp)
	repolist "$tmp"
	KUBE_TEST_REPO_LIST=$tmp "$(bindir)/e2e.test" --list-tests | sed 's/^ *[^ ]*: //' |
		grep -E -f <(grep -v '^#' hack/upstream-e2e/focus.txt | grep .) |
		grep -Ev -f <(grep -v '^#' hack/upstream-e2e/skip.txt | grep .)
	rm -f "$tmp"
}

# e2e runs the cases on a cluster made for them, or on the one the kind
# stage left up (KIND_KEEP=1), and deletes it whatever the outcome.
e2e() {
	at_exit 'hack/kind.sh down >/dev/null 2>&1 || true'
	build
	images
	if ! kc get nodes >/dev/null 2>&1; then
		hack/kind.sh up
	fi
	run
}

case "${1:-}" in
build) build && images && bindir ;;
run) run ;;
e2e) e2e ;;
list) list ;;
*) sed -n '2,18p' "$0" >&2; exit 2 ;;
esac
