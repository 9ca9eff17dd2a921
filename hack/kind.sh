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

case "${1:-}" in
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
