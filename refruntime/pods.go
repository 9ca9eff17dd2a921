// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package refruntime

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// PodSpec is a pod of the reference runtime. Its containers are plain host
// processes; port-forward reaches the host's loopback, like a host-network pod.
type PodSpec struct {
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	UID        string          `json:"uid,omitempty"`
	Containers []ContainerSpec `json:"containers"`
}

// ContainerSpec is a container's main process.
type ContainerSpec struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	// Stdin keeps the main process's stdin open for attach.
	Stdin bool `json:"stdin,omitempty"`
	// TTY runs the main process on a pty.
	TTY bool `json:"tty,omitempty"`
}

// DefaultPods is pod default/demo with container app: /bin/sh reading its
// stdin, so attach has something to talk to.
func DefaultPods() []PodSpec {
	return []PodSpec{{
		Namespace: "default",
		Name:      "demo",
		UID:       "8f0d3c2e-demo-4b1a-9c57-000000000001",
		Containers: []ContainerSpec{{
			Name:    "app",
			Command: []string{"/bin/sh"},
			Stdin:   true,
		}},
	}}
}

// LoadPods reads a JSON list of PodSpec.
func LoadPods(path string) ([]PodSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading reference pods: %w", err)
	}
	var pods []PodSpec
	if err := json.Unmarshal(b, &pods); err != nil {
		return nil, fmt.Errorf("parsing reference pods %s: %w", path, err)
	}
	return pods, validate(pods)
}

// ParsePod reads the flag form namespace/pod/container=command args...
// (stdin open, no tty); repeated flags for one pod add containers.
func ParsePod(pods []PodSpec, s string) ([]PodSpec, error) {
	ref, cmd, ok := strings.Cut(s, "=")
	parts := strings.Split(ref, "/")
	if !ok || len(parts) != 3 || strings.TrimSpace(cmd) == "" {
		return nil, fmt.Errorf("pod %q: want namespace/pod/container=command", s)
	}
	c := ContainerSpec{Name: parts[2], Command: strings.Fields(cmd), Stdin: true}
	for i := range pods {
		if pods[i].Namespace == parts[0] && pods[i].Name == parts[1] {
			pods[i].Containers = append(pods[i].Containers, c)
			return pods, validate(pods)
		}
	}
	pods = append(pods, PodSpec{Namespace: parts[0], Name: parts[1], Containers: []ContainerSpec{c}})
	return pods, validate(pods)
}

func validate(pods []PodSpec) error {
	seen := map[string]bool{}
	for _, p := range pods {
		if p.Namespace == "" || p.Name == "" {
			return fmt.Errorf("reference pod needs a namespace and a name: %+v", p)
		}
		key := p.Namespace + "/" + p.Name
		if seen[key] {
			return fmt.Errorf("reference pod %s defined twice", key)
		}
		seen[key] = true
		names := map[string]bool{}
		for _, c := range p.Containers {
			if c.Name == "" || len(c.Command) == 0 {
				return fmt.Errorf("container in pod %s needs a name and a command", key)
			}
			if names[c.Name] {
				return fmt.Errorf("container %s defined twice in pod %s", c.Name, key)
			}
			names[c.Name] = true
		}
	}
	return nil
}
