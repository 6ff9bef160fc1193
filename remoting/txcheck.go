package remoting

import (
	"github.com/hourglass-mq/hourglass/access"
	"strconv"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// loadTx reads the ends of the transactions from opTopic, once.
func (s *Server) loadTx() error {
	s.tx.mu.Lock()
	defer s.tx.mu.Unlock()
	if s.tx.loaded {
		return nil
	}
	s.tx.ended, s.tx.checks = map[uint64]bool{}, map[uint64]int{}
	if _, _, ok := s.eng.TopicKind(opTopic); ok {
		for off := uint64(0); ; {
			vs, err := s.eng.ReadQueue(opTopic, 0, off, 256)
			if err != nil {
				return err
			}
			if len(vs) == 0 {
				break
			}
			for _, v := range vs {
				if id, err := message.ParseID(string(v.Message.Body)); err == nil {
					s.tx.ended[id.Pos] = true
				}
			}
			off = vs[len(vs)-1].Offset + 1
		}
	}
	s.tx.loaded = true
	return nil
}

// flushLoop makes the offsets that pulls carry durable every second
// (an explicit UPDATE_CONSUMER_OFFSET is durable before its answer).
func (s *Server) flushLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.offsets.mu.Lock()
			gen := s.offsets.gen
			s.offsets.mu.Unlock()
			if err := s.offsets.commit(gen); err != nil {
				s.log.Error("remoting: consumer offsets could not be made durable; will try again", "err", err)
			}
		}
	}
}

// checkLoop checks the open transactions every interval until Close.
func (s *Server) checkLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if err := s.checkTransactions(); err != nil {
				s.log.Warn("remoting: checking open transactions failed; will try again", "err", err)
			}
		}
	}
}

// checkTransactions asks a producer of its group about each half message
// open for more than txTimeout, and rolls back one asked txMaxChecks
// times. It scans the half queue from the offset below which all ended,
// and moves that offset on.
func (s *Server) checkTransactions() error {
	if _, _, ok := s.eng.TopicKind(halfTopic); !ok {
		return nil
	}
	if err := s.loadTx(); err != nil {
		return err
	}
	key := offsetKey{txGroup, halfTopic, 0}
	low, _ := s.offsets.get(key)
	newLow, allEnded := low, true
	now := s.eng.Now()
	for off := uint64(low); ; {
		vs, err := s.eng.ReadQueue(halfTopic, 0, off, 256)
		if err != nil {
			return err
		}
		if len(vs) == 0 {
			break
		}
		for i := range vs {
			v := &vs[i]
			off = v.Offset + 1
			s.tx.mu.Lock()
			ended := s.tx.ended[v.ID.Pos]
			s.tx.mu.Unlock()
			if !ended && now-v.Message.Sent >= s.opts.TransactionTimeout.Milliseconds() {
				ended = s.checkOne(v)
			}
			if !ended {
				allEnded = false
			} else if allEnded {
				newLow = int64(v.Offset) + 1
			}
		}
	}
	if newLow != low {
		if _, err := s.offsets.set(key, newLow); err != nil {
			return err
		}
	}
	return nil
}

// checkOne asks a producer of the half message's group for its state, or
// rolls it back after txMaxChecks; it says whether the message ended.
func (s *Server) checkOne(v *engine.Visible) bool {
	s.tx.mu.Lock()
	n := s.tx.checks[v.ID.Pos]
	s.tx.checks[v.ID.Pos] = n + 1
	s.tx.mu.Unlock()
	props := v.Message.Properties
	if n >= txMaxChecks {
		info := engine.Info{ID: v.ID, Properties: props}
		if err := s.endTx(info, false); err != nil {
			s.log.Warn("remoting: rolling back a transaction checked too often failed", "err", err)
			return false
		}
		s.log.Warn("remoting: transaction rolled back after its producer was asked too often", "msgId", props[propUniqKey], "checks", n)
		return true
	}
	// Only a producer that could have sent the half message is shown it
	// and asked: a principal that heartbeats as another's producer group
	// reads none of its uncommitted messages.
	c := s.clients.producerThat(props[propProducerGroup], func(p *access.Principal) bool {
		return p.Allowed(access.Send, props[propRealTopic])
	})
	if c == nil {
		return false // no producer of the group that may is connected: ask later
	}
	// Sent beside the loop, at most maxChecksSending per connection: a
	// producer that does not read would otherwise stall every group's
	// checks for the write timeout per half message. One past the bound
	// is asked at a later round.
	if !c.startCheck() {
		return false
	}
	q, _ := strconv.Atoi(props[propRealQueueID])
	w := s.wire(c, props[propRealTopic], q, v)
	w.commitOffset = int64(s.handles.seal(v.ID.Pos))
	w.sysFlag |= sysTranPrepared
	ext := map[string]string{
		"tranStateTableOffset": strconv.FormatUint(v.Offset, 10), "commitLogOffset": strconv.FormatInt(int64(s.handles.seal(v.ID.Pos)), 10), // a Java long
		"msgId": props[propUniqKey], "transactionId": props[propUniqKey], "offsetMsgId": offsetMsgID(c.local, s.handles.seal(v.ID.Pos)),
	}
	body := appendWire(nil, w)
	go func() {
		defer c.checking.Add(-1)
		c.notifyBody(codeCheckTransactionState, ext, body)
	}()
	return false
}

// maxChecksSending bounds the transaction checks being sent on one
// connection (each holds its half message).
const maxChecksSending = 4

// startCheck takes a place among c's checks being sent; false when
// maxChecksSending are.
func (c *conn) startCheck() bool {
	if c.checking.Add(1) > maxChecksSending {
		c.checking.Add(-1)
		return false
	}
	return true
}
