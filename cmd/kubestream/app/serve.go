// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app wires kubestream's commands together from kubelet-style
// flags: serve (the runtime, a CRI endpoint or the embedded reference
// runtime; the CRI client; the streaming server and its TLS listener),
// node (the same server in front of a stock kubelet, with the kubelet's
// own configuration, certificates and authorization) and the client
// commands (exec, attach, port-forward through client-go). Tests start
// each the way the binary does.
//
// Reading order, each file before the files it uses: serve.go
// (ServeOptions and their flags), start.go (Start: serve's runtime,
// server and listener; Running, what Stop undoes), node.go (NodeOptions,
// StartNode) with nodeserve.go (node's listener, its drain and probes),
// reuseport_linux.go and reuseport_other.go (a listener a rolling update's
// next process can share) and kubeletconfig.go (what node reads from the
// kubelet's configuration file), tls.go (the serving certificate and
// client CA, reloaded as they rotate), conns.go (the one http.Server both
// serve and node run, and its guard on idle connections), then client.go
// (the client commands).
//
// What runs back up the order: node.go and nodeserve.go hang on start.go's
// Running, which serve and node share (what each started is undone by
// Stop); node.go and nodeserve.go read serve's defaults (NewServeOptions)
// for what has no flag of its own on node.
package app

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"

	"github.com/kubestream/kubestream/refruntime"
	"github.com/kubestream/kubestream/server"
	"github.com/kubestream/kubestream/translator"
)

// ServeOptions are kubestream serve's flags.
type ServeOptions struct {
	Address                        string
	Port                           int
	TLSCertFile, TLSPrivateKeyFile string
	ClientCAFile                   string
	ContainerRuntimeEndpoint       string
	RuntimeRequestTimeout          time.Duration
	StreamingConnectionIdleTimeout time.Duration
	StreamCreationTimeout          time.Duration
	WebSocketPingPeriod            time.Duration
	WebSocketPongTimeout           time.Duration
	InsecureDevelopmentHTTP        bool
	NodeName                       string
	ReferencePodsFile              string
	ReferencePods                  []string
	ReferenceWebSockets            bool
	ReferenceRelativeURLs          bool
	RuntimeWebSocketStreaming      string
	RuntimeWebSocketRecheckPeriod  time.Duration
	Kubeconfig                     string
	AuthorizationMode              string
	WebhookCacheAuthorizedTTL      time.Duration
	WebhookCacheUnauthorizedTTL    time.Duration
	StreamingVerbByMethod          bool
	TLSMinVersion                  string
	TLSCipherSuites                []string
	// TLSReloadPeriod is how often the serving certificate and client CA
	// files are checked for changes (no flag: the kubelet has none).
	TLSReloadPeriod time.Duration
	// IdleConnectionTimeout closes keep-alive connections idle this long
	// (no flag: the kubelet's is fixed at 90 s).
	IdleConnectionTimeout time.Duration
	// RequestReadTimeout bounds reading a whole request (no flag).
	RequestReadTimeout time.Duration
	// ShutdownMessage is what each session's client is told when the
	// server stops (no flag: a kubelet says it is stopping).
	ShutdownMessage            string
	MaxStreamingSessions       int
	MaxStreamingSessionsPerPod int
	// Reverse and UDP port-forward (kubestream's own modes), off by
	// default.
	PortForwardModes      server.PortForwardModes
	SessionRecordingDir   string
	SessionRecordingStdin bool
	// Audit log, the apiserver's flags.
	AuditLogPath                                       string
	AuditLogMaxSize, AuditLogMaxBackup, AuditLogMaxAge int
	Features                                           featuregate.MutableFeatureGate
}

// NewServeOptions returns the kubelet's defaults.
func NewServeOptions() *ServeOptions {
	tc := translator.DefaultConfig()
	return &ServeOptions{
		Address:                        "0.0.0.0",
		Port:                           10250,
		RuntimeRequestTimeout:          2 * time.Minute,
		StreamingConnectionIdleTimeout: tc.IdleTimeout,
		StreamCreationTimeout:          tc.StreamCreationTimeout,
		WebSocketPingPeriod:            tc.PingPeriod,
		WebSocketPongTimeout:           tc.PongTimeout,
		RuntimeWebSocketStreaming:      string(server.DirectAuto),
		RuntimeWebSocketRecheckPeriod:  10 * time.Minute,
		AuthorizationMode:              "AlwaysAllow",
		WebhookCacheAuthorizedTTL:      5 * time.Minute,
		WebhookCacheUnauthorizedTTL:    30 * time.Second,
		Features:                       server.NewFeatureGate(),
		TLSMinVersion:                  "VersionTLS12",
		TLSReloadPeriod:                10 * time.Second,
		IdleConnectionTimeout:          idleConnTimeout(),
		RequestReadTimeout:             time.Minute,
		PortForwardModes:               server.DefaultPortForwardModes(),
	}
}

// AddFlags registers the flags, named as the kubelet names them where the
// kubelet has one.
func (o *ServeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Address, "address", o.Address, "The IP address to serve on (0.0.0.0 for all interfaces).")
	fs.IntVar(&o.Port, "port", o.Port, "The port to serve the kubelet streaming API on.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "File containing the x509 serving certificate (with intermediates after it).")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "File containing the x509 private key matching --tls-cert-file.")
	fs.StringVar(&o.TLSMinVersion, "tls-min-version", o.TLSMinVersion, "Minimum TLS version: "+strings.Join(cliflag.TLSPossibleVersions(), ", ")+" (the kubelet's flag).")
	fs.StringSliceVar(&o.TLSCipherSuites, "tls-cipher-suites", o.TLSCipherSuites, "Comma-separated cipher suites for TLS 1.2 (IANA names; empty: Go's defaults), as the kubelet's flag. Possible values: "+strings.Join(cliflag.TLSCipherPossibleValues(), ", "))
	fs.IntVar(&o.MaxStreamingSessions, "max-streaming-sessions", o.MaxStreamingSessions, "Most concurrent exec, attach and port-forward sessions on the node; more get 429 with Retry-After (running sessions are never cut). 0: a quarter of the descriptor limit (RLIMIT_NOFILE), each session holding two.")
	fs.StringVar(&o.SessionRecordingDir, "session-recording-dir", o.SessionRecordingDir, "Record every tty exec and attach session kubestream translates as an asciicast v2 file here (kubestream recordings lists them, kubestream replay plays one); empty: none.")
	fs.BoolVar(&o.SessionRecordingStdin, "session-recording-stdin", o.SessionRecordingStdin, "Record what the user typed too (it carries passwords); off by default.")
	fs.StringVar(&o.AuditLogPath, "audit-log-path", o.AuditLogPath, "Write an audit record of every streaming session (admitted, ended) and every refused streaming request to this file as JSON lines ('-': standard output); empty: none.")
	fs.IntVar(&o.AuditLogMaxSize, "audit-log-maxsize", o.AuditLogMaxSize, "Rotate the audit log when it reaches this many megabytes (0: 100).")
	fs.IntVar(&o.AuditLogMaxBackup, "audit-log-maxbackup", o.AuditLogMaxBackup, "Most rotated audit logs to keep (0: all).")
	fs.IntVar(&o.AuditLogMaxAge, "audit-log-maxage", o.AuditLogMaxAge, "Most days to keep rotated audit logs (0: no limit).")
	fs.IntVar(&o.MaxStreamingSessionsPerPod, "max-streaming-sessions-per-pod", o.MaxStreamingSessionsPerPod, "Most concurrent streaming sessions per pod; more get 429 with Retry-After. 0: no per-pod limit.")
	m := &o.PortForwardModes
	modes := strings.Join(server.ModeAccesses, ", ")
	fs.StringVar((*string)(&m.Reverse), "reverse-port-forward", string(m.Reverse), "Serve reverse port-forward (a listener in the pod, its connections to the client): "+modes+"; opt-in serves pods annotated "+server.ReverseAnnotation+"=true. See docs/security.md.")
	fs.StringVar((*string)(&m.UDP), "udp-port-forward", string(m.UDP), "Serve UDP port-forward: "+modes+"; opt-in serves pods annotated "+server.UDPAnnotation+"=true.")
	fs.BoolVar(&m.AllowHostNetwork, "port-forward-allow-host-network", m.AllowHostNetwork, "Serve reverse and UDP port-forward to host-network pods too (their loopback is the node's).")
	fs.BoolVar(&m.AllowPrivilegedPorts, "port-forward-allow-privileged-ports", m.AllowPrivilegedPorts, "Let reverse port-forward listen on ports below the pod's net.ipv4.ip_unprivileged_port_start.")
	fs.IntVar(&m.MaxPorts, "port-forward-max-ports", m.MaxPorts, "Most ports in one reverse or UDP port-forward session; more are refused with 400. 0: no cap.")
	fs.IntVar(&m.MaxConnections, "port-forward-max-connections", m.MaxConnections, "Most concurrent connections of one reverse port-forward session, or UDP associations of one UDP port-forward session; more are reset (reverse) or refused (UDP). 0: no cap.")
	fs.IntVar(&m.MaxBufferedBytes, "port-forward-max-buffered-bytes", m.MaxBufferedBytes, "Most bytes one reverse port-forward session holds for pod connections that do not read (each connection reserves its 256 KiB window); connections beyond it are reset. 0: port-forward-max-connections windows.")
	fs.DurationVar(&m.UDPIdleTimeout, "port-forward-udp-idle-timeout", m.UDPIdleTimeout, "A UDP port-forward association with no datagram either way for this long is closed.")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "Clients must present a certificate signed by one of these CAs (the apiserver's kubelet client certificate); others get 401.")
	fs.StringVar(&o.ContainerRuntimeEndpoint, "container-runtime-endpoint", o.ContainerRuntimeEndpoint, "The CRI endpoint, e.g. unix:///run/containerd/containerd.sock. Empty starts the embedded reference runtime.")
	fs.DurationVar(&o.RuntimeRequestTimeout, "runtime-request-timeout", o.RuntimeRequestTimeout, "Timeout of every CRI call.")
	fs.DurationVar(&o.StreamingConnectionIdleTimeout, "streaming-connection-idle-timeout", o.StreamingConnectionIdleTimeout, "Maximum time a streaming session may go without data before it is closed.")
	fs.DurationVar(&o.StreamCreationTimeout, "stream-creation-timeout", o.StreamCreationTimeout, "Maximum time to set up the runtime side of a session.")
	fs.DurationVar(&o.WebSocketPingPeriod, "websocket-ping-period", o.WebSocketPingPeriod, "How often clients are pinged.")
	fs.DurationVar(&o.WebSocketPongTimeout, "websocket-pong-timeout", o.WebSocketPongTimeout, "A client that sends nothing, not even a pong, for a ping period plus this long is taken as dead.")
	fs.BoolVar(&o.InsecureDevelopmentHTTP, "insecure-development-http", o.InsecureDevelopmentHTTP, "DEVELOPMENT ONLY: serve plain HTTP with no authentication.")
	fs.StringVar(&o.NodeName, "hostname-override", o.NodeName, "The node name used in authorization attributes.")
	fs.StringVar(&o.ReferencePodsFile, "reference-pods-file", o.ReferencePodsFile, "JSON list of pods for the embedded reference runtime.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig for the kube-apiserver (needed by --authorization-mode=Webhook).")
	fs.StringVar(&o.AuthorizationMode, "authorization-mode", o.AuthorizationMode, "AlwaysAllow (a client certificate from --client-ca-file is the grant) or Webhook (a SubjectAccessReview per request, RBAC on nodes/proxy decides), as the kubelet's flag.")
	fs.DurationVar(&o.WebhookCacheAuthorizedTTL, "authorization-webhook-cache-authorized-ttl", o.WebhookCacheAuthorizedTTL, "How long Webhook allow answers are cached.")
	fs.BoolVar(&o.StreamingVerbByMethod, "streaming-authorization-verb-by-method", o.StreamingVerbByMethod, "Authorize exec, attach and port-forward with the HTTP method's verb (get for WebSocket upgrades), as the kubelet does. By default they need create on nodes/proxy whatever the method, so get nodes/proxy alone cannot run commands in containers.")
	fs.DurationVar(&o.WebhookCacheUnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", o.WebhookCacheUnauthorizedTTL, "How long Webhook deny answers are cached.")
	fs.StringVar(&o.RuntimeWebSocketStreaming, "runtime-websocket-streaming", o.RuntimeWebSocketStreaming, "auto: offer clients' v5 and port-forward tunnel WebSockets to the container runtime unchanged first, translating when it refuses (the refusal is remembered for --runtime-websocket-recheck-period); never: always translate.")
	fs.DurationVar(&o.RuntimeWebSocketRecheckPeriod, "runtime-websocket-recheck-period", o.RuntimeWebSocketRecheckPeriod, "How long a runtime's refusal of a WebSocket protocol is remembered before it is offered again.")
	fs.BoolVar(&o.ReferenceRelativeURLs, "reference-relative-urls", o.ReferenceRelativeURLs, "Make the embedded reference runtime return scheme-relative streaming URLs (//host:port/cri/exec/…), as cri-dockerd does.")
	fs.BoolVar(&o.ReferenceWebSockets, "reference-websockets", o.ReferenceWebSockets, "Serve the embedded reference runtime's streaming URLs with kubestream's runtime-side server (cri/streaming), which speaks v5 and the port-forward tunnel itself, as a runtime adopting it does (exercises the direct path); false: cri-streaming's, which refuses both.")
	fs.StringArrayVar(&o.ReferencePods, "reference-pod", o.ReferencePods, "A pod of the embedded reference runtime: namespace/pod/container=command args (repeatable).")
	o.Features.AddFlag(fs)
}

func referencePods(o *ServeOptions) ([]refruntime.PodSpec, error) {
	var pods []refruntime.PodSpec
	var err error
	if o.ReferencePodsFile != "" {
		if pods, err = refruntime.LoadPods(o.ReferencePodsFile); err != nil {
			return nil, err
		}
	}
	for _, p := range o.ReferencePods {
		if pods, err = refruntime.ParsePod(pods, p); err != nil {
			return nil, err
		}
	}
	if pods == nil {
		pods = refruntime.DefaultPods()
	}
	return pods, nil
}

// authorizerFor builds the --authorization-mode authorizer; nil is the
// server's default, AlwaysAllow.
func authorizerFor(o *ServeOptions) (authorizer.Authorizer, error) {
	switch o.AuthorizationMode {
	case "AlwaysAllow":
		return nil, nil
	case "Webhook":
		if o.Kubeconfig == "" {
			return nil, errors.New("--authorization-mode=Webhook needs --kubeconfig")
		}
		rc, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --kubeconfig: %w", err)
		}
		client, err := authorizationv1.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("building the SubjectAccessReview client: %w", err)
		}
		return server.WebhookAuthorizer(client, o.WebhookCacheAuthorizedTTL, o.WebhookCacheUnauthorizedTTL)
	}
	return nil, fmt.Errorf("--authorization-mode=%q: want AlwaysAllow or Webhook", o.AuthorizationMode)
}
