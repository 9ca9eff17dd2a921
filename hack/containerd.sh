#!/usr/bin/env bash
# A private containerd for the e2e suite, with nothing from a registry.
#
#   hack/containerd.sh install            Debian packages (containerd 1.6, runc, busybox-static) and
#                                         containerd v2.4.2 built from the Go module proxy (cached)
#   hack/containerd.sh install-ws         containerd v2.4.2 patched (hack/containerd/*.patch): its CRI
#                                         streaming server replaced by kubestream's cri/streaming
#                                         (service.go.patch), an exec's stdin no longer cut short when
#                                         its stdout ends (exec_io.patch); cached by version, patches
#                                         and kubestream's source
#   hack/containerd.sh test-patch         the patches' own tests (go test in the patched containerd)
#   hack/containerd.sh bin 2.4|2.4-ws|1.6 print where that build's binaries are
#   hack/containerd.sh up 2.4|2.4-ws|1.6 DIR
#                                         start a containerd whose every file lives under DIR;
#                                         writes DIR/env (KUBESTREAM_CONTAINERD_ENDPOINT, …)
#   hack/containerd.sh down DIR           stop it and remove DIR, leaving nothing behind
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONTAINERD2_VERSION=v2.4.2
CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}
CONTAINERD2_BIN=$CACHE/containerd-$CONTAINERD2_VERSION/bin
CRICTL_VERSION=v1.37.0
CRICTL=$CACHE/crictl-$CRICTL_VERSION/bin/crictl
export GOFLAGS=-buildvcs=false

log() { echo "containerd.sh: $*" >&2; }

# The patched build's cache key: the patch and every file of kubestream the
# build compiles in (the module's go.mod and go.sum, cri/streaming and what
# it imports from the module).
ws_key() {
	(cd "$ROOT" && { cat hack/containerd/*.patch go.mod go.sum
		# The module's packages cri/streaming imports, found by go list
		# so a new import cannot be left out of the key.
		pkgs=$(go list -deps -f '{{if .Module}}{{if eq .Module.Path "github.com/kubestream/kubestream"}}{{.Dir}}{{end}}{{end}}' ./cri/streaming | sed "s#^$ROOT/##")
		git ls-files $pkgs | grep -v _test.go | sort | xargs cat; } | sha256sum | cut -c1-16)
}
CONTAINERDWS_BIN=$CACHE/containerd-$CONTAINERD2_VERSION-kubestream-$(ws_key)/bin

install_ws() {
	[ -x "$CONTAINERDWS_BIN/containerd" ] && return 0
	install
	log "building containerd $CONTAINERD2_VERSION with kubestream's streaming server (2-5 minutes)"
	local work=$CACHE/containerd-$CONTAINERD2_VERSION-kubestream-src
	patched_source "$work"
	(cd "$work" && GOFLAGS=-mod=mod go build -trimpath -o "$work/_bin/containerd" ./cmd/containerd)
	# Builds for other inputs are stale.
	find "$CACHE" -maxdepth 1 -name "containerd-$CONTAINERD2_VERSION-kubestream-*" ! -name "*-src" -exec rm -rf {} +
	mkdir -p "$CONTAINERDWS_BIN"
	mv "$work/_bin/containerd" "$CONTAINERDWS_BIN/containerd"
	# The shim and ctr are the stock build's: the patch touches the CRI
	# plugin alone, which lives in the daemon.
	ln -sf "$CONTAINERD2_BIN/containerd-shim-runc-v2" "$CONTAINERDWS_BIN/containerd-shim-runc-v2"
	ln -sf "$CONTAINERD2_BIN/ctr" "$CONTAINERDWS_BIN/ctr"
	rm -rf "$work"
}

# patched_source DIR: containerd's module source in DIR with every patch
# of hack/containerd applied, kubestream's module replaced by this tree.
patched_source() {
	local src work=$1 p
	src=$(cd /tmp && go mod download -json "github.com/containerd/containerd/v2@$CONTAINERD2_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -d "$src" ] || { log "containerd $CONTAINERD2_VERSION not downloaded"; exit 1; }
	rm -rf "$work"
	cp -r "$src" "$work"
	chmod -R u+w "$work"
	for p in "$ROOT"/hack/containerd/*.patch; do
		(cd "$work" && patch -p1 --quiet <"$p") || { log "$(basename "$p") does not apply"; exit 1; }
	done
	(cd "$work" && go mod edit -require=github.com/kubestream/kubestream@v0.0.0-00010101000000-000000000000 \
		-replace="github.com/kubestream/kubestream=$ROOT")
}

# The patches' own tests, as they would run upstream: exec_io.patch's in
# internal/cri/io (each fails on stock containerd).
test_patch() {
	PATCH_SRC=$(mktemp -d /tmp/kubestream-containerd-src-XXXXXX)
	trap 'rm -rf "$PATCH_SRC"' EXIT
	patched_source "$PATCH_SRC"
	log "the patches' own tests in containerd $CONTAINERD2_VERSION"
	(cd "$PATCH_SRC" && GOFLAGS=-mod=mod go test -count=1 ./internal/cri/io/)
}

install() {
	local need=()
	command -v runc >/dev/null || need+=(runc)
	[ -x /usr/bin/containerd ] || need+=(containerd)
	dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
	if [ ${#need[@]} -gt 0 ]; then
		log "installing ${need[*]} from Debian"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
	fi
	# Debian's package may start a system containerd; ours never shares its socket.
	if [ ! -x "$CONTAINERD2_BIN/containerd" ] || [ ! -x "$CONTAINERD2_BIN/containerd-shim-runc-v2" ] || [ ! -x "$CONTAINERD2_BIN/ctr" ]; then
		log "building containerd $CONTAINERD2_VERSION (4-5 minutes cold on 2 cores)"
		mkdir -p "$CONTAINERD2_BIN"
		(cd /tmp && GOBIN=$CONTAINERD2_BIN go install \
			github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD2_VERSION \
			github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD2_VERSION \
			github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD2_VERSION)
	fi
	install_crictl
}

install_crictl() {
	[ -x "$CRICTL" ] && return 0
	log "building crictl $CRICTL_VERSION from the Go module proxy"
	mkdir -p "$(dirname "$CRICTL")"
	(cd /tmp && GOBIN=$(dirname "$CRICTL") go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION")
}

bins_for() {
	case "$1" in
	2.4 | 2) echo "$CONTAINERD2_BIN" ;;
	2.4-ws) echo "$CONTAINERDWS_BIN" ;;
	1.6 | 1) echo "/usr/bin" ;;
	*) log "unknown containerd version $1 (want 2.4 or 1.6)"; exit 2 ;;
	esac
}

config_v3() { # containerd 2.x
	cat <<EOF
version = 3
root = "$DIR/root"
state = "$DIR/state"
[grpc]
  address = "$DIR/containerd.sock"
[ttrpc]
  address = "$DIR/containerd.sock.ttrpc"
[metrics]
  address = "127.0.0.1:$MPORT"
[plugins.'io.containerd.transfer.v1.local']
  [[plugins.'io.containerd.transfer.v1.local'.unpack_config]]
    platform = "linux/$GOARCH"
    snapshotter = "native"
[plugins.'io.containerd.grpc.v1.cri']
  enable_tls_streaming = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "$PORT"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "native"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "docker.io/kubestream/pause:e2e"
$([ -z "${KUBESTREAM_REGISTRY_HOSTS:-}" ] || printf "  [plugins.'io.containerd.cri.v1.images'.registry]\n    config_path = \"%s\"\n" "$KUBESTREAM_REGISTRY_HOSTS")
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$DIR/cni/bin"]
    conf_dir = "$DIR/cni/conf"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      snapshotter = "native"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        Root = "$DIR/runc"
EOF
}

config_v2() { # containerd 1.6
	cat <<EOF
version = 2
root = "$DIR/root"
state = "$DIR/state"
[grpc]
  address = "$DIR/containerd.sock"
[ttrpc]
  address = "$DIR/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/kubestream/pause:e2e"
  enable_tls_streaming = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "$PORT"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$DIR/cni/bin"
    conf_dir = "$DIR/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$DIR/runc"
EOF
}

up() {
	local version=$1
	DIR=$(realpath -m "$2")
	local bins
	bins=$(bins_for "$version")
	mkdir -p "$DIR"/{root,state,runc,cni/bin,cni/conf,images}
	PORT=$(if [ -n "${KUBESTREAM_FREEPORT:-}" ]; then "$KUBESTREAM_FREEPORT"; else cd "$ROOT" && go run ./hack/tools/freeport; fi)
	MPORT=$(if [ -n "${KUBESTREAM_FREEPORT:-}" ]; then "$KUBESTREAM_FREEPORT"; else cd "$ROOT" && go run ./hack/tools/freeport; fi)
	GOARCH=$(go env GOARCH)

	if [ -n "${KUBESTREAM_CNI_BRIDGE:-}" ]; then
		# Pods with an address on a bridge (critest fetches a page from
		# the pod's IP): the reference CNI plugins, run only inside the
		# network namespace the caller made for this containerd.
		cp "$KUBESTREAM_CNI_BRIDGE"/{bridge,host-local,loopback} "$DIR/cni/bin/"
		cat >"$DIR/cni/conf/10-kubestream.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "kubestream-bridge", "plugins": [{"type": "bridge", "bridge": "ks0", "isGateway": true,
 "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.89.0.0/24"}]]}}]}
EOF
	else
		(cd "$ROOT" && go build -o "$DIR/cni/bin/loopback" ./hack/tools/cni-loopback)
		cat >"$DIR/cni/conf/10-kubestream.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "kubestream-e2e", "plugins": [{"type": "loopback"}]}
EOF
	fi
	if [[ $version == 1* ]]; then config_v2 >"$DIR/config.toml"; else config_v3 >"$DIR/config.toml"; fi

	echo "$bins" >"$DIR/bins"
	start_containerd "$bins" >/dev/null
	local ctr=("$bins/ctr" --address "$DIR/containerd.sock")

	(cd "$ROOT" && go run ./hack/tools/ociimage -busybox /bin/busybox -name docker.io/kubestream/busybox:e2e -out "$DIR/images/busybox.tar" &&
		go run ./hack/tools/ociimage -busybox /bin/busybox -name docker.io/kubestream/pause:e2e \
			-entrypoint /bin/sleep,2147483647 -out "$DIR/images/pause.tar")
	for img in busybox pause; do
		"${ctr[@]}" -n k8s.io images import --snapshotter native --platform "linux/$GOARCH" "$DIR/images/$img.tar" >/dev/null
	done
	cat >"$DIR/env" <<EOF
export KUBESTREAM_CONTAINERD_ENDPOINT=unix://$DIR/containerd.sock
export KUBESTREAM_CONTAINERD_PID=$(cat "$DIR/containerd.pid")
export KUBESTREAM_CONTAINERD_VERSION=$("$bins/containerd" --version | awk '{print $3}')
export KUBESTREAM_CONTAINERD_RESTART="$ROOT/hack/containerd.sh restart $DIR"
export KUBESTREAM_E2E_IMAGE=docker.io/kubestream/busybox:e2e
export KUBESTREAM_CONTAINERD_METRICS=$([[ $version == 1* ]] || echo "http://127.0.0.1:$MPORT/v1/metrics")
export KUBESTREAM_CRICTL=$([ -x "$CRICTL" ] && echo "$CRICTL")
export KUBESTREAM_CONTAINERD_WEBSOCKETS=$([[ $version == *-ws ]] && echo 1 || echo 0)
EOF
	log "containerd $(awk -F= '/VERSION/{print $2}' "$DIR/env") up at $DIR (streaming port $PORT)"
}

# start_containerd runs containerd from bins on $DIR's config, waits until
# it answers and prints its PID.
start_containerd() {
	local bins=$1 pid
	# containerd finds its shim on PATH: the one built with it goes first.
	PATH="$bins:$PATH" nohup "$bins/containerd" --config "$DIR/config.toml" --log-level info \
		>>"$DIR/containerd.log" 2>&1 &
	pid=$!
	echo "$pid" >"$DIR/containerd.pid"
	for _ in $(seq 1 100); do
		"$bins/ctr" --address "$DIR/containerd.sock" version >/dev/null 2>&1 && { echo "$pid"; return; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	tail -20 "$DIR/containerd.log" >&2
	log "containerd did not start"
	exit 1
}

# restart brings containerd back after a test killed it; containers live on
# in their shims.
restart() {
	DIR=$(realpath -m "$1")
	start_containerd "$(cat "$DIR/bins")"
}

down() {
	DIR=$(realpath -m "$1")
	[ -d "$DIR" ] || return 0
	if [ -f "$DIR/containerd.pid" ]; then
		kill "$(cat "$DIR/containerd.pid")" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$(cat "$DIR/containerd.pid")" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$(cat "$DIR/containerd.pid")" 2>/dev/null || true
	fi
	# Containers the tests left: kill them through runc, then their shims.
	if [ -d "$DIR/runc" ] && command -v runc >/dev/null; then
		for ns in "$DIR"/runc/*; do
			[ -d "$ns" ] || continue
			for id in $(runc --root "$ns" list -q 2>/dev/null); do
				runc --root "$ns" kill "$id" KILL 2>/dev/null || true
				runc --root "$ns" delete -f "$id" 2>/dev/null || true
			done
		done
	fi
	pkill -9 -f "containerd-shim-runc-v2.*$DIR" 2>/dev/null || true
	# Mounts (rootfs, netns) under DIR, deepest first.
	{ grep -F " $DIR/" /proc/mounts || true; } | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$DIR"
}

case "${1:-}" in
install) install ;;
install-ws) install_ws ;;
test-patch) test_patch ;;
bin) bins_for "$2" ;;
up) up "$2" "$3" ;;
restart) restart "$2" ;;
down) down "$2" ;;
*) sed -n '2,13p' "$0"; exit 2 ;;
esac
