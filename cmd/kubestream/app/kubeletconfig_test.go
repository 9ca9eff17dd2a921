// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestReadKubeletConfig: a kubeadm node's file, one that leaves everything
// to the kubelet's defaults, one with relative paths and a bootstrapped
// serving certificate, and files that are not a kubelet's.
func TestReadKubeletConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, content string
		want          kubeletSettings
	}{
		{"kubeadm.yaml", `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {cacheTTL: 0s, enabled: true}
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
authorization:
  mode: Webhook
  webhook: {cacheAuthorizedTTL: 0s, cacheUnauthorizedTTL: 0s}
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
runtimeRequestTimeout: 0s
streamingConnectionIdleTimeout: 0s
`, kubeletSettings{Port: 10250, TLSCertFile: "/pki/kubelet.crt", TLSPrivateKeyFile: "/pki/kubelet.key", TLSMinVersion: "VersionTLS12",
			ClientCAFile: "/etc/kubernetes/pki/ca.crt", Webhook: true, WebhookCacheTTL: 2 * time.Minute, AuthorizationMode: "Webhook",
			AuthorizedTTL: 5 * time.Minute, UnauthorizedTTL: 30 * time.Second, ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
			StreamingConnectionIdleTimeout: 4 * time.Hour, RuntimeRequestTimeout: 2 * time.Minute}},
		{"defaults.yaml", "kind: KubeletConfiguration\n",
			kubeletSettings{Port: 10250, TLSCertFile: "/pki/kubelet.crt", TLSPrivateKeyFile: "/pki/kubelet.key", TLSMinVersion: "VersionTLS12",
				Webhook: true, WebhookCacheTTL: 2 * time.Minute, AuthorizationMode: "Webhook", AuthorizedTTL: 5 * time.Minute,
				UnauthorizedTTL: 30 * time.Second, ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
				StreamingConnectionIdleTimeout: 4 * time.Hour, RuntimeRequestTimeout: 2 * time.Minute}},
		{"relative.yaml", `kind: KubeletConfiguration
port: 10350
serverTLSBootstrap: true
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
  x509: {clientCAFile: ca.crt}
authorization: {mode: AlwaysAllow}
tlsMinVersion: VersionTLS13
`, kubeletSettings{Port: 10350, TLSCertFile: "/pki/kubelet-server-current.pem", TLSPrivateKeyFile: "/pki/kubelet-server-current.pem",
			TLSMinVersion: "VersionTLS13", ClientCAFile: filepath.Join(dir, "ca.crt"), Anonymous: true, WebhookCacheTTL: 2 * time.Minute,
			AuthorizationMode: "AlwaysAllow", AuthorizedTTL: 5 * time.Minute, UnauthorizedTTL: 30 * time.Second,
			ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock", StreamingConnectionIdleTimeout: 4 * time.Hour,
			RuntimeRequestTimeout: 2 * time.Minute}},
	} {
		got, err := readKubeletConfig(write(c.name, c.content), "/pki")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	for _, bad := range []string{"kind: KubeProxyConfiguration\n", "port: [1\n"} {
		if _, err := readKubeletConfig(write("bad.yaml", bad), "/pki"); err == nil {
			t.Errorf("%q read as a kubelet's configuration", bad)
		}
	}
	if _, err := readKubeletConfig(filepath.Join(dir, "missing.yaml"), "/pki"); err == nil {
		t.Error("a missing file read")
	}
}
