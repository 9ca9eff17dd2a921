// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"

	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/server"
)

// servingTLS is the serving certificate and the client CA bundle, reloaded
// from disk when they change, as the kubelet does by default: renewed
// certificates take effect for new connections without a restart, and
// sessions already running are untouched. A file that does not load keeps
// the last good content, with a log line and
// kubestream_tls_reload_failures_total.
//
// Written here rather than with k8s.io/apiserver's dynamiccertificates:
// its providers start work queues when constructed that only their
// controllers' Run ends, and they report a failed reload to the log alone;
// comparing the files' bytes on a timer is all serve needs.
type servingTLS struct {
	certFile, keyFile, caFile string

	mu       sync.RWMutex
	certPEM  []byte // what cert was made from
	keyPEM   []byte
	cert     *tls.Certificate
	caPEM    []byte
	verifyCA x509.VerifyOptions
}

func newServingTLS(certFile, keyFile, caFile string) (*servingTLS, error) {
	s := &servingTLS{certFile: certFile, keyFile: keyFile, caFile: caFile}
	if _, err := s.loadCert(); err != nil {
		return nil, err
	}
	if caFile == "" {
		return s, nil // no client certificate verifies (a kubelet without x509.clientCAFile)
	}
	if _, err := s.loadCA(); err != nil {
		return nil, err
	}
	return s, nil
}

// loadCert reads the pair and swaps it in if it changed and is valid.
func (s *servingTLS) loadCert() (changed bool, err error) {
	certPEM, err := os.ReadFile(s.certFile)
	if err != nil {
		return false, fmt.Errorf("reading serving certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(s.keyFile)
	if err != nil {
		return false, fmt.Errorf("reading serving key: %w", err)
	}
	s.mu.RLock()
	same := bytes.Equal(certPEM, s.certPEM) && bytes.Equal(keyPEM, s.keyPEM)
	s.mu.RUnlock()
	if same {
		return false, nil
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("loading serving certificate %s: %w", s.certFile, err)
	}
	s.mu.Lock()
	s.cert, s.certPEM, s.keyPEM = &c, certPEM, keyPEM
	s.mu.Unlock()
	return true, nil
}

// loadCA reads the client CA bundle and swaps it in if it changed and
// holds at least one certificate.
func (s *servingTLS) loadCA() (changed bool, err error) {
	caPEM, err := os.ReadFile(s.caFile)
	if err != nil {
		return false, fmt.Errorf("reading client CA file: %w", err)
	}
	s.mu.RLock()
	same := bytes.Equal(caPEM, s.caPEM)
	s.mu.RUnlock()
	if same {
		return false, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return false, fmt.Errorf("client CA file %s holds no PEM certificates", s.caFile)
	}
	s.mu.Lock()
	s.caPEM = caPEM
	s.verifyCA = x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	s.mu.Unlock()
	return true, nil
}

// config is the server's TLS configuration from the flags.
func (s *servingTLS) config(minVersion string, cipherSuites []string) (*tls.Config, error) {
	v, err := cliflag.TLSVersion(minVersion)
	if err != nil {
		return nil, fmt.Errorf("--tls-min-version: %w", err)
	}
	suites, err := cliflag.TLSCipherSuites(cipherSuites)
	if err != nil {
		return nil, fmt.Errorf("--tls-cipher-suites: %w", err)
	}
	if v == 0 {
		v = tls.VersionTLS12
	}
	return &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			s.mu.RLock()
			defer s.mu.RUnlock()
			return s.cert, nil
		},
		// Request, not require, a certificate: the authenticator checks it
		// against the current CA bundle and answers 401 with a reason, as
		// the kubelet does, instead of a TLS alert the client cannot
		// explain. HTTP/1.1 only: upgrades do not exist in HTTP/2.
		ClientAuth:   tls.RequestClientCert,
		MinVersion:   v,
		CipherSuites: suites,
		NextProtos:   []string{"http/1.1"},
	}, nil
}

// authenticator verifies client certificates against the current bundle.
func (s *servingTLS) authenticator() *x509request.Authenticator {
	return x509request.NewDynamic(func() (x509.VerifyOptions, bool) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.verifyCA, true
	}, x509request.CommonNameUserConversion)
}

// servingTLS is also the client CA for k8s.io/apiserver's delegating
// authenticator (dynamiccertificates.CAContentProvider): kubestream node
// authenticates as the kubelet does, through the same code.

// Name names the bundle in the authenticator's logs.
func (s *servingTLS) Name() string { return "client-ca-bundle" }

// CurrentCABundleContent is the bundle's PEM.
func (s *servingTLS) CurrentCABundleContent() []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.caPEM
}

// VerifyOptions verifies client certificates against the current bundle;
// false while there is none.
func (s *servingTLS) VerifyOptions() (x509.VerifyOptions, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.verifyCA, s.caPEM != nil
}

// AddListener is not needed: VerifyOptions is read per request.
func (s *servingTLS) AddListener(dynamiccertificates.Listener) {}

// reload checks both files every period until ctx ends.
func (s *servingTLS) reload(ctx context.Context, period time.Duration, m *server.Metrics) {
	logger := klog.FromContext(ctx)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if changed, err := s.loadCert(); err != nil {
			logger.Error(err, "Reloading the serving certificate failed; keeping the last good one")
			m.TLSReloadFailed("serving-cert")
		} else if changed {
			logger.Info("Reloaded the serving certificate", "file", s.certFile)
		}
		if s.caFile == "" {
			continue
		}
		if changed, err := s.loadCA(); err != nil {
			logger.Error(err, "Reloading the client CA bundle failed; keeping the last good one")
			m.TLSReloadFailed("client-ca")
		} else if changed {
			logger.Info("Reloaded the client CA bundle", "file", s.caFile)
		}
	}
}
