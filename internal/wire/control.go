// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// control handles one control frame of n payload bytes.
func (c *Conn) control(op, n int) error {
	r := &c.rd
	payload := r.ctl[:n]
	for got := 0; got < n; {
		m, err := c.readRaw(payload[got:])
		got += m
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	// Any frame from the peer proves it is alive.
	c.extendReadDeadline()
	switch op {
	case OpPing:
		err := c.writeControl(websocket.PongMessage, payload, time.Now().Add(c.cfg.WriteTimeout))
		if err != nil && !errors.Is(err, websocket.ErrCloseSent) && !IsTimeout(err) {
			return err
		}
	case OpClose:
		code, text := websocket.CloseNoStatusReceived, ""
		switch {
		case n == 1:
			return frameErrf("close frame with a 1-byte payload")
		case n >= 2:
			code = int(binary.BigEndian.Uint16(payload))
			text = string(payload[2:])
			if !validCloseCode(code) || !utf8.ValidString(text) {
				return frameErrf("invalid close frame (code %d)", code)
			}
		}
		// Answer as gorilla would; after our own close this is a no-op.
		reply := []byte{}
		if code != websocket.CloseNoStatusReceived {
			reply = websocket.FormatCloseMessage(code, "")
		}
		_ = c.writeControl(websocket.CloseMessage, reply, time.Now().Add(c.cfg.WriteTimeout)) // the peer closed: its reply is a courtesy
		return &websocket.CloseError{Code: code, Text: text}
	}
	return nil
}

func validCloseCode(code int) bool {
	switch code {
	case 1004, 1005, 1006, 1015:
		return false
	}
	return (code >= 1000 && code <= 1014) || (code >= 3000 && code <= 4999)
}
