// Package kubeletadapter links kubestream into a kubelet: NewStreamingHandler
// builds kubestream's server on the kubelet's own pieces, for the kubelet's
// NewStreamingHandler hook (hack/kube/kubelet/server.go.patch adds it to
// pkg/kubelet/server). It is a module of its own so that kubestream's
// go.mod never depends on k8s.io/kubernetes; an embedder or an upstream
// change needs this file and the hook, nothing else.
package kubeletadapter

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubeletserver "k8s.io/kubernetes/pkg/kubelet/server"

	"github.com/kubestream/kubestream/cri"
	"github.com/kubestream/kubestream/server"
)

// streamingHandler is kubestream's server as the kubelet mounts it; the
// kubelet serves MetricsHandler at /metrics/streaming.
type streamingHandler struct{ *server.Server }

func (h streamingHandler) MetricsHandler() http.Handler { return h.Metrics().Handler() }

// NewStreamingHandler builds kubestream on the kubelet's own pieces: its
// pod manager and CRI calls through HostInterface, its feature gate (so
// ExtendWebSocketsToKubelet means the same for both), and its
// authentication and authorization. The kubelet's filter has run before any
// request reaches kubestream, but it asks get of nodes/proxy for a
// WebSocket upgrade (a GET); kubestream asks the kubelet's authorizer again
// with the kubelet's own attributes and verb create, so get nodes/proxy
// alone cannot exec. --streaming-authorization-verb-by-method has no
// kubelet equivalent; the create check is always on here.
func NewStreamingHandler(ctx context.Context, host kubeletserver.HostInterface, auth kubeletserver.AuthInterface) (http.Handler, error) {
	cfg := server.Config{
		URLs:     hostURLs{host},
		Features: utilfeature.DefaultFeatureGate,
	}
	if auth != nil {
		cfg.Authenticator, cfg.Authorizer = auth, auth
		cfg.RequestAttributes = auth.GetRequestAttributes
	}
	srv, err := server.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubestream: %w", err)
	}
	klog.FromContext(ctx).Info("kubestream serves exec, attach and port-forward")
	return streamingHandler{srv}, nil
}

// hostURLs asks the kubelet for streaming URLs exactly as its own handlers
// do: the pod from its pod manager, the URL from GetExec, GetAttach or
// GetPortForward (which find the container and call CRI).
type hostURLs struct{ host kubeletserver.HostInterface }

func (h hostURLs) pod(ref cri.PodRef) (string, types.UID, error) {
	p, ok := h.host.GetPodByName(ref.Namespace, ref.Name)
	if !ok || (ref.UID != "" && string(p.UID) != ref.UID) {
		return "", "", &cri.Error{Kind: cri.NotFound, Msg: "pod " + ref.String() + " does not exist"}
	}
	return kubecontainer.GetPodFullName(p), p.UID, nil
}

func (h hostURLs) ExecURL(ctx context.Context, ref cri.PodRef, container string, cmd []string, s cri.Streams) (*url.URL, error) {
	name, uid, err := h.pod(ref)
	if err != nil {
		return nil, err
	}
	u, err := h.host.GetExec(ctx, name, uid, container, cmd, s)
	return u, cri.Classify(err)
}

func (h hostURLs) AttachURL(ctx context.Context, ref cri.PodRef, container string, s cri.Streams) (*url.URL, error) {
	name, uid, err := h.pod(ref)
	if err != nil {
		return nil, err
	}
	u, err := h.host.GetAttach(ctx, name, uid, container, s)
	return u, cri.Classify(err)
}

func (h hostURLs) PortForwardURL(ctx context.Context, ref cri.PodRef, ports []int32) (*url.URL, error) {
	p, ok := h.host.GetPodByName(ref.Namespace, ref.Name)
	if !ok || (ref.UID != "" && string(p.UID) != ref.UID) {
		return nil, &cri.Error{Kind: cri.NotFound, Msg: "pod " + ref.String() + " does not exist"}
	}
	u, err := h.host.GetPortForward(ctx, p.Name, p.Namespace, p.UID, portforward.V4Options{Ports: ports})
	return u, cri.Classify(err)
}
