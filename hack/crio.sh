#!/usr/bin/env bash
# CRI-O, the second runtime, built here from the Go module proxy.
#
#   hack/crio.sh install      CRI-O v1.36.3 with kubestream's runtime-side server (hack/crio/*.patch)
#                             and pinns; conmon from Debian; cached by version, tags, patches and
#                             kubestream's source
#   hack/crio.sh install-stock  the same version unpatched (the stock runtime, for comparison)
#   hack/crio.sh bin ws|stock print where that build's binaries are
#   hack/crio.sh up ws|stock DIR
#                             start a CRI-O whose every file lives under DIR (storage vfs, runc,
#                             a loopback-only CNI); writes DIR/env as hack/containerd.sh does, so
#                             the e2e suite's runtime cases run against it
#   hack/crio.sh down DIR     stop it and remove DIR, leaving nothing behind
#   hack/crio.sh e2e [ws|stock...]  for each build (default both): install, up, the e2e suite's
#                             crictl cases (WebSocket transport, stdin into a file), down; with ws,
#                             the patches' own tests first (test-patch)
#   hack/crio.sh test-patch   the patches' own tests (go test in the patched CRI-O): tty.patch's
#                             in internal/oci, each but the resize one failing on stock v1.36.3
#
# Why v1.36.3: the proxy serves CRI-O at exact versions only, and of those
# (v1.35.2, v1.36.1-v1.36.3 on 2026-12-06) it is the newest; v1.36.1 pins
# k8s.io modules at a release candidate the proxy refuses.
#
# Build tags: containers_image_ostree_stub and containers_image_openpgp
# (no libostree, no gpgme: a node here verifies no signature), and the btrfs
# and devicemapper graph drivers left out (a kind node stores images on its
# volume with overlay, the hermetic CRI-O with vfs). No seccomp tag: it needs
# libseccomp's headers, and the kind node runs its pods unconfined.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CRIO_VERSION=v1.36.3
CRIO_MODULE=github.com/cri-o/cri-o
CRIO_TAGS="containers_image_ostree_stub containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper"
CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}
export GOFLAGS=-buildvcs=false

log() { echo "crio.sh: $*" >&2; }

# The patched build's key: CRI-O's version and tags, the patches, and every
# file of kubestream the build compiles in (as hack/containerd.sh keys its
# patched build).
ws_key() {
	(cd "$ROOT" && { echo "$CRIO_VERSION $CRIO_TAGS"; cat hack/crio/*.patch go.mod go.sum
		pkgs=$(go list -deps -f '{{if .Module}}{{if eq .Module.Path "github.com/kubestream/kubestream"}}{{.Dir}}{{end}}{{end}}' ./cri/streaming | sed "s#^$ROOT/##")
		git ls-files $pkgs | grep -v _test.go | sort | xargs cat; } | sha256sum | cut -c1-16)
}

bins_for() {
	case "$1" in
	ws) echo "$CACHE/crio-$CRIO_VERSION-kubestream-$(ws_key)/bin" ;;
	stock) echo "$CACHE/crio-$CRIO_VERSION-stock-$(echo "$CRIO_TAGS" | sha256sum | cut -c1-12)/bin" ;;
	*) log "unknown CRI-O build $1 (want ws or stock)"; exit 2 ;;
	esac
}

# source DIR PATCHED: CRI-O's module source in DIR; with PATCHED=1 every
# patch of hack/crio applied and kubestream's module replaced by this tree.
# CRI-O v1.36.3 is written against the k8s.io modules v0.36 (cri-api v0.37
# drops a signal it names), so they stay at its own versions: cri/streaming
# compiles against cri-streaming and cri-api v0.36 as well as v0.37
# (hack/crio.sh install is that check).
source_tree() {
	local src work=$1 patched=$2 p m
	src=$(cd /tmp && go mod download -json "$CRIO_MODULE@$CRIO_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -d "$src" ] || { log "CRI-O $CRIO_VERSION not downloaded"; exit 1; }
	rm -rf "$work"
	cp -r "$src" "$work"
	chmod -R u+w "$work"
	[ "$patched" = 1 ] || return 0
	for p in "$ROOT"/hack/crio/*.patch; do
		(cd "$work" && patch -p1 --quiet <"$p") || { log "$(basename "$p") does not apply"; exit 1; }
	done
	local edits=(-require=github.com/kubestream/kubestream@v0.0.0-00010101000000-000000000000
		-replace="github.com/kubestream/kubestream=$ROOT")
	for m in $(cd "$work" && go list -m -f '{{if not .Main}}{{.Path}}@{{.Version}}{{end}}' all 2>/dev/null | grep '^k8s\.io/' || true); do
		edits+=(-replace="${m%@*}=$m")
	done
	# What kubestream requires and CRI-O does not, at CRI-O's k8s.io
	# version: the whole k8s.io set moves together.
	for m in k8s.io/apiserver k8s.io/streaming; do
		grep -q "^	$m " "$work/go.mod" || edits+=(-replace="$m=$m@$(cd "$work" && go list -m -f '{{.Version}}' k8s.io/apimachinery)")
	done
	(cd "$work" && go mod edit "${edits[@]}")
}

build() { # build KIND OUT
	local kind=$1 out=$2 work
	work=$(mktemp -d "$CACHE/crio-src-XXXXXX")
	source_tree "$work" "$([ "$kind" = ws ] && echo 1 || echo 0)"
	log "building CRI-O $CRIO_VERSION ($kind; minutes cold on 2 cores)"
	(cd "$work" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=1 go build -trimpath -tags "$CRIO_TAGS" \
		-ldflags "-s -w -X $CRIO_MODULE/internal/version.buildCommit=$CRIO_VERSION-$kind" -o "$work/_bin/crio" ./cmd/crio)
	# pinns pins a pod's namespaces; CRI-O's own C, built as its Makefile does.
	(cd "$work/pinns" && gcc -std=c99 -Os -O3 -Wall -static -o "$work/_bin/pinns" src/*.c && strip -s "$work/_bin/pinns")
	mkdir -p "$out.tmp"
	mv "$work/_bin/crio" "$work/_bin/pinns" "$out.tmp/"
	rm -rf "$out" && mv "$out.tmp" "$out"
	rm -rf "$work"
}

install_packages() {
	local need=()
	command -v conmon >/dev/null || need+=(conmon)
	command -v runc >/dev/null || need+=(runc)
	command -v skopeo >/dev/null || need+=(skopeo)
	if [ ${#need[@]} -gt 0 ]; then
		log "installing ${need[*]} from Debian"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
	fi
}

# The patches' own tests, as they would run upstream: tty.patch's in
# internal/oci (a tty exec's last output copied before ttyCmd returns; no
# echo on CRI-O's own terminal; the wait for the output bounded by the
# command's WaitDelay). CRI-O's unit tests build with the test tag (its
# *_inject.go files); the package's ginkgo suite is not run here.
test_patch() {
	mkdir -p "$CACHE"
	PATCH_SRC=$(mktemp -d "$CACHE/crio-src-XXXXXX")
	trap 'rm -rf "$PATCH_SRC"' EXIT
	source_tree "$PATCH_SRC" 1
	log "the patches' own tests in CRI-O $CRIO_VERSION"
	(cd "$PATCH_SRC" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=1 go test -count=1 -tags "test $CRIO_TAGS" \
		-run '^TestTTYCmd' ./internal/oci/)
	rm -rf "$PATCH_SRC"
	trap - EXIT
}

install() { # install ws|stock
	local bin
	bin=$(bins_for "$1")
	[ -x "$bin/crio" ] && [ -x "$bin/pinns" ] && return 0
	build "$1" "$bin"
	# Builds of the same kind for other inputs are stale.
	find "$CACHE" -maxdepth 1 -name "crio-$CRIO_VERSION-$([ "$1" = ws ] && echo kubestream || echo stock)-*" ! -path "$(dirname "$bin")" -exec rm -rf {} +
}

# config writes the hermetic CRI-O's configuration: every path under $DIR,
# vfs storage (overlay would mount on the host), cgroupfs, runc through
# runc-fit, the loopback CNI of the e2e setup, metrics on loopback.
config() {
	cat <<EOF
[crio]
root = "$DIR/root"
runroot = "$DIR/runroot"
storage_driver = "vfs"
log_dir = "$DIR/logs"
version_file = "$DIR/version"
version_file_persist = "$DIR/version-persist"
clean_shutdown_file = "$DIR/clean.shutdown"
[crio.api]
listen = "$DIR/crio.sock"
stream_address = "127.0.0.1"
stream_port = "$PORT"
[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
pinns_path = "$BINS/pinns"
namespaces_dir = "$DIR/ns"
container_exits_dir = "$DIR/exits"
container_attach_socket_dir = "$DIR/attach"
default_mounts_file = "$DIR/mounts.conf"
hooks_dir = []
[crio.runtime.runtimes.runc]
runtime_path = "$DIR/bin/runc-fit"
runtime_type = "oci"
runtime_root = "$DIR/runc"
monitor_path = "$(command -v conmon)"
monitor_cgroup = "pod"
[crio.image]
pause_image = "docker.io/kubestream/pause:e2e"
pause_command = ""
signature_policy = "$DIR/policy.json"
[crio.network]
network_dir = "$DIR/cni/conf"
plugin_dirs = ["$DIR/cni/bin"]
[crio.metrics]
enable_metrics = true
metrics_host = "127.0.0.1"
metrics_port = $MPORT
[crio.nri]
enable_nri = false
EOF
}

up() { # up ws|stock DIR
	local kind=$1 img
	DIR=$(realpath -m "$2")
	BINS=$(bins_for "$kind")
	install_packages
	mkdir -p "$DIR"/{root,runroot,logs,ns,exits,attach,runc,bin,cni/bin,cni/conf,images,crio.conf.d}
	PORT=$(freeport)
	MPORT=$(freeport)
	(cd "$ROOT" && go build -o "$DIR/bin/runc-fit" ./hack/tools/runc-fit &&
		go build -o "$DIR/cni/bin/loopback" ./hack/tools/cni-loopback)
	cat >"$DIR/cni/conf/10-kubestream.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "kubestream-e2e", "plugins": [{"type": "loopback"}]}
EOF
	echo '{"default": [{"type": "insecureAcceptAnything"}]}' >"$DIR/policy.json"
	: >"$DIR/mounts.conf"
	config >"$DIR/crio.conf"
	echo "$BINS" >"$DIR/bins"
	start_crio >/dev/null
	"$ROOT/hack/containerd.sh" install >/dev/null # crictl and busybox-static, as for containerd
	(cd "$ROOT" && go run ./hack/tools/ociimage -busybox /bin/busybox -name docker.io/kubestream/busybox:e2e -out "$DIR/images/busybox.tar" &&
		go run ./hack/tools/ociimage -busybox /bin/busybox -name docker.io/kubestream/pause:e2e \
			-entrypoint /bin/sleep,2147483647 -out "$DIR/images/pause.tar")
	for img in busybox pause; do
		skopeo --insecure-policy copy -q "oci-archive:$DIR/images/$img.tar" \
			"containers-storage:[vfs@$DIR/root+$DIR/runroot]docker.io/kubestream/$img:e2e" >/dev/null
	done
	cat >"$DIR/env" <<EOF
export KUBESTREAM_CONTAINERD_ENDPOINT=unix://$DIR/crio.sock
export KUBESTREAM_CONTAINERD_PID=$(cat "$DIR/crio.pid")
export KUBESTREAM_CONTAINERD_VERSION=$CRIO_VERSION
export KUBESTREAM_RUNTIME_NAME="CRI-O $CRIO_VERSION ($kind)"
export KUBESTREAM_CONTAINERD_RESTART="$ROOT/hack/crio.sh restart $DIR"
export KUBESTREAM_E2E_IMAGE=docker.io/kubestream/busybox:e2e
export KUBESTREAM_CONTAINERD_METRICS=http://127.0.0.1:$MPORT/metrics
export KUBESTREAM_CRICTL=$CACHE/crictl-v1.37.0/bin/crictl
export KUBESTREAM_CONTAINERD_WEBSOCKETS=$([ "$kind" = ws ] && echo 1 || echo 0)
EOF
	log "CRI-O $CRIO_VERSION ($kind) up at $DIR (streaming port $PORT)"
}

freeport() {
	if [ -n "${KUBESTREAM_FREEPORT:-}" ]; then "$KUBESTREAM_FREEPORT"; else cd "$ROOT" && go run ./hack/tools/freeport; fi
}

# start_crio runs CRI-O from $DIR's configuration, waits until it answers
# and prints its PID.
start_crio() {
	local bins pid
	bins=$(cat "$DIR/bins")
	nohup "$bins/crio" --config "$DIR/crio.conf" --config-dir "$DIR/crio.conf.d" --log-level info \
		>>"$DIR/crio.log" 2>&1 &
	pid=$!
	echo "$pid" >"$DIR/crio.pid"
	for _ in $(seq 1 150); do
		[ -S "$DIR/crio.sock" ] && { echo "$pid"; return; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	tail -20 "$DIR/crio.log" >&2
	log "CRI-O did not start"
	exit 1
}

# restart brings CRI-O back after a test killed it; containers live on
# under their conmon.
restart() {
	DIR=$(realpath -m "$1")
	start_crio
}

down() {
	DIR=$(realpath -m "$1")
	[ -d "$DIR" ] || return 0
	if [ -f "$DIR/crio.pid" ]; then
		kill "$(cat "$DIR/crio.pid")" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$(cat "$DIR/crio.pid")" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$(cat "$DIR/crio.pid")" 2>/dev/null || true
	fi
	# Containers the tests left: killed through runc, then their conmon.
	if [ -d "$DIR/runc" ] && command -v runc >/dev/null; then
		for id in $(runc --root "$DIR/runc" list -q 2>/dev/null); do
			runc --root "$DIR/runc" kill "$id" KILL 2>/dev/null || true
			runc --root "$DIR/runc" delete -f "$id" 2>/dev/null || true
		done
	fi
	pkill -9 -f "conmon.*$DIR" 2>/dev/null || true
	# Mounts (storage, namespaces) under DIR, deepest first.
	{ grep -F " $DIR/" /proc/mounts || true; } | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$DIR"
}

# e2e runs crictl's cases against each build named: on ws crictl's
# WebSocket transport is served over v5 and counted in CRI-O's metrics; on
# stock it gets 403 (TestCrictlWebSockets says which it expects).
e2e() {
	local kind dir builds=("$@")
	[ ${#builds[@]} -gt 0 ] || builds=(ws stock)
	if [[ " ${builds[*]} " == *" ws "* ]]; then
		test_patch
	fi
	for kind in "${builds[@]}"; do
		case $kind in ws) install ws ;; stock) install stock ;; *) log "unknown build $kind"; exit 2 ;; esac
		dir=$(mktemp -d /tmp/kubestream-crio-XXXXXX)
		trap 'down "$dir"' EXIT
		up "$kind" "$dir"
		echo "== [${SECONDS}s] crictl against CRI-O $CRIO_VERSION ($kind)"
		(cd "$ROOT" && source "$dir/env" && go test -tags containerd -count=1 -timeout 10m \
			-run '^(TestCrictlWebSockets|TestCrictlStdinIntoFile)$' ./e2e/) || { tail -30 "$dir/crio.log" >&2; exit 1; }
		down "$dir"
		trap - EXIT
	done
}

case "${1:-}" in
install) install ws ;;
install-stock) install stock ;;
bin) bins_for "$2" ;;
up) up "$2" "$3" ;;
restart) restart "$2" ;;
down) down "$2" ;;
e2e) shift; e2e "$@" ;;
test-patch) test_patch ;;
*) sed -n '2,18p' "$0"; exit 2 ;;
esac
