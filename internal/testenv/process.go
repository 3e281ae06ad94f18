package testenv

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a server a test runs and may stop and start again, as a
// crash, an operator or a failover would, always by pid. The zero value is
// stopped.
type Process struct {
	mu  sync.Mutex
	cmd *exec.Cmd // nil while stopped
}

// Start starts cmd, its output appended to the file log (when not "").
func (p *Process) Start(tb testing.TB, cmd *exec.Cmd, log string) {
	tb.Helper()
	if log != "" {
		f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			tb.Fatalf("testenv: %v", err)
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("testenv: start %s: %v", cmd.Path, err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
}

// Signal sends sig to the process; it is a no-op when it is stopped.
func (p *Process) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("testenv: %v to %s: %v", sig, p.cmd.Path, err)
	}
}

// Stop sends sig to pid (the process's own when 0: a child it started
// may be the server) and waits up to grace for the process to exit, then
// kills both. It is a no-op when the process is stopped.
func (p *Process) Stop(sig syscall.Signal, pid int, grace time.Duration) {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if pid == 0 {
		pid = cmd.Process.Pid
	}
	_ = syscall.Kill(pid, sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		<-done
	}
}
