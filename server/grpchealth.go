package server

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// fenceServices are the fence.v1 services this server answers, by their
// fully-qualified names: health (grpc.health.v1) reports on each of them,
// and server reflection lists them.
var fenceServices = []string{
	fencev1connect.LockServiceName,
	fencev1connect.ResourceServiceName,
	fencev1connect.SessionServiceName,
	fencev1connect.ClusterServiceName,
	fencev1connect.MaintenanceServiceName,
	fencev1connect.AuthServiceName,
	fencev1connect.KeyServiceName,
	fencev1connect.OperatorServiceName,
}

// healthChecker answers grpc.health.v1.Health/Check the way /readyz
// answers: SERVING when /readyz would say 200 (node.Status.Ready: the
// leader once in office, a follower once it knows a leader and has applied
// what it knows committed; and the server is not shutting down),
// NOT_SERVING otherwise. The whole server ("") and each fence.v1 service
// report the same status: every service needs the node. Any other name is
// NOT_FOUND, as the health protocol asks. Watch is not offered
// (Unimplemented): a Kubernetes gRPC probe and grpc_health_probe call
// Check, and a long-lived Watch stream would need the per-message write
// deadline that MaintenanceService.Backup has (limitWrites cuts a reply
// WriteTimeout after its request began).
type healthChecker struct{ s *Server }

func (h healthChecker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && !isFenceService(req.Service) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q: ask for \"\" (the server) or one of %v", req.Service, fenceServices))
	}
	if h.s.draining() || !h.s.ready() {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

func isFenceService(name string) bool {
	for _, s := range fenceServices {
		if s == name {
			return true
		}
	}
	return false
}

// healthRoute is grpc.health.v1.Health on the API router.
func (s *Server) healthRoute(opts []connect.HandlerOption) route {
	path, h := grpchealth.NewHandler(healthChecker{s}, opts...)
	return route{prefix: path, h: h}
}
