package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// runBackup fills an engine with -n far-future pending messages, then runs
// -rounds rounds of: a send load of -producers goroutines calling Send for
// -duration without a backup (the baseline), then the same load while
// Backup writes a copy beside the data directory. It reports each
// backup's duration, pause and disk, and the send latency while it ran
// against the baseline of the same round.
func runBackup(c config, dir string) (*report, error) {
	r := newReport("backup", dir)
	r.note("size: %s pending messages due over %v from %v after the start, unique keys, %d B bodies, sent with SendBatch of %d; then per round a load of %d goroutines calling Send (one message each, due at once, so that the pending count stays at N; %d B body) for %v without a backup (baseline), then the same load while Backup runs (no checkpoint runs during a backup; the baseline has the usual one every 5 s); %d rounds; the first round starts after the preload's checkpoints; backups on the data directory's filesystem (sealed segments hard-linked); sync flush, engine defaults",
		humanInt(int64(c.n)), c.horizon, c.offset, pendingBody, c.batch, c.producers, pendingBody, c.duration, c.rounds)
	e, err := engine.Open(engineOptions(dir))
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if err := e.CreateTopic(pendingTopic, engine.TopicConfig{}); err != nil {
		return nil, err
	}
	body := make([]byte, pendingBody)
	pre, err := preload(e, preloadSpec{topic: pendingTopic, keyPrefix: "order-", n: c.n, batch: c.batch, senders: c.senders, body: body,
		due: uniformDue(e.Now()+c.offset.Milliseconds(), c.horizon.Milliseconds())})
	if err != nil {
		return nil, err
	}
	r.fig("preload", fmt.Sprintf("%s messages in %s", humanInt(int64(c.n)), secs(pre.took)))
	// The rounds start after a checkpoint that began after the preload:
	// its timer buckets are written, as in a broker that runs.
	if err := waitCheckpoints(e, 2, 10*time.Minute); err != nil {
		return nil, err
	}
	data, err := walkDisk(dir)
	if err != nil {
		return nil, err
	}
	dataApp, dataAlloc := data.total()
	r.fig("data directory before the first backup", fmt.Sprintf("%s (allocated %s)", mib(dataApp), mib(dataAlloc)))

	var durs, pauses, ratios []float64
	for round := 1; round <= c.rounds; round++ {
		base, _ := sendLoad(e, c, false, func(l *loadWindow) { time.Sleep(c.duration) })
		bdir := fmt.Sprintf("%s-backup-%d", dir, round)
		var info engine.BackupInfo
		var berr error
		during, n := sendLoad(e, c, true, func(l *loadWindow) {
			// Let the load run before the backup starts, so that it is
			// measured under a steady load.
			time.Sleep(c.duration / 4)
			l.mark(true)
			info, berr = e.BackupWith(context.Background(), bdir, nil)
			l.mark(false)
		})
		if berr != nil {
			return nil, fmt.Errorf("round %d: backup: %w", round, berr)
		}
		u, err := walkDisk(bdir)
		if err != nil {
			return nil, err
		}
		app, alloc := u.total()
		if round == 1 {
			if err := checkBackup(r, bdir); err != nil {
				return nil, err
			}
		}
		os.RemoveAll(bdir)
		bq, dq := summarize(base), summarize(during)
		ratio := float64(dq.p99) / float64(bq.p99)
		durs, pauses, ratios = append(durs, info.Duration.Seconds()), append(pauses, float64(info.Pause.Microseconds())/1000), append(ratios, ratio)
		rs := strconv.Itoa(round)
		r.fig("round "+rs+": pending when the backup ended", humanInt(e.Stats().Pending.Load()))
		r.fig("round "+rs+": backup duration, pause (sends wait)", fmt.Sprintf("%s, %.3f ms", secs(info.Duration), float64(info.Pause.Microseconds())/1000))
		r.fig("round "+rs+": backup size", fmt.Sprintf("%s in the backup's files (allocated %s): %s copied in %d files, %s hard-linked in %d sealed segments",
			mib(app), mib(alloc), mib(info.Bytes), info.Files, mib(info.LinkedBytes), info.LinkedFiles))
		r.cmp("round "+rs+": Send latency p50 / p99 / p99.9 / max while the backup ran ("+humanInt(int64(n))+" sends)", dq.nsAsMs(),
			bq.nsAsMs()+" ("+humanInt(int64(bq.n))+" sends, no backup)", ratio, "")
	}
	r.fig("backup duration, median (range) over the rounds", fmt.Sprintf("%.3f s (%.3f to %.3f)", median(durs), slices.Min(durs), slices.Max(durs)))
	r.fig("pause, median (range)", fmt.Sprintf("%.3f ms (%.3f to %.3f)", median(pauses), slices.Min(pauses), slices.Max(pauses)))
	r.fig("send p99 during the backup / without, median (range)", fmt.Sprintf("%.2f (%.2f to %.2f)", median(ratios), slices.Min(ratios), slices.Max(ratios)))
	return r, nil
}

// checkBackup runs the offline check on a backup: it must be clean, and
// its duration is what `hourglass check` costs at this size.
func checkBackup(r *report, bdir string) error {
	t := time.Now()
	rep, err := engine.Check(vfs.OS, bdir, engine.CheckOptions{})
	if err != nil {
		return fmt.Errorf("check the backup: %w", err)
	}
	if !rep.OK() {
		return fmt.Errorf("check of the backup found problems: %+v", rep.Problems[:min(5, len(rep.Problems))])
	}
	r.fig("hourglass check of the first backup (engine.Check)", fmt.Sprintf("clean, %d notes, %s: %s records, %s queue-index, %s timer, %s key-index entries",
		len(rep.Notes), secs(time.Since(t)), humanInt(int64(rep.Records)), humanInt(rep.QueueEntries), humanInt(rep.TimerEntries), humanInt(rep.KeyEntries)))
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadWindow is the part of a load that is measured: every send that
// started between mark(true) and mark(false) of a windowed load, every
// send of another.
type loadWindow struct {
	windowed   bool
	mu         sync.Mutex
	from, till time.Time
}

func (l *loadWindow) mark(start bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if start {
		l.from = time.Now()
	} else {
		l.till = time.Now()
	}
}

func (l *loadWindow) inside(t time.Time) bool {
	if !l.windowed {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.from.IsZero() && !t.Before(l.from) && (l.till.IsZero() || t.Before(l.till))
}

// sendLoad runs c.producers goroutines calling Send until during returns,
// and returns the latencies (ns) of the sends in its window and their
// number.
func sendLoad(e *engine.Engine, c config, windowed bool, during func(*loadWindow)) ([]int64, int) {
	l := loadWindow{windowed: windowed}
	var mu sync.Mutex
	var lat []int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := 0; p < c.producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []int64
			body := make([]byte, pendingBody)
			for i := 0; ; i++ {
				select {
				case <-stop:
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
					return
				default:
				}
				t := time.Now()
				_, err := e.Send(context.Background(), message.Message{Topic: pendingTopic, Body: body}, message.When{})
				if err != nil {
					fmt.Fprintln(os.Stderr, "enginebench: send:", err)
					continue
				}
				if l.inside(t) {
					mine = append(mine, int64(time.Since(t)))
				}
			}
		}()
	}
	during(&l)
	close(stop)
	wg.Wait()
	return lat, len(lat)
}
