// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Command rawclient is a conformance client that shares no code with
// client-go or gorilla: it performs the WebSocket handshake by hand and
// writes the frames it is given byte for byte, so a server can be tried
// with exactly what a hostile or broken client would send.
//
//	go run ./e2e/rawclient -url https://127.0.0.1:10250/exec/default/demo/app?command=cat\&input=1\&output=1 \
//	  -cert c.crt -key c.key -ca ca.crt -protocol v5.channel.k8s.io \
//	  -send 82850000000000686921 -send 8202 0078
//
// Each -send is hex (spaces allowed) written as is: no masking or framing is
// added, so "82 85 00000000 00686921" is a masked v5 stdin message "hi"
// (mask key 0) and "82 02 00 78" an unmasked frame. It prints the 101 (or
// the refusal), then every frame the server sends as "opcode payload-hex",
// and exits 0 when the server sent a close frame (printing its code), 1
// otherwise.
package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

type sends []string

func (s *sends) String() string     { return strings.Join(*s, ",") }
func (s *sends) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var toSend sends
	rawURL := flag.String("url", "", "https:// (or http://) URL of the streaming endpoint")
	cert := flag.String("cert", "", "client certificate")
	key := flag.String("key", "", "client key")
	ca := flag.String("ca", "", "CA bundle for the server")
	protocol := flag.String("protocol", "v5.channel.k8s.io", "Sec-WebSocket-Protocol to offer")
	wait := flag.Duration("wait", 10*time.Second, "how long to wait for the server's close")
	flag.Var(&toSend, "send", "hex bytes to write after the handshake (repeatable)")
	flag.Parse()
	code, err := run(*rawURL, *cert, *key, *ca, *protocol, toSend, *wait, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawclient:", err)
		os.Exit(1)
	}
	fmt.Printf("close %d\n", code)
}

func run(rawURL, cert, key, ca, protocol string, toSend []string, wait time.Duration, out io.Writer) (int, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, err
	}
	conn, err := dial(u, cert, key, ca)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wait))
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	challenge := base64.StdEncoding.EncodeToString(nonce[:])
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
		u.RequestURI(), u.Host, challenge, protocol)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, fmt.Errorf("reading the handshake answer: %w", err)
	}
	fmt.Fprintf(out, "%s\n", resp.Status)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("no upgrade: %s", strings.TrimSpace(string(body)))
	}
	h := sha1.Sum([]byte(challenge + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")) // RFC 6455 §1.3
	if resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(h[:]) {
		return 0, errors.New("wrong Sec-WebSocket-Accept")
	}
	for _, s := range toSend {
		b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		if err != nil {
			return 0, fmt.Errorf("-send %q: %w", s, err)
		}
		if _, err := conn.Write(b); err != nil {
			return 0, err
		}
	}
	// Server frames are unmasked: opcode, length, payload.
	for {
		var hdr [2]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return 0, fmt.Errorf("connection ended without a close frame: %w", err)
		}
		n := uint64(hdr[1] & 0x7f)
		switch n {
		case 126:
			var l [2]byte
			if _, err := io.ReadFull(br, l[:]); err != nil {
				return 0, err
			}
			n = uint64(binary.BigEndian.Uint16(l[:]))
		case 127:
			var l [8]byte
			if _, err := io.ReadFull(br, l[:]); err != nil {
				return 0, err
			}
			n = binary.BigEndian.Uint64(l[:])
		}
		if n > 1<<20 {
			return 0, fmt.Errorf("server frame of %d bytes", n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			return 0, err
		}
		op := hdr[0] & 0x0f
		fmt.Fprintf(out, "%d %x\n", op, payload)
		if op == 8 {
			if len(payload) < 2 {
				return 1005, nil
			}
			return int(binary.BigEndian.Uint16(payload)), nil
		}
	}
}

func dial(u *url.URL, cert, key, ca string) (net.Conn, error) {
	if u.Scheme == "http" {
		return net.DialTimeout("tcp", u.Host, 10*time.Second)
	}
	cfg := &tls.Config{NextProtos: []string{"http/1.1"}}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AppendCertsFromPEM(pem)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", u.Host, cfg)
}
