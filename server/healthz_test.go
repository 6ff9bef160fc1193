package server

import (
	"net/http"
	"reflect"
	"runtime"
	"testing"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/internal/buildinfo"
)

// TestHealthzCarriesBuild: /healthz says which build answers, with the
// values hourglass version prints.
func TestHealthzCarriesBuild(t *testing.T) {
	t.Cleanup(buildinfo.Stamp("v3.1.4", "feedbeef", "2026-11-30T01:02:03Z"))

	ts := newTestServer(t)
	var h api.Health
	ts.call("GET", "/healthz", nil, http.StatusOK, &h)
	want := api.Health{Status: "ok", Version: "v3.1.4", Commit: "feedbeef", BuildDate: "2026-11-30T01:02:03Z", GoVersion: runtime.Version(), Clock: api.ClockSystem}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("healthz: %+v, want %+v", h, want)
	}
}
