package remoting

import (
	"fmt"
	"strconv"
)

// queryOffset answers QUERY_CONSUMER_OFFSET. A group with no committed
// offset for the queue starts at its first message (offset 0), as RocketMQ
// does for a queue whose first message it still holds in memory; a queue
// hourglass never trims ahead of its retention, so that is always true.
func (s *Server) queryOffset(req *Command) *Command {
	f := &fields{m: req.ExtFields}
	group := f.str("consumerGroup")
	topic, q := f.queue()
	if f.err != nil {
		return badRequest(f.err)
	}
	off, ok := s.offsets.get(offsetKey{group, topic, q})
	if !ok {
		if z, set := req.ExtFields["setZeroIfNotFound"]; set && z == "false" {
			// RocketMQ 5's clients ask so when they start from the last
			// offset themselves.
			return errResp(respQueryNotFound, "no committed offset for this group and queue")
		}
		off = 0
	}
	return okResp(map[string]string{"offset": strconv.FormatInt(off, 10)})
}

// updateOffset answers UPDATE_CONSUMER_OFFSET once the offset is durable
// (a one-way update too is made durable before the next request of its
// connection that waits on it).
func (s *Server) updateOffset(req *Command) *Command {
	f := &fields{m: req.ExtFields}
	group := f.str("consumerGroup")
	topic, q := f.queue()
	off := f.int64("commitOffset")
	if f.err != nil {
		return badRequest(f.err)
	}
	if off < 0 {
		return badRequest(errOffset(off))
	}
	if resp := s.checkQueue(topic, q); resp != nil {
		return resp
	}
	gen, err := s.offsets.set(offsetKey{group, topic, q}, off)
	if err != nil {
		return badRequest(err)
	}
	if err := s.offsets.commit(gen); err != nil {
		s.log.Error("remoting: consumer offsets could not be made durable", "err", err)
		return errResp(respSystemError, err.Error())
	}
	return okResp(nil)
}

// checkQueue answers a request for a queue that does not exist (nil when
// it does): no offset is kept for a queue no consumer can pull, so a
// client cannot grow the offsets file with made-up topics and queues.
func (s *Server) checkQueue(topic string, q int) *Command {
	n, _, ok := s.eng.TopicKind(topic)
	if !ok {
		return errResp(respTopicNotExist, fmt.Sprintf("topic %q does not exist", topic))
	}
	if q >= n {
		return errResp(respInvalidParameter, fmt.Sprintf("topic %q has queues 0 to %d, not %d", topic, n-1, q))
	}
	return nil
}

type errOffset int64

func (e errOffset) Error() string {
	return "commitOffset " + strconv.FormatInt(int64(e), 10) + " is negative"
}

// minMaxOffset answers GET_MIN_OFFSET (always 0: a queue's offsets start
// there and retention only skips what it removed) and GET_MAX_OFFSET (the
// offset the next visible message will have).
func (s *Server) minMaxOffset(req *Command) *Command {
	f := &fields{m: req.ExtFields}
	topic, q := f.queue()
	if f.err != nil {
		return badRequest(f.err)
	}
	off := uint64(0)
	if req.Code == codeGetMaxOffset {
		var err error
		if off, err = s.durableLen(topic, q); err != nil {
			return durableLenErr(err)
		}
	}
	return okResp(map[string]string{"offset": strconv.FormatUint(off, 10)})
}

// searchOffset answers SEARCH_OFFSET_BY_TIMESTAMP: the first offset whose
// message became visible at or after the timestamp (the queue's length
// when none did), by binary search over the queue.
func (s *Server) searchOffset(req *Command) *Command {
	f := &fields{m: req.ExtFields}
	topic, q := f.queue()
	ts := f.int64("timestamp")
	if f.err != nil {
		return badRequest(f.err)
	}
	hi, err := s.durableLen(topic, q)
	if err != nil {
		return durableLenErr(err)
	}
	lo := uint64(0)
	for lo < hi {
		mid := lo + (hi-lo)/2
		vs, err := s.eng.ReadQueue(topic, q, mid, 1)
		if err != nil {
			return engineErr(err, respTopicNotExist)
		}
		if len(vs) == 0 || vs[0].Offset != mid || vs[0].Visible < ts {
			// Removed by retention counts as earlier.
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return okResp(map[string]string{"offset": strconv.FormatUint(lo, 10)})
}

// earliestTime answers GET_EARLIEST_MSG_STORETIME: when the queue's first
// message still held became visible.
func (s *Server) earliestTime(req *Command) *Command {
	f := &fields{m: req.ExtFields}
	topic, q := f.queue()
	if f.err != nil {
		return badRequest(f.err)
	}
	vs, err := s.eng.ReadQueue(topic, q, 0, 1)
	if err != nil {
		return engineErr(err, respTopicNotExist)
	}
	t := int64(0)
	if len(vs) > 0 {
		t = vs[0].Visible
	}
	return okResp(map[string]string{"timestamp": strconv.FormatInt(t, 10)})
}
