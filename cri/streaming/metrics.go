package streaming

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts the runtime's streaming requests by kind and by the
// protocol they were served with, so an operator can see which legs still
// speak SPDY.
type Metrics struct {
	requests *prometheus.CounterVec
	open     *prometheus.GaugeVec
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
		}, []string{"kind"})}
	for _, c := range []prometheus.Collector{m.requests, m.open} {
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
