// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubestream/kubestream/server"
	"github.com/kubestream/kubestream/translator"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubestream.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const header = "apiVersion: kubestream.io/v1alpha1\nkind: StreamingConfiguration\n"

func TestLoadApplies(t *testing.T) {
	c, err := Load(write(t, header+`runtimeWebSocketStreaming: never
runtimeWebSocketRecheckPeriod: 1m
maxStreamingSessions: 40
maxStreamingSessionsPerPod: 4
streamCreationTimeout: 5s
webSocketPingPeriod: 7s
webSocketPongTimeout: 9s
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Translator: translator.DefaultConfig(), Direct: server.DirectConfig{Mode: server.DirectAuto}}
	c.Apply(&cfg)
	if cfg.Direct.Mode != server.DirectNever || cfg.Direct.Recheck != time.Minute ||
		cfg.Limits != (server.Limits{MaxSessions: 40, MaxSessionsPerPod: 4}) ||
		cfg.Translator.StreamCreationTimeout != 5*time.Second || cfg.Translator.PingPeriod != 7*time.Second ||
		cfg.Translator.PongTimeout != 9*time.Second {
		t.Fatalf("applied: %+v", cfg)
	}
	// What the file leaves out keeps its value.
	empty, err := Load(write(t, header))
	if err != nil {
		t.Fatal(err)
	}
	before := server.Config{Translator: translator.DefaultConfig(), Direct: server.DirectConfig{Mode: server.DirectAuto, Recheck: time.Hour}}
	after := before
	empty.Apply(&after)
	if after.Direct != before.Direct || after.Translator != before.Translator || after.Limits != before.Limits {
		t.Fatalf("an empty file changed %+v into %+v", before, after)
	}
	if c, err := Load(""); err != nil || c.RuntimeWebSocketStreaming != "" {
		t.Fatalf("no file: %+v %v", c, err)
	}
}

// TestLoadNamesTheField: a bad file is refused with the field it is about,
// as the kubelet refuses its own.
func TestLoadNamesTheField(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{header + "runtimeWebSocketStreaming: sometimes\n", `runtimeWebSocketStreaming: Unsupported value: "sometimes"`},
		{header + "maxStreamingSessions: -1\n", "maxStreamingSessions: Invalid value: -1"},
		{header + "webSocketPingPeriod: 0s\n", "webSocketPingPeriod: Invalid value"},
		{header + "streamCreationTimeout: soon\n", "streamCreationTimeout"},
		{header + "maxSessions: 3\n", `unknown field "maxSessions"`},
		{"apiVersion: kubestream.io/v1\nkind: StreamingConfiguration\n", `apiVersion: Unsupported value: "kubestream.io/v1"`},
		{"apiVersion: kubestream.io/v1alpha1\nkind: KubeletConfiguration\n", `kind: Unsupported value: "KubeletConfiguration"`},
	} {
		_, err := Load(write(t, tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.body, err, tc.want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		rest []string
		path string
	}{
		{[]string{"--config", "k.yaml", "--kubestream-config", "ks.yaml", "--v=2"}, []string{"--config", "k.yaml", "--v=2"}, "ks.yaml"},
		{[]string{"--kubestream-config=ks.yaml"}, nil, "ks.yaml"},
		{[]string{"--v=2"}, []string{"--v=2"}, ""},
	} {
		rest, path, err := SplitArgs(tc.in)
		if err != nil || !slices.Equal(rest, tc.rest) || path != tc.path {
			t.Errorf("%q: %q %q %v", tc.in, rest, path, err)
		}
	}
	if _, _, err := SplitArgs([]string{"--kubestream-config"}); err == nil {
		t.Error("a flag without its file was taken")
	}
}

// The kind cluster's kubestream workers turn both port-forward modes on
// through their file; a file without them leaves both off.
func TestKindWorkersFileTurnsTheModesOn(t *testing.T) {
	c, err := Load("../hack/kind/flavours/kubestream.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{PortForwardModes: server.DefaultPortForwardModes()}
	if cfg.PortForwardModes.Reverse != server.ModeOff || cfg.PortForwardModes.UDP != server.ModeOff {
		t.Fatalf("defaults: %+v, want both off", cfg.PortForwardModes)
	}
	c.Apply(&cfg)
	if cfg.PortForwardModes.Reverse != server.ModeOn || cfg.PortForwardModes.UDP != server.ModeOn {
		t.Fatalf("after the kind workers' file: %+v, want both on", cfg.PortForwardModes)
	}
	if _, err := decodeOnly("reversePortForward: sometimes"); err == nil {
		t.Fatal("a mode access no node knows was accepted")
	}
}

func decodeOnly(field string) (*StreamingConfiguration, error) {
	path := filepath.Join(os.TempDir(), "kubestream-config-test.yaml")
	defer os.Remove(path)
	if err := os.WriteFile(path, []byte("apiVersion: kubestream.io/v1alpha1\nkind: StreamingConfiguration\n"+field+"\n"), 0o600); err != nil {
		return nil, err
	}
	return Load(path)
}
