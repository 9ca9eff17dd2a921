package server

import (
	"crypto/x509"
	"fmt"
	"os"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
)

var anonymous = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}

// ClientCertAuthenticator verifies client certificates against the CA
// bundle in caFile, as the kubelet's --client-ca-file does, mapping the
// certificate's CommonName and Organizations to a user.
func ClientCertAuthenticator(caFile string) (authenticator.Request, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client CA file %s holds no PEM certificates", caFile)
	}
	opts := x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return x509request.New(opts, x509request.CommonNameUserConversion), nil
}
