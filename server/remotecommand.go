package server

import (
	"github.com/kubestream/kubestream/internal/wire"

	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"time"

	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/translator"
)

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) {
	s.serveStream(w, r, Exec, s.remoteCommand(Exec))
}

func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) {
	s.serveStream(w, r, Attach, s.remoteCommand(Attach))
}

// remoteCommand parses an exec or attach request: the streams, the command,
// the pod and container.
func (s *Server) remoteCommand(sub string) func(*http.Request) (target, error) {
	return func(r *http.Request) (target, error) {
		opts, err := remotecommandserver.NewOptions(r)
		if err != nil {
			return target{}, err
		}
		cmd := r.URL.Query()["command"]
		if sub == Exec && len(cmd) == 0 {
			return target{}, errors.New("exec needs at least one command parameter")
		}
		pod, container := podRef(r), r.PathValue("container")
		if err := checkNames(pod, container, true); err != nil {
			return target{}, err
		}
		streams := *opts
		return target{
			newURL: func(ctx context.Context) (*url.URL, error) {
				if sub == Exec {
					return s.cfg.URLs.ExecURL(ctx, pod, container, cmd, streams)
				}
				return s.cfg.URLs.AttachURL(ctx, pod, container, streams)
			},
			logKV: []any{"pod", pod.String(), "container", container},
			describe: func(e *audit.Event) {
				e.Command, e.TTY, e.Stdin = cmd, streams.TTY, streams.Stdin
			},
			carry: func(w http.ResponseWriter, r *http.Request, ss *session, first *url.URL, newURL func(context.Context) (*url.URL, error)) {
				s.translate(w, r, ss, first, newURL, streams)
			},
		}, nil
	}
}

func (s *Server) translate(w http.ResponseWriter, r *http.Request, ss *session, first *url.URL,
	newURL func(context.Context) (*url.URL, error), opts translator.Options) {
	ws, err := s.upgrader(ss.subresource).Upgrade(wire.Hijacker{ResponseWriter: w}, r, nil)
	if err != nil {
		// gorilla answered the client already (400 with the reason).
		ss.failed("400")
		return
	}
	ctx, done := s.sessionContext(r.Context())
	defer done()
	defer ss.running()()
	dial := func(ctx context.Context, protocols []string) (net.Conn, string, error) {
		u := first
		first = nil
		if u == nil {
			var err error
			if u, err = newURL(ctx); err != nil {
				return nil, "", err
			}
		}
		return upgrade.SPDY(ctx, u, s.cfg.RuntimeTLS, protocols)
	}
	res := translator.ServeRemoteCommand(ctx, ws, dial, opts, s.cfg.Translator, ss.observer(r))
	ss.closeRecording(r)
	for ch, n := range res.Bytes {
		ss.carried(channelNames[ch], n)
	}
	ss.exited(res.Status)
	if res.NodeEnded {
		ss.ended("node", nil)
	}
	logger := klog.FromContext(ctx)
	if res.Err != nil {
		ss.ended("", res.Err)
		ss.failed("session")
		logger.V(2).Info("Session ended abnormally", "err", res.Err)
		return
	}
	logger.V(3).Info("Session ended", "exitCode", translator.ExitCode(res.Status), "duration", time.Since(ss.start))
}
