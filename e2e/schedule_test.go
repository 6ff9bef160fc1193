package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

type scheduleInfo struct {
	ID       string  `json:"id"`
	State    string  `json:"state"`
	Created  int64   `json:"created"`
	LastFire int64   `json:"last_fire"`
	Next     []int64 `json:"next"`
}

// TestScheduleKill9LosesAndRepeatsNoFiring: 20 schedules firing every
// second (catch-up all) while the broker is killed with SIGKILL four times
// at random moments. Every fire time up to the last restart reaches a
// consumer, each as exactly one message (one ID per fire key).
func TestScheduleKill9LosesAndRepeatsNoFiring(t *testing.T) {
	s := startServer(t, "", nil, "--grpc-listen", "")
	const n = 20
	created := map[string]int64{}
	for i := range n {
		id := fmt.Sprintf("s%02d", i)
		var sc scheduleInfo
		s.call("PUT", "/v1/schedules/"+id, map[string]any{"topic": "ticks", "cron": "@every 1s", "catch_up": "all", "body": id}, http.StatusCreated, &sc)
		created[id] = sc.Created
	}
	for range 4 {
		// Pacing, not a check: let the schedules fire for a while.
		time.Sleep(time.Duration(700+rand.IntN(1200)) * time.Millisecond)
		s.restart(syscall.SIGKILL)
	}
	end := nowMs()

	// Expected: every fire time in (created, end] of every schedule.
	want := map[string]bool{}
	for id, c := range created {
		for f := c + 1000; f <= end; f += 1000 {
			want[id+"@"+time.UnixMilli(f).UTC().Format("2006-01-02T15:04:05.000Z")] = true
		}
	}
	ids := map[string]map[string]bool{} // fire key -> message IDs
	deadline := time.Now().Add(60 * time.Second)
	missing := len(want)
	for missing > 0 && time.Now().Before(deadline) {
		got := s.receive("ticks", "check", map[string]any{"wait": "1s", "max": 1000})
		for _, m := range got {
			if ids[m.Key] == nil {
				ids[m.Key] = map[string]bool{}
				if want[m.Key] {
					missing--
				}
			}
			ids[m.Key][m.ID] = true
		}
		s.ack("ticks", "check", got...)
	}
	lost, dups := 0, 0
	for k := range want {
		switch len(ids[k]) {
		case 0:
			lost++
		case 1:
		default:
			dups++
			t.Errorf("fire %s stored %d times: %v", k, len(ids[k]), ids[k])
		}
	}
	t.Logf("%d fire times over 4 kill -9 restarts: %d lost, %d stored twice", len(want), lost, dups)
	if lost > 0 || dups > 0 || len(want) < n*3 {
		t.Fatalf("%d of %d fire times lost, %d stored twice; output:\n%s", lost, len(want), dups, s.logs)
	}
}

// TestScheduleCLI: the CLI creates, shows and deletes a schedule; bad
// input is a clear 400.
func TestScheduleCLI(t *testing.T) {
	s := startServer(t, "", nil, "--grpc-listen", "")
	run := func(args ...string) (string, error) {
		out, err := exec.Command(binary, append(args, "--server", s.base)...).CombinedOutput()
		return string(out), err
	}
	out, err := run("schedule", "create", "report", "--topic", "reports", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "make it")
	if err != nil || !strings.Contains(out, "schedule report (active)") || !strings.Contains(out, "30 2 * * * in Europe/Berlin") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	var sc scheduleInfo
	s.call("GET", "/v1/schedules/report", nil, http.StatusOK, &sc)
	if len(sc.Next) != 5 {
		t.Fatalf("get: %+v", sc)
	}
	for _, f := range sc.Next {
		// 02:30 in Berlin is 00:30 or 01:30 UTC (or 01:00 on a spring-forward day).
		if u := time.UnixMilli(f).UTC(); u.Minute() != 30 && u.Minute() != 0 {
			t.Fatalf("next fire %v is not a Berlin 02:30", u)
		}
	}
	out, err = run("schedule", "create", "bad", "--topic", "reports", "--cron", "61 * * * *")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(out, "invalid_argument") {
		t.Fatalf("create with minute 61: %v\n%s", err, out)
	}
	wantError(t, s.do("PUT", "/v1/schedules/bad", map[string]any{"topic": "t", "cron": "0 9 * * *", "tz": "Mars/Base"}), http.StatusBadRequest, "invalid_argument")
	if out, err = run("schedule", "delete", "report"); err != nil || !strings.Contains(out, "(deleted)") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if out, err = run("schedule", "list"); err != nil || !strings.Contains(out, "no schedules") {
		t.Fatalf("list: %v\n%s", err, out)
	}
}
