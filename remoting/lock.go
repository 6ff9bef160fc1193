package remoting

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// lockTTL is how long a queue lock holds without being renewed (RocketMQ's
// broker keeps a lock 60 s; orderly consumers renew every 20 s).
const lockTTL = 60 * time.Second

// mqRef names a message queue as the clients do.
type mqRef struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

type lockBody struct {
	ConsumerGroup string  `json:"consumerGroup"`
	ClientID      string  `json:"clientId"`
	MQSet         []mqRef `json:"mqSet"`
}

type lockKey struct {
	group, topic string
	queue        int
}

type lockHolder struct {
	client string
	c      *conn
	until  time.Time
}

// maxConnLocks bounds the queue locks taken on one connection, so that a
// client naming made-up groups, topics and queues cannot grow the table
// without end: an orderly consumer locks the queues its rebalance gave it,
// of each group and topic it consumes, far fewer.
const maxConnLocks = 4096

// lockTable holds the queue locks of orderly consumers: one client of a
// group per queue, until it unlocks, stops renewing, or disconnects.
type lockTable struct {
	mu    sync.Mutex
	locks map[lockKey]lockHolder
	// byConn holds the locks taken on each connection, so that what is
	// done for one connection (its bound, its end) costs what it holds,
	// not the whole table.
	byConn map[*conn]map[lockKey]struct{}
}

func newLockTable() *lockTable {
	return &lockTable{locks: map[lockKey]lockHolder{}, byConn: map[*conn]map[lockKey]struct{}{}}
}

// setLocked records that c holds k, and no other connection. t.mu held.
func (t *lockTable) setLocked(k lockKey, h lockHolder) {
	if old, ok := t.locks[k]; ok {
		t.forgetLocked(old.c, k)
	}
	t.locks[k] = h
	set := t.byConn[h.c]
	if set == nil {
		set = map[lockKey]struct{}{}
		t.byConn[h.c] = set
	}
	set[k] = struct{}{}
}

// forgetLocked drops k from c's locks (not from the table). t.mu held.
func (t *lockTable) forgetLocked(c *conn, k lockKey) {
	if set := t.byConn[c]; set != nil {
		delete(set, k)
		if len(set) == 0 {
			delete(t.byConn, c)
		}
	}
}

// errTooManyLocks refuses a lock request that would take a connection past
// maxConnLocks.
var errTooManyLocks = fmt.Errorf("a connection holds at most %d queue locks", maxConnLocks)

// lock takes or renews the locks it can, and returns those it holds. A
// request that would take c past maxConnLocks, once c's expired locks are
// dropped, takes none and fails.
func (t *lockTable) lock(c *conn, b *lockBody, now time.Time) ([]mqRef, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.byConn[c]) + t.newLocksLocked(c, b); n > maxConnLocks {
		t.dropExpiredLocked(c, now)
		if len(t.byConn[c])+t.newLocksLocked(c, b) > maxConnLocks {
			return nil, errTooManyLocks
		}
	}
	out := []mqRef{}
	for _, mq := range b.MQSet {
		k := lockKey{b.ConsumerGroup, mq.Topic, mq.QueueID}
		h, held := t.locks[k]
		if held && h.client != b.ClientID && now.Before(h.until) {
			continue
		}
		t.setLocked(k, lockHolder{client: b.ClientID, c: c, until: now.Add(lockTTL)})
		out = append(out, mq)
	}
	return out, nil
}

// newLocksLocked counts the queues of b that c does not hold yet: at most
// the locks the request would add to c. t.mu held.
func (t *lockTable) newLocksLocked(c *conn, b *lockBody) int {
	n := 0
	for _, mq := range b.MQSet {
		if h, ok := t.locks[lockKey{b.ConsumerGroup, mq.Topic, mq.QueueID}]; !ok || h.c != c {
			n++
		}
	}
	return n
}

// dropExpiredLocked drops c's locks that have expired. t.mu held.
func (t *lockTable) dropExpiredLocked(c *conn, now time.Time) {
	for k := range t.byConn[c] {
		if !now.Before(t.locks[k].until) {
			delete(t.locks, k)
			t.forgetLocked(c, k)
		}
	}
}

func (t *lockTable) unlock(b *lockBody) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, mq := range b.MQSet {
		k := lockKey{b.ConsumerGroup, mq.Topic, mq.QueueID}
		if h, ok := t.locks[k]; ok && h.client == b.ClientID {
			delete(t.locks, k)
			t.forgetLocked(h.c, k)
		}
	}
}

// dropConn releases the locks taken on c.
func (t *lockTable) dropConn(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.byConn[c] {
		delete(t.locks, k)
	}
	delete(t.byConn, c)
}

// lockBatch answers LOCK_BATCH_MQ.
func (s *Server) lockBatch(c *conn, req *Command) *Command {
	var b lockBody
	if err := json.Unmarshal(req.Body, &b); err != nil || b.ClientID == "" || b.ConsumerGroup == "" {
		return errResp(respInvalidParameter, "lock body is not RocketMQ's LockBatchRequestBody with a consumerGroup and a clientId")
	}
	if err := checkLockQueues(&b); err != nil {
		return badRequest(err)
	}
	held, err := s.locks.lock(c, &b, time.Now())
	if err != nil {
		return badRequest(err)
	}
	body, _ := json.Marshal(map[string][]mqRef{"lockOKMQSet": held})
	return &Command{Code: respSuccess, Body: body}
}

// checkLockQueues checks the group, topics and queue IDs a lock request
// names, as a request that names one queue is checked.
func checkLockQueues(b *lockBody) error {
	if err := checkTopic(retryPrefix + b.ConsumerGroup); err != nil {
		return fmt.Errorf("consumerGroup: %w", err)
	}
	for _, mq := range b.MQSet {
		if err := checkTopic(mq.Topic); err != nil {
			return err
		}
		if mq.QueueID < 0 || mq.QueueID > maxQueueID {
			return fmt.Errorf("queueId %d of topic %q is out of range", mq.QueueID, mq.Topic)
		}
	}
	return nil
}

// unlockBatch answers UNLOCK_BATCH_MQ.
func (s *Server) unlockBatch(c *conn, req *Command) *Command {
	var b lockBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return errResp(respInvalidParameter, "unlock body is not RocketMQ's UnlockBatchRequestBody")
	}
	s.locks.unlock(&b)
	return okResp(nil)
}
