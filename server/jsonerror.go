package server

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// The error side of the JSON contract (docs/api.md). A Connect unary error
// is always a JSON body, whatever the request's encoding; Connect writes
// {"code", "message", "details"} with the ErrorDetail inside details, as
// base64 protobuf and an optional "debug" copy. errorBodies rewrites such a
// body so that a client without the proto reads the refusal from fields of
// its own:
//
//	{"code":"failed_precondition","message":"token 1 is older than accepted token 2",
//	 "reason":"STALE_TOKEN","facts":{"name":"stock","token":1,"lastToken":2},
//	 "details":[{"type":"fence.v1.ErrorDetail","value":"…","debug":{…}}]}
//
// and makes sure the Fence-Reason header is there (an invalid_argument from
// the protobuf decoder inside Connect has no detail: INVALID_ARGUMENT). A
// 415 (a content type Connect does not serve: PHP's form encoding) gets a
// body naming what was received and what is accepted. A plain JSON call is
// not Connect's: serveJSON writes the same body from the error itself
// (writeJSONError), nothing is rewritten.

// refusalReasons gives every refusal its reason, in whichever protocol it
// is answered: a unary Connect error body its reason and facts
// (errorBodies), a gRPC or gRPC-Web error its Fence-Reason (grpcReasons),
// and the end of a Connect stream with JSON messages what a unary body gets
// (streamErrors). It is mounted outermost (server.go), so the refusals made
// in front of Connect — limitBodies' Content-Length check, serveStreams'
// and apiFront's deadline headers — get them as the handlers' do.
func refusalReasons(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case grpcWebText(r):
			// Not served: Connect would read the base64 text as binary
			// frames and refuse something else. Handed on under a type
			// Connect refuses (415, its Accept-Post), answered by
			// unsupportedBody naming the type the client sent.
			eb := &errorBodies{ResponseWriter: w, r: r}
			defer eb.finish()
			r2 := r.Clone(r.Context())
			r2.Header.Set("Content-Type", "application/x-fence-unsupported")
			r2.Header.Del("Content-Encoding")
			next.ServeHTTP(eb, r2)
			return
		case plainJSONCall(r):
			// Answered whole by serveJSON, refusals included
			// (writeJSONError; refuse in front of it).
		case unaryConnect(r):
			eb := &errorBodies{ResponseWriter: w, r: r}
			defer eb.finish()
			w = eb
		case isGRPC(r):
			gr := &grpcReasons{ResponseWriter: w}
			defer gr.finish()
			w = gr
		case connectStreamJSON(r):
			w = &streamErrors{ResponseWriter: w}
		default:
			// GET /nope, a POST that is not an API call: a 404 names the path.
			w = &notFoundWriter{ResponseWriter: w, r: r}
		}
		next.ServeHTTP(w, r)
	})
}

// plainJSONCall reports whether r is a plain JSON call of a unary
// procedure (serveJSON's).
func plainJSONCall(r *http.Request) bool {
	if p, ok := procedures[r.URL.Path]; !ok || p.stream {
		return false
	}
	isJSON, _ := plainJSON(r)
	return isJSON
}

// grpcWebText reports whether r is gRPC-Web's text mode
// (application/grpc-web-text, grpc-web-text+proto: base64 frames), which
// the server does not serve.
func grpcWebText(r *http.Request) bool {
	return strings.HasPrefix(strings.ToLower(r.Header.Get("Content-Type")), "application/grpc-web-text")
}

// unaryConnect reports whether r is an API call in Connect's unary protocol
// (or one Connect will answer as such: a content type it does not serve),
// whose errors errorBodies rewrites. gRPC, gRPC-Web and Connect streaming
// requests carry their errors in trailers and end-of-stream messages.
func unaryConnect(r *http.Request) bool {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/") || !strings.Contains(r.URL.Path[1:], "/") {
		return false
	}
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	if strings.HasPrefix(ct, "application/connect+") {
		// A streaming type on a unary method: Connect's 415, rewritten.
		return !procedures[r.URL.Path].stream
	}
	return !strings.HasPrefix(ct, "application/grpc")
}

// errorBodies wraps w so that an error response (status 400 and above) to a
// unary Connect call is held back and rewritten when the handler is done
// (finish). Successful responses pass through untouched.
type errorBodies struct {
	http.ResponseWriter
	r      *http.Request
	status int          // 0 until WriteHeader
	held   bool         // an error response is being held
	body   bytes.Buffer // the held body
}

func (e *errorBodies) WriteHeader(code int) {
	if e.status != 0 {
		return
	}
	e.status = code
	if code < 400 {
		e.ResponseWriter.WriteHeader(code)
		return
	}
	e.held = true
}

func (e *errorBodies) Write(p []byte) (int, error) {
	if e.status == 0 {
		e.WriteHeader(http.StatusOK)
	}
	if e.held {
		return e.body.Write(p)
	}
	return e.ResponseWriter.Write(p)
}

// Flush passes a flush on, except while an error is held (it is written
// whole by finish).
func (e *errorBodies) Flush() {
	if e.held {
		return
	}
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is for http.ResponseController (deadlines, full duplex).
func (e *errorBodies) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// finish writes a held error response, rewritten.
func (e *errorBodies) finish() {
	if !e.held {
		return
	}
	h := e.Header()
	body := e.body.Bytes()
	switch {
	case e.status == http.StatusUnsupportedMediaType && len(bytes.TrimSpace(body)) == 0:
		body = unsupportedBody(e.r, h)
	case strings.HasPrefix(h.Get("Content-Type"), "application/json") && h.Get("Content-Encoding") == "":
		if out, reason := rewriteError(body); out != nil {
			body = out
			if h.Get(apierr.HeaderReason) == "" && reason != "" {
				h.Set(apierr.HeaderReason, reason)
			}
		}
	case e.status == http.StatusNotFound:
		body = notFoundBody(e.r, h) // a path no handler has (http.NotFound's text)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	e.ResponseWriter.WriteHeader(e.status)
	_, _ = e.ResponseWriter.Write(body)
}

// connectWireError is Connect's unary error body.
type connectWireError struct {
	Code    string            `json:"code"`
	Message string            `json:"message,omitempty"`
	Details []json.RawMessage `json:"details,omitempty"`
}

// rewriteError is body, a Connect unary error, with reason and facts
// added and the detail's debug copy written with numbers (refusalBody);
// and the reason. It returns nil when body is not a Connect error.
func rewriteError(body []byte) ([]byte, string) {
	var wire connectWireError
	if json.Unmarshal(body, &wire) != nil || wire.Code == "" {
		return nil, ""
	}
	details := make([]wireDetail, 0, len(wire.Details))
	for _, raw := range wire.Details {
		var d wireDetail
		if json.Unmarshal(raw, &d) != nil {
			continue
		}
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			continue
		}
		d.bytes = b
		details = append(details, d)
	}
	return refusalBody(wire.Code, wire.Message, details)
}

// jsonErrorBody is ce as refusalBody writes it, and its reason.
func jsonErrorBody(ce *connect.Error) ([]byte, string) {
	details := make([]wireDetail, 0, 1)
	for _, d := range ce.Details() {
		details = append(details, wireDetail{Type: d.Type(), Value: base64.RawStdEncoding.EncodeToString(d.Bytes()), bytes: d.Bytes()})
	}
	return refusalBody(ce.Code().String(), ce.Message(), details)
}

// wireDetail is one detail of a Connect error body; bytes is its value
// decoded.
type wireDetail struct {
	Type  string          `json:"type"`
	Value string          `json:"value"`
	Debug json.RawMessage `json:"debug,omitempty"`
	bytes []byte
}

// refusalBody is the JSON contract's refusal: Connect's unary error body
// (code, message, details) with the reason and facts of its ErrorDetail —
// or, with none (a failure outside Fence's refusals: a ClusterService
// failed_precondition, Health's not_found, unavailable), the code's name
// in capitals as reason, so every refused call has one — and the detail's
// debug copy with numbers.
func refusalBody(code, message string, details []wireDetail) ([]byte, string) {
	var detail *fencev1.ErrorDetail
	raws := make([]json.RawMessage, 0, len(details))
	for _, d := range details {
		if d.Type == "fence.v1.ErrorDetail" && detail == nil {
			det := new(fencev1.ErrorDetail)
			if proto.Unmarshal(d.bytes, det) == nil {
				detail = det
				d.Debug = encodeJSON(det)
			}
		}
		raws = append(raws, mustJSON(d))
	}
	reason := strings.ToUpper(code)
	var facts []byte
	if detail != nil {
		reason = detail.GetReason()
		facts = factsJSON(detail)
	}
	members := []member{{"code", mustJSON(code)}, {"message", mustJSON(message)}}
	if reason != "" {
		members = append(members, member{"reason", mustJSON(reason)})
	}
	if facts != nil {
		members = append(members, member{"facts", facts})
	}
	if len(raws) > 0 {
		members = append(members, member{"details", mustJSON(raws)})
	}
	return writeObject(members), reason
}

// factsJSON is the facts of a refusal: the ErrorDetail's fields in JSON
// (numbers for 64-bit integers) without reason, and the last accepted
// token named lastToken (as Fence-Last-Token, and as the API names it in
// a lock or a resource state).
func factsJSON(d *fencev1.ErrorDetail) []byte {
	b := encodeJSON(d)
	var out []member
	for _, m := range objectMembers(b) {
		switch m.name {
		case "reason":
			continue
		case "lastAccepted":
			m.name = "lastToken"
		}
		out = append(out, m)
	}
	return writeObject(out)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// unsupportedBody is the body of a 415 (a content type Connect does not
// serve): what was received and what is accepted (Connect's Accept-Post
// header), as a refusal like any other (invalid_argument, reason
// INVALID_ARGUMENT, facts field/bound/got) when the client accepts JSON,
// else as text. It sets the Content-Type and Fence-Reason headers.
func unsupportedBody(r *http.Request, h http.Header) []byte {
	ct := r.Header.Get("Content-Type")
	got := "no Content-Type"
	if ct != "" {
		got = strconv.Quote(ct)
	}
	msg := "unsupported Content-Type: got " + got + "; send the body as JSON with Content-Type: application/json " +
		"(or binary protobuf with application/proto; gRPC and gRPC-Web are served too)"
	if strings.HasPrefix(strings.ToLower(ct), "application/connect+") {
		msg += "; " + strconv.Quote(ct) + " is Connect's streaming type, served on SessionService/Stream only"
	}
	if grpcWebText(r) {
		msg = "unsupported Content-Type: got " + got + ": gRPC-Web's text mode (base64 frames; protoc-gen-grpc-web's " +
			"default mode=grpcwebtext) is not served: generate with mode=grpcweb (application/grpc-web+proto, binary) " +
			"or use @connectrpc/connect-web; plain JSON (application/json) and gRPC are served too"
	}
	if mt, _, _ := mime.ParseMediaType(ct); mt == "application/x-www-form-urlencoded" || mt == "multipart/form-data" {
		msg += "; a form (what PHP's curl sends for CURLOPT_POSTFIELDS without that header, or with an array) is not JSON: " +
			"send json_encode($request) with the header Content-Type: application/json"
	}
	accepted := h.Get("Accept-Post")
	if accepted == "" {
		accepted = "application/json, application/proto"
	}
	h.Set(apierr.HeaderReason, "INVALID_ARGUMENT")
	if strings.Contains(strings.ToLower(r.Header.Get("Accept")), "json") {
		h.Set("Content-Type", "application/json")
		facts := writeObject([]member{
			{"field", mustJSON("Content-Type")},
			{"bound", mustJSON("one of " + accepted)},
			{"got", mustJSON(ct)},
		})
		return writeObject([]member{
			{"code", mustJSON("invalid_argument")},
			{"message", mustJSON(msg)},
			{"reason", mustJSON("INVALID_ARGUMENT")},
			{"facts", facts},
		})
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return []byte(msg + "\naccepted: " + accepted + "\n")
}

// grpcReasons gives a gRPC or gRPC-Web error that no handler made — the
// protobuf decoder's refusal inside Connect, a malformed deadline header —
// its Fence-Reason (INVALID_ARGUMENT: the only such code with a reason),
// as a trailer, or as a header in a trailers-only gRPC-Web reply. A
// handler's refusal has it already (apierr.SetHeaders).
type grpcReasons struct {
	http.ResponseWriter
	wrote bool
}

// isGRPC reports whether r is a gRPC or gRPC-Web request.
func isGRPC(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

// headers adds the reason to a trailers-only reply's headers, before they
// are sent.
func (g *grpcReasons) headers() {
	if g.wrote {
		return
	}
	g.wrote = true
	h := g.Header()
	if r := grpcReason(h.Get("Grpc-Status")); r != "" && h.Get(apierr.HeaderReason) == "" {
		h.Set(apierr.HeaderReason, r)
	}
}

// grpcReason is the Fence-Reason of an error with gRPC status code status
// that carries none: the code's name in capitals (INVALID_ARGUMENT for the
// decoder's refusals, NOT_FOUND for Health's unknown service, ...); "" for
// OK or no status.
func grpcReason(status string) string {
	n, err := strconv.ParseUint(status, 10, 32)
	if err != nil || n == 0 {
		return ""
	}
	return strings.ToUpper(connect.Code(n).String())
}

func (g *grpcReasons) WriteHeader(code int) {
	g.headers()
	g.ResponseWriter.WriteHeader(code)
}

func (g *grpcReasons) Write(p []byte) (int, error) {
	g.headers()
	return g.ResponseWriter.Write(p)
}

func (g *grpcReasons) Flush() {
	g.headers()
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is for http.ResponseController (deadlines, full duplex).
func (g *grpcReasons) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// finish adds the reason to the HTTP/2 trailers of a gRPC error (net/http
// sends "Trailer:"-prefixed headers set before the handler returns).
func (g *grpcReasons) finish() {
	h := g.Header()
	const status, reason = http.TrailerPrefix + "Grpc-Status", http.TrailerPrefix + apierr.HeaderReason
	if r := grpcReason(h.Get(status)); r != "" && h.Get(reason) == "" {
		h.Set(reason, r)
	}
}

// connectStreamJSON reports whether r is a Connect streaming call with JSON
// messages (SessionService.Stream over connect+json).
func connectStreamJSON(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(strings.ToLower(r.Header.Get("Content-Type")), "application/connect+json")
}

// streamErrors passes a Connect streaming response through message by
// message, holding only its end-of-stream message ({"error":{…},
// "metadata":{…}}, flag 0x02): its error is rewritten as a unary error body
// is (rewriteError: reason, facts, the detail's debug copy with numbers —
// Connect writes that end message itself, with proto3 JSON's quoted
// integers). A compressed end message is written back uncompressed (the
// flag is per message).
type streamErrors struct {
	http.ResponseWriter
	prefix [grpcPrefixBytes]byte
	have   int           // bytes of the current prefix held
	left   uint32        // bytes of the current (ordinary) message still to pass
	end    *bytes.Buffer // the end message being held, or nil
	need   uint32        // its length
	flags  byte          // its flags
}

func (s *streamErrors) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		switch {
		case s.end != nil:
			k := min(len(p), int(s.need)-s.end.Len())
			s.end.Write(p[:k])
			p = p[k:]
			if s.end.Len() == int(s.need) {
				if err := s.writeEnd(); err != nil {
					return total - len(p), err
				}
			}
		case s.left > 0:
			k := min(len(p), int(s.left))
			if _, err := s.ResponseWriter.Write(p[:k]); err != nil {
				return total - len(p), err
			}
			s.left -= uint32(k)
			p = p[k:]
		default:
			k := copy(s.prefix[s.have:], p)
			s.have += k
			p = p[k:]
			if s.have < grpcPrefixBytes {
				continue
			}
			s.have = 0
			n := binary.BigEndian.Uint32(s.prefix[1:])
			if s.prefix[0]&0b10 != 0 {
				s.end, s.need, s.flags = new(bytes.Buffer), n, s.prefix[0]
				if n == 0 {
					if err := s.writeEnd(); err != nil {
						return total - len(p), err
					}
				}
				continue
			}
			if _, err := s.ResponseWriter.Write(s.prefix[:]); err != nil {
				return total - len(p), err
			}
			s.left = n
		}
	}
	return total, nil
}

// writeEnd writes the held end message, its error rewritten.
func (s *streamErrors) writeEnd() error {
	data, flags := s.end.Bytes(), s.flags
	s.end = nil
	if flags&1 != 0 && s.Header().Get("Connect-Content-Encoding") == "gzip" {
		if zr, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
			if plain, err := io.ReadAll(io.LimitReader(zr, maxRequestBytes)); err == nil {
				data, flags = plain, flags&^1
			}
		}
	}
	if flags&1 == 0 && json.Valid(data) {
		members := objectMembers(data)
		for i, m := range members {
			if m.name == "error" {
				if out, _ := rewriteError(m.value); out != nil {
					members[i].value = out
					data = writeObject(members)
				}
				break
			}
		}
	}
	var prefix [grpcPrefixBytes]byte
	prefix[0] = flags
	binary.BigEndian.PutUint32(prefix[1:], uint32(len(data)))
	if _, err := s.ResponseWriter.Write(prefix[:]); err != nil {
		return err
	}
	_, err := s.ResponseWriter.Write(data)
	return err
}

func (s *streamErrors) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is for http.ResponseController (deadlines, full duplex).
func (s *streamErrors) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// serviceList names the API's services for a 404's text: every one of
// fenceServices, without the package.
var serviceList = func() string {
	names := make([]string, len(fenceServices))
	for i, n := range fenceServices {
		names[i] = strings.TrimPrefix(n, "fence.v1.")
	}
	return strings.Join(names, ", ")
}()

// notFoundBody is the body of a 404 (a path no handler has): the method and
// path, and what the API's paths are, as a refusal (not_found, reason
// NOT_FOUND, facts.path) when the client sends or accepts JSON, else as
// text. It sets the Content-Type and Fence-Reason headers.
func notFoundBody(r *http.Request, h http.Header) []byte {
	msg := "no such path: " + r.Method + " " + strconv.Quote(r.URL.Path) + "; the API is POST /fence.v1.<Service>/<Method> " +
		"(" + serviceList + "; docs/api.md), " +
		"with GET /v1/watch, /v1/keys, /healthz, /readyz and /metrics, and the operator page at /ui/"
	// nosniff on every 404 too: the body names the path the client sent,
	// and is never to be read as anything but its Content-Type.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(apierr.HeaderReason, "NOT_FOUND")
	if strings.Contains(strings.ToLower(r.Header.Get("Accept")+r.Header.Get("Content-Type")), "json") {
		h.Set("Content-Type", "application/json")
		return writeObject([]member{
			{"code", mustJSON("not_found")},
			{"message", mustJSON(msg)},
			{"reason", mustJSON("NOT_FOUND")},
			{"facts", writeObject([]member{{"path", mustJSON(r.URL.Path)}})},
		})
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	return []byte(msg + "\n")
}

// notFoundWriter answers a 404 written as http.NotFound writes it (text)
// with notFoundBody, for requests errorBodies does not hold (GET /nope).
type notFoundWriter struct {
	http.ResponseWriter
	r       *http.Request
	swallow bool // the 404's own text is dropped
}

func (n *notFoundWriter) WriteHeader(code int) {
	if code == http.StatusNotFound && strings.HasPrefix(n.Header().Get("Content-Type"), "text/plain") && !n.swallow {
		body := notFoundBody(n.r, n.Header())
		n.Header().Set("Content-Length", strconv.Itoa(len(body)))
		n.ResponseWriter.WriteHeader(code)
		_, _ = n.ResponseWriter.Write(body)
		n.swallow = true
		return
	}
	n.ResponseWriter.WriteHeader(code)
}

func (n *notFoundWriter) Write(p []byte) (int, error) {
	if n.swallow {
		return len(p), nil
	}
	return n.ResponseWriter.Write(p)
}

func (n *notFoundWriter) Flush() {
	if f, ok := n.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is for http.ResponseController (deadlines, full duplex).
func (n *notFoundWriter) Unwrap() http.ResponseWriter { return n.ResponseWriter }
