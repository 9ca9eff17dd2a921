// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package refruntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePod(t *testing.T) {
	cases := []struct {
		flags   []string
		wantErr string
		check   func([]PodSpec) bool
	}{
		{[]string{"default/web/app=/bin/sh -c sleep"}, "", func(p []PodSpec) bool {
			return len(p) == 1 && p[0].Containers[0].Command[0] == "/bin/sh" && len(p[0].Containers[0].Command) == 3 && p[0].Containers[0].Stdin
		}},
		{[]string{"ns/p/a=sleep 1", "ns/p/b=sleep 2"}, "", func(p []PodSpec) bool {
			return len(p) == 1 && len(p[0].Containers) == 2
		}},
		{[]string{"ns/p/a=sleep 1", "ns/p/a=sleep 2"}, "defined twice", nil},
		{[]string{"ns/p=sleep"}, "namespace/pod/container", nil},
		{[]string{"ns/p/a="}, "namespace/pod/container", nil},
		{[]string{"ns/p/a"}, "namespace/pod/container", nil},
	}
	for _, tc := range cases {
		var pods []PodSpec
		var err error
		for _, f := range tc.flags {
			if pods, err = ParsePod(pods, f); err != nil {
				break
			}
		}
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want %q", tc.flags, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !tc.check(pods)):
			t.Errorf("%v: %v %+v", tc.flags, err, pods)
		}
	}
}

func TestLoadPods(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		json, wantErr string
	}{
		"valid":             {`[{"namespace":"a","name":"b","containers":[{"name":"c","command":["sh"],"tty":true}]}]`, ""},
		"no command":        {`[{"namespace":"a","name":"b","containers":[{"name":"c"}]}]`, "needs a name and a command"},
		"duplicate pod":     {`[{"namespace":"a","name":"b"},{"namespace":"a","name":"b"}]`, "defined twice"},
		"missing name":      {`[{"namespace":"a"}]`, "namespace and a name"},
		"not a list":        {`{"namespace":"a"}`, "parsing"},
		"unknown fields ok": {`[{"namespace":"a","name":"b","extra":1}]`, ""},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		_ = os.WriteFile(p, []byte(tc.json), 0o600)
		_, err := LoadPods(p)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want %q", name, err, tc.wantErr)
		}
	}
}
