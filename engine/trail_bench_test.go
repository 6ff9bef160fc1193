package engine

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
)

// BenchmarkTrace measures what a message's trail costs: on disk, the bytes
// of trail records per message against the log's other records in the
// same run (100,000 messages of 256 B sent in batches of 1,000, received
// in batches of 100 and acked), and per look-up, the time to trace the
// oldest message (a scan of the whole log) and the newest, beside a raw
// scan of the whole log that does nothing per record.
// go test -run '^$' -bench BenchmarkTrace -benchtime 20x -count 3 ./engine/
func BenchmarkTrace(b *testing.B) {
	const n, batch, recv = 100_000, 1000, 100
	e, err := Open(Options{Dir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	body := make([]byte, 256)
	var first, last message.ID
	for i := 0; i < n; i += batch {
		reqs := make([]SendRequest, batch)
		for j := range reqs {
			reqs[j] = SendRequest{Message: message.Message{Topic: "t", Key: "k" + strconv.Itoa(i+j), Body: body}}
		}
		rs, err := e.SendBatch(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			first = rs[0].ID
		}
		last = rs[len(rs)-1].ID
	}
	for got := 0; got < n; {
		rs, err := e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g", Max: recv, Wait: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		receipts := make([]string, len(rs))
		for i, r := range rs {
			receipts[i] = r.Receipt
		}
		if len(rs) > 0 {
			if err := e.Ack(ctx, "t", "g", receipts...); err != nil {
				b.Fatal(err)
			}
		}
		got += len(rs)
	}
	bytes := map[commitlog.Type]int64{}
	var total int64
	if err := e.clog.Scan(e.clog.Start(), func(_ commitlog.Pos, rec commitlog.Record) error {
		bytes[rec.Type] += frameBytes(rec)
		total += frameBytes(rec)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	// The baseline: the same scan of the whole log with nothing done per
	// record, what any look-up by scanning costs at least.
	b.Run("raw-scan", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n = 0
			if err := e.clog.Scan(e.clog.Start(), func(_ commitlog.Pos, rec commitlog.Record) error {
				n += frameBytes(rec)
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/(1<<20), "MiB-scanned")
	})
	for _, c := range []struct {
		name string
		id   message.ID
	}{{"oldest", first}, {"newest", last}} {
		b.Run(c.name, func(b *testing.B) {
			var tr Trail
			for b.Loop() {
				if tr, err = e.Trace(ctx, c.id); err != nil {
					b.Fatal(err)
				}
			}
			if len(tr.Events) != 5 {
				b.Fatalf("trail of %d events, want 5: %+v", len(tr.Events), tr.Events)
			}
			b.ReportMetric(float64(tr.Scanned)/(1<<20), "MiB-scanned")
			b.ReportMetric(float64(bytes[recTrail])/n, "trail-B/msg")
			b.ReportMetric(float64(total-bytes[recTrail])/n, "other-B/msg")
		})
	}
}
