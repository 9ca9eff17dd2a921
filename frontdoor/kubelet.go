// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package frontdoor

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/transport"
)

// KubeletTransport reaches the local kubelet with kubestream's own
// credential: the bearer token in tokenFile (a projected service account
// token, re-read as it rotates), over TLS that trusts exactly the
// certificate in certFile, the kubelet's serving certificate, which the
// front door serves too. The file is read at each handshake, so a rotated
// certificate is trusted as soon as the kubelet serves it. Pinning the
// certificate, not a CA, is what works for a kubelet's self-signed one,
// whose names are not the loopback address kubestream dials.
func KubeletTransport(certFile, tokenFile string) (http.RoundTripper, error) {
	base, err := PinnedTransport(certFile)
	if err != nil {
		return nil, err
	}
	rt, err := transport.NewBearerAuthWithRefreshRoundTripper("", tokenFile, base)
	if err != nil {
		return nil, fmt.Errorf("the kubelet credential %s: %w", tokenFile, err)
	}
	return rt, nil
}

// PinnedTransport reaches the local kubelet over TLS that trusts exactly
// the certificate in certFile, with no credential: KubeletTransport adds
// kubestream's, and the front door asks with none whether the kubelet
// serves a path at all.
func PinnedTransport(certFile string) (*http.Transport, error) {
	if _, err := servedCertificates(certFile); err != nil {
		return nil, err
	}
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig: &tls.Config{
			// Verified below, against the file, instead of by name.
			InsecureSkipVerify: true,
			MinVersion:         tls.VersionTLS12,
			VerifyConnection:   func(cs tls.ConnectionState) error { return pinned(certFile, cs) },
			NextProtos:         []string{"http/1.1"},
		},
	}, nil
}

// pinned accepts the connection if the kubelet's leaf certificate is one
// of those in certFile.
func pinned(certFile string, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the kubelet presented no certificate")
	}
	certs, err := servedCertificates(certFile)
	if err != nil {
		return err
	}
	for _, c := range certs {
		if bytes.Equal(c, cs.PeerCertificates[0].Raw) {
			return nil
		}
	}
	return fmt.Errorf("the kubelet's certificate (%s) is not the one in %s", cs.PeerCertificates[0].Subject, certFile)
}

// servedCertificates returns the DER of each certificate in certFile.
func servedCertificates(certFile string) ([][]byte, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("reading the kubelet's serving certificate: %w", err)
	}
	var certs [][]byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			certs = append(certs, b.Bytes)
		}
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", certFile)
	}
	return certs, nil
}
