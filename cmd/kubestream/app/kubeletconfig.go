// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// kubeletSettings is what kubestream node takes from the kubelet's own
// configuration file, so that it serves, authenticates and authorizes
// exactly as that kubelet does.
type kubeletSettings struct {
	Port                           int
	TLSCertFile, TLSPrivateKeyFile string
	TLSMinVersion                  string
	TLSCipherSuites                []string
	ClientCAFile                   string
	Anonymous                      bool
	Webhook                        bool
	WebhookCacheTTL                time.Duration
	AuthorizationMode              string
	AuthorizedTTL, UnauthorizedTTL time.Duration
	ContainerRuntimeEndpoint       string
	StreamingConnectionIdleTimeout time.Duration
	RuntimeRequestTimeout          time.Duration
}

// readKubeletConfig reads a KubeletConfiguration file (kubelet.config.k8s.io
// v1beta1) and fills what it leaves out with the kubelet's defaults.
// Relative paths in it are relative to the file, as the kubelet reads
// them; certDir is the kubelet's --cert-dir, where it keeps a serving
// certificate it made itself.
func readKubeletConfig(path, certDir string) (kubeletSettings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return kubeletSettings{}, fmt.Errorf("reading the kubelet's configuration: %w", err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return kubeletSettings{}, fmt.Errorf("the kubelet's configuration %s: %w", path, err)
	}
	if kc.Kind != "" && kc.Kind != "KubeletConfiguration" {
		return kubeletSettings{}, fmt.Errorf("%s is a %s, not a KubeletConfiguration", path, kc.Kind)
	}
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(filepath.Dir(path), p)
	}
	or := func(d, def time.Duration) time.Duration {
		if d == 0 {
			return def
		}
		return d
	}
	authn, authz := kc.Authentication, kc.Authorization
	s := kubeletSettings{
		Port:              int(kc.Port),
		TLSCertFile:       rel(kc.TLSCertFile),
		TLSPrivateKeyFile: rel(kc.TLSPrivateKeyFile),
		TLSMinVersion:     kc.TLSMinVersion,
		TLSCipherSuites:   kc.TLSCipherSuites,
		ClientCAFile:      rel(authn.X509.ClientCAFile),
		// v1beta1's defaults: anonymous off, webhook on (2 minutes),
		// authorization by webhook (5 minutes allowed, 30 s denied).
		Anonymous:                      authn.Anonymous.Enabled != nil && *authn.Anonymous.Enabled,
		Webhook:                        authn.Webhook.Enabled == nil || *authn.Webhook.Enabled,
		WebhookCacheTTL:                or(authn.Webhook.CacheTTL.Duration, 2*time.Minute),
		AuthorizationMode:              string(authz.Mode),
		AuthorizedTTL:                  or(authz.Webhook.CacheAuthorizedTTL.Duration, 5*time.Minute),
		UnauthorizedTTL:                or(authz.Webhook.CacheUnauthorizedTTL.Duration, 30*time.Second),
		ContainerRuntimeEndpoint:       kc.ContainerRuntimeEndpoint,
		StreamingConnectionIdleTimeout: or(kc.StreamingConnectionIdleTimeout.Duration, 4*time.Hour),
		RuntimeRequestTimeout:          or(kc.RuntimeRequestTimeout.Duration, 2*time.Minute),
	}
	if s.Port == 0 {
		s.Port = 10250
	}
	if s.AuthorizationMode == "" {
		s.AuthorizationMode = "Webhook"
	}
	if s.ContainerRuntimeEndpoint == "" {
		s.ContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	}
	if s.TLSMinVersion == "" {
		s.TLSMinVersion = "VersionTLS12"
	}
	if s.TLSCertFile == "" {
		// The kubelet's own: the rotated pair when it bootstraps its
		// serving certificate, else the self-signed pair it made.
		if kc.ServerTLSBootstrap {
			s.TLSCertFile = filepath.Join(certDir, "kubelet-server-current.pem")
			s.TLSPrivateKeyFile = s.TLSCertFile
		} else {
			s.TLSCertFile = filepath.Join(certDir, "kubelet.crt")
			s.TLSPrivateKeyFile = filepath.Join(certDir, "kubelet.key")
		}
	}
	return s, nil
}
