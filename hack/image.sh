#!/usr/bin/env bash
# hack/image.sh [OUT]: kubestream's container image (kubestream node, the
# DaemonSet of manifests/node), built here with no registry: the static
# kubestream binary and busybox (a shell for kubectl exec into it) as one
# OCI layer (hack/tools/ociimage). Cached under ~/.cache/kubestream by its
# inputs (every Go file of the module, go.sum, the tool); prints the
# tarball's path, copied to OUT when given. Load it into a node's
# containerd with `ctr -n k8s.io images import`, or with `kind load
# image-archive`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
IMAGE=${KUBESTREAM_IMAGE:-docker.io/kubestream/kubestream:dev}
CACHE=${KUBESTREAM_CACHE:-$HOME/.cache/kubestream}/image
busybox=/bin/busybox
[ -x "$busybox" ] || { echo "image.sh: needs a static busybox at $busybox (apt-get install busybox-static)" >&2; exit 1; }
key=$( {
	echo "$IMAGE"
	git ls-files -co --exclude-standard '*.go' go.mod go.sum | grep -v '^hack/kube/\|^kubelet/\|_test.go$' | sort | xargs sha256sum
	sha256sum "$busybox"
} | sha256sum | cut -c1-16)
out=$CACHE/kubestream-$key.tar
if [ ! -s "$out" ]; then
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/build-XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "image.sh: building $IMAGE" >&2
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/kubestream" ./cmd/kubestream
	go build -o "$tmp/ociimage" ./hack/tools/ociimage
	"$tmp/ociimage" -busybox "$busybox" -name "$IMAGE" -out "$tmp/image.tar" \
		-add "$tmp/kubestream=/usr/local/bin/kubestream" -entrypoint /usr/local/bin/kubestream
	mv "$tmp/image.tar" "$out"
	# Tarballs of this image for other inputs are stale.
	find "$CACHE" -maxdepth 1 -name 'kubestream-*.tar' ! -name "kubestream-$key.tar" -delete
fi
if [ -n "${1:-}" ]; then
	mkdir -p "$(dirname "$1")"
	cp "$out" "$1"
	out=$1
fi
echo "$out"
