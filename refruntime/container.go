// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package refruntime

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"k8s.io/klog/v2"
)

// container is a main process whose output fans out to attached clients.
type container struct {
	id      string
	name    string
	sandbox *sandbox
	spec    ContainerSpec
	created int64

	cmd    *exec.Cmd
	stdin  io.WriteCloser // nil without stdin
	tty    *ptyFile       // the pty master with a tty
	exited chan struct{}  // closed when the main process is reaped

	mu        sync.Mutex
	exitCode  int32
	finished  int64
	attachers map[*attacher]struct{}
	stdinMu   sync.Mutex // one attacher writes a chunk at a time
}

type attacher struct {
	out, err io.Writer
	gone     chan struct{} // closed when a write to the client failed
	once     sync.Once
}

func startContainer(logger klog.Logger, sb *sandbox, cs ContainerSpec) (*container, error) {
	c := &container{
		id:        newID(),
		name:      cs.Name,
		sandbox:   sb,
		spec:      cs,
		created:   time.Now().UnixNano(),
		exited:    make(chan struct{}),
		attachers: map[*attacher]struct{}{},
	}
	c.cmd = exec.Command(cs.Command[0], cs.Command[1:]...)
	c.cmd.Env = append(os.Environ(), "KUBESTREAM_POD="+sb.spec.Namespace+"/"+sb.spec.Name, "KUBESTREAM_CONTAINER="+cs.Name)
	var outputs []io.Reader
	if cs.TTY {
		f, err := pty.Start(c.cmd)
		if err != nil {
			return nil, fmt.Errorf("starting container %s/%s: %w", sb.spec.Name, cs.Name, err)
		}
		c.tty = &ptyFile{f: f}
		if cs.Stdin {
			c.stdin = f
		}
		outputs = []io.Reader{f}
	} else {
		if cs.Stdin {
			w, err := c.cmd.StdinPipe()
			if err != nil {
				return nil, err
			}
			c.stdin = w
		}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stderr, err := c.cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		// A new process group, so kill reaches the whole container.
		c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting container %s/%s: %w", sb.spec.Name, cs.Name, err)
		}
		outputs = []io.Reader{stdout, stderr}
	}
	var wg sync.WaitGroup
	for i, r := range outputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.broadcast(r, i == 1)
		}()
	}
	go func() {
		// Output readers end on EOF, which os/exec needs before Wait.
		wg.Wait()
		err := c.cmd.Wait()
		c.mu.Lock()
		c.exitCode = int32(exitCode(err))
		c.finished = time.Now().UnixNano()
		c.mu.Unlock()
		if c.tty != nil {
			c.tty.Close()
		}
		logger.V(2).Info("Container exited", "pod", sb.spec.Name, "container", cs.Name, "exitCode", c.exitCode)
		close(c.exited)
	}()
	return c, nil
}

// broadcast copies one output of the main process to every attacher. A
// slow attacher slows the container, as a blocked terminal would: the
// reference runtime keeps no queue.
func (c *container) broadcast(r io.Reader, isErr bool) {
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.mu.Lock()
			for a := range c.attachers {
				w := a.out
				if isErr && a.err != nil {
					w = a.err
				}
				if w == nil {
					continue
				}
				if _, werr := w.Write(buf[:n]); werr != nil {
					a.once.Do(func() { close(a.gone) })
					delete(c.attachers, a)
				}
			}
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (c *container) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

func (c *container) kill() {
	if c.cmd.Process == nil {
		return
	}
	if c.tty == nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = c.cmd.Process.Kill()
}

// exitCode turns a Wait error into a shell-style exit code.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 255
}
