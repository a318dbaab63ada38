package server

import (
	"net/http"
	"strings"
)

// apiRouter hands a request to the first route whose prefix its path
// starts with. It sits in front of http.ServeMux so API calls reach their
// Connect handler without the mux's pattern matching, which allocated
// several objects per request; /healthz, /readyz and /metrics go through
// the mux (the last route, prefix "/"). Connect's service handlers answer
// 404 for a procedure they do not have.
type apiRouter []route

type route struct {
	prefix string
	h      http.Handler
}

func (rt apiRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, x := range rt {
		if strings.HasPrefix(r.URL.Path, x.prefix) {
			x.h.ServeHTTP(w, r)
			return
		}
	}
	http.NotFound(w, r)
}
