package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/validation"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/translator"
)

func podRef(r *http.Request) cri.PodRef {
	return cri.PodRef{Namespace: r.PathValue("namespace"), Name: r.PathValue("pod"), UID: r.PathValue("uid")}
}

// checkNames refuses path names no Kubernetes object can have, with a 400
// that says which, before they reach CRI (whose gRPC cannot even marshal a
// name that is not UTF-8).
func checkNames(pod cri.PodRef, container string, withContainer bool) error {
	bad := func(what, v string, errs []string) error {
		return fmt.Errorf("invalid %s %q: %s", what, v, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(pod.Namespace); len(errs) > 0 {
		return bad("namespace", pod.Namespace, errs)
	}
	if errs := validation.IsDNS1123Subdomain(pod.Name); len(errs) > 0 {
		return bad("pod name", pod.Name, errs)
	}
	if withContainer {
		if errs := validation.IsDNS1123Label(container); len(errs) > 0 {
			return bad("container name", container, errs)
		}
	}
	if pod.UID != "" && (!utf8.ValidString(pod.UID) || len(pod.UID) > 128 || strings.ContainsFunc(pod.UID, unicode.IsControl)) {
		return bad("pod UID", pod.UID, []string{"must be at most 128 printable UTF-8 characters"})
	}
	return nil
}

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) { s.serveRemoteCommand(w, r, Exec) }
func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) {
	s.serveRemoteCommand(w, r, Attach)
}

// session tracks one request in the metrics from decision to end.
type session struct {
	s           *Server
	subresource string
	protocol    string
	route       Route
	start       time.Time
	counted     bool
	release     func() // gives back the session slot
}

// begin starts tracking a request. Its count waits while the route may
// still turn direct (see tryDirect); every other request counts at once.
func (s *Server) begin(r *http.Request, sub string, d decision) *session {
	ss := &session{s: s, subresource: sub, protocol: d.protocol, route: d.route, start: time.Now()}
	if !d.directCandidate {
		ss.count()
	}
	return ss
}

// count adds the request to kubestream_streaming_requests_total under its
// final route, once.
func (ss *session) count() {
	if ss.counted {
		return
	}
	ss.counted = true
	proto := ss.protocol
	if proto == "" {
		proto = "none"
	}
	ss.s.cfg.Metrics.requests.WithLabelValues(ss.subresource, proto, string(ss.route)).Inc()
}

// fail answers with an HTTP error, counted and logged.
func (ss *session) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	ss.count()
	ss.s.cfg.Metrics.failures.WithLabelValues(ss.subresource, string(ss.route), strconv.Itoa(code)).Inc()
	klog.FromContext(r.Context()).V(2).Info("Streaming request failed", "subresource", ss.subresource, "route", ss.route, "code", code, "err", err)
	http.Error(w, err.Error(), code)
}

// running marks the session active until the returned func is called.
func (ss *session) running() func() {
	ss.count()
	m := ss.s.cfg.Metrics
	g := m.active.WithLabelValues(ss.subresource, string(ss.route))
	g.Inc()
	return func() {
		g.Dec()
		m.duration.WithLabelValues(ss.subresource, string(ss.route)).Observe(time.Since(ss.start).Seconds())
	}
}

// decide classifies the request and marks the WebSockets kubestream would
// translate or tunnel as candidates for the runtime's own WebSocket support.
func (s *Server) decide(r *http.Request, sub string) decision {
	d := classify(r, sub, s.webSocketsEnabled())
	d.directCandidate = (d.route == RouteTranslated || d.route == RouteTunneled) &&
		s.direct.worthTrying(sub, d.protocol)
	return d
}

// admit decides the route, counts the request and answers it if it is
// rejected or over a session limit; ok is false when the client has had
// its answer. The caller defers ss.release().
func (s *Server) admit(w http.ResponseWriter, r *http.Request, sub string) (*session, bool) {
	d := s.decide(r, sub)
	ss := s.begin(r, sub, d)
	if d.route == RouteRejected {
		s.reject(w, r, ss, d)
		return nil, false
	}
	pod := podRef(r)
	release, full := s.slots.acquire(pod.Namespace + "/" + pod.Name)
	if full != "" {
		s.cfg.Metrics.limited.WithLabelValues(full).Inc()
		w.Header().Set("Retry-After", "1")
		ss.fail(w, r, http.StatusTooManyRequests, fmt.Errorf("too many streaming sessions on this %s; retry later", full))
		return nil, false
	}
	ss.release = release
	return ss, true
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request, ss *session, d decision) {
	if len(d.accepted) > 0 {
		w.Header().Set(httpstream.HeaderAcceptedProtocolVersions, strings.Join(d.accepted, ", "))
		d.message += "; accepted: " + strings.Join(d.accepted, ", ")
	}
	ss.fail(w, r, d.status, errors.New(d.message))
}

func (s *Server) serveRemoteCommand(w http.ResponseWriter, r *http.Request, sub string) {
	ctx := r.Context()
	ss, ok := s.admit(w, r, sub)
	if !ok {
		return
	}
	defer ss.release()
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		ss.fail(w, r, http.StatusBadRequest, err)
		return
	}
	cmd := r.URL.Query()["command"]
	if sub == Exec && len(cmd) == 0 {
		ss.fail(w, r, http.StatusBadRequest, errors.New("exec needs at least one command parameter"))
		return
	}
	pod, container := podRef(r), r.PathValue("container")
	if err := checkNames(pod, container, true); err != nil {
		ss.fail(w, r, http.StatusBadRequest, err)
		return
	}
	streams := cri.Streams{Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, TTY: opts.TTY}
	// Each call asks the runtime for a new single-use URL.
	newURL := func(ctx context.Context) (*url.URL, error) {
		if sub == Exec {
			return s.cfg.URLs.ExecURL(ctx, pod, container, cmd, streams)
		}
		return s.cfg.URLs.AttachURL(ctx, pod, container, streams)
	}
	u, err := newURL(ctx)
	if err != nil {
		ss.fail(w, r, cri.HTTPStatus(err), err)
		return
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("subresource", sub, "pod", pod.String(), "container", container))
	r = r.WithContext(ctx)
	if ss.route != RouteTranslated {
		s.proxy(w, r, ss, u)
		return
	}
	if u, ok = s.offerDirect(w, r, ss, u, newURL); !ok {
		return
	}
	s.translate(w, r, ss, u, newURL, translator.Options{
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, TTY: opts.TTY,
	})
}

func (s *Server) translate(w http.ResponseWriter, r *http.Request, ss *session, first *url.URL,
	newURL func(context.Context) (*url.URL, error), opts translator.Options) {
	ws, err := s.upgrader(ss.subresource).Upgrade(bufferedHijack{w}, r, nil)
	if err != nil {
		// gorilla answered the client already (400 with the reason).
		s.cfg.Metrics.failures.WithLabelValues(ss.subresource, string(ss.route), "400").Inc()
		return
	}
	ctx, done := s.sessionContext(r.Context())
	defer done()
	defer ss.running()()
	dial := func(ctx context.Context, protocols []string) (net.Conn, string, error) {
		u := first
		first = nil
		if u == nil {
			var err error
			if u, err = newURL(ctx); err != nil {
				return nil, "", err
			}
		}
		return upgrade.SPDY(ctx, u, s.cfg.RuntimeTLS, protocols)
	}
	res := translator.ServeRemoteCommand(ctx, ws, dial, opts, s.cfg.Translator)
	for ch, n := range res.Bytes {
		if n > 0 {
			s.cfg.Metrics.bytes.WithLabelValues(ss.subresource, channelNames[ch]).Add(float64(n))
		}
	}
	logger := klog.FromContext(ctx)
	if res.Err != nil {
		s.cfg.Metrics.failures.WithLabelValues(ss.subresource, string(ss.route), "session").Inc()
		logger.V(2).Info("Session ended abnormally", "err", res.Err)
		return
	}
	logger.V(3).Info("Session ended", "exitCode", translator.ExitCode(res.Status), "duration", time.Since(ss.start))
}

func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ss, ok := s.admit(w, r, PortForward)
	if !ok {
		return
	}
	defer ss.release()
	ports, err := parsePorts(r.URL.Query()["port"])
	if err != nil {
		ss.fail(w, r, http.StatusBadRequest, err)
		return
	}
	pod := podRef(r)
	if err := checkNames(pod, "", false); err != nil {
		ss.fail(w, r, http.StatusBadRequest, err)
		return
	}
	newURL := func(ctx context.Context) (*url.URL, error) {
		return s.cfg.URLs.PortForwardURL(ctx, pod, ports)
	}
	u, err := newURL(ctx)
	if err != nil {
		ss.fail(w, r, cri.HTTPStatus(err), err)
		return
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("subresource", PortForward, "pod", pod.String()))
	r = r.WithContext(ctx)
	if ss.route != RouteTunneled {
		s.proxy(w, r, ss, u)
		return
	}
	if u, ok = s.offerDirect(w, r, ss, u, newURL); !ok {
		return
	}
	// Dial the runtime before answering the client: the tunnel has no
	// status channel, so a runtime failure must still be an HTTP answer.
	dctx, cancel := context.WithTimeout(ctx, s.cfg.Translator.StreamCreationTimeout)
	rt, proto, err := upgrade.SPDY(dctx, u, s.cfg.RuntimeTLS, []string{portforward.PortForwardV1Name})
	cancel()
	if err != nil {
		ss.fail(w, r, upgradeStatus(err), err)
		return
	}
	if proto != portforward.PortForwardV1Name {
		rt.Close()
		ss.fail(w, r, http.StatusBadGateway, fmt.Errorf("container runtime negotiated %q for port-forward", proto))
		return
	}
	ws, err := s.upgrader(PortForward).Upgrade(bufferedHijack{w}, r, nil)
	if err != nil {
		rt.Close()
		s.cfg.Metrics.failures.WithLabelValues(PortForward, string(ss.route), "400").Inc()
		return
	}
	sctx, done := s.sessionContext(ctx)
	defer done()
	defer ss.running()()
	res := translator.ServeTunnel(sctx, ws, rt, s.cfg.Translator)
	s.cfg.Metrics.bytes.WithLabelValues(PortForward, "tunnel-up").Add(float64(res.BytesUp))
	s.cfg.Metrics.bytes.WithLabelValues(PortForward, "tunnel-down").Add(float64(res.BytesDown))
	if res.Err != nil {
		s.cfg.Metrics.failures.WithLabelValues(PortForward, string(ss.route), "session").Inc()
		klog.FromContext(ctx).V(2).Info("Tunnel ended abnormally", "err", res.Err)
	}
}

// offerDirect offers a candidate WebSocket to the runtime (tryDirect). ok is
// true when kubestream must translate with the returned URL: the first one
// if no offer was made, a fresh one if the runtime refused (its URL is
// single-use). ok is false when the client has had its answer: the runtime
// served the session, or failed.
func (s *Server) offerDirect(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL,
	newURL func(context.Context) (*url.URL, error)) (*url.URL, bool) {
	if ss.counted {
		return u, true // not a candidate
	}
	err := s.tryDirect(w, r, ss, u)
	switch {
	case err == nil:
		return nil, false
	case !errors.Is(err, errRefused):
		ss.fail(w, r, upgradeStatus(err), err)
		return nil, false
	}
	ss.count()
	u, err = newURL(r.Context())
	if err != nil {
		ss.fail(w, r, cri.HTTPStatus(err), err)
		return nil, false
	}
	return u, true
}

// upgradeStatus maps a failed runtime dial to the client's status: the
// runtime's own 4xx passes on; an unreachable runtime is a bad gateway.
func upgradeStatus(err error) int {
	var ue *upgrade.Error
	if errors.As(err, &ue) && ue.StatusCode >= 400 && ue.StatusCode < 500 {
		return ue.StatusCode
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

func parsePorts(values []string) ([]int32, error) {
	var ports []int32
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("invalid port %q: want 1-65535", p)
			}
			ports = append(ports, int32(n))
		}
	}
	return ports, nil
}

// proxy passes the upgrade to the runtime, as a kubelet does: the runtime's
// answer, 101 or an error, goes back to the client. SPDY sessions are
// relayed frame by frame (relaySPDY); legacy WebSockets byte for byte.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) {
	if ss.route == RouteProxiedSPDY {
		s.relaySPDY(w, r, ss, u)
		return
	}
	defer ss.running()()
	var transport http.RoundTripper
	if s.cfg.RuntimeTLS != nil {
		transport = &http.Transport{TLSClientConfig: s.cfg.RuntimeTLS}
	}
	ctx, done := s.sessionContext(r.Context())
	defer done()
	h := proxy.NewUpgradeAwareHandler(u, transport, false, true, &responder{ss: ss})
	h.ServeHTTP(&closeOnDone{ResponseWriter: w, ctx: ctx}, r)
}

// closeOnDone hands the upgrade handler the client connection and closes
// it when ctx ends: the handler copies until one side closes, and
// http.Server never closes a hijacked connection, so Shutdown needs this
// to end passed-through sessions.
type closeOnDone struct {
	http.ResponseWriter
	ctx context.Context
}

func (c *closeOnDone) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := c.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("connection cannot be hijacked")
	}
	conn, rw, err := h.Hijack()
	if err == nil {
		_ = conn.SetDeadline(time.Time{}) // the request's read deadline is not the session's
		context.AfterFunc(c.ctx, func() { conn.Close() })
	}
	return conn, rw, err
}

// bufferedHijack hands gorilla's Upgrader the connection with what the HTTP
// server had already buffered (a client may write its first frames in the
// same write as its handshake) put back in front of it, and the server's
// reader emptied onto that: kubestream's own frame reader reads the
// connection gorilla returns (NetConn), so nothing may stay behind in a
// buffer it never sees. gorilla still reuses the server's reader, so a
// session costs no new buffer.
type bufferedHijack struct{ http.ResponseWriter }

func (b bufferedHijack) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(b.ResponseWriter).Hijack()
	if err != nil || brw.Reader.Buffered() == 0 {
		return conn, brw, err
	}
	early, _ := brw.Reader.Peek(brw.Reader.Buffered())
	c := upgrade.PrefixConn(conn, early)
	brw.Reader.Reset(c)
	return c, brw, nil
}

type responder struct{ ss *session }

func (e *responder) Error(w http.ResponseWriter, r *http.Request, err error) {
	e.ss.fail(w, r, http.StatusInternalServerError, fmt.Errorf("proxying to container runtime: %w", err))
}

func (s *Server) upgrader(sub string) *websocket.Upgrader {
	if sub == PortForward {
		return s.pfUpgrader
	}
	return s.rcUpgrader
}

// sessionContext ties a session to the server's life, so Shutdown ends it.
func (s *Server) sessionContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.baseCtx, cancel)
	s.sessions.Add(1)
	return ctx, func() {
		stop()
		cancel()
		s.sessions.Done()
	}
}

// relaySPDY passes a SPDY upgrade to the runtime with the client's
// protocol list and relays the session with translator.RelaySPDY, which
// keeps the client's pings off the runtime and tells the client when the
// runtime cut its session (issue: a slow reader lost output silently).
func (s *Server) relaySPDY(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) {
	ctx := r.Context()
	dctx, cancel := context.WithTimeout(ctx, s.cfg.Translator.StreamCreationTimeout)
	rt, proto, err := upgrade.SPDY(dctx, u, s.cfg.RuntimeTLS, r.Header.Values(httpstream.HeaderProtocolVersion))
	cancel()
	if err != nil {
		var ue *upgrade.Error
		if errors.As(err, &ue) {
			// The runtime's own refusal goes back as it was, as a
			// byte-for-byte proxy would have passed it.
			ss.fail(w, r, ue.StatusCode, errors.New(strings.TrimSpace(ue.Body)))
			return
		}
		ss.fail(w, r, upgradeStatus(err), err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		rt.Close()
		ss.fail(w, r, http.StatusInternalServerError, errors.New("connection cannot be hijacked"))
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		rt.Close()
		klog.FromContext(ctx).V(2).Info("Hijacking the client connection failed", "err", err)
		return
	}
	sctx, done := s.sessionContext(ctx)
	defer done()
	defer ss.running()()
	_ = conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\n%s: %s\r\n%s: %s\r\n%s: %s\r\n\r\n",
		httpstream.HeaderConnection, httpstream.HeaderUpgrade, httpstream.HeaderUpgrade, "SPDY/3.1",
		httpstream.HeaderProtocolVersion, proto); err != nil {
		conn.Close()
		rt.Close()
		return
	}
	res := translator.RelaySPDY(sctx, upgrade.BufferedConn(conn, brw.Reader), rt, proto, s.cfg.Translator)
	s.cfg.Metrics.bytes.WithLabelValues(ss.subresource, "spdy-up").Add(float64(res.BytesUp))
	s.cfg.Metrics.bytes.WithLabelValues(ss.subresource, "spdy-down").Add(float64(res.BytesDown))
	logger := klog.FromContext(ctx)
	if res.Lost > 0 || res.Err != nil {
		s.cfg.Metrics.failures.WithLabelValues(ss.subresource, string(ss.route), "session").Inc()
		logger.V(2).Info("SPDY session cut by the runtime's side", "err", res.Err, "errorStreamsTold", res.Lost)
		return
	}
	logger.V(3).Info("SPDY session ended", "pingsAnswered", res.PingsAnswered, "duration", time.Since(ss.start))
}
