package server

import (
	"fmt"
	"net/http"
)

// healthz answers 200 "ok" while the process serves HTTP.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 when the node leads, its clock runs and it has applied
// everything committed; 503 otherwise (and while shutting down).
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.draining() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "shutting down")
		return
	}
	ready, detail := s.deps.Node.Readiness()
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: "+detail)
		return
	}
	fmt.Fprintln(w, "ready: "+detail)
}

// ready reports whether the server serves: not draining, the node ready.
func (s *Server) ready() bool {
	if s.draining() {
		return false
	}
	ready, _ := s.deps.Node.Readiness()
	return ready
}
