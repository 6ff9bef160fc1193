package api

import "net/http"

// AllowedMethods returns the methods with which mux has a route (other than
// its catch-all "/") for r's path: what a 405 answer lists in Allow. The
// embedded server and the Kafka-mode worker answer unmatched requests
// alike with it.
func AllowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pat := mux.Handler(r2); pat != "" && pat != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}
