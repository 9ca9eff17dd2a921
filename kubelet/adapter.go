// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubeletadapter links kubestream into a kubelet: NewStreamingHandler
// builds kubestream's server on the kubelet's own pieces, for the kubelet's
// NewStreamingHandler hook (hack/kube/kubelet/server.go.patch adds it to
// pkg/kubelet/server). It is a module of its own so that kubestream's
// go.mod never depends on k8s.io/kubernetes; an embedder or an upstream
// change needs this file and the hook, nothing else.
package kubeletadapter

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubeletserver "k8s.io/kubernetes/pkg/kubelet/server"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/config"
	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/server"
	"github.com/kubestream/kubestream/translator"
)

// streamingHandler is kubestream's server as the kubelet mounts it; the
// kubelet serves MetricsHandler at /metrics/streaming (kubestream's series
// alone), beside its own /metrics (which has them too).
type streamingHandler struct{ *server.Server }

func (h streamingHandler) MetricsHandler() http.Handler { return h.Metrics().Handler() }

// Options are what the kubelet's main package gives beside the hook's
// arguments: kubestream's configuration file (config.Load; the patched
// kubelet's --kubestream-config) and what differs between kubelet versions.
type Options struct {
	File *config.StreamingConfiguration
	// WebSocketRequested is upstream's counter of the WebSocket sessions
	// the kubelet itself would have translated or tunneled
	// (servermetrics.IncWebSocketStreamingRequest, from v1.36; a v1.35
	// kubelet has none).
	WebSocketRequested func(subresource string)
	// Stopper, when set, gets the server built, so that the kubelet's
	// main can end its sessions before the process exits.
	Stopper *Stopper
}

// Stopper ends kubestream's sessions when the kubelet stops. The kubelet
// returns from its command as soon as its context ends (SIGTERM,
// systemctl restart kubelet) and its main exits right after: a session
// still writing its status then is cut, and its client reads a bare
// connection loss (close 1006). The kubelet's main calls Stop between the
// two, so each client is told the kubelet is stopping.
type Stopper struct {
	mu  sync.Mutex
	srv *server.Server
}

// Stop ends every session with the kubelet's reason and waits for them,
// at most d. Without a server (the kubelet never built one) it returns at
// once.
func (s *Stopper) Stop(d time.Duration) {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		klog.Background().Info("Streaming sessions still open as the kubelet exits", "err", err)
	}
}

// StopWait bounds the kubelet main's wait for its sessions (Stopper.Stop):
// a session ends with its status, a close frame and the peer's close.
const StopWait = 5 * time.Second

// Hook is the kubelet's NewStreamingHandler hook.
func Hook(o Options) func(context.Context, kubeletserver.HostInterface, kubeletserver.AuthInterface, *kubeletconfig.KubeletConfiguration) (http.Handler, error) {
	return func(ctx context.Context, host kubeletserver.HostInterface, auth kubeletserver.AuthInterface, kc *kubeletconfig.KubeletConfiguration) (http.Handler, error) {
		return NewStreamingHandler(ctx, host, auth, kc, o)
	}
}

// NewStreamingHandler builds kubestream on the kubelet's own pieces: its
// pod manager and CRI calls through HostInterface (so the kubelet's
// runtimeRequestTimeout bounds every CRI call, as for its own handlers),
// its streamingConnectionIdleTimeout, its feature gate (so
// ExtendWebSocketsToKubelet means the same for both), its metrics registry
// and its authentication and authorization. The kubelet's filter has run
// before any request reaches kubestream, but it asks get of nodes/proxy for
// a WebSocket upgrade (a GET); kubestream asks the kubelet's authorizer
// again with the kubelet's own attributes and verb create, so get
// nodes/proxy alone cannot exec. --streaming-authorization-verb-by-method
// has no kubelet equivalent; the create check is always on here.
func NewStreamingHandler(ctx context.Context, host kubeletserver.HostInterface, auth kubeletserver.AuthInterface, kc *kubeletconfig.KubeletConfiguration, o Options) (http.Handler, error) {
	file := o.File
	cfg := server.Config{
		URLs:       newHostURLs(host, host.GetExec, host.GetAttach, host.GetPortForward),
		Features:   utilfeature.DefaultFeatureGate,
		Translator: translator.DefaultConfig(),
		Direct:     server.DirectConfig{Mode: server.DirectAuto, Recheck: 10 * time.Minute},
		Metrics:    server.NewMetrics(),
		// Upstream's counter keeps counting what the kubelet's own
		// translator and tunnel would have served.
		WebSocketRequested: o.WebSocketRequested,
		ShutdownMessage:    "the kubelet is stopping",
		PortForwardModes:   server.DefaultPortForwardModes(),
	}
	// 0 means no timeout for both.
	cfg.Translator.IdleTimeout = kc.StreamingConnectionIdleTimeout.Duration
	if file != nil {
		file.Apply(&cfg)
	}
	if cfg.Limits.MaxSessions == 0 {
		cfg.Limits.MaxSessions = server.DefaultMaxSessions()
	}
	if auth != nil {
		cfg.Authenticator, cfg.Authorizer = auth, auth
		cfg.RequestAttributes = auth.GetRequestAttributes
	}
	if o, ok := auditLog(file); ok {
		o.Dropped = cfg.Metrics.AuditDropped
		w, err := audit.NewFile(klog.FromContext(ctx).WithName("kubestream-audit"), o)
		if err != nil {
			return nil, fmt.Errorf("kubestream: %w", err)
		}
		// Open for the kubelet's life: its server has no shutdown to
		// close it after.
		cfg.Audit = w
	}
	// Reverse and UDP port-forward need the pod's sandbox and its network
	// namespace, which HostInterface does not give: kubestream asks the
	// kubelet's runtime itself, on the endpoint and timeout the kubelet
	// uses (the connection lives as long as the kubelet). A runtime that
	// does not answer leaves those modes off; the kubelet serves the rest.
	if kc.ContainerRuntimeEndpoint != "" {
		rt, err := cri.Dial(ctx, kc.ContainerRuntimeEndpoint, kc.RuntimeRequestTimeout.Duration)
		if err != nil {
			klog.FromContext(ctx).Error(err, "kubestream: reverse and UDP port-forward are off")
		} else {
			cfg.Lookup, cfg.Sandboxes = cri.RuntimeLookup{C: rt}, rt
		}
	}
	srv, err := server.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubestream: %w", err)
	}
	cfg.Metrics.RegisterWith(legacyregistry.MustRegister)
	// The kubelet's context ends when it is told to stop: each session's
	// client is told at once, and the kubelet's main waits for them
	// (Stopper) before it exits.
	stopper := o.Stopper
	if stopper == nil {
		stopper = &Stopper{}
	}
	stopper.mu.Lock()
	stopper.srv = srv
	stopper.mu.Unlock()
	context.AfterFunc(ctx, func() { stopper.Stop(StopWait) })
	klog.FromContext(ctx).Info("kubestream serves exec, attach and port-forward",
		"streamingConnectionIdleTimeout", cfg.Translator.IdleTimeout, "runtimeWebSocketStreaming", cfg.Direct.Mode,
		"maxStreamingSessions", cfg.Limits.MaxSessions, "maxStreamingSessionsPerPod", cfg.Limits.MaxSessionsPerPod)
	return streamingHandler{srv}, nil
}

func auditLog(file *config.StreamingConfiguration) (audit.FileOptions, bool) {
	if file == nil {
		return audit.FileOptions{}, false
	}
	return file.AuditLog()
}

// streamOptions and portForwardOptions are the shapes of the options
// HostInterface's GetExec, GetAttach and GetPortForward take: cri-streaming's
// types from v1.36 on, k8s.io/kubelet/pkg/cri/streaming's in v1.35 (the
// same fields). Naming the shape rather than a package lets this one file
// build against every kubelet version; newHostURLs infers the type from the
// kubelet's own methods.
type (
	streamOptions interface {
		~struct{ Stdin, Stdout, Stderr, TTY bool }
	}
	portForwardOptions interface{ ~struct{ Ports []int32 } }
)

// hostURLs asks the kubelet for streaming URLs exactly as its own handlers
// do: the pod from its pod manager, the URL from GetExec, GetAttach or
// GetPortForward (which find the container and call CRI).
type hostURLs struct {
	host    kubeletserver.HostInterface
	exec    func(ctx context.Context, podFullName string, uid types.UID, container string, cmd []string, s cri.Streams) (*url.URL, error)
	attach  func(ctx context.Context, podFullName string, uid types.UID, container string, s cri.Streams) (*url.URL, error)
	forward func(ctx context.Context, name, namespace string, uid types.UID, ports []int32) (*url.URL, error)
}

func newHostURLs[S streamOptions, P portForwardOptions](host kubeletserver.HostInterface,
	exec func(context.Context, string, types.UID, string, []string, S) (*url.URL, error),
	attach func(context.Context, string, types.UID, string, S) (*url.URL, error),
	forward func(context.Context, string, string, types.UID, P) (*url.URL, error),
) hostURLs {
	return hostURLs{
		host: host,
		exec: func(ctx context.Context, name string, uid types.UID, c string, cmd []string, s cri.Streams) (*url.URL, error) {
			return exec(ctx, name, uid, c, cmd, S(s))
		},
		attach: func(ctx context.Context, name string, uid types.UID, c string, s cri.Streams) (*url.URL, error) {
			return attach(ctx, name, uid, c, S(s))
		},
		forward: func(ctx context.Context, name, ns string, uid types.UID, ports []int32) (*url.URL, error) {
			return forward(ctx, name, ns, uid, P{Ports: ports})
		},
	}
}

func (h hostURLs) pod(ref cri.PodRef) (string, types.UID, error) {
	p, ok := h.host.GetPodByName(ref.Namespace, ref.Name)
	if !ok || (ref.UID != "" && string(p.UID) != ref.UID) {
		return "", "", &cri.Error{Kind: cri.NotFound, Msg: "pod " + ref.String() + " does not exist"}
	}
	return kubecontainer.GetPodFullName(p), p.UID, nil
}

// PodExists is the kubelet's own look-up: its pod manager.
func (h hostURLs) PodExists(_ context.Context, ref cri.PodRef) error {
	_, _, err := h.pod(ref)
	return err
}

// RuntimeHandler keys kubestream's memory of runtimes that refused a
// WebSocket by the pod's RuntimeClass: each class names one handler, and a
// node may run one that speaks v5 beside one that does not.
func (h hostURLs) RuntimeHandler(_ context.Context, ref cri.PodRef) (string, error) {
	p, ok := h.host.GetPodByName(ref.Namespace, ref.Name)
	if !ok {
		return "", &cri.Error{Kind: cri.NotFound, Msg: "pod " + ref.String() + " does not exist"}
	}
	if p.Spec.RuntimeClassName != nil {
		return *p.Spec.RuntimeClassName, nil
	}
	return "", nil
}

func (h hostURLs) ExecURL(ctx context.Context, ref cri.PodRef, container string, cmd []string, s cri.Streams) (*url.URL, error) {
	name, uid, err := h.pod(ref)
	if err != nil {
		return nil, err
	}
	u, err := h.exec(ctx, name, uid, container, cmd, s)
	return u, cri.Classify(err)
}

func (h hostURLs) AttachURL(ctx context.Context, ref cri.PodRef, container string, s cri.Streams) (*url.URL, error) {
	name, uid, err := h.pod(ref)
	if err != nil {
		return nil, err
	}
	u, err := h.attach(ctx, name, uid, container, s)
	return u, cri.Classify(err)
}

func (h hostURLs) PortForwardURL(ctx context.Context, ref cri.PodRef, ports []int32) (*url.URL, error) {
	p, ok := h.host.GetPodByName(ref.Namespace, ref.Name)
	if !ok || (ref.UID != "" && string(p.UID) != ref.UID) {
		return nil, &cri.Error{Kind: cri.NotFound, Msg: "pod " + ref.String() + " does not exist"}
	}
	u, err := h.forward(ctx, p.Name, p.Namespace, p.UID, ports)
	return u, cri.Classify(err)
}
