#!/usr/bin/env bash
# One command to see kubestream in front of a real containerd: installs and
# starts a private containerd (hack/containerd.sh), runs the demo against it
# (pod default/demo created through CRI, one exec through the WebSocket
# path), and tears everything down.
#   hack/try-containerd.sh [2.4|1.6]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
version=${1:-2.4}
hack/containerd.sh install
dir=$(mktemp -d /tmp/kubestream-try-XXXXXX)
trap 'hack/containerd.sh down "$dir"' EXIT
hack/containerd.sh up "$version" "$dir" 2> >(grep -v DEPRECATION >&2)
source "$dir/env"
go run ./cmd/kubestream demo --exit --container-runtime-endpoint "$KUBESTREAM_CONTAINERD_ENDPOINT" --demo-image "$KUBESTREAM_E2E_IMAGE"
