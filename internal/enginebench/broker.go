package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

// brokerProc is a real broker, `hourglass serve`, run as a child process on
// a loopback port and a data directory, so that its resident set can be
// read from /proc and it can be killed with SIGKILL.
type brokerProc struct {
	bin, dir, addr string
	extra          []string
	cmd            *exec.Cmd
	exited         chan struct{}
	api            *client.Client
}

// newBrokerProc picks a free loopback port for a broker on dir; start
// runs it. The same port is reused by every restart.
func newBrokerProc(bin, dir string, extra ...string) (*brokerProc, error) {
	if bin == "" {
		return nil, fmt.Errorf("this scenario runs a real broker: pass -binary PATH of a built hourglass")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	return &brokerProc{bin: bin, dir: dir, addr: addr, extra: extra,
		api: client.New("http://"+addr, client.WithRetries(0))}, nil
}

// start runs the broker and waits until its health check answers; it
// returns how long that took (process start, recovery, listen).
func (b *brokerProc) start() (time.Duration, error) {
	args := append([]string{"serve", "--data-dir", b.dir, "--listen", b.addr, "--log-level", "warn"}, b.extra...)
	b.cmd = exec.Command(b.bin, args...)
	b.cmd.Stdout, b.cmd.Stderr = os.Stderr, os.Stderr
	t := time.Now()
	if err := b.cmd.Start(); err != nil {
		return 0, err
	}
	b.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(b.cmd, b.exited)
	for deadline := t.Add(5 * time.Minute); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(bg, time.Second)
		err := b.api.Health(ctx)
		cancel()
		if err == nil {
			return time.Since(t), nil
		}
		select {
		case <-b.exited:
			return 0, fmt.Errorf("the broker exited before it answered")
		case <-time.After(5 * time.Millisecond):
		}
	}
	b.kill()
	return 0, fmt.Errorf("the broker did not answer within 5 minutes")
}

// kill sends SIGKILL and waits until the process is gone.
func (b *brokerProc) kill() {
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
	b.cmd = nil
}

// stop asks for a graceful shutdown (SIGINT: final checkpoint) and waits.
func (b *brokerProc) stop() {
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(os.Interrupt)
	select {
	case <-b.exited:
		b.cmd = nil
	case <-time.After(2 * time.Minute):
		b.kill()
	}
}

// rss is the broker's VmRSS in bytes.
func (b *brokerProc) rss() int64 {
	return procField("/proc/"+strconv.Itoa(b.cmd.Process.Pid)+"/status", "VmRSS") * 1024
}

// startBrokerWithTopic starts a broker on dir (c.binary) and creates topic.
func startBrokerWithTopic(c config, dir, topic string) (*brokerProc, error) {
	b, err := newBrokerProc(c.binary, dir)
	if err != nil {
		return nil, err
	}
	if _, err := b.start(); err != nil {
		return nil, err
	}
	if _, err := b.api.CreateTopic(bg, topic, client.TopicConfig{}); err != nil {
		b.kill()
		return nil, err
	}
	return b, nil
}
