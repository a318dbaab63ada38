package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// Plain JSON (docs/api.md): a unary POST with Content-Type
// application/json — curl, fetch, Python, PHP and Connect-ES's default
// JSON — is answered by serveJSON, not by Connect: the body is read once
// (gunzipped when Content-Encoding: gzip), decoded once (decodeJSON), handed
// to the same service method Connect calls, and the reply or the refusal
// encoded once (encodeJSON, jsonErrorBody). Connect serves everything else
// — gRPC, gRPC-Web, Connect with binary protobuf, Connect streaming —
// with strictJSONCodec for their +json variants.

// jsonCall is one unary procedure as serveJSON calls it.
type jsonCall struct {
	// newRequest is an empty request message to decode into.
	newRequest func() proto.Message
	// call hands the request to the service method and returns its reply.
	call func(ctx context.Context, req proto.Message) (proto.Message, error)
}

// unaryJSON is the jsonCall of f, a Connect unary handler method.
func unaryJSON[Req, Res any](f func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) jsonCall {
	return jsonCall{
		newRequest: func() proto.Message { return any(new(Req)).(proto.Message) },
		call: func(ctx context.Context, m proto.Message) (proto.Message, error) {
			res, err := f(ctx, connect.NewRequest(any(m).(*Req)))
			if err != nil {
				return nil, err
			}
			return any(res.Msg).(proto.Message), nil
		},
	}
}

// jsonCalls is the JSON handler of every unary procedure, by path: the
// service methods Connect is given (server.go), bound to s. New refuses to
// build a server (checkJSONCalls) when a unary procedure of the table (procedures.go) has
// none here, so a method added to fence.proto is served as plain JSON or
// the server does not start (and TestEveryUnaryProcedureHasAJSONHandler
// fails first).
func (s *Server) jsonCalls() map[string]jsonCall {
	lock, res, sess := lockService{s}, resourceService{s}, sessionService{s}
	var cl fencev1connect.ClusterServiceHandler = fencev1connect.UnimplementedClusterServiceHandler{}
	if s.deps.Cluster != nil {
		cl = clusterService{s: s, m: s.deps.Cluster} // as clusterRoute mounts it
	}
	au, ks, op := s.authCalls(), s.keyCalls(), operatorService{s}
	return map[string]jsonCall{
		fencev1connect.LockServiceAcquireProcedure:               unaryJSON(lock.Acquire),
		fencev1connect.LockServiceRenewProcedure:                 unaryJSON(lock.Renew),
		fencev1connect.LockServiceReleaseProcedure:               unaryJSON(lock.Release),
		fencev1connect.LockServiceGetProcedure:                   unaryJSON(lock.Get),
		fencev1connect.LockServiceListProcedure:                  unaryJSON(lock.List),
		fencev1connect.ResourceServiceWriteProcedure:             unaryJSON(res.Write),
		fencev1connect.ResourceServiceAddProcedure:               unaryJSON(res.Add),
		fencev1connect.ResourceServiceReadProcedure:              unaryJSON(res.Read),
		fencev1connect.ResourceServiceDeleteProcedure:            unaryJSON(res.Delete),
		fencev1connect.SessionServiceOpenProcedure:               unaryJSON(sess.Open),
		fencev1connect.SessionServiceKeepAliveProcedure:          unaryJSON(sess.KeepAlive),
		fencev1connect.SessionServiceCloseProcedure:              unaryJSON(sess.Close),
		fencev1connect.ClusterServiceMembersProcedure:            unaryJSON(cl.Members),
		fencev1connect.ClusterServiceAddMemberProcedure:          unaryJSON(cl.AddMember),
		fencev1connect.ClusterServiceRemoveMemberProcedure:       unaryJSON(cl.RemoveMember),
		fencev1connect.ClusterServiceTransferLeadershipProcedure: unaryJSON(cl.TransferLeadership),
		fencev1connect.ClusterServiceNodeStatusProcedure:         unaryJSON(cl.NodeStatus),
		healthCheckProcedure:                                     healthJSON(healthChecker{s}),
		fencev1connect.AuthServiceBootstrapProcedure:             unaryJSON(au.Bootstrap),
		fencev1connect.AuthServiceSetEnabledProcedure:            unaryJSON(au.SetEnabled),
		fencev1connect.AuthServiceStatusProcedure:                unaryJSON(au.Status),
		fencev1connect.AuthServiceCreateTokenProcedure:           unaryJSON(au.CreateToken),
		fencev1connect.AuthServiceListTokensProcedure:            unaryJSON(au.ListTokens),
		fencev1connect.AuthServiceRevokeTokenProcedure:           unaryJSON(au.RevokeToken),
		fencev1connect.AuthServiceGrantRoleProcedure:             unaryJSON(au.GrantRole),
		fencev1connect.AuthServiceRevokeRoleProcedure:            unaryJSON(au.RevokeRole),
		fencev1connect.AuthServiceListRolesProcedure:             unaryJSON(au.ListRoles),
		fencev1connect.AuthServiceBindRoleProcedure:              unaryJSON(au.BindRole),
		fencev1connect.AuthServiceSetRoleQuotaProcedure:          unaryJSON(au.SetRoleQuota),
		fencev1connect.KeyServiceListKeysProcedure:               unaryJSON(ks.ListKeys),
		fencev1connect.KeyServiceRotateKeyProcedure:              unaryJSON(ks.RotateKey),
		fencev1connect.KeyServiceRetireKeyProcedure:              unaryJSON(ks.RetireKey),
		fencev1connect.OperatorServiceWhoAmIProcedure:            unaryJSON(op.WhoAmI),
		fencev1connect.OperatorServiceListSessionsProcedure:      unaryJSON(op.ListSessions),
		fencev1connect.OperatorServiceLockStoryProcedure:         unaryJSON(op.LockStory),
		fencev1connect.OperatorServiceActivityProcedure:          unaryJSON(op.Activity),
		fencev1connect.OperatorServiceClusterOverviewProcedure:   unaryJSON(op.ClusterOverview),
	}
}

// healthJSON is grpc.health.v1.Health/Check as plain JSON: grpchealth's
// handler takes Go structs, not its (registered) messages.
func healthJSON(c grpchealth.Checker) jsonCall {
	msg := func(name string) protoreflect.MessageType {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("connectext.grpc.health.v1." + name))
		if err != nil {
			panic(err)
		}
		return mt
	}
	reqType, resType := msg("HealthCheckRequest"), msg("HealthCheckResponse")
	return jsonCall{
		newRequest: func() proto.Message { return reqType.New().Interface() },
		call: func(ctx context.Context, m proto.Message) (proto.Message, error) {
			r := m.ProtoReflect()
			res, err := c.Check(ctx, &grpchealth.CheckRequest{Service: r.Get(r.Descriptor().Fields().ByName("service")).String()})
			if err != nil {
				return nil, err
			}
			out := resType.New()
			out.Set(out.Descriptor().Fields().ByName("status"), protoreflect.ValueOfEnum(protoreflect.EnumNumber(res.Status)))
			return out.Interface(), nil
		},
	}
}

// checkJSONCalls is an error naming the first procedure for which calls
// and the table differ: a unary procedure without a plain JSON handler, a
// handler of a streaming procedure or of no procedure, or one that decodes
// another message than its procedure's.
func checkJSONCalls(calls map[string]jsonCall) error {
	for path, p := range procedures {
		c, ok := calls[path]
		switch {
		case p.stream && ok:
			return errors.New("server: streaming procedure " + path + " has a plain JSON handler")
		case p.stream:
		case !ok:
			return errors.New("server: unary procedure " + path + " has no plain JSON handler (jsonCalls)")
		case c.newRequest().ProtoReflect().Descriptor() != p.newRequest().ProtoReflect().Descriptor():
			return errors.New("server: the plain JSON handler of " + path + " decodes another message than the procedure's")
		}
	}
	for path := range calls {
		if _, ok := procedures[path]; !ok {
			return errors.New("server: plain JSON handler for " + path + ", which is not a procedure")
		}
	}
	return nil
}

// apiFront checks an API call's deadline header, in every protocol, and
// answers a plain JSON unary call itself (serveJSON); everything else goes
// on to next (Connect, or the mux).
func (s *Server) apiFront(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proc, api := procedures[r.URL.Path]
		if !api || proc.stream {
			next.ServeHTTP(w, r)
			return
		}
		if bad := timeoutError(r.Header); bad != nil {
			refuse(w, r, apierr.ToConnect(bad))
			return
		}
		if isJSON, gz := plainJSON(r); isJSON {
			s.serveJSON(w, r, r.URL.Path, s.json[r.URL.Path], gz)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// plainJSON reports whether r is a POST of unary JSON that serveJSON
// answers, and whether its body is gzip-compressed. A Content-Encoding
// other than gzip is left to Connect (which names the ones it serves).
func plainJSON(r *http.Request) (isJSON, gz bool) {
	ct := r.Header.Get("Content-Type")
	// Binary protobuf and gRPC, the hot path, skip the media-type parse
	// (it allocates).
	if r.Method != http.MethodPost || !strings.Contains(strings.ToLower(ct), "json") {
		return false, false
	}
	// Another charset than UTF-8 is left to Connect, which refuses it (415).
	mt, params, err := mime.ParseMediaType(ct)
	if cs, ok := params["charset"]; err != nil || mt != "application/json" || ok && !strings.EqualFold(cs, "utf-8") {
		return false, false
	}
	switch r.Header.Get("Content-Encoding") {
	case "", "identity":
		return true, false
	case "gzip":
		return true, true
	}
	return false, false
}

// serveJSON answers r, a plain JSON call of the procedure at path.
func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request, path string, c jsonCall, gz bool) {
	// limitBodies, in front, makes a body over maxRequestBytes fail with
	// its refusal.
	body, err := io.ReadAll(r.Body)
	if err == nil && gz {
		body, err = gunzip(body)
		if err != nil && !errors.As(err, new(*connect.Error)) {
			err = apierr.ToConnect(fence.Invalid("body",
				"a whole gzip stream, as Content-Encoding: gzip says (it is not: "+err.Error()+")", ""))
		}
	}
	if err != nil {
		writeJSONError(w, connectError(err))
		return
	}
	msg := c.newRequest()
	if err := decodeJSON(body, msg); err != nil {
		writeJSONError(w, apierr.ToConnect(err))
		return
	}
	ctx := r.Context()
	if v := r.Header.Get("Connect-Timeout-Ms"); v != "" {
		ms, _ := strconv.ParseInt(v, 10, 64) // checked by timeoutError
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
	start := time.Now()
	res, err := c.call(ctx, msg)
	callMetrics{s.metrics}.observe(path, start, err)
	if err != nil {
		writeJSONError(w, connectError(err))
		return
	}
	addText(res.ProtoReflect())
	out := encodeJSON(res)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if len(out) >= compressMinBytes && acceptsGzip(r) {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(out)
		_ = zw.Close()
		out = b.Bytes()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// acceptsGzip reports whether r's Accept-Encoding names gzip.
func acceptsGzip(r *http.Request) bool {
	for _, e := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if name, _, _ := strings.Cut(strings.TrimSpace(e), ";"); strings.EqualFold(name, "gzip") {
			return true
		}
	}
	return false
}

// connectError is err as Connect would answer it: a *connect.Error as it
// is, a context's end or a read deadline (a body trickled past the
// server's ReadTimeout) as canceled or deadline_exceeded, anything else
// unknown.
func connectError(err error) *connect.Error {
	if ce := new(connect.Error); errors.As(err, &ce) {
		return ce
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeUnknown, err)
}

// writeJSONError writes ce as the JSON contract's refusal (jsonErrorBody),
// with its metadata as headers and Connect's HTTP status for its code.
func writeJSONError(w http.ResponseWriter, ce *connect.Error) {
	body, reason := jsonErrorBody(ce)
	h := w.Header()
	for k, v := range ce.Meta() {
		h[k] = v
	}
	if h.Get(apierr.HeaderReason) == "" && reason != "" {
		h.Set(apierr.HeaderReason, reason)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(httpStatus(ce.Code()))
	_, _ = w.Write(body)
}

// httpStatus is the HTTP status Connect's unary protocol gives code.
func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeCanceled:
		return 499
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnimplemented:
		return http.StatusNotImplemented
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}
