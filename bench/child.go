// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// child is a helper process of the orchestrator.
type child struct {
	cmd   *exec.Cmd
	value string // what it printed after READY
}

func startChild(args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
			return &child{cmd: cmd, value: v}, nil
		}
	}
	_ = cmd.Process.Kill()
	return nil, fmt.Errorf("child %v did not start", args)
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// started is what an orchestrator started, stopped in reverse when it
// ends: first what runs in this process (servers, relays, CRI clients),
// the last started first, then the child processes, the last started
// first.
type started struct {
	closers  []func()
	children []*child
}

// child starts a child process and keeps it to stop.
func (s *started) child(args ...string) (*child, error) {
	c, err := startChild(args...)
	if err == nil {
		s.children = append(s.children, c)
	}
	return c, err
}

// onStop keeps f, which stops something in this process.
func (s *started) onStop(f func()) { s.closers = append(s.closers, f) }

// stop stops everything started.
func (s *started) stop() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	for i := len(s.children) - 1; i >= 0; i-- {
		s.children[i].stop()
	}
}

// cpu returns the process's user+system CPU time so far.
func (c *child) cpu() time.Duration {
	if c == nil {
		return 0
	}
	return procCPU(c.cmd.Process.Pid)
}

// procCPU reads a process's user+system CPU time from /proc.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// rssKB reads VmRSS.
func (c *child) rssKB() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return parseKB(line)
		}
	}
	return 0
}

func (p *path) stats() (procStats, int64, error) {
	var st procStats
	resp, err := http.Get(p.base + "/debug/bench-stats")
	if err != nil {
		return st, 0, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, p.proc.rssKB(), err
}
