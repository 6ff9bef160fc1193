package metrics

import (
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/hourglass-mq/hourglass/internal/buildinfo"
)

// TestBuildInfo: hourglass_build_info is 1 with the stamped build in its
// labels, the same values hourglass version prints.
func TestBuildInfo(t *testing.T) {
	t.Cleanup(buildinfo.Stamp("v2.0.1", "c0ffee", "2026-11-30T00:00:00Z"))

	srv := httptest.NewServer(Handler(openEngine(t)))
	defer srv.Close()
	m := scrape(t, srv.URL)
	series := `hourglass_build_info{commit="c0ffee",go_version="` + runtime.Version() + `",version="v2.0.1"}`
	if v, ok := m[series]; !ok || v != 1 {
		var seen []string
		for k := range m {
			if len(k) > 20 && k[:20] == "hourglass_build_info" {
				seen = append(seen, k)
			}
		}
		t.Fatalf("%s = %v (present %v); build_info series: %v", series, v, ok, seen)
	}
}
