package streaming

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	upstream "k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/internal/connreset"
	"github.com/kubestream/kubestream/internal/wire"
)

// The protocols this package serves itself; every other one goes to
// cri-streaming's handlers.
const (
	ProtocolV5     = remotecommand.StreamProtocolV5Name               // v5.channel.k8s.io
	ProtocolTunnel = portforward.WebsocketsSPDYTunnelingPortForwardV1 // SPDY/3.1+portforward.k8s.io
)

// Runtime is cri-streaming's: what a container runtime implements is
// unchanged.
type Runtime = upstream.Runtime

// TerminalSize is cri-streaming's resize event.
type TerminalSize = remotecommandserver.TerminalSize

// Server is cri-streaming's Server: an http.Handler for the streaming URLs,
// the three CRI calls that issue them, and Start/Stop.
type Server = upstream.Server

// Config is cri-streaming's Config with the v5 protocol and the
// port-forward tunnel among the supported ones, and the limits of the
// sessions served natively.
type Config struct {
	// Addr is the address to serve on (Start).
	Addr string
	// BaseURL is the base of the URLs returned; default http(s)://Addr.
	BaseURL *url.URL
	// StreamIdleTimeout ends a session without data for this long.
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds the wait for a port-forward's stream
	// pair, and cri-streaming's wait for SPDY streams.
	StreamCreationTimeout time.Duration
	// SupportedRemoteCommandProtocols lists the exec and attach protocols:
	// ProtocolV5 is served natively, the rest by cri-streaming.
	SupportedRemoteCommandProtocols []string
	// SupportedPortForwardProtocols lists the port-forward protocols:
	// ProtocolTunnel is served natively, the rest by cri-streaming.
	SupportedPortForwardProtocols []string
	// TLSConfig makes Start serve TLS.
	TLSConfig *tls.Config

	// Limits of natively served sessions; zero fields take DefaultLimits'.
	Limits wire.Limits
	// BufferSize bounds one output message (default 32 KiB).
	BufferSize int
	// Metrics, if set, counts requests by protocol (see NewMetrics).
	Metrics *Metrics
}

// DefaultConfig is cri-streaming's defaults with v5 and the tunnel added.
var DefaultConfig = Config{
	StreamIdleTimeout:               4 * time.Hour,
	StreamCreationTimeout:           remotecommandserver.DefaultStreamCreationTimeout,
	SupportedRemoteCommandProtocols: append([]string{ProtocolV5}, remotecommandserver.SupportedStreamingProtocols...),
	SupportedPortForwardProtocols:   append([]string{ProtocolTunnel}, portforward.SupportedProtocols...),
}

// FromCRIStreaming converts a runtime's cri-streaming Config (containerd
// builds one from its own configuration): the same fields, with v5 and the
// tunnel put first in protocol lists that hold cri-streaming's defaults, so
// a runtime that adopts the package keeps its configuration and gains both.
func FromCRIStreaming(c upstream.Config) Config {
	rc, pf := c.SupportedRemoteCommandProtocols, c.SupportedPortForwardProtocols
	if len(rc) == 0 || slices.Equal(rc, remotecommandserver.SupportedStreamingProtocols) {
		rc = DefaultConfig.SupportedRemoteCommandProtocols
	}
	if len(pf) == 0 || slices.Equal(pf, portforward.SupportedProtocols) {
		pf = DefaultConfig.SupportedPortForwardProtocols
	}
	return Config{
		Addr:                            c.Addr,
		BaseURL:                         c.BaseURL,
		StreamIdleTimeout:               c.StreamIdleTimeout,
		StreamCreationTimeout:           c.StreamCreationTimeout,
		SupportedRemoteCommandProtocols: slices.Clone(rc),
		SupportedPortForwardProtocols:   slices.Clone(pf),
		TLSConfig:                       c.TLSConfig,
	}
}

// DefaultLimits are the kubelet's (wire.DefaultLimits; the idle timeout is
// Config.StreamIdleTimeout).
var DefaultLimits = wire.DefaultLimits

// NewServer returns a Server for runtime, as cri-streaming's NewServer does.
func NewServer(config Config, runtime Runtime) (Server, error) {
	if config.BaseURL == nil {
		config.BaseURL = &url.URL{Scheme: "http", Host: config.Addr}
		if config.TLSConfig != nil {
			config.BaseURL.Scheme = "https"
		}
	}
	if config.BufferSize <= 0 {
		config.BufferSize = wire.DefaultBufferSize
	}
	config.Limits = config.Limits.WithDefaults()
	config.Limits.IdleTimeout = config.StreamIdleTimeout
	s := &server{
		config:  config,
		runtime: runtime,
		tokens:  newTokens(),
		// cri-streaming serves the others; it must not see the ones
		// served here (it would refuse them).
		upstreamRC: without(config.SupportedRemoteCommandProtocols, ProtocolV5),
		upstreamPF: without(config.SupportedPortForwardProtocols, ProtocolTunnel),
	}
	s.adapter = &criAdapter{s}
	s.native.v5 = slices.Contains(config.SupportedRemoteCommandProtocols, ProtocolV5)
	s.native.tunnel = slices.Contains(config.SupportedPortForwardProtocols, ProtocolTunnel)
	pool := &sync.Pool{} // every session's write buffers (wire.NewUpgrader)
	s.rcUpgrader = wire.NewUpgrader(ProtocolV5, config.BufferSize, config.Limits.WriteTimeout, pool)
	s.pfUpgrader = wire.NewUpgrader(ProtocolTunnel, config.BufferSize, config.Limits.WriteTimeout, pool)
	s.ctx, s.stop = context.WithCancel(context.Background())

	mux := http.NewServeMux()
	prefix := path.Dir(config.BaseURL.Path)
	for _, e := range []struct {
		kind string
		h    http.HandlerFunc
	}{{"exec", s.serveExec}, {"attach", s.serveAttach}, {"portforward", s.servePortForward}} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			mux.Handle(m+" "+path.Join("/", prefix, e.kind, "{token}"), e.h)
		}
	}
	s.handler = mux
	s.http = &http.Server{Addr: config.Addr, Handler: mux, TLSConfig: config.TLSConfig}
	return s, nil
}

type server struct {
	config     Config
	runtime    Runtime
	adapter    *criAdapter
	tokens     *tokens
	handler    http.Handler
	http       *http.Server
	rcUpgrader *websocket.Upgrader
	pfUpgrader *websocket.Upgrader
	native     struct{ v5, tunnel bool }
	upstreamRC []string
	upstreamPF []string

	// ctx ends every session's runtime call when the server stops (the
	// http.Server forgets hijacked connections); calls counts them.
	ctx   context.Context
	stop  context.CancelFunc
	calls runtimeCalls
}

func without(list []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(p string) bool { return p == drop })
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *server) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if err := validateStreams(req.ContainerId, req.Tty, req.Stdin, req.Stdout, req.Stderr); err != nil {
		return nil, err
	}
	u, err := s.issue("exec", req)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecResponse{Url: u}, nil
}

func (s *server) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := validateStreams(req.ContainerId, req.Tty, req.Stdin, req.Stdout, req.Stderr); err != nil {
		return nil, err
	}
	u, err := s.issue("attach", req)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.AttachResponse{Url: u}, nil
}

func (s *server) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if req.PodSandboxId == "" {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "missing required pod_sandbox_id")
	}
	u, err := s.issue("portforward", req)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PortForwardResponse{Url: u}, nil
}

// validateStreams is cri-streaming's rule for exec and attach requests.
func validateStreams(container string, tty, stdin, stdout, stderr bool) error {
	switch {
	case container == "":
		return grpcstatus.Errorf(codes.InvalidArgument, "missing required container_id")
	case tty && stderr:
		return grpcstatus.Errorf(codes.InvalidArgument, "tty and stderr cannot both be true")
	case !stdin && !stdout && !stderr:
		return grpcstatus.Errorf(codes.InvalidArgument, "one of stdin, stdout, or stderr must be set")
	}
	return nil
}

func (s *server) issue(kind string, req any) (string, error) {
	token, err := s.tokens.insert(req)
	if err != nil {
		return "", err
	}
	return s.config.BaseURL.ResolveReference(&url.URL{Path: path.Join(kind, token)}).String(), nil
}

func (s *server) Start(stayUp bool) error {
	if !stayUp {
		return errors.New("stayUp=false is not yet implemented")
	}
	l, err := net.Listen("tcp", s.config.Addr)
	if err != nil {
		return err
	}
	s.config.BaseURL.Host = l.Addr().String()
	if s.config.TLSConfig != nil {
		return s.http.ServeTLS(l, "", "")
	}
	return s.http.Serve(l)
}

// Stop closes the listener and the connections cri-streaming serves, and
// ends every session's runtime call through its context: a natively served
// session tells its client the server is going away and closes with a
// close handshake. It returns once every runtime call has returned and its
// status is written, or after StopTimeout: a runtime stops (or restarts)
// right after, and a call still running then would leave its process
// behind in the container, with nobody to read it or stop it (containerd
// kills an exec's process when its call's context ends, but only while it
// is still running), and a status not yet written would leave the client
// a cut session that SPDY clients read as success.
func (s *server) Stop() error {
	s.stop()
	err := s.http.Close()
	if !s.calls.wait(StopTimeout) {
		klog.Background().Info("Runtime calls still running after the streaming server stopped", "timeout", StopTimeout)
	}
	return err
}

// StopTimeout bounds Stop's wait for the sessions' runtime calls.
const StopTimeout = 5 * time.Second

// runtimeCalls counts the runtime calls (Exec, Attach, PortForward) the
// sessions have in flight, each once, so Stop can wait for them. A
// WaitGroup would not do: a call may begin while Stop waits.
type runtimeCalls struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0 while Stop waits
}

// run runs one runtime call, counted.
func (c *runtimeCalls) run(call func()) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n--; c.n == 0 && c.idle != nil {
			close(c.idle)
			c.idle = nil
		}
	}()
	call()
}

// wait waits up to d for the calls in flight to return, reporting whether
// they all did.
func (c *runtimeCalls) wait(d time.Duration) bool {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return true
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

// track counts a natively served session until the returned func is called.
// offers reports whether r is a WebSocket upgrade offering protocol.
func offers(r *http.Request, protocol string) bool {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return false
	}
	for _, p := range websocket.Subprotocols(r) {
		if p == protocol {
			return true
		}
	}
	return false
}

func (s *server) serveExec(w http.ResponseWriter, r *http.Request) {
	req, ok := s.tokens.consume(r.PathValue("token")).(*runtimeapi.ExecRequest)
	if !ok {
		s.config.Metrics.request("exec", "none")
		http.NotFound(w, r)
		return
	}
	opts := &remotecommandserver.Options{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, TTY: req.Tty}
	if s.native.v5 && offers(r, ProtocolV5) {
		s.config.Metrics.request("exec", ProtocolV5)
		s.serveV5(w, r, "exec", opts, func(ctx context.Context, p processIO) error {
			return s.runtime.Exec(ctx, req.ContainerId, req.Cmd, p.stdin, p.stdout, p.stderr, req.Tty, p.resize)
		})
		return
	}
	s.config.Metrics.request("exec", offered(r, s.upstreamRC))
	s.calls.run(func() { // until the status is written: see Stop
		remotecommandserver.ServeExec(w, r, s.adapter, "", "", req.ContainerId, req.Cmd, opts,
			s.config.StreamIdleTimeout, s.config.StreamCreationTimeout, s.upstreamRC)
	})
}

func (s *server) serveAttach(w http.ResponseWriter, r *http.Request) {
	req, ok := s.tokens.consume(r.PathValue("token")).(*runtimeapi.AttachRequest)
	if !ok {
		s.config.Metrics.request("attach", "none")
		http.NotFound(w, r)
		return
	}
	opts := &remotecommandserver.Options{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, TTY: req.Tty}
	if s.native.v5 && offers(r, ProtocolV5) {
		s.config.Metrics.request("attach", ProtocolV5)
		s.serveV5(w, r, "attach", opts, func(ctx context.Context, p processIO) error {
			return s.runtime.Attach(ctx, req.ContainerId, p.stdin, p.stdout, p.stderr, req.Tty, p.resize)
		})
		return
	}
	s.config.Metrics.request("attach", offered(r, s.upstreamRC))
	s.calls.run(func() {
		remotecommandserver.ServeAttach(w, r, s.adapter, "", "", req.ContainerId, opts,
			s.config.StreamIdleTimeout, s.config.StreamCreationTimeout, s.upstreamRC)
	})
}

func (s *server) servePortForward(w http.ResponseWriter, r *http.Request) {
	req, ok := s.tokens.consume(r.PathValue("token")).(*runtimeapi.PortForwardRequest)
	if !ok {
		s.config.Metrics.request("portforward", "none")
		http.NotFound(w, r)
		return
	}
	if s.native.tunnel && offers(r, ProtocolTunnel) {
		s.config.Metrics.request("portforward", ProtocolTunnel)
		s.serveTunnel(w, r, req.PodSandboxId)
		return
	}
	opts, err := portforward.BuildV4Options(req.Port)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.config.Metrics.request("portforward", offered(r, s.upstreamPF))
	portforward.ServePortForward(w, r, s.adapter, req.PodSandboxId, "", opts,
		s.config.StreamIdleTimeout, s.config.StreamCreationTimeout, s.upstreamPF)
}

// offered names, for the metrics, the protocol cri-streaming will pick: the
// first one the client offers that it supports (SPDY's
// X-Stream-Protocol-Version, or WebSocket's subprotocols; none offered is
// the legacy WebSocket protocol or the original SPDY one).
func offered(r *http.Request, supported []string) string {
	var offers []string
	ws := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	if ws {
		offers = websocket.Subprotocols(r)
	} else {
		for _, v := range r.Header.Values("X-Stream-Protocol-Version") {
			for _, p := range strings.Split(v, ",") {
				offers = append(offers, strings.TrimSpace(p))
			}
		}
	}
	for _, p := range offers {
		if slices.Contains(supported, p) || ws {
			return p
		}
	}
	if ws {
		return "websocket"
	}
	return "spdy"
}

// criAdapter is cri-streaming's own adapter from Runtime to its handlers'
// interfaces (it keeps its copy unexported), with two of this package's
// guarantees on the sessions cri-streaming serves (SPDY, legacy
// WebSocket): Stop ends their runtime calls as it ends the native ones, and
// a forwarded connection the pod resets ends alone.
type criAdapter struct{ s *server }

func (a *criAdapter) ExecInContainer(ctx context.Context, _, _, container string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize, _ time.Duration) error {
	return a.call(ctx, func(ctx context.Context) error {
		return a.s.runtime.Exec(ctx, container, cmd, in, out, errw, tty, resize)
	})
}

func (a *criAdapter) AttachContainer(ctx context.Context, _, _, container string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error {
	return a.call(ctx, func(ctx context.Context) error {
		return a.s.runtime.Attach(ctx, container, in, out, errw, tty, resize)
	})
}

// PortForward resets the data stream of a connection the pod reset or
// broke and returns no error, so cri-streaming writes nothing on its error
// stream (connreset says why); every other failure is reported as before.
// Only a stream that can be reset on its own (SPDY's) is: on the legacy
// WebSocket protocol a port's channels are the session.
func (a *criAdapter) PortForward(ctx context.Context, pod, _ string, port int32, stream io.ReadWriteCloser) error {
	var err error
	// A forwarded connection is counted on its own: cri-streaming's
	// port-forward session has no end Stop could wait for.
	a.s.calls.run(func() {
		err = a.call(ctx, func(ctx context.Context) error {
			return a.s.runtime.PortForward(ctx, pod, port, stream)
		})
	})
	reset, ok := stream.(interface{ Reset() error })
	reason := connreset.Of(err)
	if reason == "" || !ok {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Port-forward connection broken by the pod", "pod", pod, "port", port, "reason", reason, "err", err)
	a.s.config.Metrics.connectionReset(reason)
	if rerr := reset.Reset(); rerr != nil {
		klog.FromContext(ctx).V(3).Info("Resetting a port-forward stream failed", "port", port, "err", rerr)
	}
	return nil
}

// call runs a runtime call for cri-streaming with a context that also ends
// when the server stops. Exec and attach sessions are counted by their
// handlers, until cri-streaming has written their status.
func (a *criAdapter) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.s.ctx, cancel)()
	return f(ctx)
}

// klogFor is the session's logger.
func klogFor(r *http.Request, kind string) klog.Logger {
	return klog.FromContext(r.Context()).WithValues("streaming", kind)
}
