// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

// Package audit records who ran what on the node: one JSON object per line
// per streaming-session event, in the spirit of the apiserver's audit log
// (audit.k8s.io/v1 Event field names where they fit) with what only the
// node sees: the route, the runtime side, bytes per channel, the exit code,
// and who ended the session and why.
//
// A session has two records: stage ResponseStarted when it is admitted (so a
// session that never ends is on record) and ResponseComplete when it ends. A
// request refused before it became a session (401, 403, a 4xx of the
// protocol decision, a CRI error) has one, ResponseComplete, with its status.
//
// Writing never blocks a session: records go through a bounded queue to one
// writer goroutine, in order, so a session's first record is written before
// its last; when the queue is full a record is dropped and counted.
//
// Who imports it: server, which writes the records, and the kubelet
// adapter and kubestream serve, which open the file.
//
// Reading order, each file before the files it uses: writer.go (Writer:
// the bounded queue and the one goroutine that writes it) and audit.go
// (Event, the record, and Sink). Nothing runs back up the order.
package audit

import (
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	APIVersion = "kubestream.io/v1alpha1"
	Kind       = "StreamingEvent"

	// Stages, as the apiserver names them.
	StageResponseStarted  = "ResponseStarted"
	StageResponseComplete = "ResponseComplete"
)

// Event is one record.
type Event struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// AuditID is the node's own ID for the session, the same on both of its
	// records; the apiserver's (when it sent one) is in Correlation.
	AuditID types.UID `json:"auditID"`
	Stage   string    `json:"stage"`
	// RequestURI and Verb are the kubelet API request's.
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	// User is who the node authenticated: through an apiserver, the
	// apiserver's kubelet client, not the person who typed the command.
	User      authnv1.UserInfo `json:"user"`
	SourceIPs []string         `json:"sourceIPs,omitempty"`
	UserAgent string           `json:"userAgent,omitempty"`
	ObjectRef ObjectReference  `json:"objectRef"`
	// ResponseStatus is the HTTP answer: 101 for a session, the error's
	// code for a refused request.
	ResponseStatus           *metav1.Status   `json:"responseStatus,omitempty"`
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
	StageTimestamp           metav1.MicroTime `json:"stageTimestamp"`

	// Correlation is every correlation header the request carried to the
	// node (Audit-Id, Kubectl-Session, Kubectl-Command, X-Forwarded-For),
	// by its canonical name.
	Correlation map[string]string `json:"correlation,omitempty"`

	Node     string `json:"node,omitempty"`
	Route    string `json:"route,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	// Command, TTY and Stdin describe an exec or attach; Ports a
	// port-forward (empty for the tunnel, whose ports come later, per stream).
	Command []string `json:"command,omitempty"`
	TTY     bool     `json:"tty,omitempty"`
	Stdin   bool     `json:"stdin,omitempty"`
	Ports   []int32  `json:"ports,omitempty"`
	// Connections are a reverse or UDP port-forward session's
	// connections or associations, opened and refused.
	Connections *Connections `json:"connections,omitempty"`

	// At the end: how long, how it ended, and the bytes by channel
	// (stdin, stdout, stderr, resize; tunnel-up, tunnel-down; …).
	DurationSeconds float64           `json:"durationSeconds,omitempty"`
	ExitCode        *int              `json:"exitCode,omitempty"`
	Bytes           map[string]uint64 `json:"bytes,omitempty"`
	// EndedBy is client, runtime or node; EndReason says why when the end
	// was not a normal one.
	EndedBy   string `json:"endedBy,omitempty"`
	EndReason string `json:"endReason,omitempty"`
	// Recording is the session's terminal recording (tty sessions, with
	// recordings on); RecordingError why it is missing or incomplete.
	Recording      string `json:"recording,omitempty"`
	RecordingError string `json:"recordingError,omitempty"`
}

// Connections counts a port-forward mode session's connections.
type Connections struct {
	Opened  int `json:"opened"`
	Refused int `json:"refused"`
}

// ObjectReference is the pod (and container) the request is about.
type ObjectReference struct {
	Resource    string    `json:"resource"`
	Namespace   string    `json:"namespace"`
	Name        string    `json:"name"`
	UID         types.UID `json:"uid,omitempty"`
	Subresource string    `json:"subresource"`
	Container   string    `json:"container,omitempty"`
}

// Sink takes records. Record must not block, and must not keep e after it
// returns unless it copies it: the caller may reuse it.
type Sink interface {
	Record(e *Event)
}

// Now is a record timestamp.
func Now() metav1.MicroTime { return metav1.NewMicroTime(time.Now()) }
