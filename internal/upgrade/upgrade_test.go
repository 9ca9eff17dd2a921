// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package upgrade

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"
)

// TestSwitchProtocols: the 101 reads back as one with exactly the fields
// given, and the WebSocket answer carries RFC 6455's example accept key.
func TestSwitchProtocols(t *testing.T) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := SwitchProtocols(w, WebSocketAnswer("dGhlIHNhbXBsZSBub25jZQ==", "v5.channel.k8s.io")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(&b), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" ||
		resp.Header.Get("Sec-WebSocket-Protocol") != "v5.channel.k8s.io" || resp.Header.Get("Upgrade") != "websocket" || len(resp.Header) != 4 {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	if b.Len() != 0 {
		t.Fatalf("%d bytes after the response", b.Len())
	}
	if h := WebSocketAnswer("k", ""); h["Sec-WebSocket-Protocol"] != nil {
		t.Fatalf("no protocol agreed, yet %v", h)
	}
}
