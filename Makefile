# kubestream: the two commands a newcomer needs are `make run` and `make test`.
GO ?= go
export GOFLAGS ?= -buildvcs=false

.PHONY: run run-containerd build plugin image bench-daemon test test-short test-containerd test-crio test-critest test-apiserver test-kubelet test-kubelet-skew test-kubelet-stock test-chain test-kind test-upstream-e2e test-critest-full cross fuzz bench bench-node lint clean

## run: kubestream serve on the embedded reference runtime, with one exec through the WebSocket path.
run:
	$(GO) run ./cmd/kubestream demo

## run-containerd: the same demonstration in front of a private containerd (installed and torn down).
run-containerd:
	hack/try-containerd.sh

# GUARD runs a stage and fails it, naming the key, if the machine's kernel
# settings (/proc/sys) differ after it from before (hack/tools/sysctls): the
# machine is shared, and a kubelet under test would change six of them.
GUARD = $(GO) run ./hack/tools/sysctls guard --

build:
	$(GO) build -o bin/kubestream ./cmd/kubestream

## plugin: the kubectl plugin, bin/kubectl-kubestream; on PATH, kubectl runs it as `kubectl kubestream`.
plugin:
	$(GO) build -o bin/kubectl-kubestream ./cmd/kubectl-kubestream

## image: kubestream's container image (kubestream node, manifests/node) as an OCI tarball, _output/kubestream-image.tar,
## built here with no registry (hack/image.sh); load it with `ctr -n k8s.io images import` or `kind load image-archive`.
image:
	hack/image.sh _output/kubestream-image.tar

## test: vet, format check, the docs' references (lint), and the conformance suite under the race detector (client-go's real clients against kubestream serve).
test: lint
	$(GUARD) $(GO) test -race -count=1 -timeout 20m ./...

## test-short: the unit tests alone, in seconds (no e2e, no race detector): the loop while editing.
test-short:
	$(GO) test -count=1 ./translator/ ./server/ ./cri/... ./config/ ./audit/ ./recording/ ./internal/...

## fuzz: every fuzz target (the parsers of untrusted bytes) for FUZZTIME each; crashers land in testdata/fuzz.
FUZZTIME ?= 30s
FUZZ_TARGETS = translator:FuzzClientMessages translator:FuzzRuntimeFrames translator:FuzzSPDYRelay \
	translator:FuzzFrameFollowers translator:FuzzTunnelUp internal/wire:FuzzResizeStream server:FuzzClassify server:FuzzCheckNames \
	cri/streaming:FuzzV5Client cri/streaming:FuzzTunnelClient internal/spdy:FuzzHeaderDecoder internal/spdy:FuzzReader \
	recording:FuzzPlainUntil portmux:FuzzParseFrame portmux:FuzzNodeFrames
fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) hack/fuzz.sh $(FUZZ_TARGETS)

## test-containerd: the e2e suite against a private containerd (see hack/containerd.sh): 2.4, Debian's 1.6,
## then crictl over WebSockets against the patched 2.4; CONTAINERD_VERSIONS="2.4 2.4-ws" picks legs.
CONTAINERD_VERSIONS ?=
test-containerd:
	$(GUARD) hack/containerd-e2e.sh $(CONTAINERD_VERSIONS)

## test-crio: crictl over WebSockets against CRI-O v1.36.3 with kubestream's runtime-side server (hack/crio.sh),
## and against stock CRI-O, which refuses it; CRIO_BUILDS="ws" picks one.
CRIO_BUILDS ?= ws stock
test-crio:
	$(GUARD) hack/crio.sh e2e $(CRIO_BUILDS)

## test-critest: critest v1.37.0's streaming cases over WebSockets against containerd with kubestream's runtime-side server (and stock, which refuses them).
test-critest:
	$(GUARD) hack/critest.sh

## test-apiserver: kubectl through a real kube-apiserver v1.37.2 to kubestream (builds them once, see hack/kube.sh).
test-apiserver:
	$(GUARD) hack/apiserver-e2e.sh

## test-kubelet: kubectl through kube-apiserver to the upstream kubelet v1.37.2 with kubestream linked in, on containerd 2.4.
test-kubelet:
	$(GUARD) hack/kubelet-e2e.sh

## test-kubelet-skew: the same through the upstream kubelets v1.36.3 and v1.35.4 with kubestream linked in (one and two minors behind the v1.37.2 control plane).
test-kubelet-skew:
	KUBESTREAM_KUBELET_VERSION=v1.36.3 $(GUARD) hack/kubelet-e2e.sh
	KUBESTREAM_KUBELET_VERSION=v1.35.4 $(GUARD) hack/kubelet-e2e.sh

## test-kubelet-stock: the stock kubelets v1.37.2, v1.36.3 and v1.35.4 (the same source, no kubestream) behind the same apiserver, for comparison.
test-kubelet-stock:
	KUBESTREAM_KUBELET_STOCK=1 $(GUARD) hack/kubelet-e2e.sh
	KUBESTREAM_KUBELET_STOCK=1 KUBESTREAM_KUBELET_VERSION=v1.36.3 $(GUARD) hack/kubelet-e2e.sh
	KUBESTREAM_KUBELET_STOCK=1 KUBESTREAM_KUBELET_VERSION=v1.35.4 $(GUARD) hack/kubelet-e2e.sh

## test-chain: the same, on containerd v2.4.2 with kubestream's runtime-side server: WebSocket on every leg, no SPDY.
test-chain:
	$(GUARD) hack/kubelet-e2e.sh 2.4-ws

## test-kind: the kind cluster (hack/kind.sh e2e): a control plane and workers ws, skew, stock, crio and daemon, built offline
## and booted as this Docker engine allows (without --privileged where it refuses it); kubectl exec, cp, attach,
## port-forward and logs on each worker, a pod deleted under an exec, a kubelet replaced on a live node, a node
## restarted; the host's kernel settings untouched. The first run builds for ~25 minutes, a warm one ~8.
test-kind:
	$(GUARD) hack/kind.sh node-test
	$(GUARD) hack/kind.sh e2e

## test-critest-full: critest v1.37.0's whole suite against containerd v2.4.2 stock and with kubestream's
## runtime-side server, side by side (_output/critest-full/table.md): the patch changes nothing else.
test-critest-full:
	$(GUARD) hack/critest.sh full

## test-upstream-e2e: Kubernetes' own e2e v1.37.2, the cases of the streaming path (hack/upstream-e2e/focus.txt),
## unchanged, on a kind cluster: a pass on each of the ws, skew, stock, crio and daemon workers, the others cordoned; the
## table and each worker's sessions by route in _output/upstream-e2e/table.md (docs/upstream-e2e.md).
## UPSTREAM_E2E_SLOW=1 adds the [Slow] cases; UPSTREAM_E2E_FIRST_ONLY=<regexp> runs the cases it matches on ws alone
## (.ci/run's shortcut for the 1000-exec case; the table shows them left out elsewhere).
test-upstream-e2e:
	$(GUARD) hack/upstream-e2e.sh e2e

## bench-daemon: the kubelet API's cost through kubestream node beside the stock kubelet, and kubestream node at idle, on
## the kind cluster (hack/kind.sh up, the measurement, down; docs/node.md keeps the figures).
bench-daemon:
	mkdir -p _output; hack/kind.sh up >/dev/null && KUBESTREAM_KIND_KUBECONFIG=$(CURDIR)/_output/kind/kubeconfig KUBESTREAM_KIND_COST=1 \
		$(GO) test -tags kind -run '^TestKind$$/^kubestream-node$$/^authorization$$' -count=1 -v ./e2e/ >_output/bench-daemon.log; rc=$$?; \
		hack/kind.sh down >/dev/null 2>&1; grep -A6 'through kubestream node and\|at idle' _output/bench-daemon.log; exit $$rc

## bench-node: kubectl → kube-apiserver → kubelet → containerd, stock kubelets v1.37.2 and v1.35.4 against kubestream and the direct chain, side by side (bench/results-node.md; ~25 minutes at 1 GiB).
## KUBESTREAM_BENCH_SIZE, _ROUNDS, _SESSIONS, _SLOW_RUNS shrink it; KUBESTREAM_BENCH_PATHS=direct,kubestream picks paths (stock-1.37 always runs).
bench-node:
	KUBESTREAM_TEST_VERBOSE=1 $(GUARD) hack/kubelet-e2e.sh bench

## bench: kubestream's translator side by side with direct SPDY and upstream's translator; reverse and UDP port-forward beside forward (BENCHFLAGS="-only reverse" alone).
## BENCHFLAGS="-profile-dir bench/profiles" writes pprof CPU and alloc profiles of both translators.
BENCHFLAGS ?=
bench:
	$(GUARD) hack/bench.sh $(BENCHFLAGS)

## cross: the library packages build for every platform the kubelet ships and a developer's Mac; the
## kubelet adapter module for windows/amd64 (linux/amd64 is test-kubelet's; 5 minutes a platform cold:
## CROSS_KUBELET="linux/arm64 linux/ppc64le linux/s390x windows/amd64" checks them all).
CROSS_PLATFORMS = linux/amd64 linux/arm64 linux/ppc64le linux/s390x windows/amd64 darwin/arm64
CROSS_LIBRARY = ./server/... ./translator/... ./cri/... ./internal/... ./audit/... ./recording/... ./config/... ./portmux/...
CROSS_KUBELET ?= windows/amd64
cross:
	@for p in $(CROSS_PLATFORMS); do echo "cross: library $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build $(CROSS_LIBRARY) || exit 1; done
	@for p in $(CROSS_KUBELET); do echo "cross: kubelet adapter $$p"; \
		(cd kubelet && GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./...) || exit 1; done

## lint: go vet, gofmt, docrefs (the docs name no test, flag or file the tree lacks; their tables render, their patch sizes
## and reading orders are the tree's) and licence (every Go file begins with LICENSE's header; -fix writes it).
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) run ./hack/tools/docrefs
	$(GO) run ./hack/tools/licence

clean:
	rm -rf bin _output
