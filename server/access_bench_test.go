package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/access/accesstest"
	"github.com/hourglass-mq/hourglass/engine"
)

// BenchmarkAccessCheck: what authentication and the permission check add
// to a request, in process (no network, no disk): GET /v1/topics/{topic}
// on a broker with no credentials (the baseline), with the -auth-token,
// and with a file principal whose rule allows it by a prefix pattern.
func BenchmarkAccessCheck(b *testing.B) {
	path, secrets := accesstest.Write(b, b.TempDir(), map[string][]string{"svc": {"send:other", "send:ord*"}})
	cases := []struct {
		name, auth string
		store      func() *access.Store
	}{
		{"open", "", func() *access.Store { s, _ := access.Open(access.Options{}); return s }},
		{"token", "Bearer tok", func() *access.Store { s, _ := access.Open(access.Options{AuthToken: "tok"}); return s }},
		{"principal", "Bearer svc:" + secrets["svc"], func() *access.Store { return accesstest.Store(b, path, "") }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			opts, logger, eng := benchEngine(b)
			if err := eng.CreateTopic("orders", engine.TopicConfig{}); err != nil {
				b.Fatal(err)
			}
			opts.Access = c.store()
			h := New(eng, opts, logger, nil)
			req := httptest.NewRequest("GET", "/v1/topics/orders", nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
