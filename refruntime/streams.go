// Copyright 2026 The kubestream Authors.
// SPDX-License-Identifier: Apache-2.0

package refruntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"github.com/creack/pty"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// Exec runs cmd as a host process next to the container's main process.
// cri-streaming calls it once all streams exist and writes the returned
// exit status on the error stream.
func (r streamRuntime) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	c, err := r.container(containerID)
	if err != nil {
		return err
	}
	if !c.running() {
		return errNotRunning
	}
	if len(cmd) == 0 {
		return errors.New("empty command")
	}
	// The session's end (its client gone, the streaming server stopping)
	// ends the process, as containerd's exec does.
	p := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	p.Cancel = func() error { return syscall.Kill(-p.Process.Pid, syscall.SIGKILL) }
	p.Env = c.cmd.Env
	started := func() bool { return r.trackExec(p.Process) }
	defer r.untrackExec(p)
	var runErr error
	if tty {
		runErr = runTTY(p, in, out, resize, started)
	} else {
		runErr = runPipes(p, in, out, errw, started)
	}
	if runErr == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		return utilexec.CodeExitError{Err: runErr, Code: exitCode(runErr)}
	}
	return runErr
}

// trackExec records a started process so Stop can kill it; false means the
// runtime is stopping and the process was killed at once.
func (r streamRuntime) trackExec(p *os.Process) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		// The whole group, as Stop kills them: a child of the shell
		// (sleep in "sh -c 'echo; sleep'") would otherwise outlive it and
		// hold the output pipes, and Wait with them. The process can be
		// started, and even have written, before it is tracked.
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		_ = p.Kill()
		return false
	}
	r.execs[p] = struct{}{}
	return true
}

func (r streamRuntime) untrackExec(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	r.mu.Lock()
	delete(r.execs, c.Process)
	r.mu.Unlock()
}

func runPipes(p *exec.Cmd, in io.Reader, out, errw io.Writer, started func() bool) error {
	// nil writers go to /dev/null; os/exec handles an io.Writer with a
	// copying goroutine that Wait waits for, so no output is cut short.
	if out != nil {
		p.Stdout = out
	}
	if errw != nil {
		p.Stderr = errw
	}
	p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdin io.WriteCloser
	if in != nil {
		w, err := p.StdinPipe()
		if err != nil {
			return err
		}
		stdin = w
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("starting %q: %w", p.Path, err)
	}
	started()
	if stdin != nil {
		// Not waited for: it ends when the client half-closes stdin (the
		// process sees EOF) or cri-streaming closes the stream after we
		// return. Giving os/exec the reader instead would make Wait hang on a
		// client that never closes stdin.
		go func() {
			_, _ = io.Copy(stdin, in)
			stdin.Close()
		}()
	}
	return p.Wait()
}

func runTTY(p *exec.Cmd, in io.Reader, out io.Writer, resize <-chan remotecommandserver.TerminalSize, started func() bool) error {
	f, err := pty.Start(p)
	if err != nil {
		return fmt.Errorf("starting %q on a tty: %w", p.Path, err)
	}
	started()
	term := &ptyFile{f: f}
	defer term.Close()
	if resize != nil {
		// Ends when cri-streaming closes the channel with the session,
		// which may be after we return: hence ptyFile's lock.
		go func() {
			for size := range resize {
				term.Resize(size)
			}
		}()
	}
	if in != nil {
		go func() { _, _ = io.Copy(f, in) }()
	}
	if out == nil {
		out = io.Discard
	}
	// Reading the master ends with EIO once every holder of the slave has
	// exited; only then is all output read.
	_, _ = io.Copy(out, f)
	return p.Wait()
}

// Attach connects the client to the container's main process.
func (r streamRuntime) Attach(ctx context.Context, containerID string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	c, err := r.container(containerID)
	if err != nil {
		return err
	}
	if !c.running() {
		return errNotRunning
	}
	a := &attacher{gone: make(chan struct{})}
	if out != nil {
		a.out = out
	}
	if errw != nil {
		a.err = errw
	}
	c.mu.Lock()
	c.attachers[a] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.attachers, a)
		c.mu.Unlock()
	}()
	if resize != nil && c.tty != nil {
		go func() {
			for size := range resize {
				c.tty.Resize(size)
			}
		}()
	}
	stdinDone := make(chan struct{})
	if in != nil && c.stdin != nil {
		go func() {
			defer close(stdinDone)
			buf := make([]byte, 32*1024)
			for {
				n, err := in.Read(buf)
				if n > 0 {
					c.stdinMu.Lock()
					_, werr := c.stdin.Write(buf[:n])
					c.stdinMu.Unlock()
					if werr != nil {
						return
					}
				}
				if err != nil {
					// The client detached; the main process keeps its stdin.
					return
				}
			}
		}()
	}
	select {
	case <-c.exited:
		// All output is broadcast before exited is closed.
	case <-stdinDone:
	case <-a.gone:
	case <-ctx.Done():
	}
	return nil
}

// PortForward connects stream to port on the host's loopback, like a
// host-network pod.
func (r streamRuntime) PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error {
	r.mu.Lock()
	_, ok := r.sandboxes[podSandboxID]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("pod sandbox %q not found", podSandboxID)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("localhost", strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("dialing port %d in pod sandbox %s: %w", port, podSandboxID[:12], err)
	}
	defer conn.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The client finished sending: pass the half-close on.
		if _, err := io.Copy(conn, stream); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
				return
			}
		}
		conn.Close()
	}()
	_, err = io.Copy(stream, conn)
	// The pod's side is done: close both ends so the other copy ends too.
	stream.Close()
	conn.Close()
	wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("copying from port %d: %w", port, err)
	}
	return nil
}

// streamRuntime is the cri-streaming side of the runtime; its methods share
// names with the CRI ones, hence a type of its own.
type streamRuntime struct{ *Runtime }

// ptyFile is a pty master that a resize goroutine may outlive: resizes after
// Close are dropped instead of racing with it.
type ptyFile struct {
	mu     sync.Mutex
	f      *os.File
	closed bool
}

func (t *ptyFile) Resize(size remotecommandserver.TerminalSize) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		_ = pty.Setsize(t.f, &pty.Winsize{Rows: size.Height, Cols: size.Width})
	}
}

func (t *ptyFile) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	return t.f.Close()
}
