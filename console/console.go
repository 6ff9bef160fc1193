// Package console is the broker's web console: static files (one HTML
// page, one script, one style sheet) built into the binary with go:embed
// and served by `hourglass serve` under /ui/. The page talks only to the
// broker's own HTTP API (/v1/...) and /metrics, with the bearer token the
// operator types in (kept in sessionStorage, sent as Authorization on every
// call); it loads nothing from anywhere else, which the Content-Security-
// Policy on every file enforces in the browser.
//
// The files are served without the token: they hold no data. Everything
// the console shows comes from API calls that need it.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed ui
var files embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// CSP is the Content-Security-Policy of every console file: scripts,
// styles, images, fonts and API calls from the broker's origin only; no
// inline script or style, no frames, no form posts elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the console's files for paths under Prefix.
func Handler() http.Handler {
	sub, err := fs.Sub(files, "ui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fileServer := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// Revalidate on every load, so that a new broker's console is
		// never mixed with an old one's cached script.
		h.Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}
