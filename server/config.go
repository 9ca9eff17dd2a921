// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/component-base/featuregate"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/translator"
)

// ExtendWebSocketsToKubelet is the kubelet's feature gate: with it off the
// node answers like a kubelet that only passes upgrades to the runtime.
const ExtendWebSocketsToKubelet featuregate.Feature = "ExtendWebSocketsToKubelet"

// NewFeatureGate returns a gate that knows kubestream's features.
func NewFeatureGate() featuregate.MutableFeatureGate {
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		ExtendWebSocketsToKubelet: {Default: true, PreRelease: featuregate.Beta},
	}); err != nil {
		panic(err) // only on a duplicate registration: a programming error
	}
	return fg
}

// Runtime hands out single-use streaming URLs; *cri.Client is one.
type Runtime = cri.Issuer

// Authorizer is the one method kubestream asks of an authorizer: the
// apiserver library's UnconditionalAuthorizer from v0.37 on, declared here
// so that kubelets built on earlier versions link kubestream too.
type Authorizer interface {
	Authorize(ctx context.Context, a authorizer.Attributes) (authorized authorizer.Decision, reason string, err error)
}

// Config is everything the server needs; a kubelet fills it from its own
// pod manager, authenticator and authorizer.
type Config struct {
	// URLs turns requests into runtime streaming URLs. When nil it is
	// cri.ByLookup{Lookup, Runtime}; a kubelet passes its own (its pod
	// manager knows the IDs without asking the runtime).
	URLs    cri.URLSource
	Lookup  cri.PodLookup
	Runtime Runtime
	// RuntimeTLS is used for https streaming URLs (nil: system roots).
	RuntimeTLS *tls.Config
	// Direct: whether a runtime that speaks the client's WebSocket protocol
	// itself gets it unchanged (detected per request, with fallback).
	Direct DirectConfig

	Translator translator.Config
	Features   featuregate.FeatureGate

	// Authenticator and Authorizer guard every endpoint but /healthz. A nil
	// Authenticator lets everyone in as anonymous (development only).
	Authenticator authenticator.Request
	Authorizer    Authorizer
	NodeName      string
	// RequestAttributes, when set, gives the attributes to authorize a
	// request with (a kubelet's own: its node name, its subresource
	// mapping); any one allowed lets the request in, as in the kubelet.
	// Streaming requests still need create (StreamingVerbByMethod).
	RequestAttributes func(ctx context.Context, u user.Info, r *http.Request) []authorizer.Attributes
	// StreamingVerbByMethod authorizes /exec, /attach and /portForward with
	// the verb of the HTTP method, as the kubelet does (get for a
	// WebSocket upgrade). By default they need create whatever the method:
	// a WebSocket upgrade is a GET, and "get nodes/proxy" (granted widely,
	// to monitoring agents among others) must not be a way to run commands
	// in every container on the node (kubernetes#136550; the apiserver
	// asks create of pods/exec for WebSockets for the same reason).
	StreamingVerbByMethod bool

	Metrics *Metrics
	// Recording, when set, records every tty exec and attach session that
	// kubestream translates as an asciicast v2 file (recording package).
	Recording *RecordingConfig
	// Audit, when set, gets a record of every streaming session (admitted
	// and ended) and of every refused streaming request (audit package).
	Audit audit.Sink
	// WebSocketRequested, when set, is called once for each WebSocket
	// session the kubelet itself would translate or tunnel (v5 or the
	// port-forward tunnel, with ExtendWebSocketsToKubelet on) once the
	// runtime gave its URL: upstream's
	// kubelet_websocket_streaming_requests_total{subresource} counts exactly
	// these, and the kubelet adapter keeps it counting.
	WebSocketRequested func(subresource string)
	// Limits bound concurrent streaming sessions (zero: none).
	Limits Limits
	// ShutdownMessage is what Shutdown tells each session's client (a
	// kubelet: "the kubelet is stopping"); empty, that the node's
	// streaming server is shutting down.
	ShutdownMessage string
	// Sandboxes, with Lookup, lets the node serve kubestream's own
	// reverse and UDP port-forward (a pod's network namespace and whether
	// it still exists); nil: those modes are not served or offered.
	Sandboxes        cri.Sandboxes
	PortForwardModes PortForwardModes
	// RuntimeReady, when set, is /healthz's runtime check.
	RuntimeReady func(context.Context) error
}

// RecordingConfig says where terminal recordings go.
type RecordingConfig struct {
	Dir string
	// Stdin records what the user typed too: it carries passwords, so it
	// is off unless asked for.
	Stdin bool
}

// Server serves the streaming endpoints.
type Server struct {
	cfg        Config
	handler    http.Handler
	rcUpgrader *websocket.Upgrader
	pfUpgrader *websocket.Upgrader
	// kubestream's own port-forward modes (portmodes.go).
	reverseUpgrader, udpUpgrader *websocket.Upgrader
	direct                       *directCache
	slots                        *sessionSlots
	pods                         *podWatches

	baseCtx    context.Context // cancelled by Shutdown; ends every session
	cancelBase context.CancelCauseFunc
	// sessions counts admitted requests; under mu, once stopping (Shutdown
	// or Drain began) no request is admitted, so their wait cannot miss one.
	sessions sync.WaitGroup
	mu       sync.Mutex
	stopping bool
	// drained closes once every admitted session ended after Shutdown or Drain.
	drainOnce sync.Once
	drained   chan struct{}
}

// track counts an admitted request for Shutdown to wait for, unless
// Shutdown began (false).
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.sessions.Add(1)
	return true
}

// webSocketsEnabled: the node handles WebSockets itself (the kubelet's
// feature gate).
func (s *Server) webSocketsEnabled() bool {
	return s.cfg.Features.Enabled(ExtendWebSocketsToKubelet)
}

// ModeAccess says which pods a port-forward mode is served to.
type ModeAccess string

const (
	// ModeOff: not served; the node answers as one without the mode.
	ModeOff ModeAccess = "off"
	// ModeOptIn: served to pods annotated for it (ReverseAnnotation,
	// UDPAnnotation set to "true").
	ModeOptIn ModeAccess = "opt-in"
	// ModeOn: served to every pod.
	ModeOn ModeAccess = "on"
)

// The pod annotations that opt a pod in to a mode whose access is opt-in.
const (
	ReverseAnnotation = "portforward.kubestream.io/reverse"
	UDPAnnotation     = "portforward.kubestream.io/udp"
)

// ModeAccesses are the values a mode's access takes.
var ModeAccesses = []string{string(ModeOff), string(ModeOptIn), string(ModeOn)}

// PortForwardModes configure the reverse and UDP port-forward modes. They
// go beyond what a kubelet does (a reverse listener binds in the pod, as
// root), so both are off until the operator turns them on.
type PortForwardModes struct {
	Reverse, UDP ModeAccess
	// AllowHostNetwork serves the modes to host-network pods, whose
	// loopback is the node's.
	AllowHostNetwork bool
	// AllowPrivilegedPorts lets reverse listen on ports below the pod's
	// net.ipv4.ip_unprivileged_port_start, which its own processes may not.
	AllowPrivilegedPorts bool
	// MaxPorts caps the ports of one session (0: no cap).
	MaxPorts int
	// MaxConnections caps concurrent reverse connections or UDP
	// associations per session (0: none).
	MaxConnections int
	// MaxBufferedBytes caps what one session holds for pod-side peers
	// that do not read (0: MaxConnections windows).
	MaxBufferedBytes int
	// UDPIdleTimeout closes a UDP association with no datagram this long.
	UDPIdleTimeout time.Duration
	// PodCheckPeriod is how often the node checks that a pod with
	// sessions still exists (0: 5 s).
	PodCheckPeriod time.Duration
}

// DefaultPortForwardModes are the modes' settings a node starts with:
// both off; kubestream serve's flags and the configuration file change
// them.
func DefaultPortForwardModes() PortForwardModes {
	return PortForwardModes{Reverse: ModeOff, UDP: ModeOff, MaxPorts: 8, MaxConnections: 128,
		MaxBufferedBytes: 16 << 20, UDPIdleTimeout: time.Minute}
}

// Validate names a setting no node can run with.
func (m PortForwardModes) Validate() error {
	for flag, a := range map[string]ModeAccess{"reverse-port-forward": m.Reverse, "udp-port-forward": m.UDP} {
		if a != "" && !slices.Contains(ModeAccesses, string(a)) {
			return fmt.Errorf("--%s=%q: want one of %s", flag, a, strings.Join(ModeAccesses, ", "))
		}
	}
	if m.MaxPorts < 0 || m.MaxConnections < 0 || m.MaxBufferedBytes < 0 {
		return errors.New("port-forward caps must not be negative")
	}
	return nil
}
