package server

import (
	"net/http"
	"strings"
)

// apiRouter hands an API call — a path in procedures — to the first route
// whose prefix it starts with, and every other request to the route with
// prefix "/" (the mux of /healthz, /readyz and /metrics, which answers 404
// for a path it does not have). A path that is not in procedures never
// reaches a service handler: the procedure table decides what is served,
// so nothing is served without the JSON contract. API calls skip the
// mux's pattern matching, which allocated several objects per request.
type apiRouter []route

type route struct {
	prefix string
	h      http.Handler
}

func (rt apiRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, api := procedures[r.URL.Path]
	for _, x := range rt {
		if x.prefix == "/" || api && strings.HasPrefix(r.URL.Path, x.prefix) {
			x.h.ServeHTTP(w, r)
			return
		}
	}
	http.NotFound(w, r)
}
