package server

import (
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
)

// reflectRoute is gRPC server reflection, v1 and v1alpha (grpcurl, grpcui
// and Postman ask v1 first, older tools v1alpha), on the API router. It
// lists the fence.v1 services, grpc.health.v1.Health and reflection
// itself, and serves their descriptors (fence.proto and what it imports)
// from the descriptors compiled into the binary, so a client needs no
// .proto file: `grpcurl -plaintext HOST:PORT list`.
func reflectRoute(opts []connect.HandlerOption) route {
	names := append(append([]string{}, fenceServices...),
		grpchealth.HealthV1ServiceName,
		grpcreflect.ReflectV1ServiceName,
		grpcreflect.ReflectV1AlphaServiceName,
	)
	r := grpcreflect.NewStaticReflector(names...)
	mux := http.NewServeMux()
	mux.Handle(grpcreflect.NewHandlerV1(r, opts...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(r, opts...))
	return route{prefix: "/grpc.reflection.", h: mux}
}
