package remoting

import (
	"net"
	"strings"
	"testing"
	"time"
)

// fakeConn is a client connection that swallows what the broker writes.
type fakeConn struct{ net.Conn }

func (fakeConn) Write(b []byte) (int, error)      { return len(b), nil }
func (fakeConn) Close() error                     { return nil }
func (fakeConn) SetWriteDeadline(time.Time) error { return nil }
func (fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 4242} }
func (fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9876} }
func (fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (fakeConn) SetDeadline(time.Time) error      { return nil }
func (fakeConn) Read([]byte) (int, error)         { select {} }

// servedCodes are the request codes dispatch serves.
var servedCodes = []int32{codeGetRouteInfoByTopic, codeGetBrokerClusterInfo, codeHeartBeat, codeUnregisterClient,
	codeGetConsumerListByGroup, codeSendMessage, codeSendMessageV2, codeSendBatchMessage, codePullMessage,
	codeLitePullMessage, codeQueryConsumerOffset, codeUpdateConsumerOffset, codeGetMaxOffset, codeGetMinOffset,
	codeSearchOffsetByTime, codeGetEarliestMsgTime, codeConsumerSendMsgBack, codeLockBatchMQ, codeUnlockBatchMQ,
	codeEndTransaction, codeViewMessageByID, codeQueryMessage, codeCheckClientConfig}

// FuzzRequest: any request of a served code, whatever its fields and
// body, is answered (an error or not) without a panic, and a response
// that holds a connection's answer token gives it back. ext is
// "name=value" lines.
func FuzzRequest(f *testing.F) {
	seeds := []string{
		"topic=orders\nqueueId=0\nproducerGroup=p\nproperties=DELAY\x013\x02KEYS\x01k\x02",
		"b=orders\ne=3\nf=4\ni=UNIQ_KEY\x01u\x02PGROUP\x01p\x02",
		"consumerGroup=g\ntopic=orders\nqueueId=0\nqueueOffset=0\nmaxMsgNums=32\nsysFlag=7\ncommitOffset=9223372036854775807\nsubscription=a||b",
		"consumerGroup=g\ntopic=orders\nqueueId=65536\nqueueOffset=-1\nmaxMsgNums=-1\nsysFlag=-1",
		"group=g\noffset=-9223372036854775808\noriginTopic=orders\ndelayLevel=-1\nmaxReconsumeTimes=-5",
		"group=g\noffset=1\noriginTopic=%RETRY%g\ndelayLevel=99999\noriginMsgId=x",
		"msgId=x\ncommitLogOffset=1\ncommitOrRollback=8",
		"topic=orders\nkey=k\nmaxNum=99999999\nbeginTimestamp=-1\nendTimestamp=1\n_UNIQUE_KEY_QUERY=true",
		"offset=-1\ntopic=%DLQ%g",
		"topic=orders\nqueueId=0\ntimestamp=-9223372036854775808",
		"consumerGroup=g\nclientID=c\nproducerGroup=p",
		"topic=%RETRY%\nqueueId=0",
	}
	bodies := [][]byte{nil, []byte(`{"clientID":"c","consumerDataSet":[{"groupName":"g","messageModel":"BROADCASTING","subscriptionDataSet":[{"topic":"orders","subString":"*"}]}],"producerDataSet":[{"groupName":"p"}]}`),
		[]byte(`{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"orders","queueId":1}]}`), batchMessage([]byte("x"), "DELAY\x01-1\x02"), {0xff}}
	for i := range servedCodes {
		f.Add(uint8(i), seeds[i%len(seeds)], bodies[i%len(bodies)])
		f.Add(uint8(i), seeds[(i+5)%len(seeds)], bodies[(i+1)%len(bodies)])
	}
	b := startTest(f, func(o *Options) { o.MaxLongPoll = time.Millisecond })
	c := newConn(b.srv, fakeConn{})
	for _, q := range []string{"0", "1", "2", "3"} {
		req := &Command{Code: codeSendMessage, Body: []byte("seed"), ExtFields: map[string]string{"topic": "orders", "queueId": q,
			"properties": "UNIQ_KEY\x01u" + q + "\x02KEYS\x01k\x02"}}
		if resp := b.srv.dispatch(c, req); resp.Code != respSuccess {
			f.Fatalf("seed send: %d %q", resp.Code, resp.Remark)
		}
	}
	f.Fuzz(func(t *testing.T, code uint8, ext string, body []byte) {
		req := &Command{Code: servedCodes[int(code)%len(servedCodes)], ExtFields: map[string]string{}, Body: body}
		for _, line := range strings.Split(ext, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				req.ExtFields[k] = v
			}
		}
		var resp *Command
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("code %d %q: panic %v", req.Code, ext, p)
				}
			}()
			resp = b.srv.dispatch(c, req)
		}()
		if resp != nil && resp.release != nil {
			resp.release()
		}
		if resp == nil {
			t.Fatalf("code %d %q: no answer", req.Code, ext)
		}
		if resp.Code != respSuccess && resp.Remark == "" && resp.Code != respPullNotFound && resp.Code != respPullOffsetMoved && resp.Code != respPullRetryImmediately {
			t.Fatalf("code %d %q: error %d without a reason", req.Code, ext, resp.Code)
		}
		if n := len(c.answering); n != 0 {
			t.Fatalf("code %d %q: %d answer tokens still held", req.Code, ext, n)
		}
	})
}
