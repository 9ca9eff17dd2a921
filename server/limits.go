// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import "sync"

// Limits bound concurrent streaming sessions, so that one client cannot
// take every descriptor on the node (each session holds two: the client's
// connection and the runtime's). A request over a limit is refused with
// 429 and Retry-After before any CRI call; sessions already running are
// never cut by it. Zero means no limit.
//
// The limits are kept in descriptors, two a session: a reverse or UDP
// port-forward session also holds one for each listener and each
// connection or UDP socket it opens, so with those modes on a session can
// count as several; a connection the limit cannot cover is refused, the
// session goes on.
type Limits struct {
	MaxSessions       int // on the node
	MaxSessionsPerPod int // per pod (namespace/name)
}

// maxDescriptors caps DescriptorLimit: an unlimited RLIMIT_NOFILE would
// make the default session limit meaningless.
const maxDescriptors = 1 << 20

// DefaultMaxSessions is the node's session limit when none is set: a
// quarter of the descriptor limit in sessions (two descriptors each, so
// half the descriptors), leaving the rest to idle connections, CRI and
// files.
func DefaultMaxSessions() int { return max(8, DescriptorLimit()/4) }

// sessionDescriptors is what an admitted session counts for.
const sessionDescriptors = 2

// sessionSlots counts the descriptors of admitted requests, from
// admission to the handler's return.
type sessionSlots struct {
	limits Limits
	mu     sync.Mutex
	total  int
	perPod map[string]int
}

// acquire takes a session's slot for pod, or names the limit that is full.
func (s *sessionSlots) acquire(pod string) (release func(), full string) {
	if full = s.take(pod, sessionDescriptors); full != "" {
		return nil, full
	}
	var once sync.Once
	return func() { once.Do(func() { s.give(pod, sessionDescriptors) }) }, ""
}

// take counts n more descriptors for pod, or names the limit they would
// pass (nothing taken).
func (s *sessionSlots) take(pod string, n int) (full string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limits.MaxSessions > 0 && s.total+n > sessionDescriptors*s.limits.MaxSessions {
		return "node"
	}
	if s.limits.MaxSessionsPerPod > 0 && s.perPod[pod]+n > sessionDescriptors*s.limits.MaxSessionsPerPod {
		return "pod"
	}
	if s.perPod == nil {
		s.perPod = map[string]int{}
	}
	s.total += n
	s.perPod[pod] += n
	return ""
}

// give returns n descriptors take counted for pod.
func (s *sessionSlots) give(pod string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total -= n
	if s.perPod[pod] -= n; s.perPod[pod] <= 0 {
		delete(s.perPod, pod)
	}
}

// podDescriptors charges one pod's mode-session connections to the
// limits (portmux.Descriptors).
type podDescriptors struct {
	slots *sessionSlots
	pod   string
}

func (d podDescriptors) Take() bool { return d.slots.take(d.pod, 1) == "" }
func (d podDescriptors) Give()      { d.slots.give(d.pod, 1) }
