// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/config"
	"github.com/kubestream/kubestream/frontdoor"
	"github.com/kubestream/kubestream/internal/redirect"
	"github.com/kubestream/kubestream/server"
)

// NodeOptions are kubestream node's flags: where the kubelet's files are,
// where to serve, and how to take the kubelet's port.
type NodeOptions struct {
	KubeletConfigFile string
	KubeletCertDir    string
	KubeletURL        string
	KubeletTokenFile  string
	ConfigFile        string
	Kubeconfig        string
	NodeName          string
	Address           string
	Port              int
	Redirect          bool
	RedirectOwner     string
	RunDir            string
	HealthzAddress    string
	HealthzPort       int
	DrainTimeout      time.Duration
}

// NewNodeOptions returns the defaults for a kubeadm node.
func NewNodeOptions() *NodeOptions {
	return &NodeOptions{
		KubeletConfigFile: "/var/lib/kubelet/config.yaml",
		KubeletCertDir:    "/var/lib/kubelet/pki",
		KubeletTokenFile:  "/var/run/secrets/kubernetes.io/serviceaccount/token",
		Address:           "0.0.0.0",
		Port:              10260,
		Redirect:          true,
		RedirectOwner:     "pid-" + strconv.Itoa(os.Getpid()),
		RunDir:            "/run/kubestream",
		HealthzAddress:    "127.0.0.1",
		HealthzPort:       10261,
		DrainTimeout:      2 * time.Minute,
	}
}

// AddFlags registers the flags.
func (o *NodeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.KubeletConfigFile, "kubelet-config", o.KubeletConfigFile, "The kubelet's configuration file (KubeletConfiguration): its port, serving certificate, client CA, authentication, authorization, CRI endpoint and timeouts are kubestream's.")
	fs.StringVar(&o.KubeletCertDir, "kubelet-cert-dir", o.KubeletCertDir, "The kubelet's --cert-dir, where it keeps the serving certificate it made or rotates when its configuration names none.")
	fs.StringVar(&o.KubeletURL, "kubelet-url", o.KubeletURL, "Where the kubelet is reached for every path but the streaming ones (empty: https://127.0.0.1:PORT, the kubelet's port).")
	fs.StringVar(&o.KubeletTokenFile, "kubelet-token-file", o.KubeletTokenFile, "kubestream's own bearer token for the kubelet (its service account's), re-read as it rotates.")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "kubestream's configuration file (StreamingConfiguration; empty: every default).")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "A kubeconfig for TokenReview and SubjectAccessReview (empty: the pod's service account).")
	fs.StringVar(&o.NodeName, "hostname-override", o.NodeName, "The node's name, which requests are authorized against (nodes/NAME).")
	fs.StringVar(&o.Address, "address", o.Address, "The IP address to serve on.")
	fs.IntVar(&o.Port, "port", o.Port, "The port to serve the kubelet API on; --redirect sends the kubelet's port here.")
	fs.BoolVar(&o.Redirect, "redirect", o.Redirect, "While serving, redirect TCP connections that arrive at the node for the kubelet's port to --port (an nftables table of its own, removed on exit). false: the kubelet listens elsewhere and kubestream takes its address and port (docs/node.md).")
	fs.StringVar(&o.RedirectOwner, "redirect-owner", o.RedirectOwner, "This process's name in the redirect's table and lock file (the pod's UID).")
	fs.StringVar(&o.RunDir, "run-dir", o.RunDir, "A host directory for the redirect's lock files.")
	fs.StringVar(&o.HealthzAddress, "healthz-bind-address", o.HealthzAddress, "The address of the plain-HTTP /healthz and /readyz (probes).")
	fs.IntVar(&o.HealthzPort, "healthz-port", o.HealthzPort, "The port of /healthz and /readyz; 0: none.")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "On exit, how long running sessions and passed-through requests may go on while new ones go elsewhere; those left are then told the node's streaming server is stopping.")
}

// StartNode brings kubestream node up, returning once the redirect is in
// place: the kubelet's settings, the runtime and the streaming server
// (nodeServer), the front door before it, the listener, probes, and the
// redirect. Stop undoes them last first: redirect, probes, then the drain.
func StartNode(ctx context.Context, o *NodeOptions) (_ *Running, err error) {
	logger := klog.FromContext(ctx)
	run := &Running{}
	defer func() {
		if err != nil {
			run.undo()
		}
	}()
	ks, err := readKubeletConfig(o.KubeletConfigFile, o.KubeletCertDir)
	if err != nil {
		return nil, err
	}
	if o.NodeName == "" {
		return nil, errors.New("--hostname-override is required: requests are authorized against the node's name")
	}
	st, err := newServingTLS(ks.TLSCertFile, ks.TLSPrivateKeyFile, ks.ClientCAFile)
	if err != nil {
		return nil, err
	}
	srv, authn, authz, err := run.nodeServer(ctx, o, ks, st)
	if err != nil {
		return nil, err
	}
	kubeletURL := o.KubeletURL
	if kubeletURL == "" {
		kubeletURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ks.Port))
	}
	ku, err := url.Parse(kubeletURL)
	if err != nil {
		return nil, fmt.Errorf("--kubelet-url: %w", err)
	}
	rt, err := frontdoor.KubeletTransport(ks.TLSCertFile, o.KubeletTokenFile)
	if err != nil {
		return nil, err
	}
	anon, err := frontdoor.PinnedTransport(ks.TLSCertFile)
	if err != nil {
		return nil, err
	}
	front, err := frontdoor.New(frontdoor.Config{NodeName: o.NodeName, Streaming: srv, Own: srv.Metrics().Handler(),
		Kubelet: ku, Transport: rt, Anonymous: anon, Authenticator: authn, Authorizer: authz})
	if err != nil {
		return nil, err
	}
	tlsConfig, err := st.config(ks.TLSMinVersion, ks.TLSCipherSuites)
	if err != nil {
		return nil, err
	}
	rctx, stopReload := context.WithCancel(klog.NewContext(context.Background(), logger))
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		st.reload(rctx, 10*time.Second, srv.Metrics())
	}()
	run.onStop(func() { stopReload(); <-reloaded })
	if err := run.serveNode(ctx, o, front, srv, tlsConfig); err != nil {
		return nil, err
	}
	ready := &atomic.Bool{}
	if err := run.probes(ctx, o, srv, ready); err != nil {
		return nil, err
	}
	if o.Redirect {
		in, err := redirect.Install(redirect.Rule{From: uint16(ks.Port), To: uint16(o.Port), Owner: o.RedirectOwner, RunDir: o.RunDir})
		if err != nil {
			return nil, err
		}
		run.onStop(func() {
			ready.Store(false)
			if err := in.Remove(); err != nil {
				logger.Error(err, "Removing the redirect of the kubelet's port")
			}
		})
	}
	ready.Store(true)
	logger.Info("kubestream node serving the kubelet API", "url", run.URL, "kubelet", kubeletURL, "redirect", o.Redirect, "runtime", run.Endpoint)
	return run, nil
}

// nodeServer is the streaming server as the kubelet's settings and
// kubestream's configuration file make it, with the kubelet's
// authenticator and authorizer (returned for the front door too).
func (r *Running) nodeServer(ctx context.Context, o *NodeOptions, ks kubeletSettings, st *servingTLS) (*server.Server, authenticator.Request, server.Authorizer, error) {
	file, err := config.Load(o.ConfigFile)
	if err != nil {
		return nil, nil, nil, err
	}
	so := NewServeOptions()
	so.ContainerRuntimeEndpoint = ks.ContainerRuntimeEndpoint
	so.RuntimeRequestTimeout = ks.RuntimeRequestTimeout
	so.StreamingConnectionIdleTimeout = ks.StreamingConnectionIdleTimeout
	so.NodeName = o.NodeName
	if a, ok := file.AuditLog(); ok {
		so.AuditLogPath, so.AuditLogMaxSize, so.AuditLogMaxBackup, so.AuditLogMaxAge = a.Path, a.MaxSizeMB, a.MaxBackups, a.MaxAgeDays
	}
	client, err := r.runtimeClient(ctx, so)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := r.serverConfig(ctx, so, client)
	if err != nil {
		return nil, nil, nil, err
	}
	file.Apply(&cfg)
	if err := cfg.PortForwardModes.Validate(); err != nil {
		return nil, nil, nil, err
	}
	cfg.ShutdownMessage = "kubestream on this node is stopping"
	authn, authz, err := kubeletAuth(o, ks, st)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.Authenticator, cfg.Authorizer = authn, authz
	cfg.RequestAttributes = func(_ context.Context, u user.Info, req *http.Request) []authorizer.Attributes {
		return frontdoor.Attributes(o.NodeName, u, req)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	r.Server = srv
	return srv, authn, authz, nil
}

// kubeletAuth is the kubelet's authenticator and authorizer, built as the
// kubelet builds them (cmd/kubelet/app/auth.go) from its settings.
func kubeletAuth(o *NodeOptions, ks kubeletSettings, st *servingTLS) (authenticator.Request, server.Authorizer, error) {
	rc, err := restConfig(o.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("building the cluster client: %w", err)
	}
	ac := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous: &apiserver.AnonymousAuthConfig{Enabled: ks.Anonymous},
		CacheTTL:  ks.WebhookCacheTTL,
	}
	if ks.ClientCAFile != "" {
		ac.ClientCertificateCAContentProvider = st
	}
	if ks.Webhook {
		ac.TokenAccessReviewClient = cs.AuthenticationV1()
		// k8s.io/apiserver's default for delegated authentication.
		ac.WebhookRetryBackoff = &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	}
	authn, _, err := ac.New()
	if err != nil {
		return nil, nil, fmt.Errorf("building the kubelet's authenticator: %w", err)
	}
	switch ks.AuthorizationMode {
	case "AlwaysAllow":
		return authn, authorizerfactory.NewAlwaysAllowAuthorizer(), nil
	case "Webhook":
		authz, err := server.WebhookAuthorizer(cs.AuthorizationV1(), ks.AuthorizedTTL, ks.UnauthorizedTTL)
		return authn, authz, err
	}
	return nil, nil, fmt.Errorf("the kubelet's authorization mode %q: kubestream node knows AlwaysAllow and Webhook", ks.AuthorizationMode)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --kubeconfig: %w", err)
		}
		return rc, nil
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, and not in a pod: %w", err)
	}
	return rc, nil
}
