// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package translator

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestream/kubestream/internal/upgrade"
)

// serveWith runs ServeRemoteCommand behind an httptest server with dial as
// the runtime leg and returns a connected v5 client.
func serveWith(t *testing.T, cfg Config, dial DialFunc) (*websocket.Conn, <-chan Result) {
	t.Helper()
	results := make(chan Result, 1)
	up := websocket.Upgrader{Subprotocols: []string{"v5.channel.k8s.io"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		results <- ServeRemoteCommand(r.Context(), ws, dial, Options{Stdout: true, Stdin: true}, cfg, nil)
	}))
	t.Cleanup(srv.Close)
	d := websocket.Dialer{Subprotocols: []string{"v5.channel.k8s.io"}}
	c, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, results
}

func readStatus(t *testing.T, c *websocket.Conn) (*metav1.Status, int) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var st *metav1.Status
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("no close frame: %v", err)
			}
			return st, ce.Code
		}
		if len(data) > 0 && data[0] == ChanError {
			st = &metav1.Status{}
			if err := json.Unmarshal(data[1:], st); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRuntimeLegTimeouts: a runtime that never answers the dial, or
// accepts it but never creates the streams, costs the client at most the
// stream creation timeout, and it gets a status saying why.
func TestRuntimeLegTimeouts(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := DefaultConfig()
	cfg.StreamCreationTimeout = 300 * time.Millisecond
	cases := map[string]DialFunc{
		"dial never completes": func(ctx context.Context, _ []string) (net.Conn, string, error) {
			<-ctx.Done()
			return nil, "", ctx.Err()
		},
		"streams never created": func(ctx context.Context, _ []string) (net.Conn, string, error) {
			// A peer that reads nothing and answers nothing.
			a, b := net.Pipe()
			t.Cleanup(func() { b.Close() })
			return a, RuntimeProtocol, nil
		},
		"runtime refuses": func(ctx context.Context, _ []string) (net.Conn, string, error) {
			return nil, "", &upgrade.Error{StatusCode: 404, Body: "token not found"}
		},
		"runtime speaks an older protocol": func(ctx context.Context, _ []string) (net.Conn, string, error) {
			a, b := net.Pipe()
			b.Close()
			return a, "v3.channel.k8s.io", nil
		},
	}
	for name, dial := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			c, results := serveWith(t, cfg, dial)
			st, code := readStatus(t, c)
			if st == nil || st.Status != metav1.StatusFailure || st.Message == "" {
				t.Fatalf("status %+v", st)
			}
			if code != websocket.CloseNormalClosure {
				t.Errorf("close code %d", code)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v with a %v creation timeout", d, cfg.StreamCreationTimeout)
			}
			c.Close()
			if res := <-results; res.Err == nil {
				t.Error("result carries no error")
			}
			t.Logf("client saw: %s", st.Message)
		})
	}
}

func TestExitCode(t *testing.T) {
	for raw, want := range map[string]int{
		`{"metadata":{},"status":"Success"}`: 0,
		`{"metadata":{},"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"42"}]}}`: 42,
		`{"metadata":{},"status":"Failure","reason":"InternalError","code":500}`:                                                    -1,
	} {
		st, frame := parseRuntimeStatus([]byte(raw))
		if got := ExitCode(st); got != want {
			t.Errorf("%s: exit code %d, want %d", raw, got, want)
		}
		if frame[0] != ChanError || string(frame[1:]) != raw {
			t.Errorf("runtime status not forwarded verbatim: %q", frame)
		}
	}
	st, _ := parseRuntimeStatus(nil)
	if st.Code != 500 || !strings.Contains(st.Message, "runtime ended the session without reporting its exit status") {
		t.Errorf("empty error stream: %+v", st)
	}
}
