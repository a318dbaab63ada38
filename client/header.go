package client

import (
	"context"
	"net/http"

	"connectrpc.com/connect"
)

// headerInterceptor sets h on every request, unary and streaming.
type headerInterceptor http.Header

func (h headerInterceptor) set(dst http.Header) {
	for k, vs := range h {
		dst[k] = append([]string(nil), vs...)
	}
}

func (h headerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		h.set(req.Header())
		return next(ctx, req)
	}
}

func (h headerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		h.set(conn.RequestHeader())
		return conn
	}
}

func (h headerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// ctxHeaderInterceptor sets headers from each call's context.
type ctxHeaderInterceptor func(ctx context.Context, h http.Header)

func (f ctxHeaderInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		f(ctx, req.Header())
		return next(ctx, req)
	}
}

func (f ctxHeaderInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		f(ctx, conn.RequestHeader())
		return conn
	}
}

func (f ctxHeaderInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
