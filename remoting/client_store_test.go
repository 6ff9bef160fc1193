//go:build !race

package remoting

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestClientStoreTimestamp: a level's delay counts from the broker's store
// time, which a view of the send's offset message ID reports as the
// message's storeTimestamp, before and after delivery alike (RocketMQ's
// view of that ID shows its stored copy): it lies within the send, the
// due time is that time plus the level (plus the 1 ms the broker adds for
// its clock's millisecond, never less), and the push consumer gets the
// message no earlier. The pushed message's storeTimestamp is when it
// became visible, as RocketMQ's is when its schedule stored it again in
// the real topic.
func TestClientStoreTimestamp(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	_, got := newPush(t, b, "stamps", "stamped", consumer.MessageSelector{}, nil)
	level := testLevels[2].Milliseconds()
	before := time.Now().UnixMilli()
	res, err := p.SendSync(context.Background(), primitive.NewMessage("stamped", []byte("x")).WithDelayTimeLevel(3))
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	view := func() *primitive.MessageExt {
		t.Helper()
		h, _ := handleOf(res.OffsetMsgID)
		resp := b.request(t, &Command{Code: codeViewMessageByID, ExtFields: map[string]string{"topic": "stamped", "offset": strconv.FormatInt(int64(h), 10)}})
		ms := primitive.DecodeMessage(resp.Body)
		if resp.Code != respSuccess || len(ms) != 1 {
			t.Fatalf("view: %d %q", resp.Code, resp.Remark)
		}
		return ms[0]
	}
	store := view().StoreTimestamp
	if store < before || store > after {
		t.Fatalf("storeTimestamp %d is not within the send [%d, %d]", store, before, after)
	}
	h, _ := handleOf(res.OffsetMsgID)
	id, err := b.eng.MessageAt(b.srv.handles.open(h))
	if err != nil {
		t.Fatal(err)
	}
	info, err := b.eng.Inspect(id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Sent != store || info.Due < store+level || info.Due > store+level+1 {
		t.Fatalf("stored at %d (reported %d), due %d: want due = store + %d ms (+1)", info.Sent, store, info.Due, level)
	}
	d := waitFor(t, got, 10*time.Second)
	if at := d.at.UnixMilli(); at < store+level {
		t.Fatalf("delivered at %d, before store %d + level %d", at, store, level)
	}
	if d.msg.StoreTimestamp < store+level {
		t.Fatalf("the pushed storeTimestamp %d is before it became visible (due %d)", d.msg.StoreTimestamp, info.Due)
	}
	if again := view().StoreTimestamp; again != store {
		t.Fatalf("after delivery the view says storeTimestamp %d, before it %d", again, store)
	}
}
