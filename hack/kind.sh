#!/usr/bin/env bash
# A kind cluster whose worker runs the kubelet with kubestream linked in.
#
#   hack/kind.sh up       build the kubelet (static, for the node image), render
#                         manifests/kind/cluster.yaml and create cluster "kubestream";
#                         then run a pod on the worker and exec into it
#   hack/kind.sh render   print the rendered config (no Docker needed)
#   hack/kind.sh down     delete the cluster
#   hack/kind.sh probe    can this Docker engine run kind's nodes? (privileged containers;
#                         an image of one static program, made with docker import, no pull)
#   hack/kind.sh image    build the node image offline (a debootstrap bookworm base, systemd,
#                         containerd v2.4.2 stock and with kubestream's runtime-side server,
#                         runc and the CNI plugins from Debian, crictl and the kubelet, kubeadm,
#                         kubectl v1.37.2 built here), cached by its inputs; prints its name
#   hack/kind.sh node-test  boot one node from it as this engine allows (run_flags) and check
#                         systemd, a nested container and the host's kernel settings
#   hack/kind.sh kind-bin   build kind v0.33.0 (patched by hack/kind/kind.patch where the engine
#                         refuses privileged containers), cached; print its path
#   hack/kind.sh kind-test  kind itself starts a node from the image and runs its commands in it
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

# probe runs what kind's node containers need, smallest first, and says
# which step the engine refuses. kind's docker provider starts every node
# with --privileged, which adds every capability: an engine whose own
# bounding set lacks one cannot start it.
probe() {
	local dir img=kubestream-probe:true
	dir=$(mktemp -d)
	# The image holds one static program that exits 0: no busybox needed on
	# the host, no image to pull.
	mkdir -p "$dir/bin"
	printf 'package main\n\nfunc main() {}\n' >"$dir/true.go"
	(cd "$dir" && CGO_ENABLED=0 go build -o bin/true true.go) && rm "$dir/true.go"
	tar -C "$dir" -c . | docker import - "$img" >/dev/null
	rm -rf "$dir"
	echo "docker $(docker version --format '{{.Server.Version}}'), host bounding set $(awk '/CapBnd/{print $2}' /proc/1/status)"
	docker run --rm "$img" /bin/true && echo "unprivileged container: ok"
	local missing=() c
	for c in CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE \
		NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT \
		SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE \
		AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ; do
		# Only the runtime's refusal counts (an engine may not know a
		# newer capability's name at all).
		if grep -q 'operation not permitted' <<<"$(docker run --rm --cap-add "$c" "$img" /bin/true 2>&1)"; then
			missing+=("$c")
		fi
	done
	[ ${#missing[@]} -eq 0 ] || echo "capabilities the engine cannot grant: ${missing[*]}"
	if docker run --rm --privileged "$img" /bin/true; then
		echo "privileged container: ok"
	else
		echo "privileged container: refused (kind's nodes are privileged containers)"
		return 1
	fi
}

CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}/kind
# The base file system: Debian's packages a node needs, and nothing else.
BASE_PACKAGES=systemd,systemd-sysv,dbus,iptables,iproute2,mount,procps,ca-certificates,kmod,util-linux,conntrack,ethtool,socat,ebtables,libseccomp2,runc,containernetworking-plugins

# base prints the path of the node's base file system as a tarball, made
# with debootstrap once per package list (5-6 minutes, from Debian's mirror).
base() {
	local key out tmp
	key=$(echo "$BASE_PACKAGES" | sha256sum | cut -c1-12)
	out=$CACHE/base-bookworm-$key.tar
	if [ ! -s "$out" ]; then
		command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
		mkdir -p "$CACHE"
		tmp=$(mktemp -d "$CACHE/base-XXXXXX")
		echo "kind.sh: debootstrap bookworm (5-6 minutes)" >&2
		debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$tmp/rootfs" http://deb.debian.org/debian >"$tmp/log" 2>&1 ||
			{ tail -20 "$tmp/log" >&2; rm -rf "$tmp"; exit 1; }
		chroot "$tmp/rootfs" apt-get clean
		# A node's identity is made at its first boot.
		: >"$tmp/rootfs/etc/machine-id"
		rm -f "$tmp/rootfs/var/lib/dbus/machine-id"
		tar -C "$tmp/rootfs" -cf "$out.tmp" . && mv "$out.tmp" "$out"
		rm -rf "$tmp"
	fi
	echo "$out"
}

# image builds the node image from base and what hack/containerd.sh and
# hack/kube.sh build, named kubestream-kind-node:KEY, KEY a hash of every
# input; an image of that name already built is used as it is.
image() {
	local b kubebin cbin wsbin crictl key name tmp
	b=$(base)
	hack/containerd.sh install >&2
	hack/containerd.sh install-ws >&2
	hack/kube.sh install >&2
	kubebin=$(hack/kube.sh bin)
	cbin=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}/containerd-v2.4.2/bin
	wsbin=$(ls -d "${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}"/containerd-v2.4.2-kubestream-*/bin | head -1)
	crictl=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}/crictl-v1.37.0/bin/crictl
	key=$(cat "$b.sha" 2>/dev/null || sha256sum "$b" | cut -c1-16 | tee "$b.sha")
	key=$( { echo "$key $KUBE_VERSION"; cat hack/kind/entrypoint hack/kind/files/* hack/kubelet-tunables; sha256sum "$cbin"/* "$wsbin/containerd" "$crictl" "$kubebin/kubectl" | cut -c1-64; } | sha256sum | cut -c1-16)
	name=kubestream-kind-node:$key
	if docker image inspect "$name" >/dev/null 2>&1; then
		echo "$name"
		return
	fi
	tmp=$(mktemp -d "$CACHE/image-XXXXXX")
	mkdir -p "$tmp/root/usr/local/bin" "$tmp/root/etc/containerd" "$tmp/root/etc/systemd/system/multi-user.target.wants"
	tar -C "$tmp/root" -xf "$b"
	cp -L "$cbin/containerd" "$tmp/root/usr/local/bin/containerd-stock"
	cp -L "$wsbin/containerd" "$tmp/root/usr/local/bin/containerd-kubestream"
	ln -s containerd-stock "$tmp/root/usr/local/bin/containerd"
	cp -L "$cbin/containerd-shim-runc-v2" "$cbin/ctr" "$crictl" "$kubebin/kubectl" "$tmp/root/usr/local/bin/"
	install -m 0755 hack/kind/entrypoint "$tmp/root/usr/local/bin/entrypoint"
	install -D -m 0644 hack/kubelet-tunables "$tmp/root/usr/local/share/kubestream/kubelet-tunables"
	cp hack/kind/files/config.toml "$tmp/root/etc/containerd/config.toml"
	# The nested test container's image (node-test), made here as the
	# e2e's are: no registry.
	mkdir -p "$tmp/root/kind/images"
	go run ./hack/tools/ociimage -busybox /bin/busybox -name docker.io/kubestream/busybox:e2e -out "$tmp/root/kind/images/busybox.tar"
	cp hack/kind/files/containerd.service "$tmp/root/etc/systemd/system/"
	ln -s ../containerd.service "$tmp/root/etc/systemd/system/multi-user.target.wants/containerd.service"
	printf 'runtime-endpoint: unix:///run/containerd/containerd.sock\n' >"$tmp/root/etc/crictl.yaml"
	echo "$KUBE_VERSION" >"$tmp/root/kind/version" # kind reads the node's Kubernetes version here
	tar -C "$tmp/root" -c . | docker import \
		--change 'ENTRYPOINT ["/usr/local/bin/entrypoint"]' --change 'ENV container=docker' \
		- "$name" >/dev/null
	rm -rf "$tmp"
	# Images of this name for other inputs are stale: removed by name.
	docker images --format '{{.Repository}}:{{.Tag}}' kubestream-kind-node | grep -vx "$name" | xargs -r docker rmi >/dev/null || true
	echo "$name"
}

KIND_VERSION=v0.33.0

# kind_bin prints the path of kind $KIND_VERSION built from the module
# proxy: unpatched where the engine starts privileged containers, and
# otherwise with hack/kind/kind.patch, which starts nodes with the flags
# KIND_NODE_PRIVILEGES names instead of --privileged and runs commands in
# them without it. Cached by version and patch.
kind_bin() {
	local key src dir work
	if [ "$(run_flags)" = --privileged ]; then
		key=unpatched
	else
		key=$(sha256sum <hack/kind/kind.patch | cut -c1-12)
	fi
	dir=$CACHE/kind-$KIND_VERSION-$key
	if [ ! -x "$dir/kind" ]; then
		src=$(cd /tmp && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
		[ -d "$src" ] || { echo "kind.sh: kind $KIND_VERSION not downloaded" >&2; exit 1; }
		work=$(mktemp -d "$CACHE/kind-src-XXXXXX")
		cp -r "$src/." "$work"
		chmod -R u+w "$work"
		[ "$key" = unpatched ] || (cd "$work" && patch -p1 --quiet <"$ROOT/hack/kind/kind.patch")
		mkdir -p "$dir"
		(cd "$work" && go build -trimpath -o "$dir/kind" .)
		rm -rf "$work"
	fi
	echo "$dir/kind"
}

# run_flags prints the docker run flags a node needs on this engine, one
# flag or value a line: --privileged where the engine can start such a
# container, and otherwise every capability the engine's own bounding set
# holds (kind's nodes are privileged; PROTOCOLS.md, the Docker engine here),
# with the devices, profiles and cgroup namespace a node needs.
run_flags() {
	local pid bnd c i=0
	pid=$(pidof dockerd | cut -d' ' -f1)
	bnd=$(awk '/CapBnd/ { print $2 }' "/proc/${pid:-1}/status")
	if [ "$((16#$bnd & 16#1ffffffffff))" = "$((16#1ffffffffff))" ]; then
		echo --privileged
		return
	fi
	printf '%s\n' --cap-add ALL
	for c in CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE \
		NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT \
		SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE \
		AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ; do
		[ $(((16#$bnd >> i) & 1)) = 1 ] || printf '%s\n' --cap-drop "$c"
		i=$((i + 1))
	done
	printf '%s\n' --security-opt seccomp=unconfined --security-opt apparmor=unconfined --cgroupns=private \
		--device-cgroup-rule 'a *:* rwm' --device /dev/kmsg
}

# systemd_running waits (a minute at most) for systemd in the node
# container $1 to finish booting, and fails unless it runs with no failed
# unit.
systemd_running() {
	local state i
	for i in $(seq 60); do
		state=$(docker exec "$1" systemctl is-system-running 2>/dev/null || true)
		case $state in running | degraded) break ;; esac
		sleep 1
	done
	echo "kind.sh: node $1: systemd $state"
	docker exec "$1" systemctl --failed --no-legend
	[ "$state" = running ] || { docker logs "$1" 2>&1 | tail -20; exit 1; }
}

# node_test boots one node container from the image on a network of its
# own (both named, and removed by name) and checks what a node needs before
# any kubelet: systemd running with no failed unit, containerd running a
# nested container whose cgroup limit applies and a nested privileged one.
# `make test-kind-node` runs it under the kernel-settings guard.
node_test() {
	local img name=kubestream-kind-nodetest flags out i
	img=$(image)
	mapfile -t flags < <(run_flags)
	docker rm -f -v "$name" >/dev/null 2>&1 || true
	docker network rm "$name" >/dev/null 2>&1 || true
	trap 'docker rm -f -v '"$name"' >/dev/null 2>&1 || true; docker network rm '"$name"' >/dev/null 2>&1 || true' EXIT
	docker network create "$name" >/dev/null
	docker run -d --name "$name" --hostname "$name" --network "$name" "${flags[@]}" \
		--tmpfs /run --tmpfs /tmp -v /var --stop-signal SIGRTMIN+3 "$img" >/dev/null
	systemd_running "$name"
	# The kubelet's tunables read as it wants them inside, from covers in
	# the node's own mount namespace; the host's stay as they are (the
	# guard around this test checks every one).
	out=$(docker exec "$name" cat /proc/sys/vm/overcommit_memory /proc/sys/kernel/panic_on_oops | tr '\n' ' ')
	echo "kind.sh: node's vm.overcommit_memory, kernel.panic_on_oops: $out(host: $(cat /proc/sys/vm/overcommit_memory /proc/sys/kernel/panic_on_oops | tr '\n' ' '))"
	[ "$out" = "1 1 " ] || exit 1
	for i in $(seq 30); do docker exec "$name" ctr version >/dev/null 2>&1 && break; sleep 1; done
	docker exec "$name" ctr -n k8s.io images import /kind/images/busybox.tar >/dev/null
	docker exec "$name" ctr -n k8s.io run -d --memory-limit 67108864 docker.io/kubestream/busybox:e2e nested sleep 60 2>/dev/null
	out=$(docker exec "$name" cat /sys/fs/cgroup/memory/k8s.io/nested/memory.limit_in_bytes)
	docker exec "$name" ctr -n k8s.io task kill -s KILL nested
	echo "kind.sh: nested container: memory limit $out"
	[ "$out" = 67108864 ] || exit 1
	out=$(docker exec "$name" ctr -n k8s.io run --rm --privileged docker.io/kubestream/busybox:e2e nested-privileged \
		sh -c "ip link add kstest0 type veth peer name kstest1 && echo created" 2>/dev/null)
	echo "kind.sh: nested privileged container: ${out:-refused}"
	[ "$out" = created ]
}

# kind_test creates a cluster of one node with kind_bin on a Docker network
# of its own and checks how far it gets: kind starts the node (without
# --privileged where the engine refuses it) and runs its own commands in it
# (docker exec, likewise), and the node boots; the node image has no
# kubeadm yet, so kind stops at starting the control plane, and the test
# checks that it stops there and not before. Everything it made is removed
# by name.
kind_test() {
	local kind img name=kubestream-kindtest net=kubestream-kindtest out privileged
	kind=$(kind_bin)
	img=$(image)
	trap "$(printf '%q delete cluster --name %q >/dev/null 2>&1 || true; docker network rm %q >/dev/null 2>&1 || true' "$kind" "$name" "$net")" EXIT
	"$kind" delete cluster --name "$name" >/dev/null 2>&1 || true
	export KIND_EXPERIMENTAL_DOCKER_NETWORK=$net
	[ "$(run_flags)" = --privileged ] || export KIND_NODE_PRIVILEGES="$(run_flags)"
	out=$("$kind" create cluster --name "$name" --image "$img" --retain 2>&1) && {
		echo "$out"
		echo "kind.sh: kind created a cluster from an image without kubeadm?" >&2
		exit 1
	}
	echo "kind.sh: kind's output (it stops at kubeadm init, which the node image does not have yet):"
	echo "$out" | sed 's/^/  kind: /'
	privileged=$(docker inspect -f '{{.HostConfig.Privileged}}' "$name-control-plane")
	echo "kind.sh: node $name-control-plane privileged: $privileged"
	[ -n "${KIND_NODE_PRIVILEGES:-}" ] && [ "$privileged" = true ] && exit 1
	systemd_running "$name-control-plane"
	# kind wrote its kubeadm configuration into the node (its own exec)
	# and stopped at kubeadm init, which the image does not have yet.
	docker exec "$name-control-plane" test -s /kind/kubeadm.conf
	grep -q "kubeadm" <<<"$out"
}

case "${1:-}" in
image) image ;;
kind-bin) kind_bin ;;
kind-test) kind_test ;;
node-test) node_test ;;
render) render ;;
probe) probe ;;
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
