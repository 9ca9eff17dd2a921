// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package pki makes the small CA, serving and client certificates that the
// demo and the tests need; production nodes bring their own.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority held in memory.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte
}

// NewCA creates a self-signed CA named cn.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pair is a PEM certificate and key.
type Pair struct{ CertPEM, KeyPEM []byte }

// Serving issues a server certificate for localhost and the given IPs.
func (ca *CA) Serving(cn string, ips ...net.IP) (Pair, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    []string{"localhost", cn},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client issues a client certificate for user cn in groups orgs.
func (ca *CA) Client(cn string, orgs ...string) (Pair, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(tmpl *x509.Certificate) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Pair{}, fmt.Errorf("issuing certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// Files are paths of a written set of node credentials.
type Files struct {
	Dir                          string
	CA, CAKey                    string
	ServerCert, ServerKey        string
	ClientCert, ClientKey        string
	OtherCA                      string // a CA the server does not trust
	OtherClientCert, OtherClient string // a client certificate from OtherCA (cert, key)
}

// WriteNodeSet writes a client CA, a serving pair (for loopback and ips),
// a client pair for user (in group system:masters) and a pair from an
// untrusted CA into dir.
func WriteNodeSet(dir, user string, ips ...net.IP) (*Files, error) {
	ca, err := NewCA("kubestream-ca")
	if err != nil {
		return nil, err
	}
	other, err := NewCA("untrusted-ca")
	if err != nil {
		return nil, err
	}
	srv, err := ca.Serving("kubestream-node", ips...)
	if err != nil {
		return nil, err
	}
	cli, err := ca.Client(user, "system:masters")
	if err != nil {
		return nil, err
	}
	bad, err := other.Client(user, "system:masters")
	if err != nil {
		return nil, err
	}
	kb, err := x509.MarshalECPrivateKey(ca.Key)
	if err != nil {
		return nil, err
	}
	caKey := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	f := &Files{Dir: dir}
	for _, w := range []struct {
		path *string
		name string
		data []byte
	}{
		{&f.CA, "ca.crt", ca.PEM},
		{&f.CAKey, "ca.key", caKey},
		{&f.ServerCert, "server.crt", srv.CertPEM},
		{&f.ServerKey, "server.key", srv.KeyPEM},
		{&f.ClientCert, "client.crt", cli.CertPEM},
		{&f.ClientKey, "client.key", cli.KeyPEM},
		{&f.OtherCA, "other-ca.crt", other.PEM},
		{&f.OtherClientCert, "other-client.crt", bad.CertPEM},
		{&f.OtherClient, "other-client.key", bad.KeyPEM},
	} {
		*w.path = filepath.Join(dir, w.name)
		if err := os.WriteFile(*w.path, w.data, 0o600); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// ControlPlaneFiles are paths of a written set of kube-apiserver credentials.
type ControlPlaneFiles struct {
	CA                    string // signs the serving and admin certificates; the apiserver's client CA
	ServerCert, ServerKey string
	AdminCert, AdminKey   string // user "e2e-admin" in system:masters
	ServiceAccountKey     string // signs and verifies service account tokens
}

// WriteControlPlaneSet writes what a kube-apiserver needs to serve TLS on
// loopback, authenticate an admin by client certificate and sign service
// account tokens.
func WriteControlPlaneSet(dir string) (*ControlPlaneFiles, error) {
	ca, err := NewCA("kube-apiserver-ca")
	if err != nil {
		return nil, err
	}
	srv, err := ca.Serving("kube-apiserver", net.IPv4(10, 0, 0, 1))
	if err != nil {
		return nil, err
	}
	admin, err := ca.Client("e2e-admin", "system:masters")
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	f := &ControlPlaneFiles{}
	for _, w := range []struct {
		path *string
		name string
		data []byte
	}{
		{&f.CA, "apiserver-ca.crt", ca.PEM},
		{&f.ServerCert, "apiserver.crt", srv.CertPEM},
		{&f.ServerKey, "apiserver.key", srv.KeyPEM},
		{&f.AdminCert, "admin.crt", admin.CertPEM},
		{&f.AdminKey, "admin.key", admin.KeyPEM},
		{&f.ServiceAccountKey, "sa.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER})},
	} {
		*w.path = filepath.Join(dir, w.name)
		if err := os.WriteFile(*w.path, w.data, 0o600); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// LoadCA reads a CA written by WriteNodeSet, to issue more certificates.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("no PEM in %s or %s", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: certPEM}, nil
}

// WriteClient writes a client pair for user in groups, issued by ca, into
// dir as <user>.crt and <user>.key.
func (ca *CA) WriteClient(dir, user string, groups ...string) (cert, key string, err error) {
	p, err := ca.Client(user, groups...)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, user+".crt"), filepath.Join(dir, user+".key")
	if err := os.WriteFile(cert, p.CertPEM, 0o600); err != nil {
		return "", "", err
	}
	return cert, key, os.WriteFile(key, p.KeyPEM, 0o600)
}
