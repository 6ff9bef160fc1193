package remoting

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

// Pull request sysFlag bits (RocketMQ's PullSysFlag).
const (
	pullCommitOffset = 0x1
	pullSuspend      = 0x2
	pullSubscription = 0x4
	pullClassFilter  = 0x8
)

// Bounds of one pull.
const (
	// maxPullMessages bounds one pull's messages (RocketMQ's clients ask 32).
	maxPullMessages = 64
	// maxPullBytes bounds the bodies of one pull's messages (a first
	// message larger than it still goes alone): RocketMQ's clients refuse
	// a frame over 16 MiB, and a connection's long polls must not hold
	// 64 of the largest messages each. RocketMQ's own bound is 256 KiB.
	maxPullBytes = 1 << 20
	// pullChunk is how many queue entries a pull reads at once.
	pullChunk = 8
)

// pullRequest is a PULL_MESSAGE's header.
type pullRequest struct {
	group, topic string
	queue        int
	offset       int64
	max          int
	sysFlag      int64
	commit       int64
	suspend      time.Duration
	sub          string
	expType      string
}

func readPull(req *Command) (pullRequest, error) {
	f := &fields{m: req.ExtFields}
	p := pullRequest{group: f.str("consumerGroup")}
	p.topic, p.queue = f.queue()
	p.offset = f.int64("queueOffset")
	p.max = int(f.int64("maxMsgNums"))
	p.sysFlag = f.int64("sysFlag")
	p.commit = f.optInt64("commitOffset", -1)
	p.suspend = time.Duration(f.optInt64("suspendTimeoutMillis", 0)) * time.Millisecond
	p.sub = f.opt("subscription")
	p.expType = f.opt("expressionType")
	if f.err != nil {
		return p, f.err
	}
	if p.offset < 0 {
		return p, fmt.Errorf("queueOffset %d is negative", p.offset)
	}
	if p.max <= 0 {
		p.max = 1
	}
	p.max = min(p.max, maxPullMessages)
	return p, nil
}

// pull answers PULL_MESSAGE. With the suspend flag it waits (a long poll)
// until a message is visible at the offset or the suspend timeout ends.
// A commit offset carried by the pull is recorded as the group's offset.
func (s *Server) pull(c *conn, req *Command) *Command {
	p, err := readPull(req)
	if err != nil {
		return badRequest(err)
	}
	if p.expType != "" && !strings.EqualFold(p.expType, "TAG") || p.sysFlag&pullClassFilter != 0 {
		return errResp(respSubscriptionParse, "only TAG filtering is supported by hourglass; "+p.expType+" is not")
	}
	if p.sysFlag&pullCommitOffset != 0 && p.commit >= 0 && s.checkQueue(p.topic, p.queue) == nil {
		if _, err := s.offsets.set(offsetKey{p.group, p.topic, p.queue}, p.commit); err != nil {
			return badRequest(err)
		}
	}
	filter := tagFilter("*")
	if p.sysFlag&pullSubscription != 0 {
		filter = tagFilter(p.sub)
	} else if sd, ok := s.clients.subscription(p.group, p.topic); ok {
		filter = tagFilter(sd.SubString)
	}
	wait := time.Duration(0)
	if p.sysFlag&pullSuspend != 0 {
		wait = min(max(p.suspend, 0), s.opts.MaxLongPoll)
	}
	deadline := time.Now().Add(wait)
	holding := false
	defer func() {
		if holding { // pullOnce panicked: the token goes back
			c.releaseAnswer()
		}
	}()
	for {
		signal := s.eng.VisibleSignal() // before the read: a message made visible after it wakes us
		if !c.holdAnswer(s.done) {
			return errResp(respSystemBusy, "the broker is closing")
		}
		holding = true
		resp, found := s.pullOnce(c, p, filter)
		holding = false
		if found || !time.Now().Before(deadline) {
			if len(resp.Body) > 0 {
				resp.release = c.releaseAnswer // held until the answer is written
			} else {
				c.releaseAnswer()
			}
			return resp
		}
		c.releaseAnswer()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-signal:
		case <-t.C:
		case <-s.done:
		}
		t.Stop()
		select {
		case <-s.done:
			return resp
		default:
		}
	}
}

// pullOnce reads the queue at the pull's offset; found is false when
// there is nothing at or past it yet (a long poll waits then).
func (s *Server) pullOnce(c *conn, p pullRequest, filter tagFilter) (*Command, bool) {
	n, _, ok := s.eng.TopicKind(p.topic)
	if !ok {
		return s.pullResp(respPullNotFound, p.offset, 0, nil), false
	}
	if p.queue >= n {
		return errResp(respInvalidParameter, fmt.Sprintf("topic %q has queues 0 to %d, not %d", p.topic, n-1, p.queue)), true
	}
	maxOff, err := s.durableLen(p.topic, p.queue)
	if err != nil {
		return durableLenErr(err), true
	}
	switch {
	case uint64(p.offset) > maxOff:
		return s.pullResp(respPullOffsetMoved, int64(maxOff), maxOff, nil), true
	case uint64(p.offset) == maxOff:
		return s.pullResp(respPullNotFound, p.offset, maxOff, nil), false
	}
	body, matched, next, err := s.readPull(c, p, filter, maxOff)
	if err != nil {
		return engineErr(err, respPullNotFound), true
	}
	if matched == 0 {
		return s.pullResp(respPullRetryImmediately, next, maxOff, nil), true
	}
	return s.pullResp(respSuccess, next, maxOff, body), true
}

// readPull reads a pull's messages from its offset in chunks of
// pullChunk entries, until p.max entries are read or the bodies reach
// maxPullBytes (one message always goes): a pull over large messages
// neither reads nor answers more than that. next is the offset after the
// last entry read and answered.
func (s *Server) readPull(c *conn, p pullRequest, filter tagFilter, maxOff uint64) (body []byte, matched int, next int64, err error) {
	from, left := uint64(p.offset), p.max
	for left > 0 && from < maxOff && len(body) < maxPullBytes {
		// Never past maxOff, even if the queue grew since it was taken:
		// the fire records of later entries may not be durable (E21).
		n := int(min(uint64(min(left, pullChunk)), maxOff-from))
		vs, err := s.eng.ReadQueue(p.topic, p.queue, from, n)
		if err != nil {
			if len(body) > 0 {
				break // answer what was read; the next pull meets the error
			}
			return nil, 0, 0, err
		}
		// Past what was read (entries removed by retention are skipped).
		end := from + uint64(n)
		for i := range vs {
			v := &vs[i]
			if len(body) >= maxPullBytes {
				end = v.Offset // not answered: the next pull starts at it
				break
			}
			end = max(end, v.Offset+1)
			// A message for one consumer group (a redrive of its dead
			// letters: engine.SendRequest.ForGroup) is passed over by the
			// others, as a tag filter passes over a message.
			if !filter.match(v.Message.Tag) || (v.Message.ForGroup != "" && v.Message.ForGroup != p.group) {
				continue
			}
			matched++
			body = appendWire(body, s.wire(c, p.topic, p.queue, v))
		}
		from, left = end, left-n
	}
	return body, matched, int64(from), nil
}

func (s *Server) pullResp(code int32, next int64, maxOff uint64, body []byte) *Command {
	return &Command{Code: code, Body: body, ExtFields: map[string]string{
		"nextBeginOffset": strconv.FormatInt(next, 10), "minOffset": "0",
		"maxOffset": strconv.FormatUint(maxOff, 10), "suggestWhichBrokerId": "0"}}
}

// durableLen is queueLen once the fire records of those entries are
// durable: every queue offset this adapter hands a client (a pull's
// messages and next offset, the max offset, a search's answer) is at most
// it, so a client that keeps an offset (its in-memory next offset, a
// broadcasting consumer's offset file) never holds one past entries a
// crash can take back (engine invariant E21). The length is read first,
// then the log synced: the fires it counts were written before.
func (s *Server) durableLen(topic string, queue int) (uint64, error) {
	n := s.queueLen(topic, queue)
	if err := s.eng.Sync(); err != nil {
		return 0, err
	}
	return n, nil
}

// durableLenErr answers a request whose durableLen failed: the log could
// not be synced (the engine stops then), so no offset of the queue is
// handed out. SYSTEM_ERROR, as RocketMQ answers a pull its store cannot
// serve; a client retries later, on this connection or another.
func durableLenErr(err error) *Command {
	return errResp(respSystemError, "the commit log could not be synced, so no offset of this queue is handed out: "+err.Error())
}

// queueLen is the number of entries of a queue, 0 for an unknown one.
func (s *Server) queueLen(topic string, queue int) uint64 {
	st, err := s.eng.DescribeTopic(topic)
	if err != nil || queue >= len(st.Lengths) {
		return 0
	}
	return st.Lengths[queue]
}

// wire renders a visible message for a pull response.
func (s *Server) wire(c *conn, topic string, queue int, v *engine.Visible) *wireMessage {
	m := v.Message
	props := make(map[string]string, len(m.Properties)+2)
	w := &wireMessage{queueID: int32(queue), queueOffset: int64(v.Offset), commitOffset: s.commitHandle(topic, queue, v.Offset),
		storeTimestamp: v.Visible, topic: topic, body: m.Body}
	for k, val := range m.Properties {
		switch k {
		case hidBorn:
			w.bornTimestamp, _ = strconv.ParseInt(val, 10, 64)
		case hidBornHost:
			w.bornHost, w.bornPort = splitHost(val)
		case hidFlag:
			f, _ := strconv.Atoi(val)
			w.flag = int32(f)
		case hidSysFlag:
			f, _ := strconv.Atoi(val)
			w.sysFlag = int32(f) & (sysCompressed | sysMultiTags)
		case hidReconsume:
			r, _ := strconv.Atoi(val)
			w.reconsumeTimes = int32(r)
		default:
			if !strings.HasPrefix(k, hidPrefix) {
				props[k] = val
			}
		}
	}
	if m.Tag != "" {
		props[propTags] = m.Tag
	}
	if _, ok := props[propTimerOutMs]; ok {
		props[propTimerEnqueueMs] = strconv.FormatInt(m.Sent, 10)
		props[propTimerDequeueMs] = strconv.FormatInt(v.Visible, 10)
	}
	w.props = formatProperties(props)
	w.storeHost, w.storePort = splitHost(c.local)
	if w.bornHost == nil {
		w.bornHost = w.storeHost
	}
	return w
}

// commitHandle is the "commit log offset" a pulled message carries, which
// a consumer's send-back names it by: the queue and the queue offset,
// sealed (handles) in the domain of the topic. RocketMQ's is the position
// in its commit log; hourglass's positions are not handed out without
// their tag, and a queue and offset must not be guessable either: a
// made-up or another topic's handle opens to a random queue and offset,
// which names a message with a chance of about one in 2^64 over the
// topic's messages.
func (s *Server) commitHandle(topic string, queue int, offset uint64) int64 {
	return int64(s.handles.sealIn(topicTweak(topic), uint64(queue)<<48|offset&(1<<48-1)))
}

// splitHandle opens a commit handle of topic.
func (s *Server) splitHandle(topic string, h int64) (queue int, offset uint64) {
	v := s.handles.openIn(topicTweak(topic), uint64(h))
	return int(v >> 48), v & (1<<48 - 1)
}

// topicTweak is the handle domain of a topic's commit handles: never 0,
// the domain of positions.
func topicTweak(topic string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(topic))
	return f.Sum64() | 1
}

// tagFilter is a TAG subscription expression: "*" or tags joined by "||".
type tagFilter string

func (f tagFilter) match(tag string) bool {
	e := strings.TrimSpace(string(f))
	if e == "" || e == "*" {
		return true
	}
	for _, t := range strings.Split(e, "||") {
		if strings.TrimSpace(t) == tag {
			return true
		}
	}
	return false
}
