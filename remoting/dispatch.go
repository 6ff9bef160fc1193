package remoting

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// dispatch answers one request; nil means no answer.
func (s *Server) dispatch(c *conn, req *Command) *Command {
	s.count(req.Code)
	if resp := systemTopicRefusal(req); resp != nil {
		return resp
	}
	switch req.Code {
	case codeGetRouteInfoByTopic:
		return s.route(c, req)
	case codeGetBrokerClusterInfo:
		return s.clusterInfo(c)
	case codeHeartBeat:
		return s.heartbeat(c, req)
	case codeUnregisterClient:
		return s.unregister(c, req)
	case codeCheckClientConfig:
		return s.checkClientConfig(req)
	case codeGetConsumerListByGroup:
		return s.consumerList(req)
	case codeSendMessage, codeSendMessageV2, codeSendBatchMessage:
		return s.send(c, req)
	case codePullMessage, codeLitePullMessage:
		return s.pull(c, req)
	case codeQueryConsumerOffset:
		return s.queryOffset(req)
	case codeUpdateConsumerOffset:
		return s.updateOffset(req)
	case codeGetMaxOffset, codeGetMinOffset:
		return s.minMaxOffset(req)
	case codeSearchOffsetByTime:
		// Each step of the search reads a whole message, as a pull does:
		// with a token of the connection's answers held, so a client's
		// searches in flight read at most maxPullsAnswering at once.
		return s.holdingAnswer(c, func() *Command { return s.searchOffset(req) })
	case codeGetEarliestMsgTime:
		return s.holdingAnswer(c, func() *Command { return s.earliestTime(req) })
	case codeConsumerSendMsgBack:
		return s.sendBack(c, req)
	case codeLockBatchMQ:
		return s.lockBatch(c, req)
	case codeUnlockBatchMQ:
		return s.unlockBatch(c, req)
	case codeEndTransaction:
		return s.endTransaction(req)
	case codeViewMessageByID:
		return s.holdingAnswer(c, func() *Command { return s.viewMessage(c, req) })
	case codeQueryMessage:
		return s.holdingAnswer(c, func() *Command { return s.queryMessage(c, req) })
	}
	return s.unsupported(req)
}

// fields reads a request's extFields, keeping the first problem.
type fields struct {
	m map[string]string
	// short, when set, gives a field's short name (SEND_MESSAGE_V2's
	// one-letter names), which is read first.
	short map[string]string
	err   error
}

// get reads a field by its short name, if it has one, else by name.
func (f *fields) get(name string) (string, bool) {
	if sn, ok := f.short[name]; ok {
		if v, ok := f.m[sn]; ok {
			return v, true
		}
	}
	v, ok := f.m[name]
	return v, ok
}

func (f *fields) str(name string) string {
	v, ok := f.get(name)
	if !ok && f.err == nil {
		f.err = fmt.Errorf("the request has no %q field", name)
	}
	return v
}

func (f *fields) opt(name string) string {
	v, _ := f.get(name)
	return v
}

func (f *fields) int64(name string) int64 {
	v := f.str(name)
	if f.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		f.err = fmt.Errorf("field %q is %q, not an integer", name, v)
	}
	return n
}

// optInt64 is an optional integer field: def when absent or empty.
func (f *fields) optInt64(name string, def int64) int64 {
	if v, ok := f.get(name); !ok || v == "" {
		return def
	}
	return f.int64(name)
}

// optInt32 is an optional field of a Java int (a flag, a sysFlag): one
// past int32 is an error, not wrapped into another value (a sysFlag of
// 2^32+4 would read as a transaction's half message).
func (f *fields) optInt32(name string, def int32) int32 {
	n := f.optInt64(name, int64(def))
	if f.err == nil && n != int64(int32(n)) {
		f.err = fmt.Errorf("field %q is %d, past a Java int", name, n)
	}
	return int32(n)
}

func (f *fields) bool(name string) bool {
	b, _ := strconv.ParseBool(f.opt(name))
	return b
}

// queue reads a topic and queue ID and checks both.
// maxQueueID bounds the queue IDs a request may name: above any queue
// count a topic can have, and small enough for an int everywhere.
const maxQueueID = 1 << 16

func (f *fields) queue() (string, int) {
	topic := f.str("topic")
	q := f.int64("queueId")
	if f.err == nil {
		if err := message.ValidateTopic(topic); err != nil {
			f.err = err
		} else if q < 0 || q > maxQueueID {
			f.err = fmt.Errorf("queueId %d is out of range", q)
		}
	}
	return topic, int(q)
}

// badRequest answers a request whose fields do not make sense.
func badRequest(err error) *Command {
	return errResp(respInvalidParameter, err.Error())
}

// engineErr maps an engine error onto the closest response code; notFound
// is the code of errs.NotFound in the caller's context.
func engineErr(err error, notFound int32) *Command {
	code := int32(respSystemError)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = respSystemBusy
	default:
		switch errs.CodeOf(err) {
		case errs.InvalidArgument, errs.TooLarge, errs.AlreadyExists, errs.FailedPrecondition:
			code = respMessageIllegal
		case errs.NotFound:
			code = notFound
		case errs.ResourceExhausted:
			code = respSystemBusy
		case errs.Unavailable:
			code = respServiceNotAvailable
		case errs.Unauthenticated:
			code = respNoPermission
		}
	}
	return errResp(code, err.Error())
}
