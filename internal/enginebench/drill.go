package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

const (
	drillTopic = "drill"
	drillGroup = "drill-group"
	// drillLease is the consumers' invisibility: a lease whose ack was lost
	// comes back this long after it was handed out.
	drillLease = 3 * time.Second
)

// outcome classifies a request by what its caller learned.
type outcome int

const (
	answered outcome = iota // an HTTP answer, success or refusal
	refused                 // the connection was refused: nothing reached the broker
	inDoubt                 // sent, then the connection broke: the caller cannot know
)

// classify tells an in-doubt failure (the request may have reached the
// broker) from one that cannot have (connection refused at dial).
func classify(err error) outcome {
	var ce *client.Error
	switch {
	case err == nil, errors.As(err, &ce) && ce.StatusCode != 0:
		return answered
	case errors.Is(err, syscall.ECONNREFUSED):
		return refused
	}
	return inDoubt
}

// killTally is what one kill left in doubt.
type killTally struct {
	sendReqs, ackReqs, recvReqs int      // requests in doubt
	sendKeys, ackKeys           []string // their messages
	recoverMs                   int64    // restart until the health check answered
}

// drillState is shared by the producers, consumers and the killer.
type drillState struct {
	mu        sync.Mutex
	epoch     int // kills so far; a failure is charged to the latest kill
	kills     []killTally
	acked     []string             // keys of sends with a success answer
	received  map[string]int       // deliveries per key
	ackedAt   map[string]int       // deliveries of a key when its ack went out in doubt
	early     int                  // deliveries before the due time
	dueOf     map[string]time.Time // due time per sent key
	refusedN  int
	answerErr error
}

// runDrill kills a real broker with SIGKILL -kills times while producers
// send and consumers receive and ack over HTTP, with no client retries.
// Every request that failed after it may have reached the broker is in
// doubt and charged to the kill that broke it. After the last restart and
// a drain, it reports what became of each: in-doubt sends present or
// absent, in-doubt acks taken or redelivered, and whether any
// acknowledged send was lost or any message delivered twice.
func runDrill(c config, dir string) (*report, error) {
	r := newReport("drill", dir)
	b, api, err := startDrillBroker(c, dir)
	if err != nil {
		return nil, err
	}
	defer b.kill()
	s := &drillState{received: map[string]int{}, ackedAt: map[string]int{}, dueOf: map[string]time.Time{}}
	w := startDrillWorkers(c, api, s)
	if err := drillKills(c, b, s); err != nil {
		close(w.stop)
		close(w.consStop)
		return r, err
	}
	time.Sleep(c.upMin)
	close(w.stop)
	w.wg.Wait()
	s.drain(time.Now().Add(drillLease*3 + 30*time.Second))
	// Leases whose ack was lost come back after drillLease; wait for them.
	time.Sleep(2 * drillLease)
	close(w.consStop)
	w.cwg.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answerErr != nil {
		return r, s.answerErr
	}
	return r, s.reportLocked(c, r)
}

// startDrillBroker starts the broker with the drill topic and group, and
// returns it with an HTTP client that never retries. On error no broker
// is left running.
func startDrillBroker(c config, dir string) (*brokerProc, *client.Client, error) {
	b, err := startBrokerWithTopic(c, dir, drillTopic)
	if err != nil {
		return nil, nil, err
	}
	if _, err := b.api.CreateGroup(bg, drillTopic, drillGroup, client.GroupConfig{}); err != nil {
		b.kill()
		return nil, nil, err
	}
	// A short response timeout keeps a request to a stopped broker from
	// hanging; a kill breaks connections at once anyway.
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return b, client.New("http://"+b.addr, client.WithRetries(0), client.WithHTTPClient(hc)), nil
}

// drillWorkers are the running producers and consumers of a drill:
// closing stop ends the producers (wait on wg), closing consStop the
// consumers (wait on cwg).
type drillWorkers struct {
	stop, consStop chan struct{}
	wg, cwg        sync.WaitGroup
}

// startDrillWorkers starts c.producers producers and c.consumers
// consumers on api, all recording into s.
func startDrillWorkers(c config, api *client.Client, s *drillState) *drillWorkers {
	w := &drillWorkers{stop: make(chan struct{}), consStop: make(chan struct{})}
	var seq atomic.Int64
	for p := range c.producers {
		w.wg.Add(1)
		go func(p int) {
			defer w.wg.Done()
			drillProduce(api, s, &seq, c.batch, uint64(p), w.stop)
		}(p)
	}
	for range c.consumers {
		w.cwg.Add(1)
		go func() {
			defer w.cwg.Done()
			drillConsume(api, s, w.consStop)
		}()
	}
	return w
}

// drillKills kills and restarts the broker c.kills times, after a random
// uptime of c.upMin to 2*c.upMin each. Before each kill it opens a new
// epoch in s, so that failures from then on are charged to that kill, and
// after each restart it records how long the broker took to answer.
func drillKills(c config, b *brokerProc, s *drillState) error {
	rng := rand.New(rand.NewPCG(11, 11))
	for i := range c.kills {
		time.Sleep(c.upMin + time.Duration(rng.Int64N(int64(c.upMin))))
		s.mu.Lock()
		s.epoch = i + 1
		s.kills = append(s.kills, killTally{})
		s.mu.Unlock()
		b.kill()
		time.Sleep(c.downtime)
		took, err := b.start()
		if err != nil {
			return fmt.Errorf("restart %d: %w", i+1, err)
		}
		s.mu.Lock()
		s.kills[i].recoverMs = took.Milliseconds()
		s.mu.Unlock()
	}
	return nil
}

// drain waits until every acknowledged send was delivered or the deadline
// passes: every acknowledged send must arrive; in-doubt sends may.
func (s *drillState) drain(deadline time.Time) {
	for time.Now().Before(deadline) {
		s.mu.Lock()
		missing := s.lostLocked()
		s.mu.Unlock()
		if missing == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lostLocked counts the acknowledged sends not delivered so far.
func (s *drillState) lostLocked() int {
	lost := 0
	for _, k := range s.acked {
		if s.received[k] == 0 {
			lost++
		}
	}
	return lost
}

// reportLocked writes the drill's notes and figures to r: the method, one
// figure per kill with what became of its requests in doubt, and the
// totals. It fails if an acknowledged send was lost or a message came
// early.
func (s *drillState) reportLocked(c config, r *report) error {
	lost, dups, deliveries := s.lostLocked(), 0, 0
	for _, n := range s.received {
		deliveries += n
		if n > 1 {
			dups++
		}
	}
	r.note("broker: `hourglass serve` with default flags (sync flush) on a fresh directory; %d producers sending SendBatch of %d keyed messages due 0 to 1 s ahead, %d consumers looping Receive (Max 32, Invisible %v, Wait 1 s) and Ack; HTTP client with no retries", c.producers, c.batch, c.consumers, drillLease)
	r.note("kills: %d, each with SIGKILL after %v to %v of uptime, down %v, then restarted on the same directory", c.kills, c.upMin, 2*c.upMin, c.downtime)
	r.note("in doubt: a request that failed after it may have reached the broker (any transport error but connection refused); it is charged to the kill that broke it. A send in doubt is present if its key was later delivered, absent if not. An ack in doubt was taken if its message was not delivered again, redelivered if it was (after the %v lease)", drillLease)
	r.note("refused: %d requests found the broker down (connection refused) and cannot have reached it; they are not in doubt", s.refusedN)
	for i, k := range s.kills {
		r.fig(fmt.Sprintf("kill %d (restart answered after %d ms)", i+1, k.recoverMs), s.killOutcomeLocked(k))
	}
	r.fig("acknowledged sends / lost", fmt.Sprintf("%s / %d", humanInt(int64(len(s.acked))), lost))
	r.fig("deliveries / keys delivered more than once / early deliveries", fmt.Sprintf("%s / %d / %d", humanInt(int64(deliveries)), dups, s.early))
	if lost > 0 || s.early > 0 {
		return fmt.Errorf("%d acknowledged sends lost, %d early deliveries", lost, s.early)
	}
	return nil
}

// killOutcomeLocked says what became of the requests one kill left in
// doubt: sends present or absent, acks taken or redelivered, receives.
func (s *drillState) killOutcomeLocked(k killTally) string {
	present := 0
	for _, key := range k.sendKeys {
		if s.received[key] > 0 {
			present++
		}
	}
	redelivered := 0
	for _, key := range k.ackKeys {
		if s.received[key] > s.ackedAt[key] {
			redelivered++
		}
	}
	return fmt.Sprintf("sends in doubt: %d requests, %d messages: %d present, %d absent; acks in doubt: %d requests, %d messages: %d taken, %d redelivered; receives in doubt: %d",
		k.sendReqs, len(k.sendKeys), present, len(k.sendKeys)-present, k.ackReqs, len(k.ackKeys), len(k.ackKeys)-redelivered, redelivered, k.recvReqs)
}

// drillProduce sends batches of keyed messages until stop.
func drillProduce(api *client.Client, s *drillState, seq *atomic.Int64, batch int, seed uint64, stop chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 77))
	for {
		select {
		case <-stop:
			return
		default:
		}
		first := seq.Add(int64(batch)) - int64(batch)
		msgs := make([]client.Message, batch)
		keys := make([]string, batch)
		now := time.Now()
		for i := range msgs {
			keys[i] = "d-" + strconv.FormatInt(first+int64(i), 10)
			msgs[i] = client.Message{Key: keys[i], Body: []byte("x"), When: client.When{At: now.Add(time.Duration(rng.Int64N(int64(time.Second))))}}
		}
		s.mu.Lock()
		for i, k := range keys {
			s.dueOf[k] = msgs[i].When.At.Truncate(time.Millisecond)
		}
		s.mu.Unlock()
		_, err := api.SendBatch(bg, drillTopic, msgs)
		s.mu.Lock()
		switch classify(err) {
		case answered:
			if err == nil {
				s.acked = append(s.acked, keys...)
			} else if s.answerErr == nil {
				s.answerErr = fmt.Errorf("send answered with an error: %w", err)
			}
		case refused:
			s.refusedN++
		case inDoubt:
			if s.epoch == 0 {
				s.answerErr = fmt.Errorf("send failed before any kill: %w", err)
			} else {
				k := &s.kills[s.epoch-1]
				k.sendReqs++
				k.sendKeys = append(k.sendKeys, keys...)
			}
		}
		s.mu.Unlock()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// drillConsume receives and acks until stop.
func drillConsume(api *client.Client, s *drillState, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		rs, err := api.Receive(bg, drillTopic, drillGroup, client.ReceiveOptions{Max: 32, Invisible: drillLease, Wait: time.Second})
		now := time.Now()
		s.mu.Lock()
		s.chargeLocked(err, func(k *killTally) { k.recvReqs++ })
		keys := make([]string, len(rs))
		receipts := make([]string, len(rs))
		for i, m := range rs {
			keys[i], receipts[i] = m.Key, m.Receipt
			s.received[m.Key]++
			if due, ok := s.dueOf[m.Key]; ok && now.Before(due) {
				s.early++
			}
		}
		s.mu.Unlock()
		if err != nil || len(rs) == 0 {
			if err != nil {
				time.Sleep(20 * time.Millisecond)
			}
			continue
		}
		_, err = api.Ack(bg, drillTopic, drillGroup, receipts...)
		s.mu.Lock()
		s.chargeLocked(err, func(k *killTally) {
			k.ackReqs++
			k.ackKeys = append(k.ackKeys, keys...)
			for _, key := range keys {
				s.ackedAt[key] = s.received[key]
			}
		})
		s.mu.Unlock()
	}
}

// chargeLocked counts a failed receive or ack: refused, or in doubt and
// charged by charge to the latest kill. Answers and failures before any
// kill are not counted (a consumer cannot lose what the broker keeps).
func (s *drillState) chargeLocked(err error, charge func(*killTally)) {
	switch classify(err) {
	case refused:
		s.refusedN++
	case inDoubt:
		if s.epoch > 0 {
			charge(&s.kills[s.epoch-1])
		}
	}
}
