package remoting

import (
	"encoding/json"
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

// lockTable holds the queue locks of orderly consumers: one client of a
// group per queue, until it unlocks, stops renewing, or disconnects.
type lockTable struct {
	mu    sync.Mutex
	locks map[lockKey]lockHolder
}

func newLockTable() *lockTable { return &lockTable{locks: map[lockKey]lockHolder{}} }

// lock takes or renews the locks it can, and returns those it holds.
func (t *lockTable) lock(c *conn, b *lockBody, now time.Time) []mqRef {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []mqRef{}
	for _, mq := range b.MQSet {
		k := lockKey{b.ConsumerGroup, mq.Topic, mq.QueueID}
		h, held := t.locks[k]
		if held && h.client != b.ClientID && now.Before(h.until) {
			continue
		}
		t.locks[k] = lockHolder{client: b.ClientID, c: c, until: now.Add(lockTTL)}
		out = append(out, mq)
	}
	return out
}

func (t *lockTable) unlock(b *lockBody) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, mq := range b.MQSet {
		k := lockKey{b.ConsumerGroup, mq.Topic, mq.QueueID}
		if h, ok := t.locks[k]; ok && h.client == b.ClientID {
			delete(t.locks, k)
		}
	}
}

// dropConn releases the locks taken on c.
func (t *lockTable) dropConn(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, h := range t.locks {
		if h.c == c {
			delete(t.locks, k)
		}
	}
}

// lockBatch answers LOCK_BATCH_MQ.
func (s *Server) lockBatch(c *conn, req *Command) *Command {
	var b lockBody
	if err := json.Unmarshal(req.Body, &b); err != nil || b.ClientID == "" || b.ConsumerGroup == "" {
		return errResp(respInvalidParameter, "lock body is not RocketMQ's LockBatchRequestBody with a consumerGroup and a clientId")
	}
	body, _ := json.Marshal(map[string][]mqRef{"lockOKMQSet": s.locks.lock(c, &b, time.Now())})
	return &Command{Code: respSuccess, Body: body}
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
