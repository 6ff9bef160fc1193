package remoting

import (
	"context"
	"github.com/hourglass-mq/hourglass/access"

	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// Transactions are kept as RocketMQ keeps them, in two topics of one
// queue, so that they survive a restart with nothing but the log:
//
//   - a half message is stored, visible at once, in halfTopic, its key its
//     message ID, with the topic and queue it is for in REAL_TOPIC and
//     REAL_QID;
//   - an end (commit or rollback, by END_TRANSACTION or after too many
//     checks) is a message in opTopic whose body is the half message's
//     hourglass ID; a commit first sends the message to its topic, due
//     after its delay counted from the commit, deduplicated by its message
//     ID, so a commit repeated after a crash between the two stores it
//     once;
//   - a half message with no end after txTimeout is checked: the broker
//     asks a producer of its group (CHECK_TRANSACTION_STATE), whose answer
//     is an END_TRANSACTION; after txMaxChecks it is rolled back.
const (
	halfTopic   = "RMQ_SYS_TRANS_HALF_TOPIC"
	opTopic     = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	txTimeout   = 6 * time.Second
	txMaxChecks = 15
	// txGroup keeps, in the offsets store, the half queue's offset below
	// which every half message has ended.
	txGroup = "hourglass-transactions"
)

// End-transaction values (RocketMQ's MessageSysFlag transaction types).
const (
	txCommit   = sysTranCommit
	txRollback = sysTranRollback
)

// txState is what the broker knows of the open transactions.
type txState struct {
	mu     sync.Mutex
	loaded bool
	ended  map[uint64]bool // half message positions with an end
	checks map[uint64]int  // checks sent, by half message position
}

// sendHalf stores a transactional producer's half message.
func (s *Server) sendHalf(c *conn, h sendHeader, items []batchItem) *Command {
	if len(items) != 1 {
		return errResp(respMessageIllegal, "a transactional message cannot be sent in a batch")
	}
	props, err := parseProperties(items[0].props)
	if err != nil {
		return errResp(respMessageIllegal, err.Error())
	}
	uniq := props[propUniqKey]
	if uniq == "" || props[propProducerGroup] == "" {
		return errResp(respMessageIllegal, "a half message needs UNIQ_KEY and PGROUP properties")
	}
	props[propRealTopic], props[propRealQueueID] = h.topic, strconv.Itoa(h.queue)
	props[hidBorn], props[hidBornHost] = strconv.FormatInt(h.born, 10), h.bornHost
	if items[0].flag != 0 {
		props[hidFlag] = strconv.Itoa(int(items[0].flag))
	}
	if sf := h.sysFlag & (sysCompressed | sysMultiTags); sf != 0 {
		props[hidSysFlag] = strconv.Itoa(int(sf))
	}
	if err := s.ensureTxTopics(); err != nil {
		return engineErr(err, respSystemError)
	}
	m := message.Message{Topic: halfTopic, Key: uniq, Tag: props[propTags], Properties: props, Body: items[0].body, DedupID: uniq}
	rs, err := s.sendEngine([]engine.SendRequest{{Message: m, DedupIgnore: []string{hidBorn, hidBornHost}, SystemProperties: systemOf(props)}}, false)
	if err != nil {
		return engineErr(err, respTopicNotExist)
	}
	return okResp(map[string]string{"msgId": offsetMsgID(c.local, s.handles.seal(rs[0].ID.Pos)), "queueId": strconv.Itoa(h.queue),
		"queueOffset": "-1", "transactionId": uniq, "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
}

func (s *Server) ensureTxTopics() error {
	for _, t := range []string{halfTopic, opTopic} {
		if _, _, ok := s.eng.TopicKind(t); ok {
			continue
		}
		if err := s.eng.CreateTopic(t, engine.TopicConfig{Queues: 1}); err != nil && errs.CodeOf(err) != errs.AlreadyExists {
			return err
		}
	}
	return nil
}

// endTransaction answers END_TRANSACTION: a commit sends the half message
// to its topic, a rollback drops it, "unknown" leaves it to be checked.
// The half message is found by its message ID and must be the one whose
// handle the producer was told.
func (s *Server) endTransaction(req *Command) *Command {
	f := &fields{m: req.ExtFields}
	id := f.str("msgId")
	pos := f.int64("commitLogOffset")
	kind := f.int64("commitOrRollback")
	if f.err != nil {
		return badRequest(f.err)
	}
	if kind != txCommit && kind != txRollback {
		return okResp(nil) // unknown: the check will ask again
	}
	if err := s.loadTx(); err != nil {
		return engineErr(err, respSystemError)
	}
	info, err := s.eng.InspectKey(halfTopic, id)
	found := err == nil && info.ID.Pos == s.handles.open(uint64(pos))
	if p := req.principal; p != nil && !p.AllowedAll(access.Send) && (!found || !p.Allowed(access.Send, info.Properties[propRealTopic])) {
		// The same refusal whether or not the half message exists: only
		// a principal that may send everywhere learns that.
		s.audit.Record(context.Background(), "remoting", p.Name, access.Send, "topic of half message "+id, access.ResultDenied, "end transaction")
		return errResp(respNoPermission, access.Denied(p, access.Send, "the topic of half message "+id).Error())
	}
	if !found {
		return errResp(respSystemError, errHalfNotFound.Error())
	}
	if err := s.endTx(info, kind == txCommit); err != nil {
		return engineErr(err, respSystemError)
	}
	return okResp(nil)
}

// endTx commits or rolls back one half message, once.
func (s *Server) endTx(info engine.Info, commit bool) error {
	s.tx.mu.Lock()
	done := s.tx.ended[info.ID.Pos]
	s.tx.mu.Unlock()
	if done {
		return nil
	}
	if commit {
		if err := s.commitTx(info); err != nil {
			return err
		}
	}
	op := message.Message{Topic: opTopic, Body: []byte(info.ID.String())}
	if _, err := s.sendEngine([]engine.SendRequest{{Message: op}}, false); err != nil {
		return err
	}
	s.tx.mu.Lock()
	s.tx.ended[info.ID.Pos] = true
	delete(s.tx.checks, info.ID.Pos)
	s.tx.mu.Unlock()
	return nil
}

// commitTx sends a half message to its topic, with its delay from now.
func (s *Server) commitTx(info engine.Info) error {
	body, _, err := s.eng.Peek(info.ID, s.opts.Limits.MaxBodyBytes)
	if err != nil {
		return err
	}
	props := maps.Clone(info.Properties)
	topic := props[propRealTopic]
	q, _ := strconv.Atoi(props[propRealQueueID])
	delete(props, propRealTopic)
	delete(props, propRealQueueID)
	h := sendHeader{topic: topic, queue: q}
	w, err := s.when(props, h, s.eng.Now())
	if err != nil {
		return err
	}
	tag := props[propTags]
	delete(props, propTags)
	key := props[propUniqKey]
	if ks := strings.Fields(props[propKeys]); len(ks) > 0 {
		key = ks[0]
	}
	m := message.Message{Topic: topic, Key: key, Tag: tag, Properties: props, Body: body, DedupID: props[propUniqKey]}
	if n, ok := s.queueCount(topic); ok && q < n {
		m.Group = queueGroup(n, q)
	}
	_, err = s.sendEngine([]engine.SendRequest{{Message: m, When: w, SystemProperties: systemOf(m.Properties)}}, false)
	return err
}
