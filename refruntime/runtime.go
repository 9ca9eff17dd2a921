// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package refruntime is kubestream's embedded reference container runtime: a
// real CRI RuntimeService served over gRPC on a unix socket, whose streaming
// server is k8s.io/cri-streaming (or, with Options.WebSockets, kubestream's
// own runtime-side server, cri/streaming) and whose containers are host
// processes. It lets the whole kubelet→runtime path run with nothing
// installed; it is not an isolation boundary.
//
// Reading order, each file before the files it uses: runtime.go (Options,
// Runtime, Start and Stop), serve.go (the CRI socket and the streaming
// server) with refusal.go (a v5-only offer refused as cri-streaming does,
// without its error line), cri.go (the CRI RuntimeService's calls),
// streams.go (exec, attach and port-forward for the streaming server),
// container.go (a container: a host process and its output to attachers),
// then pods.go (the pods it starts with).
//
// What runs back up the order: cri.go, serve.go and streams.go hang on
// runtime.go's Runtime (one type's methods spread by job); cri.go's
// proto, state and labels describe container.go's and runtime.go's
// types for the CRI beside the calls that return them.
//
// Who imports it: kubestream serve (its embedded runtime), e2e and bench;
// it is a test double with real processes, not a runtime to deploy.
package refruntime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/klog/v2"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// Options configure a reference runtime.
type Options struct {
	Pods []PodSpec
	// SocketDir holds the CRI socket; a temporary directory when empty.
	SocketDir string
	// StreamingAddr is the cri-streaming listen address (127.0.0.1:0).
	StreamingAddr string
	// StreamIdleTimeout and StreamCreationTimeout override cri-streaming's
	// defaults when set.
	StreamIdleTimeout, StreamCreationTimeout time.Duration
	// WebSockets serves the streaming URLs with kubestream's runtime-side
	// server (cri/streaming), which speaks v5.channel.k8s.io and the
	// port-forward tunnel itself, as a runtime adopting it does; off, they
	// are cri-streaming's, which refuses both.
	WebSockets bool
	// Metrics, if set, receives the runtime streaming server's request
	// counts (WebSockets only).
	Metrics prometheus.Registerer
	// RelativeURLs makes the streaming URLs scheme-relative
	// (//127.0.0.1:port/cri/exec/…), as cri-dockerd's are: its streaming
	// server has BaseURL {Path: "/cri/"}, and cri-streaming fills in only
	// the listener's address.
	RelativeURLs bool
}

// Runtime is a running reference runtime.
type Runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer

	logger    klog.Logger
	endpoint  string
	sockDir   string
	ownDir    bool
	grpc      *grpc.Server
	streaming streaming.Server
	httpSrv   *http.Server
	wg        sync.WaitGroup

	mu         sync.Mutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	conns      map[net.Conn]struct{} // streaming connections, hijacked or not
	execs      map[*os.Process]struct{}
	stopped    bool
}

type sandbox struct {
	id      string
	spec    PodSpec
	created int64
}

// Start brings the runtime up: containers' main processes, the streaming
// server and the gRPC socket.
func Start(ctx context.Context, opts Options) (_ *Runtime, err error) {
	if opts.Pods == nil {
		opts.Pods = DefaultPods()
	}
	if err := validate(opts.Pods); err != nil {
		return nil, err
	}
	r := &Runtime{
		logger:     klog.FromContext(ctx).WithName("refruntime"),
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		conns:      map[net.Conn]struct{}{},
		execs:      map[*os.Process]struct{}{},
		sockDir:    opts.SocketDir,
	}
	defer func() {
		if err != nil {
			r.Stop()
		}
	}()
	if r.sockDir == "" {
		if r.sockDir, err = os.MkdirTemp("", "kubestream-refruntime-"); err != nil {
			return nil, fmt.Errorf("creating runtime socket directory: %w", err)
		}
		r.ownDir = true
	}
	if err := r.startPods(opts.Pods); err != nil {
		return nil, err
	}
	base, err := r.serveStreaming(opts)
	if err != nil {
		return nil, err
	}
	if err := r.serveCRI(); err != nil {
		return nil, err
	}
	r.logger.V(1).Info("Reference runtime started", "endpoint", r.endpoint, "streaming", base.String(), "pods", len(opts.Pods))
	return r, nil
}

// startPods gives each pod a sandbox and starts its containers' main
// processes.
func (r *Runtime) startPods(pods []PodSpec) error {
	for _, p := range pods {
		if p.UID == "" {
			p.UID = newID()[:32]
		}
		sb := &sandbox{id: newID(), spec: p, created: time.Now().UnixNano()}
		r.sandboxes[sb.id] = sb
		for _, cs := range p.Containers {
			c, err := startContainer(r.logger, sb, cs)
			if err != nil {
				return err
			}
			r.containers[c.id] = c
		}
	}
	return nil
}

// Endpoint is the CRI endpoint, unix:///….
func (r *Runtime) Endpoint() string { return r.endpoint }

// Stop kills every container and exec'd process, cuts every streaming
// connection and removes the socket: to clients it looks like a crash.
func (r *Runtime) Stop() {
	if r.grpc != nil {
		r.grpc.Stop()
	}
	if r.httpSrv != nil {
		_ = r.httpSrv.Close()
	}
	r.mu.Lock()
	r.stopped = true
	cs := make([]*container, 0, len(r.containers))
	for _, c := range r.containers {
		cs = append(cs, c)
	}
	for c := range r.conns {
		c.(*trackedConn).Conn.Close()
	}
	for p := range r.execs {
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		_ = p.Kill()
	}
	r.mu.Unlock()
	for _, c := range cs {
		c.kill()
	}
	r.wg.Wait()
	for _, c := range cs {
		<-c.exited
	}
	if r.ownDir {
		_ = os.RemoveAll(r.sockDir)
	}
}

func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (r *Runtime) container(id string) (*container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %q not found", id)
	}
	return c, nil
}

func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (sb *sandbox) labels() map[string]string {
	return map[string]string{
		kubetypes.KubernetesPodNamespaceLabel: sb.spec.Namespace,
		kubetypes.KubernetesPodNameLabel:      sb.spec.Name,
		kubetypes.KubernetesPodUIDLabel:       sb.spec.UID,
	}
}

var errNotRunning = errors.New("container is not running")

// ForgetPod drops a pod's sandbox as a runtime does once the kubelet has
// removed it, so CRI no longer finds it (tests: a pod deleted mid-session);
// its containers run on until Stop. It says whether the pod was there.
func (r *Runtime) ForgetPod(namespace, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, sb := range r.sandboxes {
		if sb.spec.Namespace == namespace && sb.spec.Name == name {
			delete(r.sandboxes, id)
			return true
		}
	}
	return false
}
