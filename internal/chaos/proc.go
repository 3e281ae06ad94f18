package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Proc is one process the harness started inside a host's namespace.
type Proc struct {
	// Name says what it is ("r1-redis", "d2-decide").
	Name string
	// Host is the host it runs on.
	Host string
	// Log is the file its stdout and stderr go to.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

// Procs starts processes in the harness's hosts and stops them: every one
// by the pid it started, never by name.
type Procs struct {
	net *Net
	dir string // log files

	mu   sync.Mutex
	list []*Proc
}

// Start runs bin with args inside host's namespace (ip netns exec, which
// execs bin in place: the pid is bin's), with env added to the harness's
// environment. The process gets SIGKILL if the harness dies first.
func (ps *Procs) Start(host, name string, env []string, bin string, args ...string) (*Proc, error) {
	ns := ps.net.Host(host).NS
	log := filepath.Join(ps.dir, name+".log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer f.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C reaches the harness, which stops
	// everything in order, not every child at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s on %s: %w", name, host, err)
	}
	p := &Proc{Name: name, Host: host, Log: log, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process ends.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit error once Done is closed.
func (p *Proc) Err() error { return p.err }

// Signal sends sig to the process (not its group).
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("%s: already exited", p.Name)
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}

// Stop sends sig, waits up to grace for the process to end, then kills it
// (SIGCONT first, in case it was paused).
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGCONT)
	_ = syscall.Kill(p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Kill ends the process at once, as a crash would, and waits for it.
func (p *Proc) Kill() { p.Stop(syscall.SIGKILL, 5*time.Second) }

// Tail returns the last n bytes of the process's log, for failure reports.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// StopAll stops every process still running, newest first: SIGTERM and up
// to 5s each, then SIGKILL.
func (ps *Procs) StopAll() {
	ps.mu.Lock()
	list := ps.list
	ps.list = nil
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range slices.Backward(list) {
		wg.Go(func() { p.Stop(syscall.SIGTERM, 5*time.Second) })
	}
	wg.Wait()
}

// forget drops stopped processes from the list.
func (ps *Procs) forget() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.list = slices.DeleteFunc(ps.list, (*Proc).Exited)
}
