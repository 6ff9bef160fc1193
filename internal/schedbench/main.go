// Command schedbench measures recurring schedules at scale: N schedules
// firing every minute (default 100,000), against N plain delayed messages
// due at the same instants in the same run, on one in-process engine and
// schedule runner on a real directory (sync flush, the broker's defaults).
//
// For each of -minutes fire instants it reports the lateness of both
// populations, visible time minus fire time as the engine records it in
// its queue index (p50 / p99 / max, ms), and their ratio. A firing's fire
// time is its hourglass-fire-time property, so a firing sent late by the
// runner counts its full delay.
//
// Usage:
//
//	go run ./internal/schedbench -n 100000 -minutes 2
//
// Setting up N schedules through the API costs one fsync each; the
// benchmark writes their journal without fsync before the measured run
// (the runner then opens it as the broker would).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/schedule"
	"github.com/hourglass-mq/hourglass/vfs"
)

func main() {
	n := flag.Int("n", 100000, "schedules, and plain messages per fire instant")
	minutes := flag.Int("minutes", 2, "fire instants measured")
	dir := flag.String("dir", "", "data directory (default: a temporary one, removed afterwards)")
	flag.Parse()
	if err := run(*n, *minutes, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

func run(n, minutes int, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "schedbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	setup := time.Now()
	if err := writeJournal(filepath.Join(dir, "schedules"), n, setup.UnixMilli()); err != nil {
		return err
	}
	o := engine.NewOptions(dir)
	o.Logger = logger
	eng, err := engine.Open(o)
	if err != nil {
		return err
	}
	defer eng.Close()
	r, err := schedule.Open(schedule.Options{Dir: filepath.Join(dir, "schedules"), Broker: eng, Limits: o.Limits, Logger: logger})
	if err != nil {
		return err
	}
	defer r.Close()

	// The first instant measured: a minute boundary at least 45 s away,
	// so the plain messages are all sent before it and the runner sends
	// the firings ahead as it would in steady state.
	first := time.Now().Add(45 * time.Second).Truncate(time.Minute).Add(time.Minute)
	var instants []int64
	for i := range minutes {
		instants = append(instants, first.Add(time.Duration(i)*time.Minute).UnixMilli())
	}
	sendStart := time.Now()
	for _, at := range instants {
		if err := sendPlain(eng, n, at); err != nil {
			return err
		}
	}
	fmt.Printf("setup: %d schedules journaled in %v; %d plain messages sent in %v; first instant in %v\n",
		n, sendStart.Sub(setup).Round(time.Millisecond), n*minutes, time.Since(sendStart).Round(time.Millisecond),
		time.Until(first).Round(time.Second))

	last := time.UnixMilli(instants[len(instants)-1])
	time.Sleep(time.Until(last.Add(5 * time.Second)))
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if visible(eng, "sched") >= n*minutes && visible(eng, "plain") >= n*minutes {
			break
		}
	}
	sched, err := lateness(eng, "sched", true)
	if err != nil {
		return err
	}
	plain, err := lateness(eng, "plain", false)
	if err != nil {
		return err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("runner: sent %d firings, %d send errors; heap in use %d MiB\n",
		r.Stats().Sent.Load(), r.Stats().SendErrors.Load(), ms.HeapInuse>>20)
	for _, at := range instants {
		fmt.Printf("firings of %s sent after their fire time: %d\n", time.UnixMilli(at).UTC().Format("15:04"), sentLate[at])
	}
	printLateness(instants, sched, plain)
	return nil
}

// writeJournal writes n every-minute schedules as the API would have
// created them at created, without fsync (setup only).
func writeJournal(dir string, n int, created int64) error {
	st, _, err := schedule.OpenStore(noSync{vfs.OS}, dir)
	if err != nil {
		return err
	}
	for i := range n {
		sc := &schedule.Schedule{ID: fmt.Sprintf("s%06d", i), Topic: "sched", Cron: "* * * * *", TZ: "UTC",
			CatchUp: schedule.CatchUpSkip, Created: created, Through: created, Body: []byte("tick")}
		if err := st.Put(sc); err != nil {
			return err
		}
	}
	return st.Close()
}

// sendPlain sends n messages due at at, in batches of 1000.
func sendPlain(eng *engine.Engine, n int, at int64) error {
	for sent := 0; sent < n; {
		k := min(1000, n-sent)
		reqs := make([]engine.SendRequest, k)
		for i := range reqs {
			reqs[i] = engine.SendRequest{Message: message.Message{Topic: "plain", Body: []byte("tick")}, When: message.When{At: at}}
		}
		if _, err := eng.SendBatch(context.Background(), reqs); err != nil {
			return err
		}
		sent += k
	}
	return nil
}

func visible(eng *engine.Engine, topic string) int {
	total := 0
	for _, t := range eng.Topics() {
		if t.Name == topic {
			for _, l := range t.Lengths {
				total += int(l)
			}
		}
	}
	return total
}

// sentLate counts, by fire time, the firings the runner sent after their
// fire time (due at their send time): the runner's share of the lateness.
var sentLate = map[int64]int{}

// lateness reads every visible message of topic and returns visible minus
// fire time (ms) by fire time.
func lateness(eng *engine.Engine, topic string, fired bool) (map[int64][]int64, error) {
	out := map[int64][]int64{}
	for _, t := range eng.Topics() {
		if t.Name != topic {
			continue
		}
		for q := range t.Queues {
			for from := uint64(0); ; {
				vs, err := eng.ReadQueue(topic, q, from, 4096)
				if err != nil {
					return nil, err
				}
				if len(vs) == 0 {
					break
				}
				for _, v := range vs {
					fire := v.Due
					if fired {
						ft, err := time.Parse("2006-01-02T15:04:05.000Z", v.Message.Properties[schedule.PropFireTime])
						if err != nil {
							return nil, fmt.Errorf("firing without a fire time: %v", err)
						}
						fire = ft.UnixMilli()
					}
					out[fire] = append(out[fire], v.Visible-fire)
					if v.Due > fire {
						sentLate[fire]++
					}
				}
				from = vs[len(vs)-1].Offset + 1
			}
		}
	}
	return out, nil
}

// noSync is a filesystem whose Sync does nothing: the setup's journal.
type noSync struct{ vfs.FS }

func (f noSync) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	return noSyncFile{file}, err
}

func (f noSync) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	return noSyncFile{file}, err
}

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error { return nil }

// printLateness prints, as a markdown table, the count and the p50, p99 and
// max lateness (ms) of the schedule firings and of the plain delayed
// messages at each fire instant.
func printLateness(instants []int64, sched, plain map[int64][]int64) {
	fmt.Println("| fire instant | population | count | p50 ms | p99 ms | max ms |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, at := range instants {
		for _, p := range []struct {
			name string
			l    map[int64][]int64
		}{{"schedule firings", sched}, {"plain delayed messages", plain}} {
			l := p.l[at]
			slices.Sort(l)
			if len(l) == 0 {
				fmt.Printf("| %s | %s | 0 | - | - | - |\n", time.UnixMilli(at).UTC().Format("15:04"), p.name)
				continue
			}
			fmt.Printf("| %s | %s | %d | %d | %d | %d |\n", time.UnixMilli(at).UTC().Format("15:04"), p.name, len(l),
				l[len(l)/2], l[len(l)*99/100], l[len(l)-1])
		}
	}
}
