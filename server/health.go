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
	st := s.status.Status()
	switch {
	case s.draining():
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "shutting down")
	case !st.Ready():
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: leader=%t in_office=%t applied=%d commit=%d\n", st.Leader, st.InOffice, st.AppliedIndex, st.CommitIndex)
	default:
		fmt.Fprintf(w, "ready: applied=%d last_token=%d\n", st.AppliedIndex, st.LastToken)
	}
}
