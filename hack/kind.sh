#!/usr/bin/env bash
# kind for real: a cluster of kubestream nodes beside stock ones, on this
# Docker engine, with nothing pulled (manifests/kind/cluster.yaml).
#
#   hack/kind.sh up       build what the cluster needs (cached by its inputs) and create
#                         cluster "kubestream": a control plane and workers ws, skew, stock, crio,
#                         daemon; install kubestream node on daemon (manifests/node); then exec
#                         through each worker; prints KUBECONFIG=...
#   hack/kind.sh e2e      up, the e2e (e2e/kind_test.go) through the cluster's kubeconfig, down
#                         (KIND_KEEP=1: the cluster stays up if the e2e passed)
#   hack/kind.sh down     delete the cluster and its network, by name
#   hack/kind.sh render   print the cluster's kind configuration
#   hack/kind.sh probe    can this Docker engine start kind's privileged nodes? (an image
#                         of one static program, made with docker import, no pull)
#   hack/kind.sh base     debootstrap the node's base file system (Debian bookworm), cached;
#                         print its path
#   hack/kind.sh image    build the node image offline (a debootstrap bookworm base, systemd,
#                         containerd v2.4.2 stock and with kubestream's runtime-side server,
#                         runc and the CNI plugins from Debian, crictl, kubeadm, kubectl and
#                         the kubelets built here, the control-plane and add-on images),
#                         cached by its inputs; prints its name
#   hack/kind.sh node-test  boot one node from it as this engine allows (run_flags) and check
#                         systemd, a nested container and the host's kernel settings
#   hack/kind.sh kind-bin   build kind v0.33.0 (patched by hack/kind/kind.patch where the engine
#                         refuses privileged containers), cached; print its path
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
KUBE_VERSION=v1.37.2
NAME=kubestream

CLUSTER=kubestream
# The workers' flavours (hack/kind/flavours), one worker each.
FLAVOURS="ws skew stock crio daemon"
NET=kubestream-kind
KUBECONFIG_OUT=$ROOT/_output/kind/kubeconfig

render() { sed "s#FLAVOURS#$ROOT/hack/kind/flavours#" manifests/kind/cluster.yaml; }

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
BASE_PACKAGES=systemd,systemd-sysv,dbus,iptables,iproute2,mount,procps,ca-certificates,kmod,util-linux,conntrack,ethtool,socat,ebtables,libseccomp2,runc,containernetworking-plugins,conmon,skopeo

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

# The images kubeadm v1.37.2 names (cmd/kubeadm/app/constants), built here.
ETCD_TAG=3.7.0-0
COREDNS_TAG=v1.14.6
PAUSE_TAG=3.10.2

# coredns_bin prints the path of CoreDNS built from hack/kind/coredns (the
# plugins kubeadm's Corefile names), cached by that module's files.
coredns_bin() {
	local key out
	key=$( { echo static; cat hack/kind/coredns/go.mod hack/kind/coredns/go.sum hack/kind/coredns/main.go; } | sha256sum | cut -c1-12)
	out=$CACHE/coredns-$COREDNS_TAG-$key
	if [ ! -x "$out" ]; then
		echo "kind.sh: building CoreDNS $COREDNS_TAG (minutes cold)" >&2
		(cd hack/kind/coredns && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out.tmp" .) && mv "$out.tmp" "$out"
	fi
	echo "$out"
}

# images writes the control-plane and add-on images into $1 as OCI
# tarballs, each a busybox layer with the component's binary (hack/tools/
# ociimage), under the names kubeadm asks for. kube-proxy's carries the
# node base's iptables (nftables), its extensions and the libraries they
# load, from the root file system $2.
images() {
	local dir=$1 rootfs=$2 kubebin tool c pause libs lib
	kubebin=$(hack/kube.sh bin)
	tool=$(mktemp -d)
	go build -o "$tool/ociimage" ./hack/tools/ociimage
	mk() { "$tool/ociimage" -busybox /bin/busybox "$@"; }
	# The tests' pods: busybox, a TCP echo server for port-forward, a
	# server that resets a connection on request (the port-forward reset
	# case) and a UDP echo server (UDP port-forward).
	CGO_ENABLED=0 go build -o "$tool/tcpecho" ./hack/tools/tcpecho
	CGO_ENABLED=0 go build -o "$tool/tcpreset" ./hack/tools/tcpreset
	CGO_ENABLED=0 go build -o "$tool/udpecho" ./hack/tools/udpecho
	mk -name docker.io/kubestream/busybox:e2e -out "$dir/busybox.tar" -add "$tool/tcpecho=/bin/tcpecho" -add "$tool/tcpreset=/bin/tcpreset" \
		-add "$tool/udpecho=/bin/udpecho"
	# The routes between the nodes' pod CIDRs (manifests/kind/routes.yaml).
	mk -name docker.io/kubestream/routes:kind -out "$dir/routes.tar" -add "$kubebin/kubectl=/usr/local/bin/kubectl" \
		-add hack/kind/routes=/usr/local/bin/routes
	for c in kube-apiserver kube-controller-manager kube-scheduler; do
		mk -name "registry.k8s.io/$c:$KUBE_VERSION" -out "$dir/$c.tar" -add "$kubebin/$c=/usr/local/bin/$c"
	done
	mk -name "registry.k8s.io/etcd:$ETCD_TAG" -out "$dir/etcd.tar" -add "$kubebin/etcd=/usr/local/bin/etcd"
	mk -name "registry.k8s.io/coredns/coredns:$COREDNS_TAG" -out "$dir/coredns.tar" -add "$(coredns_bin)=/coredns" -entrypoint /coredns
	# The pause program is upstream's C source, from the same module copy.
	pause=$(cd hack/kube && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
	gcc -Os -static -DVERSION="v$PAUSE_TAG" -o "$tool/pause" "$pause"
	mk -name "registry.k8s.io/pause:$PAUSE_TAG" -out "$dir/pause.tar" -add "$tool/pause=/pause" -entrypoint /pause
	libs=()
	for lib in $(for f in /usr/sbin/xtables-nft-multi "$rootfs"/usr/lib/x86_64-linux-gnu/xtables/*.so; do
		chroot "$rootfs" ldd "${f#"$rootfs"}"
	done | grep -o '/[^ ]*' | sort -u); do
		libs+=(-add "$rootfs$lib=$lib")
	done
	for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
		libs+=(-add "$rootfs/usr/sbin/xtables-nft-multi=/usr/sbin/$c")
	done
	mk -name "registry.k8s.io/kube-proxy:$KUBE_VERSION" -out "$dir/kube-proxy.tar" \
		-add "$kubebin/kube-proxy=/usr/local/bin/kube-proxy" "${libs[@]}" \
		-add "$rootfs/usr/lib/x86_64-linux-gnu/xtables=/usr/lib/x86_64-linux-gnu/xtables"
	rm -rf "$tool"
}

# image builds the node image from base and what hack/containerd.sh and
# hack/kube.sh build, named kubestream-kind-node:KEY, KEY a hash of every
# input; an image of that name already built is used as it is.
image() {
	local b kubebin cbin wsbin criobin crictl key name tmp f
	b=$(base)
	hack/containerd.sh install >&2
	hack/containerd.sh install-ws >&2
	hack/kube.sh cluster >&2
	hack/kube.sh kubelet >&2
	hack/kube.sh kubelet-stock >&2
	hack/kube.sh kubelet v1.35.4 >&2
	hack/crio.sh install >&2
	kubebin=$(hack/kube.sh bin)
	cbin=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}/containerd-v2.4.2/bin
	wsbin=$(hack/containerd.sh bin 2.4-ws)
	crictl=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}/crictl-v1.37.0/bin/crictl
	criobin=$(hack/crio.sh bin ws)
	# What the node runs (every kubelet a flavour of hack/kind/flavours may
	# name, and kubeadm), and what images() packs.
	local node=(kubectl kubeadm kubelet-stock kubelet-kubestream kubelet-kubestream-v1.35.4)
	local packed=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd)
	key=$(cat "$b.sha" 2>/dev/null || sha256sum "$b" | cut -c1-16 | tee "$b.sha")
	key=$( {
		echo "$key $KUBE_VERSION $ETCD_TAG $COREDNS_TAG $PAUSE_TAG"
		cat hack/kind/entrypoint hack/kind/routes hack/kind/kubestream-cni hack/kind/images-load hack/kind/files/* hack/kubelet-tunables \
			hack/tools/ociimage/*.go hack/tools/tcpecho/*.go hack/tools/tcpreset/*.go hack/tools/udpecho/*.go hack/tools/runc-fit/*.go internal/wiretest/reset.go
		sha256sum "$cbin"/* "$wsbin/containerd" "$criobin"/* "$crictl" "$(coredns_bin)" "${node[@]/#/$kubebin/}" "${packed[@]/#/$kubebin/}" | cut -c1-64
	} | sha256sum | cut -c1-16)
	name=kubestream-kind-node:$key
	if docker image inspect "$name" >/dev/null 2>&1; then
		echo "$name"
		return
	fi
	echo "kind.sh: building the node image $name" >&2
	tmp=$(mktemp -d "$CACHE/image-XXXXXX")
	mkdir -p "$tmp/root/usr/local/bin" "$tmp/root/etc/containerd" "$tmp/root/etc/systemd/system/multi-user.target.wants" \
		"$tmp/root/kind/images" "$tmp/root/kind/manifests"
	tar -C "$tmp/root" -xf "$b"
	cp -L "$cbin/containerd" "$tmp/root/usr/local/bin/containerd-stock"
	cp -L "$wsbin/containerd" "$tmp/root/usr/local/bin/containerd-kubestream"
	ln -s containerd-stock "$tmp/root/usr/local/bin/containerd"
	cp -L "$cbin/containerd-shim-runc-v2" "$cbin/ctr" "$crictl" "$tmp/root/usr/local/bin/"
	cp -L "${node[@]/#/$kubebin/}" "$tmp/root/usr/local/bin/"
	ln -s /usr/local/bin/kubelet-stock "$tmp/root/usr/bin/kubelet"
	install -m 0755 hack/kind/entrypoint hack/kind/images-load hack/kind/kubestream-cni "$tmp/root/usr/local/bin/"
	# CRI-O for the crio flavour, enabled by the entrypoint on that node.
	cp -L "$criobin/crio" "$criobin/pinns" "$tmp/root/usr/local/bin/"
	CGO_ENABLED=0 go build -o "$tmp/root/usr/local/bin/runc-fit" ./hack/tools/runc-fit
	install -D -m 0644 hack/kind/files/crio.conf "$tmp/root/etc/crio/crio.conf"
	install -D -m 0644 hack/kind/files/crio-cni.json "$tmp/root/etc/crio/cni.json"
	install -D -m 0644 hack/kind/files/storage.conf "$tmp/root/etc/containers/storage.conf"
	install -D -m 0644 hack/kubelet-tunables "$tmp/root/usr/local/share/kubestream/kubelet-tunables"
	cp hack/kind/files/config.toml hack/kind/files/cni-template.json "$tmp/root/etc/containerd/"
	cp hack/kind/files/default-storage.yaml "$tmp/root/kind/manifests/"
	for f in containerd kubelet kubestream-images; do
		cp "hack/kind/files/$f.service" "$tmp/root/etc/systemd/system/"
		ln -s "../$f.service" "$tmp/root/etc/systemd/system/multi-user.target.wants/$f.service"
	done
	cp hack/kind/files/crio.service hack/kind/files/kubestream-cni.service "$tmp/root/etc/systemd/system/"
	cp hack/kind/files/kubelet.slice "$tmp/root/etc/systemd/system/"
	images "$tmp/root/kind/images" "$tmp/root"
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
# `make test-kind` runs it under the kernel-settings guard.
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

# kind_env exports what kind needs on this engine: the cluster's own Docker
# network (named, removed by name) and, where the engine refuses privileged
# containers, the node flags hack/kind/kind.patch reads.
kind_env() {
	export KIND_EXPERIMENTAL_DOCKER_NETWORK=$NET
	if [ "$(run_flags)" != --privileged ]; then
		KIND_NODE_PRIVILEGES="$(run_flags)"
		export KIND_NODE_PRIVILEGES
	fi
}

# kc runs the cluster's kubectl with its kubeconfig.
kc() { "$(hack/kube.sh bin)/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }

# up creates the cluster from the node image and waits for every node to
# be Ready, then execs through a pod on each worker.
up() {
	local kind img node flavour
	kind=$(kind_bin)
	img=$(image)
	kind_env
	down >/dev/null 2>&1 || true
	# The network is made here, IPv4 only: kind would make it with IPv6,
	# and the Docker daemon then turns on the host's IPv6 forwarding
	# (net.ipv6.conf.all.forwarding), a kernel setting the host's own.
	docker network create "$NET" >/dev/null
	mkdir -p "$(dirname "$KUBECONFIG_OUT")"
	render | "$kind" create cluster --name "$CLUSTER" --image "$img" --config - --kubeconfig "$KUBECONFIG_OUT" --wait 5m
	kc wait --for=condition=Ready nodes --all --timeout=5m >/dev/null
	kc apply -f manifests/kind/routes.yaml >/dev/null
	kc -n kube-system rollout status daemonset/kubestream-routes --timeout=3m >/dev/null
	# CoreDNS answers the cluster's own names and nothing else: the nodes'
	# resolver is the Docker engine's, on a loopback address a pod cannot
	# reach (CoreDNS would forward to itself), and nothing here may query
	# outside the cluster's network.
	kc -n kube-system get configmap coredns -o jsonpath='{.data.Corefile}' | sed '/^ *forward /,/^ *}/d' >"$KUBECONFIG_OUT.Corefile"
	kc -n kube-system create configmap coredns --from-file=Corefile="$KUBECONFIG_OUT.Corefile" --dry-run=client -o yaml |
		kc apply -f - >/dev/null 2>&1
	rm -f "$KUBECONFIG_OUT.Corefile"
	kc -n kube-system rollout restart deployment/coredns >/dev/null
	kc -n kube-system rollout status deployment/coredns --timeout=3m >/dev/null
	install_node
	kc get nodes -L kubestream.io/flavour
	for flavour in $FLAVOURS; do
		node=$(kc get nodes -l "kubestream.io/flavour=$flavour" -o jsonpath='{.items[0].metadata.name}')
		kc run "demo-$flavour" --image=docker.io/kubestream/busybox:e2e --restart=Never \
			--overrides="{\"spec\":{\"nodeName\":\"$node\"}}" -- sleep 3600 >/dev/null
	done
	for flavour in $FLAVOURS; do
		kc wait --for=condition=Ready "pod/demo-$flavour" --timeout=2m >/dev/null
		kc exec "demo-$flavour" -- sh -c "echo exec through the $flavour worker: \$(hostname)"
		kc delete pod "demo-$flavour" --wait=false >/dev/null
	done
	echo "KUBECONFIG=$KUBECONFIG_OUT"
}

# install_node installs kubestream node on the daemon worker as a user
# would: its image (hack/image.sh, built here) into the node's containerd,
# then kubectl apply -k (hack/kind/node: manifests/node on that worker).
install_node() {
	local tar node
	tar=$(hack/image.sh)
	node=$(kc get nodes -l kubestream.io/flavour=daemon -o jsonpath='{.items[0].metadata.name}')
	docker cp "$tar" "$node:/kind/kubestream-image.tar"
	# ctr warns of cgroup v1 on every command: its output is shown only if
	# the import fails.
	docker exec "$node" sh -c 'out=$(ctr -n k8s.io images import /kind/kubestream-image.tar 2>&1) || { echo "$out" >&2; exit 1; }; rm /kind/kubestream-image.tar'
	kc apply -k hack/kind/node >/dev/null
	kc -n kubestream-system rollout status daemonset/kubestream --timeout=3m >/dev/null
}

# down deletes the cluster (kind removes its containers and their volumes)
# and the network, each by name.
down() {
	local kind
	kind=$(kind_bin)
	"$kind" delete cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG_OUT"
	docker network rm "$NET" >/dev/null 2>&1 || true
	rm -f "$KUBECONFIG_OUT"
}

# e2e runs e2e/kind_test.go against a cluster made for it, and deletes it
# whatever the outcome; with KIND_KEEP=1 it leaves the cluster for the
# next stage (.ci/run: Kubernetes' own e2e, which deletes it), unless the
# e2e failed. `make test-kind` runs it under the kernel-settings guard: the
# host's /proc/sys before the cluster starts and after the stage.
e2e() {
	if [ "${KIND_KEEP:-0}" = 1 ]; then
		trap 'rc=$?; [ "$rc" = 0 ] || down >/dev/null 2>&1 || true' EXIT
	else
		trap 'down >/dev/null 2>&1 || true' EXIT
	fi
	up
	KUBESTREAM_KIND_KUBECONFIG=$KUBECONFIG_OUT KUBESTREAM_KIND_CLUSTER=$CLUSTER \
		go test -tags kind -run '^TestKind$' -count=1 -timeout 30m -v ./e2e/
}

case "${1:-}" in
base) base ;;
image) image ;;
kind-bin) kind_bin ;;
node-test) node_test ;;
render) render ;;
probe) probe ;;
up) up ;;
down) down ;;
e2e) e2e ;;
*) sed -n '2,24p' "$0" >&2; exit 2 ;;
esac
