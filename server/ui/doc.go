// Package ui is the operator page that `fence serve` serves at /ui/: one
// HTML file, one style sheet and one script, hand-written (no framework,
// no build step) and embedded in the binary. The page talks to the same
// port as any client: the Watch stream (GET /v1/watch, read with fetch so
// it can send the bearer token), the OperatorService, ClusterService and
// AuthService as JSON POSTs. It holds no credentials of its own: the
// operator's bearer token is asked once and kept in the tab's
// sessionStorage, and every call is judged by the server as any other.
//
// Mode (--ui) says what is served: Off (404), Read (the page without any
// action) or Full (a release button for admins). Every answer carries a
// strict Content-Security-Policy (no inline script or style, no eval, no
// framing) and X-Content-Type-Options: nosniff.
package ui
