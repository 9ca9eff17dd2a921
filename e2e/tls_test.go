// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubestream/kubestream/cmd/kubestream/app"
	"github.com/kubestream/kubestream/internal/pki"
)

// TestTLSVersionAndCiphers: --tls-min-version and --tls-cipher-suites take
// the kubelet's value names and are enforced; a bad name stops serve at
// start with an error naming the flag.
func TestTLSVersionAndCiphers(t *testing.T) {
	n := startNode(t, func(o *app.ServeOptions) { o.TLSMinVersion = "VersionTLS13" })
	cfg := n.tlsConfig(n.certs.ClientCert, n.certs.ClientKey)
	cfg.MaxVersion = tls.VersionTLS12
	if c, err := tls.Dial("tcp", n.run.Addr, cfg); err == nil {
		c.Close()
		t.Fatal("a TLS 1.2 client was served with --tls-min-version=VersionTLS13")
	}
	cfg.MaxVersion = tls.VersionTLS13
	c, err := tls.Dial("tcp", n.run.Addr, cfg)
	if err != nil {
		t.Fatalf("TLS 1.3: %v", err)
	}
	c.Close()

	suite := "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
	m := startNode(t, func(o *app.ServeOptions) { o.TLSCipherSuites = []string{suite} })
	cfg = m.tlsConfig(m.certs.ClientCert, m.certs.ClientKey)
	cfg.MaxVersion = tls.VersionTLS12
	cfg.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}
	if c, err := tls.Dial("tcp", m.run.Addr, cfg); err == nil {
		c.Close()
		t.Fatal("a client without the configured suite was served")
	}
	cfg.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	if c, err = tls.Dial("tcp", m.run.Addr, cfg); err != nil {
		t.Fatalf("with %s: %v", suite, err)
	}
	c.Close()

	for _, bad := range []func(*app.ServeOptions){
		func(o *app.ServeOptions) { o.TLSMinVersion = "VersionTLS99" },
		func(o *app.ServeOptions) { o.TLSCipherSuites = []string{"TLS_NOT_A_SUITE"} },
	} {
		o := app.NewServeOptions()
		o.Address, o.Port, o.ContainerRuntimeEndpoint = "127.0.0.1", 0, rt.endpoint
		o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile = m.certs.ServerCert, m.certs.ServerKey, m.certs.CA
		bad(o)
		if run, err := app.Start(context.Background(), o); err == nil {
			run.Stop()
			t.Error("serve started with a bad TLS flag")
		} else if !strings.Contains(err.Error(), "--tls-") {
			t.Errorf("error %q does not name the flag", err)
		}
	}
	n.waitIdle(10 * time.Second)
	m.waitIdle(10 * time.Second)
}

// TestServingFilesReload: a renewed serving certificate and client CA
// bundle take effect for new connections without a restart, a session
// open across the change goes on, and files that do not load keep the
// last good ones, with a log line and a metric.
func TestServingFilesReload(t *testing.T) {
	n := startNode(t, func(o *app.ServeOptions) { o.TLSReloadPeriod = 100 * time.Millisecond })
	// A session open before the change.
	c := n.v5Conn(t, "command=cat&input=1&output=1&error=1")
	renewed, err := pki.WriteNodeSet(t.TempDir(), "kube-apiserver-kubelet-client")
	if err != nil {
		t.Fatal(err)
	}
	// The CA first: a reload between the copies then never pairs the
	// renewed certificate (which the wait below looks for) with the old CA.
	copyFile(t, renewed.CA, n.certs.CA)
	copyFile(t, renewed.ServerCert, n.certs.ServerCert)
	copyFile(t, renewed.ServerKey, n.certs.ServerKey)
	// New connections see the renewed certificate and need a client
	// certificate from the renewed CA.
	waitFor(t, 10*time.Second, func() bool {
		conn, err := tls.Dial("tcp", n.run.Addr, trusting(t, renewed.CA, renewed.ClientCert, renewed.ClientKey))
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
	m := &node{t: t, run: n.run, certs: renewed}
	if res := m.exec("websocket", nil, "echo", "renewed"); res.err != nil || res.stdout != "renewed\n" {
		t.Fatalf("exec with the renewed certificates: %q %v", res.stdout, res.err)
	}
	// The session from before still works.
	if err := c.WriteMessage(2, []byte("\x00still here")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("the session open across the reload broke: %v", err)
		}
		if string(msg) == "\x01still here" {
			break
		}
	}
	// A broken file keeps the last good certificate.
	if err := os.WriteFile(n.certs.ServerCert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool {
		return m.metricSum("kubestream_tls_reload_failures_total", map[string]string{"file": "serving-cert"}) > 0
	})
	if res := m.exec("websocket", nil, "echo", "last good"); res.err != nil || res.stdout != "last good\n" {
		t.Fatalf("exec after a failed reload: %q %v", res.stdout, res.err)
	}
	c.Close()
	m.waitIdle(10 * time.Second)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// trusting is a client TLS config trusting caFile and presenting a pair.
func trusting(t *testing.T, caFile, cert, key string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(ca)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}}
}
