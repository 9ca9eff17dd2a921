// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts the runtime's streaming requests by kind and by the
// protocol they were served with, so an operator can see which legs still
// speak SPDY.
type Metrics struct {
	requests *prometheus.CounterVec
	open     *prometheus.GaugeVec
	// out holds output's two children, by path: kernel (splice) and copy.
	out    *prometheus.CounterVec
	kernel prometheus.Counter
	copied prometheus.Counter
	resets *prometheus.CounterVec
}

// NewMetrics registers the runtime server's metrics with reg
// (prometheus.DefaultRegisterer when nil: containerd serves that one on its
// metrics address).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	m := &Metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubestream_runtime_streaming_requests_total",
		Help: "Streaming requests a container runtime's streaming server received, by kind (exec, attach, portforward) and the protocol that served them (none: unknown or spent URL).",
	}, []string{"kind", "protocol"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubestream_runtime_streaming_sessions",
			Help: "Sessions the runtime's streaming server serves itself (v5 and the port-forward tunnel) open now, by kind.",
		}, []string{"kind"}),
		out: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubestream_runtime_streaming_output_bytes_total",
			Help: "Output bytes (stdout and stderr) the runtime's streaming server sent in v5 sessions, by path: kernel (splice(2) from the runtime's pipe to the socket) or copy (through a buffer).",
		}, []string{"path"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubestream_runtime_portforward_connections_reset_total",
			Help: "Forwarded connections the pod reset (connection-reset) or broke (broken-pipe) mid-stream: each ended alone, its data stream reset, its session going on.",
		}, []string{"reason"})}
	m.kernel, m.copied = m.out.WithLabelValues("kernel"), m.out.WithLabelValues("copy")
	for _, c := range []prometheus.Collector{m.requests, m.open, m.out, m.resets} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) request(kind, protocol string) {
	if m != nil {
		m.requests.WithLabelValues(kind, protocol).Inc()
	}
}

// session counts one natively served session of kind as open until the
// returned func is called.
func (m *Metrics) session(kind string) func() {
	if m == nil {
		return func() {}
	}
	g := m.open.WithLabelValues(kind)
	g.Inc()
	return g.Dec
}

// connectionReset counts a forwarded connection the pod reset or broke
// (reason: connreset's).
func (m *Metrics) connectionReset(reason string) {
	if m != nil {
		m.resets.WithLabelValues(reason).Inc()
	}
}

// output counts n bytes of output sent by the kernel path or a copy.
func (m *Metrics) output(n int64, kernel bool) {
	switch {
	case m == nil || n == 0:
	case kernel:
		m.kernel.Add(float64(n))
	default:
		m.copied.Add(float64(n))
	}
}
