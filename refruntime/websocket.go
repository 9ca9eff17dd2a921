package refruntime

import (
	"net/http"
	"net/url"
	"path"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/proxy"
	upstream "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// webSocketFront makes the reference runtime a runtime that speaks
// v5.channel.k8s.io and the port-forward tunnel on its own streaming URLs,
// as a runtime adopting KEP-4006 would; cri-streaming answers both with 403.
// It serves them with upstream's handlers (k8s.io/apiserver's
// StreamTranslatorHandler and TunnelingHandler) against the runtime's own
// cri-streaming SPDY endpoint on the same single-use URL, so token checks,
// expiry and the stream semantics stay cri-streaming's. It exists so the
// node's direct WebSocket path has a real runtime to detect and use, and it
// shares no code with kubestream's translator: the direct-path tests have a
// different implementation at each end.
type webSocketFront struct {
	next    http.Handler
	base    *url.URL // this runtime's own streaming server
	logger  klog.Logger
	mu      sync.Mutex
	streams map[string]pendingStreams // token → what the CRI request asked
}

type pendingStreams struct {
	opts    upstream.Options
	expires time.Time
}

// tokenTTL matches cri-streaming's request cache: a URL is good for a minute.
const tokenTTL = time.Minute

func newWebSocketFront(next http.Handler, base *url.URL, logger klog.Logger) *webSocketFront {
	return &webSocketFront{next: next, base: base, logger: logger, streams: map[string]pendingStreams{}}
}

// remember records the streams a remotecommand URL was issued for: the
// translator must know them, and cri-streaming keeps them private.
func (f *webSocketFront) remember(rawURL string, opts upstream.Options) {
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

func (f *webSocketFront) take(token string) (upstream.Options, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.streams[token]
	delete(f.streams, token)
	return p.opts, ok && time.Now().Before(p.expires)
}

func (f *webSocketFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// …/exec/<token>, under whatever base path the URLs have (/cri/ for
	// relative ones).
	dir, token := path.Split(r.URL.Path)
	kind := path.Base(dir)
	own := *f.base
	own.Path = r.URL.Path
	switch {
	case (kind == "exec" || kind == "attach") && wsstream.IsWebSocketRequestWithStreamCloseProtocol(r):
		opts, ok := f.take(token)
		if !ok {
			http.Error(w, "unknown or expired streaming token", http.StatusNotFound)
			return
		}
		upstream.NewStreamTranslatorHandler(&own, nil, 0, opts).ServeHTTP(w, r)
		f.logger.V(3).Info("Native v5 session ended", "path", r.URL.Path)
	case kind == "portforward" && wsstream.IsWebSocketRequestWithTunnelingProtocol(r):
		upstream.NewTunnelingHandler(proxy.NewUpgradeAwareHandler(&own, nil, false, true, errResponder{})).ServeHTTP(w, r)
		f.logger.V(3).Info("Native tunnel ended", "path", r.URL.Path)
	default:
		f.next.ServeHTTP(w, r)
	}
}

type errResponder struct{}

func (errResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, err.Error(), http.StatusNotFound)
}
