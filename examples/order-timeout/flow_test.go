package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestOrderTimeoutFlow runs the example's binary against a real hourglass
// process and a real PostgreSQL (HOURGLASS_PG_URL, started by
// scripts/postgres.sh; `make test-examples` does both): orders are placed
// with a 4 s timeout, a third are paid, the broker is killed with SIGKILL
// while every timeout is pending and started again, and the closer runs.
// Paid orders must never be closed; unpaid ones must be closed, none
// before its timeout and none much after it.
func TestOrderTimeoutFlow(t *testing.T) {
	pgURL := os.Getenv("HOURGLASS_PG_URL")
	if pgURL == "" {
		if os.Getenv("HOURGLASS_PG_REQUIRED") == "1" {
			t.Fatal("HOURGLASS_PG_REQUIRED=1 but HOURGLASS_PG_URL is not set")
		}
		t.Skip("SKIPPED: no PostgreSQL (set HOURGLASS_PG_URL, or run `make test-examples`, which starts one)")
	}
	bin := t.TempDir()
	hourglass, example := filepath.Join(bin, "hourglass"), filepath.Join(bin, "order-timeout")
	build(t, "../..", hourglass, "./cmd/hourglass")
	build(t, ".", example, ".")

	ctx := context.Background()
	db, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `DROP TABLE IF EXISTS orders`); err != nil {
		t.Fatal(err)
	}

	data := t.TempDir()
	b := startBroker(t, hourglass, data)
	run := func(endpoint string, args ...string) {
		t.Helper()
		cmd := exec.Command(example, append(args, "--endpoint", endpoint, "--plaintext", "--pg", pgURL)...)
		out, err := cmd.CombinedOutput()
		t.Logf("order-timeout %v:\n%s", args, out)
		if err != nil {
			t.Fatalf("order-timeout %v: %v", args, err)
		}
	}
	const orders, timeout = 30, 4 * time.Second
	run(b.grpc, "place", "--orders", fmt.Sprint(orders), "--timeout", timeout.String())
	run(b.grpc, "pay", "--pay-every", "3")

	b.kill()
	var firstDue time.Time
	if err := db.QueryRow(ctx, `SELECT min(timeout_at) FROM orders`).Scan(&firstDue); err != nil {
		t.Fatal(err)
	}
	if !time.Now().Before(firstDue) {
		t.Fatal("the broker was killed only after the first timeout was due: the test proves nothing")
	}
	b2 := startBroker(t, hourglass, data)
	run(b2.grpc, "close", "--until-done", "--max-wait", "60s")

	checkOrders(ctx, t, db, orders)
}

// checkOrders checks every order in the table: each third one paid, every
// other one closed within 3 s after its timeout, never before it.
func checkOrders(ctx context.Context, t *testing.T, db *pgx.Conn, orders int) {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT id, status, timeout_at, closed_at FROM orders ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var paid, closed int
	for rows.Next() {
		var id int64
		var status string
		var due time.Time
		var closedAt *time.Time
		if err := rows.Scan(&id, &status, &due, &closedAt); err != nil {
			t.Fatal(err)
		}
		switch {
		case id%3 == 0 && status != "PAID":
			t.Errorf("order %d was paid but is %s", id, status)
		case id%3 == 0:
			paid++
		case status != "CLOSED":
			t.Errorf("order %d is unpaid and %s, want CLOSED", id, status)
		case closedAt.Before(due):
			t.Errorf("order %d closed %v before its timeout", id, due.Sub(*closedAt))
		case closedAt.Sub(due) > 3*time.Second:
			t.Errorf("order %d closed %v after its timeout", id, closedAt.Sub(due))
		default:
			closed++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if paid != orders/3 || closed != orders-orders/3 {
		t.Errorf("%d paid and %d closed on time; want %d and %d", paid, closed, orders/3, orders-orders/3)
	}
}

func build(t *testing.T, dir, out, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
}

// broker is a running `hourglass serve` process with plaintext gRPC.
type broker struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	exited chan struct{}
	grpc   string
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBroker starts hourglass on data and waits until both its HTTP and
// gRPC ports answer.
func startBroker(t *testing.T, bin, data string) *broker {
	t.Helper()
	httpAddr := freeAddr(t)
	b := &broker{grpc: freeAddr(t), exited: make(chan struct{})}
	b.cmd = exec.Command(bin, "serve", "--data-dir", data, "--listen", httpAddr, "--grpc-listen", b.grpc, "--grpc-plaintext")
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.out
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.cmd.Wait(); close(b.exited) }()
	t.Cleanup(b.kill)
	for deadline := time.Now().Add(20 * time.Second); ; {
		select {
		case <-b.exited:
			t.Fatalf("hourglass exited at start:\n%s", b.out.String())
		default:
		}
		if resp, err := http.Get("http://" + httpAddr + "/healthz"); err == nil {
			resp.Body.Close()
			if c, err := net.Dial("tcp", b.grpc); err == nil && resp.StatusCode == http.StatusOK {
				c.Close()
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hourglass not ready in 20s:\n%s", b.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to end.
func (b *broker) kill() {
	b.cmd.Process.Kill()
	<-b.exited
}
