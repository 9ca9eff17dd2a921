// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config reads kubestream's configuration file: the settings that
// have no field in a kubelet's own configuration (the direct path, session
// limits, the runtime leg's timeouts and pings). Inside a kubelet they
// cannot be kubelet flags, so the patched kubelet takes one flag of its
// own, --kubestream-config, naming this file; everything the kubelet does
// have (streamingConnectionIdleTimeout, runtimeRequestTimeout) comes from
// the kubelet's configuration.
//
//	apiVersion: kubestream.io/v1alpha1
//	kind: StreamingConfiguration
//	runtimeWebSocketStreaming: never
//	maxStreamingSessionsPerPod: 20
//
// Who imports it: the patched kubelet (hack/kube/kubelet) and its
// adapter's tests; kubestream serve takes flags instead.
package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/server"
)

const (
	APIVersion = "kubestream.io/v1alpha1"
	Kind       = "StreamingConfiguration"
	// FlagName is the patched kubelet's flag naming the file.
	FlagName = "kubestream-config"
)

// StreamingConfiguration is the file's content. A field left out keeps
// kubestream's default (the same as kubestream serve's flag of that name).
type StreamingConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	// RuntimeWebSocketStreaming: auto offers the client's WebSocket to the
	// runtime first and remembers a refusal; never always translates.
	RuntimeWebSocketStreaming string `json:"runtimeWebSocketStreaming,omitempty"`
	// RuntimeWebSocketRecheckPeriod is how long a refusal is remembered.
	RuntimeWebSocketRecheckPeriod *metav1.Duration `json:"runtimeWebSocketRecheckPeriod,omitempty"`
	// MaxStreamingSessions bounds concurrent sessions on the node (0: a
	// quarter of the descriptor limit); more get 429 with Retry-After.
	MaxStreamingSessions *int32 `json:"maxStreamingSessions,omitempty"`
	// MaxStreamingSessionsPerPod bounds them per pod (0: no limit).
	MaxStreamingSessionsPerPod *int32 `json:"maxStreamingSessionsPerPod,omitempty"`
	// ReversePortForward and UDPPortForward serve kubestream's own
	// port-forward modes: off (the default), opt-in (pods annotated for
	// it) or on; the two Allow fields widen them to host-network pods and
	// to the pod's privileged ports. See docs/security.md.
	ReversePortForward              string `json:"reversePortForward,omitempty"`
	UDPPortForward                  string `json:"udpPortForward,omitempty"`
	PortForwardAllowHostNetwork     *bool  `json:"portForwardAllowHostNetwork,omitempty"`
	PortForwardAllowPrivilegedPorts *bool  `json:"portForwardAllowPrivilegedPorts,omitempty"`
	// PortForwardMaxPorts caps the ports of one session (0: no cap);
	// PortForwardMaxBufferedBytes what one session holds for pod
	// connections that do not read.
	PortForwardMaxPorts         *int32 `json:"portForwardMaxPorts,omitempty"`
	PortForwardMaxBufferedBytes *int32 `json:"portForwardMaxBufferedBytes,omitempty"`
	// PortForwardMaxConnections caps the concurrent connections of one
	// reverse port-forward session, or the associations of one UDP session
	// (0: no cap); PortForwardUDPIdleTimeout closes an idle association.
	PortForwardMaxConnections *int32           `json:"portForwardMaxConnections,omitempty"`
	PortForwardUDPIdleTimeout *metav1.Duration `json:"portForwardUDPIdleTimeout,omitempty"`
	// StreamCreationTimeout bounds setting up the runtime side of a session.
	StreamCreationTimeout *metav1.Duration `json:"streamCreationTimeout,omitempty"`
	// WebSocketPingPeriod is how often clients are pinged; a client silent
	// for a ping period plus WebSocketPongTimeout is taken as dead.
	WebSocketPingPeriod  *metav1.Duration `json:"webSocketPingPeriod,omitempty"`
	WebSocketPongTimeout *metav1.Duration `json:"webSocketPongTimeout,omitempty"`
	// AuditLogPath turns on the audit log (audit package), rotated at
	// AuditLogMaxSize megabytes, keeping AuditLogMaxBackup files for
	// AuditLogMaxAge days, as the apiserver's flags of those names.
	AuditLogPath      string `json:"auditLogPath,omitempty"`
	AuditLogMaxSize   int32  `json:"auditLogMaxSize,omitempty"`
	AuditLogMaxBackup int32  `json:"auditLogMaxBackup,omitempty"`
	AuditLogMaxAge    int32  `json:"auditLogMaxAge,omitempty"`
}

// Load reads, decodes and validates the file at path; "" is an empty
// configuration (every default). Unknown fields are errors, and every
// error names its field.
func Load(path string) (*StreamingConfiguration, error) {
	c := &StreamingConfiguration{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind}}
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubestream configuration: %w", err)
	}
	c = &StreamingConfiguration{}
	if err := decode(data, c); err != nil {
		return nil, fmt.Errorf("kubestream configuration %s: %w", path, err)
	}
	if errs := c.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("kubestream configuration %s is invalid: %w", path, errs.ToAggregate())
	}
	return c, nil
}

// decode is strict YAML (or JSON). A value that does not decode (a
// duration "soon") makes encoding/json say what was wrong but not where, so
// the fields are tried one at a time to name it.
func decode(data []byte, c *StreamingConfiguration) error {
	err := yaml.UnmarshalStrict(data, c)
	if err == nil {
		return nil
	}
	var fields map[string]any
	if yaml.Unmarshal(data, &fields) != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		one, merr := yaml.Marshal(map[string]any{k: fields[k]})
		if merr != nil {
			continue
		}
		if ferr := yaml.UnmarshalStrict(one, &StreamingConfiguration{}); ferr != nil {
			return fmt.Errorf("%s: %w", k, ferr)
		}
	}
	return err
}

func (c *StreamingConfiguration) validate() field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	modes := []string{string(server.DirectAuto), string(server.DirectNever)}
	if m := c.RuntimeWebSocketStreaming; m != "" && m != modes[0] && m != modes[1] {
		errs = append(errs, field.NotSupported(field.NewPath("runtimeWebSocketStreaming"), m, modes))
	}
	for name, v := range map[string]string{"reversePortForward": c.ReversePortForward, "udpPortForward": c.UDPPortForward} {
		if v != "" && !slices.Contains(server.ModeAccesses, v) {
			errs = append(errs, field.NotSupported(field.NewPath(name), v, server.ModeAccesses))
		}
	}
	for name, d := range map[string]*metav1.Duration{
		"runtimeWebSocketRecheckPeriod": c.RuntimeWebSocketRecheckPeriod,
		"streamCreationTimeout":         c.StreamCreationTimeout,
		"webSocketPingPeriod":           c.WebSocketPingPeriod,
		"webSocketPongTimeout":          c.WebSocketPongTimeout,
		"portForwardUDPIdleTimeout":     c.PortForwardUDPIdleTimeout,
	} {
		if d != nil && d.Duration <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), d.Duration.String(), "must be greater than zero"))
		}
	}
	for name, n := range map[string]*int32{
		"maxStreamingSessions":        c.MaxStreamingSessions,
		"maxStreamingSessionsPerPod":  c.MaxStreamingSessionsPerPod,
		"portForwardMaxConnections":   c.PortForwardMaxConnections,
		"portForwardMaxPorts":         c.PortForwardMaxPorts,
		"portForwardMaxBufferedBytes": c.PortForwardMaxBufferedBytes,
		"auditLogMaxSize":             &c.AuditLogMaxSize,
		"auditLogMaxBackup":           &c.AuditLogMaxBackup,
		"auditLogMaxAge":              &c.AuditLogMaxAge,
	} {
		if n != nil && *n < 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), *n, "must not be negative"))
		}
	}
	// Map iteration order is random; the report is not.
	slices.SortFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
	return errs
}

// Apply sets what the file says on cfg, whose Translator must already hold
// its defaults; fields the file leaves out keep cfg's values.
func (c *StreamingConfiguration) Apply(cfg *server.Config) {
	if c.RuntimeWebSocketStreaming != "" {
		cfg.Direct.Mode = server.DirectMode(c.RuntimeWebSocketStreaming)
	}
	set := func(dst *int, v *int32) {
		if v != nil {
			*dst = int(*v)
		}
	}
	set(&cfg.Limits.MaxSessions, c.MaxStreamingSessions)
	set(&cfg.Limits.MaxSessionsPerPod, c.MaxStreamingSessionsPerPod)
	set(&cfg.PortForwardModes.MaxConnections, c.PortForwardMaxConnections)
	set(&cfg.PortForwardModes.MaxPorts, c.PortForwardMaxPorts)
	set(&cfg.PortForwardModes.MaxBufferedBytes, c.PortForwardMaxBufferedBytes)
	if c.ReversePortForward != "" {
		cfg.PortForwardModes.Reverse = server.ModeAccess(c.ReversePortForward)
	}
	if c.UDPPortForward != "" {
		cfg.PortForwardModes.UDP = server.ModeAccess(c.UDPPortForward)
	}
	if b := c.PortForwardAllowHostNetwork; b != nil {
		cfg.PortForwardModes.AllowHostNetwork = *b
	}
	if b := c.PortForwardAllowPrivilegedPorts; b != nil {
		cfg.PortForwardModes.AllowPrivilegedPorts = *b
	}
	if d := c.PortForwardUDPIdleTimeout; d != nil {
		cfg.PortForwardModes.UDPIdleTimeout = d.Duration
	}
	if d := c.RuntimeWebSocketRecheckPeriod; d != nil {
		cfg.Direct.Recheck = d.Duration
	}
	if d := c.StreamCreationTimeout; d != nil {
		cfg.Translator.StreamCreationTimeout = d.Duration
	}
	if d := c.WebSocketPingPeriod; d != nil {
		cfg.Translator.PingPeriod = d.Duration
	}
	if d := c.WebSocketPongTimeout; d != nil {
		cfg.Translator.PongTimeout = d.Duration
	}
}

// AuditLog is the audit log the file asks for (ok false: none).
func (c *StreamingConfiguration) AuditLog() (o audit.FileOptions, ok bool) {
	if c.AuditLogPath == "" {
		return o, false
	}
	return audit.FileOptions{Path: c.AuditLogPath, MaxSizeMB: int(c.AuditLogMaxSize),
		MaxBackups: int(c.AuditLogMaxBackup), MaxAgeDays: int(c.AuditLogMaxAge)}, true
}

// SplitArgs takes --kubestream-config FILE (or =FILE) out of a kubelet's
// arguments, which the kubelet's own flag parser would refuse.
func SplitArgs(args []string) (rest []string, path string, err error) {
	long := "--" + FlagName
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(rest, args[i:]...), path, nil
		case a == long:
			if i+1 == len(args) {
				return nil, "", fmt.Errorf("flag needs an argument: %s", long)
			}
			path = args[i+1]
			i++
		case strings.HasPrefix(a, long+"="):
			path = strings.TrimPrefix(a, long+"=")
		default:
			rest = append(rest, a)
		}
	}
	return rest, path, nil
}
