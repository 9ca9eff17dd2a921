package refruntime

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"path"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/kubestream/kubestream/internal/upgrade"
	"github.com/kubestream/kubestream/translator"
)

// webSocketFront makes the reference runtime a runtime that speaks
// v5.channel.k8s.io and the port-forward tunnel on its own streaming URLs,
// as a runtime adopting KEP-4006 would; cri-streaming answers both with 403.
// It serves them with kubestream's translator against the runtime's own
// cri-streaming SPDY endpoint on the same single-use URL, so token checks,
// expiry and the stream semantics stay cri-streaming's. It exists so the
// node's direct WebSocket path has a real runtime to detect and use.
type webSocketFront struct {
	next    http.Handler
	base    *url.URL // this runtime's own streaming server
	logger  klog.Logger
	rc, pf  *websocket.Upgrader
	mu      sync.Mutex
	streams map[string]pendingStreams // token → what the CRI request asked
}

type pendingStreams struct {
	opts    translator.Options
	expires time.Time
}

// tokenTTL matches cri-streaming's request cache: a URL is good for a minute.
const tokenTTL = time.Minute

func newWebSocketFront(next http.Handler, base *url.URL, logger klog.Logger) *webSocketFront {
	up := func(p string) *websocket.Upgrader {
		return &websocket.Upgrader{Subprotocols: []string{p}, CheckOrigin: func(*http.Request) bool { return true }}
	}
	return &webSocketFront{next: next, base: base, logger: logger, streams: map[string]pendingStreams{},
		rc: up(remotecommand.StreamProtocolV5Name), pf: up(portforward.WebsocketsSPDYTunnelingPortForwardV1)}
}

// remember records the streams a remotecommand URL was issued for: the
// translator must know them, and cri-streaming keeps them private.
func (f *webSocketFront) remember(rawURL string, opts translator.Options) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for t, p := range f.streams {
		if now.After(p.expires) {
			delete(f.streams, t)
		}
	}
	f.streams[path.Base(rawURL)] = pendingStreams{opts: opts, expires: now.Add(tokenTTL)}
}

func (f *webSocketFront) take(token string) (translator.Options, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.streams[token]
	delete(f.streams, token)
	return p.opts, ok && time.Now().Before(p.expires)
}

func (f *webSocketFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, token := path.Split(r.URL.Path)
	own := *f.base
	own.Path = r.URL.Path
	switch {
	case (kind == "/exec/" || kind == "/attach/") && wsstream.IsWebSocketRequestWithStreamCloseProtocol(r):
		opts, ok := f.take(token)
		if !ok {
			http.Error(w, "unknown or expired streaming token", http.StatusNotFound)
			return
		}
		ws, err := f.rc.Upgrade(w, r, nil)
		if err != nil {
			return // answered by the upgrader
		}
		used := false
		dial := func(ctx context.Context, protocols []string) (net.Conn, string, error) {
			if used { // single-use, like the URL it stands for
				return nil, "", &upgrade.Error{StatusCode: http.StatusNotFound, Body: "streaming token used"}
			}
			used = true
			return upgrade.SPDY(ctx, &own, nil, protocols)
		}
		res := translator.ServeRemoteCommand(context.Background(), ws, dial, opts, translator.DefaultConfig())
		f.logger.V(3).Info("Native v5 session ended", "path", r.URL.Path, "err", res.Err)
	case kind == "/portforward/" && wsstream.IsWebSocketRequestWithTunnelingProtocol(r):
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		rt, _, err := upgrade.SPDY(ctx, &own, nil, []string{portforward.PortForwardV1Name})
		cancel()
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		ws, err := f.pf.Upgrade(w, r, nil)
		if err != nil {
			rt.Close()
			return
		}
		res := translator.ServeTunnel(context.Background(), ws, rt, translator.DefaultConfig())
		f.logger.V(3).Info("Native tunnel ended", "path", r.URL.Path, "err", res.Err)
	default:
		f.next.ServeHTTP(w, r)
	}
}
