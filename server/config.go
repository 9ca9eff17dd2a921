// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"crypto/tls"
	"net/http"
	"sync"

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
	// began) no request is admitted, so Shutdown's wait cannot miss one.
	sessions sync.WaitGroup
	mu       sync.Mutex
	stopping bool
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
