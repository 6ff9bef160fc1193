//go:build !race

package remoting

import (
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRemotingSend measures the broker's side of the send path as
// the bench's Java producers load it: 4 connections, 8 synchronous
// senders sharing each (their requests pipelined, answers matched by
// opaque), SEND_MESSAGE_V2 with a 256 B body at a delay level, JSON
// headers as the Java client writes them, sync flush. Besides ns/op it
// reports the process's CPU time per send (cpu-us/op: the test's client
// is in it too, the same in every build), which a loaded machine
// disturbs less than the rate.
func BenchmarkRemotingSend(b *testing.B) {
	tb := startBench(b, []time.Duration{time.Hour})
	const conns, senders = 4, 8
	body := make([]byte, 256)
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	var wg sync.WaitGroup
	var next sync.Mutex
	left := b.N
	take := func() bool {
		next.Lock()
		defer next.Unlock()
		left--
		return left >= 0
	}
	for c := 0; c < conns; c++ {
		nc, err := net.Dial("tcp", tb.addr)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		var mu sync.Mutex
		waiting := map[int32]chan *Command{}
		go func() {
			for {
				buf, err := readFrame(nc, testLimits)
				if err != nil {
					return
				}
				resp, err := decodeFrame(buf, testLimits)
				if err != nil {
					return
				}
				mu.Lock()
				ch := waiting[resp.Opaque]
				delete(waiting, resp.Opaque)
				mu.Unlock()
				if ch != nil {
					ch <- resp
				}
			}
		}()
		var wmu sync.Mutex
		for s := 0; s < senders; s++ {
			wg.Add(1)
			go func(id int32) {
				defer wg.Done()
				ch := make(chan *Command, 1)
				for i := int32(0); take(); i++ {
					op := id<<20 | i&0xFFFFF
					req := &Command{Code: codeSendMessageV2, Language: "JAVA", Version: 397, Opaque: op, Body: body,
						ExtFields: map[string]string{"a": "bench_p", "b": "bench", "c": "TBW102", "d": "4", "e": strconv.Itoa(int(i % 4)),
							"f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0",
							"i": "DELAY\x013\x02UNIQ_KEY\x01" + strconv.Itoa(int(op)) + "AC1100010000000000000000\x02WAIT\x01true\x02",
							"j": "0", "k": "false", "m": "false", "n": "hourglass"}}
					out, err := req.encode()
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					waiting[op] = ch
					mu.Unlock()
					wmu.Lock()
					_, err = nc.Write(out)
					wmu.Unlock()
					if err != nil {
						b.Error(err)
						return
					}
					if resp := <-ch; resp.Code != respSuccess {
						b.Errorf("send: %d %q", resp.Code, resp.Remark)
						return
					}
				}
			}(int32(c*senders + s))
		}
	}
	wg.Wait()
	b.StopTimer()
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) + syscall.TimevalToNsec(ru1.Stime) -
		syscall.TimevalToNsec(ru0.Utime) - syscall.TimevalToNsec(ru0.Stime))
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
}
