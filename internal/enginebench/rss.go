package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

// rssSettle is how long the broker is left idle before its RSS is read:
// longer than one checkpoint interval (5 s), so that the figure includes
// the checkpoint's steady state and not only the send path's.
const rssSettle = 8 * time.Second

// runRSS measures the resident set of a real broker process holding far-
// future pending messages: VmRSS of `hourglass serve` (read from /proc)
// with N pending, minus VmRSS of the same process with the topic created
// and nothing pending, divided by N. Messages are sent over HTTP, as a
// producer would. With -cancel-frac, that share of them is then cancelled
// by ID and the figure is read again. Finally the broker is stopped,
// restarted on the same directory, and read once more.
func runRSS(c config, dir string) (*report, error) {
	r := newReport("rss", dir)
	b, err := startBrokerWithTopic(c, dir, pendingTopic)
	if err != nil {
		return nil, err
	}
	defer b.kill()
	time.Sleep(rssSettle)
	empty := b.rss()
	r.note("size: up to %s messages sent over HTTP (SendBatch of %d from %d goroutines), unique keys \"order-<n>\", %d B bodies, due uniformly over %v starting %v after sending; broker `hourglass serve` with default flags (sync flush)",
		humanInt(int64(c.n)), c.batch, c.senders, pendingBody, c.horizon, c.offset)
	r.note("method: VmRSS of the broker process from /proc/PID/status, read after the broker was left idle for %v (no forced GC; the broker's own GOGC and scavenger), minus its VmRSS with the topic created and nothing pending, read the same way", rssSettle)
	r.fig("broker VmRSS, empty", mib(empty))

	marks := c.rssMarks
	if len(marks) == 0 || marks[len(marks)-1] != c.n {
		marks = append(marks, c.n)
	}
	var ids []string // every 1/cancelFrac-th message's ID, to cancel
	every := 0
	if c.cancelFrac > 0 {
		every = int(1 / c.cancelFrac)
	}
	sent := 0
	start := time.Now()
	var sendTime time.Duration
	for _, m := range marks {
		t := time.Now()
		got, err := sendOverHTTP(b.api, c, sent, m, every)
		if err != nil {
			return r, err
		}
		sendTime += time.Since(t)
		ids = append(ids, got...)
		sent = m
		time.Sleep(rssSettle)
		now := b.rss()
		r.figT(fmt.Sprintf("RSS per pending message, %s pending", humanInt(int64(m))),
			fmt.Sprintf("%s (VmRSS %s)", perMsg(now-empty, int64(m)), mib(now)), "< 64 B")
	}
	r.fig("send rate over HTTP", fmt.Sprintf("%s (%s in %s; %s including the idle reads)", rate(sent, sendTime), humanInt(int64(sent)), secs(sendTime), secs(time.Since(start))))
	if every > 0 {
		t := time.Now()
		if err := cancelOverHTTP(b.api, ids, c.senders*4); err != nil {
			return r, err
		}
		took := time.Since(t)
		time.Sleep(rssSettle)
		now := b.rss()
		left := int64(sent - len(ids))
		r.figT(fmt.Sprintf("with %s of %s cancelled (every %d-th, by ID, in %s): RSS per message still pending / per message sent", humanInt(int64(len(ids))), humanInt(int64(sent)), every, secs(took)),
			fmt.Sprintf("%s / %s (VmRSS %s)", perMsg(now-empty, left), perMsg(now-empty, int64(sent)), mib(now)), "< 64 B")
	}
	if st, err := b.api.Stats(bg); err == nil {
		r.fig("broker Stats: pending / cancelled", fmt.Sprintf("%s / %s", humanInt(st.Pending), humanInt(int64(st.Cancelled))))
	}
	b.stop()
	if _, err := b.start(); err != nil {
		return r, err
	}
	time.Sleep(rssSettle)
	after := b.rss()
	st, _ := b.api.Stats(bg)
	r.figT("after a clean stop and restart on the same directory: RSS per pending message (the empty figure from before)",
		fmt.Sprintf("%s (VmRSS %s, %s pending)", perMsg(after-empty, st.Pending), mib(after), humanInt(st.Pending)), "< 64 B")
	b.stop()
	return r, nil
}

// sendOverHTTP sends messages from..to-1 with c.senders goroutines and
// returns the IDs of those whose number is a multiple of every (none when
// every is 0).
func sendOverHTTP(api *client.Client, c config, from, to, every int) ([]string, error) {
	var next atomic.Int64
	next.Store(int64(from))
	var mu sync.Mutex
	var ids []string
	body := make([]byte, pendingBody)
	for i := range body {
		body[i] = 'b'
	}
	p := progress{last: time.Now()}
	err := parallel(c.senders, func(s int) error {
		rng := rand.New(rand.NewPCG(uint64(s)+1, uint64(from)))
		msgs := make([]client.Message, 0, c.batch)
		for {
			lo := int(next.Add(int64(c.batch))) - c.batch
			if lo >= to {
				return nil
			}
			hi := min(lo+c.batch, to)
			base := time.Now().Add(c.offset)
			msgs = msgs[:0]
			for i := lo; i < hi; i++ {
				msgs = append(msgs, client.Message{Key: "order-" + strconv.Itoa(i), Body: body,
					When: client.When{At: base.Add(time.Duration(rng.Int64N(int64(c.horizon))))}})
			}
			rs, err := api.SendBatch(bg, pendingTopic, msgs)
			if err != nil {
				return fmt.Errorf("send %d..%d: %w", lo, hi, err)
			}
			if every > 0 {
				mu.Lock()
				for i, rc := range rs {
					if (lo+i)%every == 0 {
						ids = append(ids, rc.ID)
					}
				}
				mu.Unlock()
			}
			if s == 0 {
				p.print("sent up to %s of %s", humanInt(int64(hi)), humanInt(int64(to)))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// cancelOverHTTP cancels ids with n goroutines.
func cancelOverHTTP(api *client.Client, ids []string, n int) error {
	var next atomic.Int64
	return parallel(n, func(int) error {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(ids) {
				return nil
			}
			if err := api.Cancel(bg, ids[i]); err != nil {
				return fmt.Errorf("cancel %s: %w", ids[i], err)
			}
		}
	})
}
