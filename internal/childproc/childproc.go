//go:build linux

// Package childproc starts a child process that must die with slowstart (a
// parent-death signal, SysProcAttr.Pdeathsig) and must not die before.
//
// Linux sends the parent-death signal when the OS thread that forked the child
// ends, not when the process does; and the Go runtime ends any thread a
// goroutine leaves locked, which is how code that enters another network
// namespace discards its thread (internal/netnsexec). A child forked by an
// ordinary goroutine is therefore killed whenever that thread is later picked up
// by such a goroutine: Chromium was killed half a second into a page load that
// way. Start forks on a thread of its own, kept locked until the child exits,
// so nothing else ever runs there.
package childproc

import (
	"os/exec"
	"runtime"

	"github.com/slowstart/slowstart/internal/netnsexec"
)

// Process is a child started by Start.
type Process struct {
	Cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start starts cmd inside the network namespace whose file is netnsPath (as
// under /run/netns; the current one when empty), from an OS thread that stays
// locked, and in that namespace, until the child exits. Wait for it with Wait or
// Exited, never with cmd.Wait.
func Start(cmd *exec.Cmd, netnsPath string) (*Process, error) {
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after the child
		// has exited, and so cannot carry a namespace it entered to other code.
		if netnsPath != "" {
			if err := netnsexec.Enter(netnsPath); err != nil {
				started <- err
				return
			}
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Exited is closed when the child has exited and been waited for.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Wait waits for the child to exit and returns what cmd.Wait returned.
func (p *Process) Wait() error {
	<-p.exited
	return p.err
}

// Err is what cmd.Wait returned; valid once Exited is closed.
func (p *Process) Err() error { return p.err }
