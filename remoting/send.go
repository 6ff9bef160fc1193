package remoting

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// The properties that carry what RocketMQ keeps outside a message's
// properties (its header fields) through the engine. The gRPC adapter
// uses the same prefix; users may not set names with it.
const (
	hidPrefix    = "rocketmq."
	hidBorn      = hidPrefix + "born_ms"   // born timestamp, Unix ms
	hidBornHost  = hidPrefix + "born_host" // born host, ip:port
	hidFlag      = hidPrefix + "flag"      // the message's flag, when not 0
	hidSysFlag   = hidPrefix + "sysflag"   // compressed and multi-tags bits, when set
	hidReconsume = hidPrefix + "reconsume" // reconsume times, when not 0
)

// systemNames are the properties that are not the user's: RocketMQ's own
// (its client's and its broker's, as in RocketMQ's MessageConst: RocketMQ
// counts none of them as a user property) and the adapter's hidden ones.
var systemNames = []string{propKeys, propTags, propDelay, propRetryTopic, propRealTopic, propRealQueueID,
	propTranPrepared, propProducerGroup, propOriginMsgID, propReconsumeTime, propUniqKey, propMaxReconsume,
	propTimerDelaySec, propTimerDelayMs, propTimerDeliverMs, propTimerOutMs, propTimerEnqueueMs, propTimerDequeueMs,
	propDLQOriginTopic, propDLQOriginMsgID, "WAIT", "MSG_REGION", "TRACE_ON",
	hidBorn, hidBornHost, hidFlag, hidSysFlag, hidReconsume}

// systemOf names the properties of props that are RocketMQ's or the
// adapter's: they do not count against the user's limits, but against a
// budget of their own (message.Limits.ValidateSystem), so that a 4.x
// client's 128 user properties are not cut by what RocketMQ adds.
func systemOf(props map[string]string) []string {
	var out []string
	for _, k := range systemNames {
		if _, ok := props[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// v2Short maps SEND_MESSAGE's field names to SEND_MESSAGE_V2's one-letter
// ones. A V2 request is read through it in place: copying its fields
// under their long names cost a map per send.
var v2Short = map[string]string{"producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d",
	"queueId": "e", "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i", "reconsumeTimes": "j",
	"unitMode": "k", "maxReconsumeTimes": "l", "batch": "m", "bname": "n"}

// sendHeader is what a send request says besides its messages.
type sendHeader struct {
	group, topic   string
	queue          int
	sysFlag        int32
	born           int64
	flag           int32
	props          string
	reconsume      int
	maxReconsume   int
	bornHost       string
	local          string // the address the client reached
	transactionSet bool
}

// sendFields reads a send request's fields by the names it uses: a
// SEND_MESSAGE_V2 (and a batch that names its topic only by "b") by the
// short names first. Whatever checks a send's topic (its permission, the
// system topics) reads it through sendFields, as the send does: a
// request carrying both "topic" and "b" must not be checked for one and
// stored in the other.
func sendFields(req *Command) fields {
	ext := req.ExtFields
	f := fields{m: ext}
	if req.Code == codeSendMessageV2 || (req.Code == codeSendBatchMessage && ext["b"] != "" && ext["topic"] == "") {
		f.short = v2Short
	}
	return f
}

// sendTopic is the topic a send request stores its messages in.
func sendTopic(req *Command) string {
	f := sendFields(req)
	return f.opt("topic")
}

func readSendHeader(req *Command) (sendHeader, error) {
	sf := sendFields(req)
	f := &sf
	h := sendHeader{group: f.opt("producerGroup")}
	h.topic, h.queue = f.queue()
	h.sysFlag = f.optInt32("sysFlag", 0)
	h.born = f.optInt64("bornTimestamp", 0)
	h.flag = f.optInt32("flag", 0)
	h.props = f.opt("properties")
	h.reconsume = int(f.optInt64("reconsumeTimes", 0))
	h.maxReconsume = int(f.optInt64("maxReconsumeTimes", 16))
	if f.err == nil {
		f.err = checkTopic(h.topic)
	}
	return h, f.err
}

// send answers SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE: the
// messages are stored in one engine batch (all or none), durable before
// the answer.
func (s *Server) send(c *conn, req *Command) *Command {
	h, err := readSendHeader(req)
	if err != nil {
		return badRequest(err)
	}
	h.bornHost, h.local = c.nc.RemoteAddr().String(), c.local
	items := []batchItem{{flag: h.flag, body: req.Body, props: h.props}}
	if req.Code == codeSendBatchMessage {
		if items, err = decodeBatch(req.Body, s.opts.MaxBatch); err != nil {
			return errResp(respMessageIllegal, err.Error())
		}
		if len(items) == 0 {
			return errResp(respMessageIllegal, "the batch holds no message")
		}
	}
	if h.sysFlag&sysTranMask == sysTranPrepared {
		return s.sendHalf(c, h, items)
	}
	return s.store(h, items)
}

// store sends items to h.topic, or to the group's dead-letter topic when
// h is a retry at or past its group's maximum: RocketMQ's rule for a
// consumer that sends a message back as a normal message. The Java
// client's orderly consumer relies on it: past its maximum it sends the
// message with its reconsume count (not one more) to be dead-lettered.
func (s *Server) store(h sendHeader, items []batchItem) *Command {
	now := s.eng.Now()
	internal := false
	retryTopic := h.topic
	if g, ok := strings.CutPrefix(h.topic, retryPrefix); ok && h.reconsume >= h.maxReconsume {
		h.topic, internal = dlqPrefix+g, true
	}
	reqs := make([]engine.SendRequest, 0, len(items))
	var uniq []string
	for _, it := range items {
		r, err := s.toEngine(h, it, now)
		if err != nil {
			return errResp(respMessageIllegal, err.Error())
		}
		reqs = append(reqs, r)
		uniq = append(uniq, r.Message.Properties[propUniqKey])
	}
	rs, ok := s.storedElsewhere(reqs, retryTopic)
	if !ok {
		var err error
		if rs, err = s.sendEngine(reqs, internal); err != nil {
			return engineErr(err, respTopicNotExist)
		}
	}
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = offsetMsgID(h.local, s.handles.seal(r.ID.Pos))
	}
	return okResp(map[string]string{"msgId": strings.Join(ids, ","), "queueId": strconv.Itoa(rs[0].Queue),
		"queueOffset": "-1", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
}

// sendEngine stores reqs; internal ones go to a dead-letter topic, which
// only the broker writes.
func (s *Server) sendEngine(reqs []engine.SendRequest, internal bool) ([]engine.Receipt, error) {
	ctx, cancel := s.requestContext()
	defer cancel()
	if err := s.ensureTopic(reqs[0].Message.Topic); err != nil {
		return nil, err
	}
	var rs []engine.Receipt
	var err error
	if internal {
		rs, err = s.eng.SendDeadLetters(ctx, reqs)
	} else {
		rs, err = s.eng.SendBatch(ctx, reqs)
	}
	if errs.CodeOf(err) == errs.AlreadyExists && len(reqs) == 1 && isRetryOrDLQ(reqs[0].Message.Topic) {
		// The copy of this retry is already stored, by the other of a
		// client's two ways to send a message back (the consumer sends it
		// as a normal message when the broker's answer to its send-back
		// was late): the first copy stands, and the second send succeeds.
		m := reqs[0].Message
		if id, lerr := s.eng.LookupDedup(m.Topic, m.DedupID); lerr == nil {
			return []engine.Receipt{{ID: id, Topic: m.Topic}}, nil
		}
	}
	return rs, err
}

// storedElsewhere finds the copy of a retry stored already in the other
// of its group's retry and dead-letter topics, under the same dedup ID
// (retryDedupID): a consumer's send-back and its fallback send of one
// retry can land on either side of the maximum (the send-back counts the
// reconsumes done, the fallback one more), and the first copy stands.
// other is the topic a send named (the retry topic for a send-back).
func (s *Server) storedElsewhere(reqs []engine.SendRequest, other string) ([]engine.Receipt, bool) {
	if len(reqs) != 1 || reqs[0].Message.DedupID == "" {
		return nil, false
	}
	m := reqs[0].Message
	var topic string
	if g, ok := strings.CutPrefix(m.Topic, dlqPrefix); ok && other == retryPrefix+g {
		topic = other
	} else if g, ok := strings.CutPrefix(m.Topic, retryPrefix); ok {
		topic = dlqTopicOf(g)
	} else {
		return nil, false
	}
	if _, _, exists := s.eng.TopicKind(topic); !exists {
		return nil, false
	}
	id, err := s.eng.LookupDedup(topic, m.DedupID)
	if err != nil {
		return nil, false
	}
	return []engine.Receipt{{ID: id, Topic: topic}}, true
}

func isRetryOrDLQ(topic string) bool {
	return strings.HasPrefix(topic, retryPrefix) || strings.HasPrefix(topic, dlqPrefix)
}

// retryDedupID is the dedup ID of the copy of a message (message ID uniq)
// sent back for the times-th reconsume: a send-back and a client's
// fallback send of the same retry store one copy.
func retryDedupID(uniq string, times int) string {
	if uniq == "" {
		return ""
	}
	return uniq + "#" + strconv.Itoa(times)
}

// ensureTopic creates a retry topic with one queue, as RocketMQ does; other
// topics are created by the engine on first send with its default count.
func (s *Server) ensureTopic(topic string) error {
	if _, _, ok := s.eng.TopicKind(topic); ok || !strings.HasPrefix(topic, retryPrefix) {
		return nil
	}
	err := s.eng.CreateTopic(topic, engine.TopicConfig{Queues: 1})
	if errs.CodeOf(err) == errs.AlreadyExists {
		return nil
	}
	return err
}

// requestContext bounds an engine call by the server's life.
func (s *Server) requestContext() (context.Context, context.CancelFunc) {
	return context.WithCancel(s.ctx)
}

// toEngine translates one message.
func (s *Server) toEngine(h sendHeader, it batchItem, now int64) (engine.SendRequest, error) {
	props, err := parseProperties(it.props)
	if err != nil {
		return engine.SendRequest{}, err
	}
	for k := range props {
		if strings.HasPrefix(k, hidPrefix) {
			return engine.SendRequest{}, fmt.Errorf("property %q: names starting with %q are reserved", k, hidPrefix)
		}
	}
	var w message.When
	if strings.HasPrefix(h.topic, dlqPrefix) {
		// A retry past its maximum, dead-lettered now: RocketMQ clears
		// its delay level, as a send-back to %DLQ% does.
		delete(props, propDelay)
	} else if w, err = s.when(props, h, now); err != nil {
		return engine.SendRequest{}, err
	}
	tag := props[propTags]
	delete(props, propTags)
	// hourglass indexes one key a message: its first key, by which it
	// can be cancelled, rescheduled and inspected through hourglass's own
	// API; else its message ID, by which queries find it.
	uniq := props[propUniqKey]
	key := uniq
	if ks := strings.Fields(props[propKeys]); len(ks) > 0 {
		key = ks[0]
	}
	props[hidBorn] = strconv.FormatInt(h.born, 10)
	props[hidBornHost] = h.bornHost
	if it.flag != 0 {
		props[hidFlag] = strconv.Itoa(int(it.flag))
	}
	if sf := h.sysFlag & (sysCompressed | sysMultiTags); sf != 0 {
		props[hidSysFlag] = strconv.Itoa(int(sf))
	}
	if h.reconsume > 0 {
		props[hidReconsume] = strconv.Itoa(h.reconsume)
	}
	if n := propertiesLen(props); n > 32767 {
		return engine.SendRequest{}, fmt.Errorf("properties take %d bytes; a RocketMQ message holds at most 32767", n)
	}
	dedup := uniq
	if isRetryOrDLQ(h.topic) {
		// Each retry of one message is a message of its own, and one
		// retry is stored once (see retryDedupID).
		dedup = retryDedupID(uniq, h.reconsume)
	}
	if err := message.ValidateDedupID(dedup); err != nil {
		return engine.SendRequest{}, err
	}
	m := message.Message{Topic: h.topic, Key: key, Tag: tag, Properties: props, Body: it.body, DedupID: dedup}
	if n, ok := s.queueCount(h.topic); ok && h.queue < n {
		// The producer chose the queue (an orderly producer's selector
		// keeps one order's messages in one queue): pin it.
		m.Group = queueGroup(n, h.queue)
	}
	return engine.SendRequest{Message: m, When: w, DedupIgnore: []string{hidBorn, hidBornHost}, SystemProperties: systemOf(props)}, nil
}

// when reads a message's delivery time: a delay level (clamped to the
// table's last level, as RocketMQ does; it removes any timer property),
// else RocketMQ 5's timer properties, TIMER_DELAY_SEC first, then
// TIMER_DELAY_MS, then TIMER_DELIVER_MS. It adds the properties RocketMQ
// adds: REAL_TOPIC, REAL_QID, and TIMER_OUT_MS for a timer.
// levelWhen is when a message at delay level level (> 0) is due, and
// sets in props what such a message carries, as RocketMQ's broker does: a
// level above the table is the last one, and DELAY then says so; the
// message's own topic and queue in REAL_TOPIC and REAL_QID; no timer
// properties, which a level removes. A send's level and a retry's
// (sendBack) are the same rule.
func (s *Server) levelWhen(props map[string]string, level int, topic string, queue int) message.When {
	delete(props, propTimerDelaySec)
	delete(props, propTimerDelayMs)
	delete(props, propTimerDeliverMs)
	props[propRealTopic], props[propRealQueueID] = topic, strconv.Itoa(queue)
	if n := len(s.opts.Limits.DelayLevels); level > n {
		level, props[propDelay] = n, strconv.Itoa(n)
	}
	// The broker's clock counts whole milliseconds, so the send happened
	// up to 1 ms after the instant it reads: 1 ms more keeps the delivery
	// from being early by that fraction.
	return message.When{Delay: s.opts.Limits.DelayLevels[level-1] + time.Millisecond}
}

func (s *Server) when(props map[string]string, h sendHeader, now int64) (message.When, error) {
	if v, ok := props[propDelay]; ok && v != "" {
		level, err := strconv.Atoi(v)
		if err != nil {
			return message.When{}, fmt.Errorf("property DELAY is %q, not a delay level", v)
		}
		if level > 0 {
			return s.levelWhen(props, level, h.topic, h.queue), nil
		}
	}
	var w message.When
	var at int64
	for _, name := range []string{propTimerDelaySec, propTimerDelayMs, propTimerDeliverMs} {
		v, ok := props[name]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return message.When{}, fmt.Errorf("property %s is %q, not an integer", name, v)
		}
		if name == propTimerDelaySec {
			n = max(-1<<40, min(n, 1<<40)) * 1000 // far beyond any maximum delay: refused below, not wrapped
			name = propTimerDelayMs
		}
		if name == propTimerDelayMs && n > s.opts.Limits.MaxDelay.Milliseconds() {
			return message.When{}, fmt.Errorf("property %s is %q: beyond the maximum delay of %v", name, v, s.opts.Limits.MaxDelay)
		}
		switch name {
		case propTimerDelayMs:
			// 1 ms more, as for a level.
			w, at = message.When{Delay: time.Duration(max(n, 0)+1) * time.Millisecond}, now+n
		default:
			w, at = message.When{At: n}, n
		}
		break
	}
	if at > now {
		props[propTimerOutMs] = strconv.FormatInt(at, 10)
		props[propRealTopic], props[propRealQueueID] = h.topic, strconv.Itoa(h.queue)
	} else {
		w = message.When{}
	}
	return w, nil
}

// queueGroups caches queueGroup's answers by queue count and queue.
var queueGroups sync.Map

// queueGroup returns a message group name that the engine places in queue
// q of a topic of n queues: it spreads messages by FNV-1a of their group,
// so the name is searched for once. A test holds the engine to it.
func queueGroup(n, q int) string {
	k := [2]int{n, q}
	if g, ok := queueGroups.Load(k); ok {
		return g.(string)
	}
	g := ""
	for i := 0; ; i++ {
		g = "q" + strconv.Itoa(q) + "." + strconv.Itoa(i)
		h := fnv.New64a()
		h.Write([]byte(g))
		if n == 1 || int(h.Sum64()%uint64(n)) == q {
			break
		}
	}
	queueGroups.Store(k, g)
	return g
}
