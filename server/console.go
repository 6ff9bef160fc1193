package server

import (
	"mime"
	"net/http"
	"strings"

	"github.com/hourglass-mq/hourglass/console"
	"github.com/hourglass-mq/hourglass/errs"
)

// mountConsole serves the web console's files under /ui/ (package
// console); /ui redirects there.
func (h *Handler) mountConsole() {
	h.mux.Handle("GET "+console.Prefix, console.Handler())
	h.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, console.Prefix, http.StatusMovedPermanently)
	})
}

// isConsolePath reports whether p is a console file: open without the
// token, since the files hold no data (every call they make needs it).
func isConsolePath(p string) bool { return p == "/ui" || strings.HasPrefix(p, console.Prefix) }

// crossOrigin rejects state-changing requests a browser sends from
// another origin (Sec-Fetch-Site, or Origin against Host); requests
// without those headers (curl, the Go client) pass.
var crossOrigin = http.NewCrossOriginProtection()

// checkBrowserWrite is the CSRF guard. The API's credential is a bearer
// header, never a cookie, so a foreign page cannot borrow it; but a broker
// without a token must still not take a write from a page the operator
// happens to visit: a cross-origin write is refused, and so is a browser's
// body declared as anything but JSON (a form or text/plain post, which
// browsers send cross-origin without asking first).
func checkBrowserWrite(r *http.Request) error {
	if err := crossOrigin.Check(r); err != nil {
		return errs.New(errs.Unauthenticated, "cross-origin %s refused: %v", r.Method, err)
	}
	// Only what a browser sends is held to JSON (it carries Origin or
	// Sec-Fetch-Site on a write): curl -d and other tools label a JSON body
	// as a form, and the body is parsed strictly as JSON anyway.
	fromBrowser := r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != ""
	if ct := r.Header.Get("Content-Type"); fromBrowser && ct != "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errs.New(errs.InvalidArgument, "Content-Type %q is not accepted: request bodies are JSON (application/json)", ct)
		}
	}
	return nil
}
