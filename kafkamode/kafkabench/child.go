package kafkabench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Child is a worker process the benchmark started.
type Child struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

// StartChild starts name with args, its output kept for Output.
func StartChild(name string, args ...string) (*Child, error) {
	return StartCmd(exec.Command(name, args...))
}

// StartCmd starts cmd as a Child. Its output is kept for Output unless
// the caller set cmd.Stdout or cmd.Stderr.
func StartCmd(cmd *exec.Cmd) (*Child, error) {
	ch := &Child{cmd: cmd, done: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = ch
	}
	if cmd.Stderr == nil {
		cmd.Stderr = ch
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); close(ch.done) }()
	return ch, nil
}

// Write keeps the process's output.
func (ch *Child) Write(p []byte) (int, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.out.Write(p)
}

// Output is what the process wrote so far.
func (ch *Child) Output() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.out.String()
}

// Done is closed when the process has exited.
func (ch *Child) Done() <-chan struct{} { return ch.done }

// PeakRSS is VmHWM of the process in MiB.
func (ch *Child) PeakRSS() float64 { return ch.StatusMiB("VmHWM:") }

// StatusMiB is a kB field of the process's /proc status (such as
// "VmRSS:") in MiB; 0 when it cannot be read.
func (ch *Child) StatusMiB(field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ch.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// Stop sends sig and waits for the process to exit; after 30 s it kills
// it.
func (ch *Child) Stop(sig syscall.Signal) {
	_ = ch.cmd.Process.Signal(sig)
	select {
	case <-ch.done:
	case <-time.After(30 * time.Second):
		_ = ch.cmd.Process.Kill()
		<-ch.done
	}
}
