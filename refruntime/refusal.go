package refruntime

import (
	"net/http"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// quietRefusal answers a WebSocket upgrade that offers only protocols
// cri-streaming does not speak (v5.channel.k8s.io, the port-forward tunnel)
// as cri-streaming does, 403 Forbidden and nothing else, but without
// cri-streaming's "Unhandled Error" line: a separate runtime prints that in
// its own log, and this one shares kubestream's stderr, where a refusal
// kubestream expects and handles is no error worth a newcomer's alarm. An
// offer that also lists an older protocol goes on to cri-streaming, which
// picks that one. The refused URL's token stays unspent until it expires (a
// minute); kubestream asks for a fresh URL after a refusal anyway.
type quietRefusal struct {
	next   http.Handler
	logger klog.Logger
}

func (q quietRefusal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if onlyUnspoken(r) {
		q.logger.V(2).Info("Refusing a WebSocket protocol cri-streaming does not speak", "path", r.URL.Path, "protocols", websocket.Subprotocols(r))
		w.WriteHeader(http.StatusForbidden)
		return
	}
	q.next.ServeHTTP(w, r)
}

func onlyUnspoken(r *http.Request) bool {
	offered := websocket.Subprotocols(r)
	if !wsstream.IsWebSocketRequest(r) || len(offered) == 0 {
		return false
	}
	for _, p := range offered {
		if p != remotecommand.StreamProtocolV5Name && p != portforward.WebsocketsSPDYTunnelingPortForwardV1 {
			return false
		}
	}
	return true
}
