// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/component-base/metrics"
)

// Metrics are kubestream's metrics, declared with k8s.io/component-base so
// that a kubelet registers them where its own are (RegisterWith) and every
// kubelet scraper finds them on its /metrics. Registry is kubestream's own:
// standalone serve's /metrics and the kubelet's /metrics/streaming. All are
// ALPHA: their names and labels may still change.
type Metrics struct {
	Registry metrics.KubeRegistry

	requests *metrics.CounterVec
	failures *metrics.CounterVec
	tlsFails *metrics.CounterVec
	limited  *metrics.CounterVec
	evicted  *metrics.Counter
	dropped  *metrics.Counter

	recordingFails *metrics.Counter
	resets         *metrics.CounterVec
	active         *metrics.GaugeVec
	duration       *metrics.HistogramVec
	bytes          *metrics.CounterVec
	probes         *metrics.CounterVec
	// modeConns: reverse connections and UDP associations.
	modeConns *metrics.CounterVec
}

// NewMetrics declares the metrics and registers them (and the Go runtime's
// and the process's collectors) on a registry of their own.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: metrics.NewKubeRegistry(),
		requests: metrics.NewCounterVec(&metrics.CounterOpts{
			Name:           "kubestream_streaming_requests_total",
			Help:           "Streaming requests by subresource, client protocol and the route kubestream took.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"subresource", "protocol", "route"}),
		failures: metrics.NewCounterVec(&metrics.CounterOpts{
			Name:           "kubestream_streaming_failures_total",
			Help:           "Streaming requests that failed, by subresource, route and HTTP-style code.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"subresource", "route", "code"}),
		active: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Name:           "kubestream_streaming_sessions_active",
			Help:           "Streaming sessions in progress.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"subresource", "route"}),
		duration: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Name:           "kubestream_streaming_session_duration_seconds",
			Help:           "Duration of streaming sessions.",
			Buckets:        metrics.ExponentialBuckets(0.01, 4, 10),
			StabilityLevel: metrics.ALPHA,
		}, []string{"subresource", "route"}),
		bytes: metrics.NewCounterVec(&metrics.CounterOpts{
			Name:           "kubestream_streaming_bytes_total",
			Help:           "Payload bytes carried by kubestream's own routes, by channel (stdin, stdout, stderr, resize, tunnel-up, tunnel-down, direct-up, direct-down, spdy-up, spdy-down).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"subresource", "channel"}),
		probes: metrics.NewCounterVec(&metrics.CounterOpts{
			Name:           "kubestream_runtime_websocket_offers_total",
			Help:           "Client WebSockets offered to the runtime unchanged, by subresource, protocol and result (accepted, refused).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"subresource", "protocol", "result"}),
		tlsFails: metrics.NewCounterVec(&metrics.CounterOpts{
			Name:           "kubestream_tls_reload_failures_total",
			Help:           "Failed reloads of the serving certificate (serving-cert) or the client CA bundle (client-ca); the last good one stays in use.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"file"}),
		limited: metrics.NewCounterVec(&metrics.CounterOpts{
			Name:           "kubestream_streaming_sessions_limited_total",
			Help:           "Streaming requests refused with 429 because a session limit was reached, by limit (node, pod).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"limit"}),
		evicted: metrics.NewCounter(&metrics.CounterOpts{
			Name:           "kubestream_idle_connections_evicted_total",
			Help:           "Connections closed before they sent a request (or between requests) to make room for new ones.",
			StabilityLevel: metrics.ALPHA,
		}),
		dropped: metrics.NewCounter(&metrics.CounterOpts{
			Name:           "kubestream_audit_records_dropped_total",
			Help:           "Audit records dropped because the audit log could not keep up (the session went on).",
			StabilityLevel: metrics.ALPHA,
		}),
		resets: metrics.NewCounterVec(&metrics.CounterOpts{
			Name:           "kubestream_portforward_connections_reset_total",
			Help:           "Forwarded connections the pod reset (connection-reset) or broke (broken-pipe) mid-stream, by route: each ended alone, its data stream reset and nothing on its error stream, the port-forward going on.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"route", "reason"}),
		modeConns: metrics.NewCounterVec(&metrics.CounterOpts{
			Name:           "kubestream_portforward_mode_connections_total",
			Help:           "Connections (reverse-portforward) and UDP associations (udp-portforward) of kubestream's own port-forward modes, by mode and result (opened, refused: over the per-session cap).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"mode", "result"}),
		recordingFails: metrics.NewCounter(&metrics.CounterOpts{
			Name:           "kubestream_session_recording_failures_total",
			Help:           "Terminal recordings that could not start or were cut short (a full or read-only disk, a disk slower than the session); the session went on.",
			StabilityLevel: metrics.ALPHA,
		}),
	}
	m.RegisterWith(m.Registry.MustRegister)
	// The collectors are Prometheus's own; component-base has no wrapper
	// for them (its legacyregistry registers them the same way).
	m.Registry.RawMustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// RegisterWith registers kubestream's metrics with another registry too:
// inside a kubelet, legacyregistry.MustRegister, so they appear on the
// kubelet's /metrics. Call it once per registry.
func (m *Metrics) RegisterWith(register func(...metrics.Registerable)) {
	register(m.requests, m.failures, m.active, m.duration, m.bytes, m.probes, m.tlsFails, m.limited, m.evicted, m.dropped, m.recordingFails, m.resets, m.modeConns)
}

// resetCounter counts a route's forwarded connections the pod reset
// (translator.ResetCounter).
type resetCounter struct {
	m     *Metrics
	route Route
}

func (c resetCounter) ConnectionReset(reason string) {
	c.m.resets.WithLabelValues(string(c.route), reason).Inc()
}

// TLSReloadFailed counts a failed reload of a serving TLS file.
func (m *Metrics) TLSReloadFailed(file string) { m.tlsFails.WithLabelValues(file).Inc() }

// AuditDropped counts an audit record dropped on a full queue.
func (m *Metrics) AuditDropped() { m.dropped.Inc() }

// ConnectionEvicted counts an idle connection closed to admit a new one.
func (m *Metrics) ConnectionEvicted() { m.evicted.Inc() }

// Handler serves kubestream's own registry in Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return metrics.HandlerFor(m.Registry, metrics.HandlerOpts{})
}

var channelNames = [5]string{"stdin", "stdout", "stderr", "error", "resize"}
