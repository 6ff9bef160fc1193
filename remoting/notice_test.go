package remoting

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// noticeGoroutines counts the goroutines sending a member-change notice.
func noticeGoroutines() int {
	buf := make([]byte, 4<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "(*conn).noticeChanged") {
			n++
		}
	}
	return n
}

// TestNoticesCoalesce: a thousand changes of a group's members while the
// client does not read hold one goroutine, not a thousand; once it reads,
// it gets the notice under way and one more for the changes that came
// meanwhile (none lost, none repeated per change).
func TestNoticesCoalesce(t *testing.T) {
	b := startTest(t, nil)
	g := &gateConn{open: make(chan struct{}), first: make(chan struct{})}
	c := &conn{nc: g, w: newFrameWriter(g)}
	b.srv.notifyGroup("g", []*conn{c})
	<-g.first // the first notice is being written, and waits
	for i := 0; i < 1000; i++ {
		b.srv.notifyGroup("g", []*conn{c})
	}
	if n := noticeGoroutines(); n != 1 {
		t.Fatalf("%d goroutines sending notices for 1,001 changes, want 1", n)
	}
	close(g.open)
	for deadline := time.Now().Add(10 * time.Second); noticeGoroutines() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still sending notices", noticeGoroutines())
		}
	}
	g.mu.Lock()
	out := bytes.NewReader(g.out.Bytes())
	g.mu.Unlock()
	frames := 0
	for out.Len() > 0 {
		buf, err := readFrame(out, testLimits)
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := decodeFrame(buf, testLimits)
		if err != nil || cmd.Code != codeNotifyConsumerIDs || cmd.ExtFields["consumerGroup"] != "g" {
			t.Fatalf("frame %d: %+v %v", frames, cmd, err)
		}
		frames++
	}
	if frames != 2 {
		t.Fatalf("%d notices written for a change and 1,000 more while it was sent, want 2", frames)
	}
}
