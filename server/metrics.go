package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are kubestream's Prometheus metrics, on a registry of their own
// so a kubelet can mount them next to its own.
type Metrics struct {
	Registry *prometheus.Registry

	requests *prometheus.CounterVec
	failures *prometheus.CounterVec
	tlsFails *prometheus.CounterVec
	limited  *prometheus.CounterVec
	evicted  prometheus.Counter
	active   *prometheus.GaugeVec
	duration *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
	probes   *prometheus.CounterVec
}

// NewMetrics registers the metrics (and the Go runtime's) on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubestream_streaming_requests_total",
			Help: "Streaming requests by subresource, client protocol and the route kubestream took.",
		}, []string{"subresource", "protocol", "route"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubestream_streaming_failures_total",
			Help: "Streaming requests that failed, by subresource, route and HTTP-style code.",
		}, []string{"subresource", "route", "code"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubestream_streaming_sessions_active",
			Help: "Streaming sessions in progress.",
		}, []string{"subresource", "route"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubestream_streaming_session_duration_seconds",
			Help:    "Duration of streaming sessions.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}, []string{"subresource", "route"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubestream_streaming_bytes_total",
			Help: "Payload bytes carried by kubestream's own routes, by channel (stdin, stdout, stderr, resize, tunnel-up, tunnel-down, direct-up, direct-down, spdy-up, spdy-down).",
		}, []string{"subresource", "channel"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubestream_runtime_websocket_offers_total",
			Help: "Client WebSockets offered to the runtime unchanged, by subresource, protocol and result (accepted, refused).",
		}, []string{"subresource", "protocol", "result"}),
	}
	m.tlsFails = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubestream_tls_reload_failures_total",
		Help: "Failed reloads of the serving certificate (serving-cert) or the client CA bundle (client-ca); the last good one stays in use.",
	}, []string{"file"})
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubestream_streaming_sessions_limited_total",
		Help: "Streaming requests refused with 429 because a session limit was reached, by limit (node, pod).",
	}, []string{"limit"})
	m.evicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubestream_idle_connections_evicted_total",
		Help: "Connections closed before they sent a request (or between requests) to make room for new ones.",
	})
	m.Registry.MustRegister(m.requests, m.failures, m.active, m.duration, m.bytes, m.probes, m.tlsFails, m.limited, m.evicted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// TLSReloadFailed counts a failed reload of a serving TLS file.
func (m *Metrics) TLSReloadFailed(file string) { m.tlsFails.WithLabelValues(file).Inc() }

// ConnectionEvicted counts an idle connection closed to admit a new one.
func (m *Metrics) ConnectionEvicted() { m.evicted.Inc() }

// Handler serves the metrics in Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

var channelNames = [5]string{"stdin", "stdout", "stderr", "error", "resize"}
