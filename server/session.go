package server

import (
	"net/http"
	"strconv"
	"time"

	"k8s.io/klog/v2"
)

// session is one streaming request from its route decision to its end. It
// owns every metric the request touches, through the methods below:
// requests (count), failures (fail, failed), active sessions and duration
// (running), bytes (carried), direct offers (offered), session limits
// (limited).
type session struct {
	s           *Server
	subresource string
	protocol    string
	route       Route
	start       time.Time
	// direct: the runtime is offered the client's WebSocket first; the
	// request is counted once the offer settles the route.
	direct  bool
	counted bool
	release func() // gives back the session slot (limits.go)
}

// begin starts tracking a request. A direct candidate's count waits until
// the offer settles its route; every other request counts at once.
func (s *Server) begin(sub string, d decision) *session {
	ss := &session{s: s, subresource: sub, protocol: d.protocol, route: d.route, start: time.Now(),
		direct: d.directCandidate, release: func() {}}
	if !ss.direct {
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
	ss.failed(strconv.Itoa(code))
	klog.FromContext(r.Context()).V(2).Info("Streaming request failed", "subresource", ss.subresource, "route", ss.route, "code", code, "err", err)
	http.Error(w, err.Error(), code)
}

// failed counts a failure the client has already heard of: "400" when the
// WebSocket handshake failed (gorilla answered), "session" when a session
// ended abnormally.
func (ss *session) failed(code string) {
	ss.s.cfg.Metrics.failures.WithLabelValues(ss.subresource, string(ss.route), code).Inc()
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

// carried adds n payload bytes on channel to kubestream_streaming_bytes_total.
func (ss *session) carried(channel string, n uint64) {
	if n > 0 {
		ss.s.cfg.Metrics.bytes.WithLabelValues(ss.subresource, channel).Add(float64(n))
	}
}

// offered counts the runtime's answer to a direct offer.
func (ss *session) offered(accepted bool) {
	result := "refused"
	if accepted {
		result = "accepted"
	}
	ss.s.cfg.Metrics.probes.WithLabelValues(ss.subresource, ss.protocol, result).Inc()
}

// limited counts a request refused by a full session limit ("node", "pod").
func (ss *session) limited(limit string) {
	ss.s.cfg.Metrics.limited.WithLabelValues(limit).Inc()
}
