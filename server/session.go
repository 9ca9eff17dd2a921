// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/component-base/metrics"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/klog/v2"

	"github.com/kubestream/kubestream/audit"
	"github.com/kubestream/kubestream/recording"
	"github.com/kubestream/kubestream/translator"
)

// session is one streaming request from its route decision to its end. It
// owns every metric and audit record the request touches, through the
// methods below, in the order a request meets them: requests (count),
// refusals before the session runs (refuse, rejected), the running
// session (open), its end (finish: bytes, failures, duration), and direct
// offers (countOffer) and session limits (countLimited) on the way.
type session struct {
	s           *Server
	subresource string
	protocol    string
	route       Route
	start       time.Time
	// direct: the runtime is offered the client's WebSocket first.
	direct  bool
	release func() // gives back the session slot (limits.go)

	// ev is the session's audit record (nil without an audit sink):
	// written once when it starts running and once when it ends, or once
	// when it is refused before that.
	ev     *audit.Event
	rec    *recording.Recorder // a tty session's recording, if any
	active metrics.GaugeMetric // kubestream_streaming_sessions_active, once open
}

// begin starts tracking a request. It is counted once it is answered:
// under the route that runs it (open), or as rejected (refuse,
// rejected).
func (s *Server) begin(r *http.Request, sub string, d decision) *session {
	ss := &session{s: s, subresource: sub, protocol: d.protocol, start: time.Now(),
		direct: d.directCandidate, release: func() {}}
	if s.cfg.Audit != nil {
		ss.ev = s.auditEvent(r, sub, ss.start)
	}
	return ss
}

// record writes the audit record at stage, with the route as it stands.
func (ss *session) record(stage string, status *metav1.Status) {
	if ss.ev == nil {
		return
	}
	ss.ev.Stage, ss.ev.StageTimestamp, ss.ev.ResponseStatus = stage, audit.Now(), status
	ss.ev.Route, ss.ev.Protocol = string(ss.route), ss.protocol
	ss.s.cfg.Audit.Record(ss.ev)
}

// observer starts the session's terminal recording when one is due (a tty
// exec or attach, recordings on) and returns it as the observer of the
// translation or splice that carries it (nil for a recorder that did not
// start: an Observer holding a nil pointer would not be nil). A
// recording that cannot start is logged, counted and on the audit record;
// the session goes on.
func (ss *session) observer(r *http.Request) translator.Observer {
	rc := ss.s.cfg.Recording
	if rc == nil || ss.subresource == PortForward || r.FormValue(remotecommandserver.ExecTTYParam) != "1" {
		return nil
	}
	meta := recording.Meta{Node: ss.s.cfg.NodeName, Namespace: r.PathValue("namespace"), Pod: r.PathValue("pod"),
		Container: r.PathValue("container"), Subresource: ss.subresource}
	var command []string
	if ss.ev != nil {
		meta.AuditID, meta.User, command = string(ss.ev.AuditID), ss.ev.User.Username, ss.ev.Command
	} else {
		meta.AuditID = string(uuid.NewUUID())
		command = r.URL.Query()["command"]
	}
	rec, err := recording.Start(rc.Dir, meta, command, rc.Stdin)
	if err != nil {
		ss.recordingFailed(r, err)
		return nil
	}
	ss.rec = rec
	if ss.ev != nil {
		ss.ev.Recording = rec.Path()
	}
	return rec
}

// closeRecording finishes the recording; an incomplete one is said.
func (ss *session) closeRecording(r *http.Request) {
	if ss.rec == nil {
		return
	}
	if err := ss.rec.Close(); err != nil {
		ss.recordingFailed(r, err)
	}
}

func (ss *session) recordingFailed(r *http.Request, err error) {
	ss.s.cfg.Metrics.recordingFails.Inc()
	klog.FromContext(r.Context()).Info("Terminal recording failed; the session goes on", "err", err)
	if ss.ev != nil {
		ss.ev.RecordingError = err.Error()
	}
}

// count counts the request under route: the one that ran it, or
// RouteRejected for a request refused before any route ran.
func (ss *session) count(route Route) {
	proto := ss.protocol
	if proto == "" {
		proto = "none"
	}
	ss.s.cfg.Metrics.requests.WithLabelValues(ss.subresource, proto, string(route)).Inc()
}

// refuse answers with an HTTP error before the session runs (rejected).
func (ss *session) refuse(w http.ResponseWriter, r *http.Request, code int, err error) {
	ss.rejected(r, code, err)
	http.Error(w, err.Error(), code)
}

// rejected is a request answered, or left, before any route ran: counted
// as rejected with its code, logged and on record. The caller answers the
// client (refuse) or has already (gorilla refused the handshake, 400) or
// cannot (a connection taken over that failed before its 101).
func (ss *session) rejected(r *http.Request, code int, err error) {
	ss.route = RouteRejected // no route ran
	ss.count(RouteRejected)
	ss.s.cfg.Metrics.failures.WithLabelValues(ss.subresource, string(RouteRejected), strconv.Itoa(code)).Inc()
	klog.FromContext(r.Context()).V(2).Info("Streaming request failed", "subresource", ss.subresource, "route", ss.route, "code", code, "err", err)
	ss.record(audit.StageResponseComplete, httpStatus(code, err.Error()))
}

// open marks the session running on route: counted, active, and on
// record as admitted. The route is set here, once, from the legs that
// run it.
func (ss *session) open(route Route) {
	ss.route = route
	ss.count(ss.route)
	ss.record(audit.StageResponseStarted, httpStatus(http.StatusSwitchingProtocols, ""))
	ss.active = ss.s.cfg.Metrics.active.WithLabelValues(ss.subresource, string(ss.route))
	ss.active.Inc()
}

// finish is a running session's one wrap-up, whatever carried it: the
// recording closed, the bytes counted, how it ended on the audit record,
// an abnormal end counted as a failure and logged, then the session no
// longer active, its duration observed and its end on record.
func (ss *session) finish(r *http.Request, o outcome) {
	ss.closeRecording(r)
	for ch, n := range o.bytes {
		ss.carried(ch, n)
	}
	if ev := ss.ev; ev != nil {
		ev.Connections = o.conns
		// Who ended it: the carrier's word when it knows, else the status.
		switch {
		case o.endedBy != "":
			ev.EndedBy = o.endedBy
		case o.exited:
			ev.EndedBy = endedBy(o.status)
		}
		if o.exited {
			if code := translator.ExitCode(o.status); code >= 0 {
				ev.ExitCode = &code
			}
		}
		// Why: the carrier's error, else a failure status without an exit code.
		switch {
		case o.err != nil:
			ev.EndReason = o.err.Error()
		case o.exited && o.status != nil && o.status.Status != metav1.StatusSuccess && ev.ExitCode == nil:
			ev.EndReason = o.status.Message
		}
	}
	m, logger, took := ss.s.cfg.Metrics, klog.FromContext(r.Context()), time.Since(ss.start)
	if o.err != nil {
		m.failures.WithLabelValues(ss.subresource, string(ss.route), "session").Inc()
		logger.V(2).Info("Session ended abnormally", "route", ss.route, "endedBy", o.endedBy, "err", o.err)
	} else {
		logger.V(3).Info("Session ended", "route", ss.route, "exitCode", translator.ExitCode(o.status), "duration", took)
	}
	ss.active.Dec()
	m.duration.WithLabelValues(ss.subresource, string(ss.route)).Observe(took.Seconds())
	if ss.ev != nil {
		ss.ev.DurationSeconds = took.Seconds()
		ss.record(audit.StageResponseComplete, httpStatus(http.StatusSwitchingProtocols, ""))
	}
}

// carried adds n payload bytes on channel to kubestream_streaming_bytes_total
// and to the audit record.
func (ss *session) carried(channel string, n uint64) {
	if ss.ev != nil {
		if ss.ev.Bytes == nil {
			ss.ev.Bytes = map[string]uint64{}
		}
		ss.ev.Bytes[channel] += n
	}
	if n > 0 {
		ss.s.cfg.Metrics.bytes.WithLabelValues(ss.subresource, channel).Add(float64(n))
	}
}

// countOffer counts the runtime's answer to a direct offer.
func (ss *session) countOffer(accepted bool) {
	result := "refused"
	if accepted {
		result = "accepted"
	}
	ss.s.cfg.Metrics.probes.WithLabelValues(ss.subresource, ss.protocol, result).Inc()
}

// countLimited counts a request refused by a full session limit ("node", "pod").
func (ss *session) countLimited(limit string) {
	ss.s.cfg.Metrics.limited.WithLabelValues(limit).Inc()
}

// outcome is how a session ended, whichever translator function carried
// it: what session.finish turns into metrics, the audit record and a log
// line.
type outcome struct {
	bytes map[string]uint64 // payload bytes by channel
	// status is the command's end as the client was told it (nil: the
	// client left first) when the carrier saw it (exited).
	status *metav1.Status
	exited bool
	// endedBy names who ended the session when the carrier knows ("node":
	// idle timeout or shutdown; "runtime": its connection was lost).
	endedBy string
	err     error // why it ended abnormally; nil for a normal end
	// conns: a port-forward mode's connections, opened and refused.
	conns *audit.Connections
}

// auditEvent starts a record for r: who, from where, about what.
func (s *Server) auditEvent(r *http.Request, sub string, start time.Time) *audit.Event {
	e := &audit.Event{
		Kind: audit.Kind, APIVersion: audit.APIVersion,
		AuditID:    uuid.NewUUID(),
		RequestURI: r.URL.RequestURI(),
		Verb:       strings.ToLower(r.Method),
		UserAgent:  r.UserAgent(),
		ObjectRef: audit.ObjectReference{Resource: "pods", Namespace: r.PathValue("namespace"), Name: r.PathValue("pod"),
			UID: uidOf(r), Subresource: sub, Container: r.PathValue("container")},
		RequestReceivedTimestamp: metav1.NewMicroTime(start),
		Node:                     s.cfg.NodeName,
	}
	if u, ok := apirequest.UserFrom(r.Context()); ok {
		e.User = userInfo(u)
	}
	for _, ip := range utilnet.SourceIPs(r) {
		e.SourceIPs = append(e.SourceIPs, ip.String())
	}
	for _, h := range correlationHeaders {
		if v := strings.Join(r.Header.Values(h), ", "); v != "" {
			if e.Correlation == nil {
				e.Correlation = map[string]string{}
			}
			e.Correlation[h] = v
		}
	}
	return e
}
