package client

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkReceiveDecode reads a receive answer of 32 messages of the
// broker's shape (a 256-byte text body, two properties, a key) with the
// fast reader; encoding/json reads the same answer as the baseline.
func BenchmarkReceiveDecode(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"messages":[`)
	for i := range 32 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"%016x%016x","receipt":"AAEAAAAAAAAAKgAAAAEAAAAAAAAAAA","attempt":1,"queue":%d,"offset":%d,"key":"order-%d","tag":"","group":"",`+
			`"properties":{"bench-run":"mx4hy49cqg8","bench-seq":"%d"},"body":"%s","due":1764500000123,"visible":1764500000124}`,
			i, i*7, i%4, i, i, i, strings.Repeat("b", 256))
	}
	sb.WriteString(`],"acked":32}` + "\n")
	answer := []byte(sb.String())
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(answer)))
		for b.Loop() {
			var a receiveAnswer
			if err := a.decodeRaw(answer); err != nil || len(a.Messages) != 32 {
				b.Fatal(err, len(a.Messages))
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(answer)))
		for b.Loop() {
			var a receiveAnswer
			if err := json.Unmarshal(answer, &a); err != nil || len(a.Messages) != 32 {
				b.Fatal(err, len(a.Messages))
			}
		}
	})
}
