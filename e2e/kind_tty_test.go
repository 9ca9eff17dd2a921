// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build kind

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

// faultTTYTail: a short tty exec whose last output comes after a resize,
// through the apiserver on every WebSocket protocol with a tty and on
// SPDY, many times each with the machine loaded: the output is exactly
// the echoed keystroke and the new size, and the status Success. A
// runtime that returns before it has copied its terminal's last bytes
// loses them and still says Success (about one run in eight).
var faultTTYTail = faultCase{"a short tty exec, its last output after a resize (16 runs a protocol, 5 WebSocket protocols and SPDY, loaded): every byte", kubestreamWorkers}

// ttyTailProtocols are the WebSocket subprotocols that carry a tty; ""
// stands for SPDY.
var ttyTailProtocols = []string{"channel.k8s.io", "base64.channel.k8s.io", "v4.channel.k8s.io", "v4.base64.channel.k8s.io", "v5.channel.k8s.io", ""}

const (
	ttyTailRuns   = 16
	ttyTailScript = "sleep 1; stty size"
	ttyTailWant   = " 45 123\r\n" // the keystroke's echo, then rows and columns
)

func faultTTYLastOutput(t *testing.T, cp *controlPlane, ft *faultTable, flavour, pod string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 { // two busy loops beside the sessions: the load the loss needs
		go func() {
			for ctx.Err() == nil {
			}
		}()
	}
	type result struct{ proto, out, err string }
	var (
		mu      sync.Mutex
		bad     []result
		done    atomic.Int64
		wg      sync.WaitGroup
		workers = make(chan struct{}, 8)
	)
	for _, proto := range ttyTailProtocols {
		for range ttyTailRuns {
			wg.Add(1)
			workers <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-workers }()
				out, err := ttyTailExec(ctx, cfg, pod, proto)
				done.Add(1)
				if err != nil || out != ttyTailWant {
					r := result{proto, out, fmt.Sprint(err)}
					mu.Lock()
					bad = append(bad, r)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for _, b := range bad {
		name := b.proto
		if name == "" {
			name = "SPDY"
		}
		t.Logf("%s on %s: output %q, err %s; want %q and Success", name, flavour, b.out, b.err, ttyTailWant)
	}
	ft.record(t, faultTTYTail, flavour, fmt.Sprintf("%d of %d exact", done.Load()-int64(len(bad)), done.Load()), len(bad) == 0)
}

// ttyTailExec runs the script with a tty in pod's app container: one
// keystroke, one resize to 123×45, then the output until the status.
func ttyTailExec(ctx context.Context, cfg *rest.Config, pod, proto string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	q := url.Values{"container": {"app"}, "command": {"sh", "-c", ttyTailScript}, "stdin": {"true"}, "stdout": {"true"}, "tty": {"true"}}
	u, err := url.Parse(strings.TrimRight(cfg.Host, "/") + "/api/v1/namespaces/default/pods/" + pod + "/exec?" + q.Encode())
	if err != nil {
		return "", err
	}
	if proto == "" {
		return ttyTailSPDY(ctx, cfg, u)
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return "", err
	}
	u.Scheme = "wss"
	d := websocket.Dialer{TLSClientConfig: tlsConfig, Subprotocols: []string{proto}, HandshakeTimeout: 30 * time.Second}
	h := http.Header{}
	if cfg.BearerToken != "" {
		h.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	ws, resp, err := d.DialContext(ctx, u.String(), h)
	if err != nil {
		return "", fmt.Errorf("dial %s: %w", proto, err)
	}
	defer resp.Body.Close()
	defer ws.Close()
	context.AfterFunc(ctx, func() { ws.Close() })
	b64 := strings.Contains(proto, "base64")
	send := func(ch byte, p []byte) error {
		if b64 {
			return ws.WriteMessage(websocket.TextMessage, append([]byte{'0' + ch}, base64.StdEncoding.EncodeToString(p)...))
		}
		return ws.WriteMessage(websocket.BinaryMessage, append([]byte{ch}, p...))
	}
	size, _ := json.Marshal(remotecommand.TerminalSize{Width: 123, Height: 45})
	if err := send(0, []byte(" ")); err != nil {
		return "", err
	}
	if err := send(4, size); err != nil {
		return "", err
	}
	var out, status strings.Builder
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			// The older protocols end with the connection; v5 with a
			// close frame after its status.
			break
		}
		if len(msg) == 0 {
			continue
		}
		ch, p := msg[0], msg[1:]
		if b64 {
			ch -= '0'
			if p, err = base64.StdEncoding.DecodeString(string(p)); err != nil {
				return out.String(), fmt.Errorf("a frame that is not base64: %w", err)
			}
		}
		switch ch {
		case 1:
			out.Write(p)
		case 3:
			status.Write(p)
		}
	}
	return out.String(), ttyTailStatus(proto, status.String())
}

// ttyTailStatus reads the error channel: a Status on v4 and v5 (Success
// required), plain text on the older ones (none is success).
func ttyTailStatus(proto, s string) error {
	if !strings.HasPrefix(proto, "v4.") && !strings.HasPrefix(proto, "v5.") {
		if s != "" {
			return fmt.Errorf("error channel %q", s)
		}
		return nil
	}
	var st metav1.Status
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return fmt.Errorf("no status (%q): %w", s, err)
	}
	if st.Status != metav1.StatusSuccess {
		return fmt.Errorf("status %s: %s", st.Status, st.Message)
	}
	return nil
}

// oneSize is a terminal size queue of one size, then none until done.
type oneSize struct {
	sent bool
	done <-chan struct{}
}

func (q *oneSize) Next() *remotecommand.TerminalSize {
	if !q.sent {
		q.sent = true
		return &remotecommand.TerminalSize{Width: 123, Height: 45}
	}
	<-q.done
	return nil
}

func ttyTailSPDY(ctx context.Context, cfg *rest.Config, u *url.URL) (string, error) {
	e, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	if err != nil {
		return "", err
	}
	// Stdin stays open until the exec ends (no half-close mid-test).
	stdinR, stdinW := io.Pipe()
	go func() { _, _ = stdinW.Write([]byte(" ")) }() // ends when the pipe closes
	defer stdinW.Close()
	done := make(chan struct{})
	defer close(done)
	var out syncBuffer
	err = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: &out, Tty: true, TerminalSizeQueue: &oneSize{done: done}})
	return out.String(), err
}
