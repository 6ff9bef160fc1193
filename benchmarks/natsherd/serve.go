package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// syncPolicy applies the --sync flag to the server's options and returns
// how the report names the policy. "default" keeps nats-server's own
// setting (a background fsync every 2 minutes); "always" is the
// configuration file's `sync_interval: always` (the file store fsyncs
// after each write it flushes); anything else is a Go duration for the
// background fsync's period.
func syncPolicy(opts *server.Options, sync string) (string, error) {
	switch sync {
	case "default":
		return "fsync every 2m (nats-server default)", nil
	case "always":
		opts.SyncAlways = true
		return "fsync after every write (sync_interval: always)", nil
	}
	d, err := time.ParseDuration(sync)
	if err != nil || d <= 0 {
		return "", fmt.Errorf("--sync %q: want default, always or a positive duration", sync)
	}
	opts.SyncInterval = d
	return "fsync every " + d.String(), nil
}

// serveMain runs `natsherd serve`: an embedded nats-server with JetStream
// on file storage, in a process of its own as `hourglass serve` is, so
// that the broker and the bench's clients do not share a Go runtime. It
// prints the client URL on a line when it accepts connections and runs
// until SIGTERM or until its stdin closes (the parent bench ended).
func serveMain(args []string) int {
	fs := flag.NewFlagSet("natsherd serve", flag.ContinueOnError)
	storeDir := fs.String("store-dir", "", "JetStream `directory` (required)")
	sync := fs.String("sync", "default", "fsync policy: default, always, or a `duration`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *storeDir == "" {
		fmt.Fprintln(os.Stderr, "natsherd serve: --store-dir is required")
		return 2
	}
	opts := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: *storeDir,
		NoSigs: true, NoLog: true,
	}
	if _, err := syncPolicy(opts, *sync); err != nil {
		fmt.Fprintln(os.Stderr, "natsherd serve:", err)
		return 2
	}
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsherd serve:", err)
		return 1
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		fmt.Fprintln(os.Stderr, "natsherd serve: the server did not become ready within 30 s")
		s.Shutdown()
		return 1
	}
	fmt.Println(s.ClientURL())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-stop:
	case <-eof:
	}
	s.Shutdown()
	s.WaitForShutdown()
	return 0
}

// child is a `natsherd serve` process started by the bench.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startServer starts `natsherd serve` on storeDir with the sync policy
// and returns it with its client URL once it accepts connections.
func startServer(storeDir, sync string) (*child, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self, "serve", "--store-dir", storeDir, "--sync", sync)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	c := &child{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url := strings.TrimSpace(line)
	if err != nil || !strings.HasPrefix(url, "nats://") {
		c.stop()
		return nil, "", errors.New("natsherd serve did not report a client URL (see its messages above)")
	}
	return c, url, nil
}

// stop ends the server: closing its stdin asks for a clean shutdown; a
// server that has not exited after 10 s is killed. It waits for the exit.
func (c *child) stop() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
