package remoting

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestTrickledFrameCutOff: a client that sends a frame a byte at a time,
// each byte well within the read timeout, is cut off once the frame has
// taken the read timeout in all (each byte does not restart it), long
// before the idle timeout.
func TestTrickledFrameCutOff(t *testing.T) {
	b := startTest(t, func(o *Options) { o.ReadTimeout, o.IdleTimeout = 300*time.Millisecond, time.Minute })
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	frame, _ := (&Command{Code: codeGetBrokerClusterInfo, Remark: string(make([]byte, 200))}).encode()
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		io.Copy(io.Discard, nc)
		closed <- time.Since(start)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case d := <-closed:
			if d > 20*time.Second {
				t.Fatalf("a trickled frame was cut off after %v (read timeout 300 ms)", d)
			}
			return
		case <-tick.C:
			if i >= len(frame) {
				t.Fatalf("the whole frame (%d bytes over %v) went through a read timeout of 300 ms", len(frame), time.Since(start))
			}
			nc.Write(frame[i : i+1])
		}
	}
}
