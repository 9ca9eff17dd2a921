// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package streaming

import (
	"container/list"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	upstream "k8s.io/cri-streaming/pkg/streaming"
)

// The rules of cri-streaming's request cache, which a runtime's users rely
// on: a URL is good once, for a minute, and at most 1000 wait at a time.
const (
	tokenTTL    = time.Minute
	maxInFlight = 1000
	tokenLen    = 8
)

// tokens holds the requests whose URLs were issued and not yet used, oldest
// at the back.
type tokens struct {
	mu  sync.Mutex
	now func() time.Time
	ll  *list.List
	m   map[string]*list.Element
}

type tokenEntry struct {
	token   string
	req     any
	expires time.Time
}

func newTokens() *tokens {
	return &tokens{now: time.Now, ll: list.New(), m: map[string]*list.Element{}}
}

func (t *tokens) insert(req any) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for e := t.ll.Back(); e != nil && now.After(e.Value.(*tokenEntry).expires); e = t.ll.Back() {
		t.ll.Remove(e)
		delete(t.m, e.Value.(*tokenEntry).token)
	}
	if t.ll.Len() >= maxInFlight {
		return "", upstream.NewErrorTooManyInFlight()
	}
	raw := make([]byte, tokenLen*6/8)
	for range 10 {
		if _, err := rand.Read(raw); err != nil {
			return "", err
		}
		token := base64.RawURLEncoding.EncodeToString(raw)
		if _, taken := t.m[token]; taken {
			continue
		}
		t.m[token] = t.ll.PushFront(&tokenEntry{token: token, req: req, expires: now.Add(tokenTTL)})
		return token, nil
	}
	return "", fmt.Errorf("failed to generate a unique streaming token")
}

// consume returns the request a token was issued for, once; nil for an
// unknown, spent or expired token.
func (t *tokens) consume(token string) any {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[token]
	if !ok {
		return nil
	}
	t.ll.Remove(e)
	delete(t.m, token)
	if te := e.Value.(*tokenEntry); !t.now().After(te.expires) {
		return te.req
	}
	return nil
}
