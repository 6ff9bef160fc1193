package server

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/internal/jsonenc"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/stream"
)

// The consumer path: receive (with acks of the previous batch carried in
// the same request) and ack. A receive answer is written by hand into a
// pooled buffer rather than through encoding/json: it is the largest
// answer the broker sends on its busiest path, and the reflection, the
// per-message strings (ID, base64, body copy) and the HTML escaping of
// the generic encoder cost as much as the engine's own work (see
// BenchmarkReceiveAck8). TestReceiveEncodingMatchesJSON holds the hand
// encoder to what encoding/json makes of api.ReceiveResponse.

// receive leases messages, long-polling up to "wait", after acking the
// receipts the request carries. The contract a consumer relies on: an
// error answer means nothing was acked and nothing leased; a 200 means
// every receipt of ack was acked. The wait ends early when the client
// disconnects or the server starts shutting down; either way nothing was
// leased, and the answer is an empty list.
func (h *Handler) receive(w http.ResponseWriter, r *http.Request) {
	var in api.ReceiveRequest
	body, err := h.readBody(w, r)
	if err == nil && !readReceiveFast(body, &in) {
		err = decodeBody(body, &in, true)
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	req, err := receiveRequest(&in, pathTopic(r), r.PathValue("group"))
	if err != nil {
		h.writeError(w, err)
		return
	}
	// The engine makes the acks with the leases (one append) or before
	// it waits; an error means it made neither. Once it has made them it
	// answers a later failure as no messages, so a 200 is always true
	// about the acks.
	req.Ack = in.Ack
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.draining, cancel)
	defer stop()
	got, err := h.eng.Receive(ctx, req)
	if err != nil && !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		if len(in.Ack) > 0 {
			err = errs.Wrap(errs.CodeOf(err), err, "receive with acks (nothing acked, nothing leased)")
		}
		h.writeError(w, err)
		return
	}
	acked := stream.Distinct(in.Ack)
	bp := receiveBufs.Get().(*[]byte)
	b := appendReceiveResponse((*bp)[:0], got, acked, in.BodyEncoding)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	if cap(b) <= maxPooledReceive {
		*bp = b
		receiveBufs.Put(bp)
	}
}

// receiveRequest checks a receive's fields and turns them into the
// engine's request. It refuses here what the engine would refuse, so that
// a request carrying acks is refused before they are made.
func receiveRequest(in *api.ReceiveRequest, topic, group string) (engine.ReceiveRequest, error) {
	req := engine.ReceiveRequest{Topic: topic, Group: group, Max: in.Max}
	var err error
	if req.Invisible, err = positiveDurationField("invisible", in.Invisible); err != nil {
		return req, err
	}
	if req.Wait, err = durationField("wait", in.Wait); err != nil {
		return req, err
	}
	switch {
	case in.Max < 0 || in.Max > engine.MaxReceive:
		return req, errs.New(errs.InvalidArgument, "max %d is not in [0, %d]", in.Max, engine.MaxReceive)
	case req.Invisible != 0 && (req.Invisible < time.Millisecond || req.Invisible > engine.MaxInvisible):
		return req, errs.New(errs.InvalidArgument, "invisible %v is not in [1ms, %v]", req.Invisible, engine.MaxInvisible)
	case req.Wait < 0 || req.Wait > engine.MaxReceiveWait:
		return req, errs.New(errs.InvalidArgument, "wait %v is not in [0, %v]", req.Wait, engine.MaxReceiveWait)
	case len(in.Ack) > engine.MaxReceive:
		return req, errs.New(errs.TooLarge, "ack has %d receipts; the limit is %d", len(in.Ack), engine.MaxReceive)
	}
	if err := checkBodyEncoding(in.BodyEncoding); err != nil {
		return req, err
	}
	for i, rc := range in.Ack {
		if rc == "" {
			return req, errs.New(errs.InvalidArgument, "ack[%d] is empty; give a receipt", i)
		}
	}
	return req, nil
}

// checkBodyEncoding refuses a body_encoding that is not one of the
// API's; empty is the default.
func checkBodyEncoding(enc api.BodyEncoding) error {
	if enc != "" && !slices.Contains(api.BodyEncodings(), enc) {
		return errs.New(errs.InvalidArgument, "body_encoding %q is not one of %v", enc, api.BodyEncodings())
	}
	return nil
}

func (h *Handler) ack(w http.ResponseWriter, r *http.Request) {
	var in api.AckRequest
	if err := h.decode(w, r, &in, false); err != nil {
		h.writeError(w, err)
		return
	}
	if len(in.Receipts) == 0 {
		h.writeError(w, errs.New(errs.InvalidArgument, "receipts is empty; give at least one receipt"))
		return
	}
	if err := h.eng.Ack(r.Context(), pathTopic(r), r.PathValue("group"), in.Receipts...); err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.AckResponse{Acked: stream.Distinct(in.Receipts)})
}

// receiveBufs recycles the buffers receive answers are written into;
// maxPooledReceive keeps an answer of large bodies from pinning its
// buffer.
var receiveBufs = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

const maxPooledReceive = 1 << 20

// appendReceiveResponse appends the JSON of api.ReceiveResponse for got.
func appendReceiveResponse(b []byte, got []engine.Received, acked int, enc api.BodyEncoding) []byte {
	b = append(b, `{"messages":[`...)
	for i := range got {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendReceived(b, &got[i], enc)
	}
	b = append(b, `],"acked":`...)
	b = strconv.AppendInt(b, int64(acked), 10)
	return append(b, "}\n"...)
}

// appendReceived appends the JSON of one api.ReceivedMessage, its fields
// in the type's order.
func appendReceived(b []byte, r *engine.Received, enc api.BodyEncoding) []byte {
	m := r.Message
	b = append(b, `{"id":"`...)
	b = appendID(b, r.ID)
	b = append(b, `","receipt":`...)
	b = appendJSONString(b, r.Receipt)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	b = append(b, `,"queue":`...)
	b = strconv.AppendInt(b, int64(r.Queue), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendUint(b, r.Offset, 10)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, m.Key)
	b = append(b, `,"tag":`...)
	b = appendJSONString(b, m.Tag)
	b = append(b, `,"group":`...)
	b = appendJSONString(b, m.Group)
	if len(m.Properties) > 0 {
		b = appendProperties(b, m.Properties)
	}
	text := enc != api.BodyBase64 && utf8.Valid(m.Body)
	if text {
		b = append(b, `,"body":`...)
		// The string does not outlive the call, and the body is not
		// written to meanwhile.
		b = appendJSONString(b, unsafe.String(unsafe.SliceData(m.Body), len(m.Body)))
	}
	if !text || enc != api.BodyText {
		b = append(b, `,"body_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, m.Body)
		b = append(b, '"')
	}
	b = append(b, `,"due":`...)
	b = strconv.AppendInt(b, r.Due, 10)
	b = append(b, `,"visible":`...)
	b = strconv.AppendInt(b, r.Visible.Visible, 10)
	return append(b, '}')
}

// appendProperties appends `,"properties":{...}` with the keys sorted, as
// encoding/json writes a map. The keys of a message's few properties are
// sorted in an array on the stack: a sorted copy from the map's iterator
// cost an allocation and a tenth of the broker's CPU under a herd.
func appendProperties(b []byte, props map[string]string) []byte {
	var arr [8]string
	keys := arr[:0]
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, `,"properties":{`...)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, props[k])
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendID appends an ID's text form (message.ID.String: Pos then Tag,
// 16 lower-case hex digits each) without the formatting machinery.
func appendID(b []byte, id message.ID) []byte {
	for _, v := range [2]uint64{id.Pos, id.Tag} {
		for shift := 60; shift >= 0; shift -= 4 {
			b = append(b, hexDigits[v>>uint(shift)&0xf])
		}
	}
	return b
}

// appendJSONString appends s as a JSON string the way encoding/json
// writes it (jsonenc.AppendString).
func appendJSONString(b []byte, s string) []byte { return jsonenc.AppendString(b, s) }
