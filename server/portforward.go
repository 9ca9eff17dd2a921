package server

import (
	"github.com/kubestream/kubestream/internal/wire"

	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/translator"
)

func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	s.serveStream(w, r, PortForward, func(r *http.Request) (target, error) {
		ports, err := parsePorts(r.URL.Query()["port"])
		if err != nil {
			return target{}, err
		}
		pod := podRef(r)
		if err := checkNames(pod, "", false); err != nil {
			return target{}, err
		}
		return target{
			newURL:   func(ctx context.Context) (*url.URL, error) { return s.cfg.URLs.PortForwardURL(ctx, pod, ports) },
			logKV:    []any{"pod", pod.String()},
			describe: func(e *audit.Event) { e.Ports = ports },
			carry: func(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL, _ func(context.Context) (*url.URL, error)) {
				s.tunnel(w, r, ss, u)
			},
		}, nil
	})
}

// tunnel carries the client's SPDY port-forward session inside WebSocket
// messages to the runtime's SPDY (translator.ServeTunnel).
func (s *Server) tunnel(w http.ResponseWriter, r *http.Request, ss *session, u *url.URL) {
	ctx := r.Context()
	// Dial the runtime before answering the client: the tunnel has no
	// status channel, so a runtime failure must still be an HTTP answer.
	dctx, cancel := context.WithTimeout(ctx, s.cfg.Translator.StreamCreationTimeout)
	rt, proto, err := upgrade.SPDY(dctx, u, s.cfg.RuntimeTLS, []string{portforward.PortForwardV1Name})
	cancel()
	if err != nil {
		ss.fail(w, r, upgradeStatus(err), err)
		return
	}
	if proto != portforward.PortForwardV1Name {
		rt.Close()
		ss.fail(w, r, http.StatusBadGateway, fmt.Errorf("container runtime negotiated %q for port-forward", proto))
		return
	}
	ws, err := s.upgrader(PortForward).Upgrade(wire.Hijacker{ResponseWriter: w}, r, nil)
	if err != nil {
		rt.Close()
		ss.failed("400")
		return
	}
	sctx, done := s.sessionContext(ctx)
	defer done()
	defer ss.running()()
	res := translator.ServeTunnel(sctx, ws, rt, s.cfg.Translator)
	ss.carried("tunnel-up", res.BytesUp)
	ss.carried("tunnel-down", res.BytesDown)
	if res.Err != nil {
		ss.ended("", res.Err)
		ss.failed("session")
		klog.FromContext(ctx).V(2).Info("Tunnel ended abnormally", "err", res.Err)
	}
}

func parsePorts(values []string) ([]int32, error) {
	var ports []int32
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("invalid port %q: want 1-65535", p)
			}
			ports = append(ports, int32(n))
		}
	}
	return ports, nil
}
