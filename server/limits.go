package server

import "sync"

// Limits bound concurrent streaming sessions, so that one client cannot
// take every descriptor on the node (each session holds two: the client's
// connection and the runtime's). A request over a limit is refused with
// 429 and Retry-After before any CRI call; sessions already running are
// never cut by it. Zero means no limit.
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

// sessionSlots counts admitted requests, from admission to the handler's
// return.
type sessionSlots struct {
	limits Limits
	mu     sync.Mutex
	total  int
	perPod map[string]int
}

// acquire takes a slot for pod, or names the limit that is full.
func (s *sessionSlots) acquire(pod string) (release func(), full string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limits.MaxSessions > 0 && s.total >= s.limits.MaxSessions {
		return nil, "node"
	}
	if s.limits.MaxSessionsPerPod > 0 && s.perPod[pod] >= s.limits.MaxSessionsPerPod {
		return nil, "pod"
	}
	if s.perPod == nil {
		s.perPod = map[string]int{}
	}
	s.total++
	s.perPod[pod]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.perPod[pod]--; s.perPod[pod] == 0 {
				delete(s.perPod, pod)
			}
		})
	}, ""
}
