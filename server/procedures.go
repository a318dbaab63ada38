package server

import (
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// healthCheckProcedure is grpc.health.v1.Health/Check.
const healthCheckProcedure = "/grpc.health.v1.Health/Check"

// procedure is one method the API serves, as its service descriptor
// declares it.
type procedure struct {
	// stream is true for a client- or server-streaming method: a Connect
	// streaming content type (application/connect+json) is served on it,
	// and its errors are end-of-stream messages, not unary error bodies.
	stream bool
	// newRequest makes the request message of a unary method, as the
	// descriptor declares it: its plain JSON handler must decode into it
	// (checkJSONCalls). Nil for a streaming method.
	newRequest func() proto.Message
}

// procedures is every procedure the server answers, keyed by its path
// (/fence.v1.LockService/Acquire), derived from the descriptors of the
// services it mounts: the fence.v1 services, grpc.health.v1.Health and
// server reflection (v1 and v1alpha). The router serves exactly these
// paths (apiRouter), so a method added to fence.proto is served with the
// JSON contract or not at all.
var procedures = procedureTable()

// procedureTable builds procedures from the registered service
// descriptors. connectrpc.com/grpchealth and grpcreflect register theirs
// under the package prefix "connectext."; the paths clients call have
// none. grpcreflect serves v1alpha with v1's methods.
func procedureTable() map[string]procedure {
	t := make(map[string]procedure)
	for _, name := range fenceServices {
		addProcedures(t, mustService(name), name)
	}
	addProcedures(t, mustService("connectext."+grpchealth.HealthV1ServiceName), grpchealth.HealthV1ServiceName)
	refl := mustService("connectext." + grpcreflect.ReflectV1ServiceName)
	addProcedures(t, refl, grpcreflect.ReflectV1ServiceName)
	addProcedures(t, refl, grpcreflect.ReflectV1AlphaServiceName)
	return t
}

// addProcedures adds the methods of sd to t under the service name path.
func addProcedures(t map[string]procedure, sd protoreflect.ServiceDescriptor, path string) {
	ms := sd.Methods()
	for i := 0; i < ms.Len(); i++ {
		m := ms.Get(i)
		p := procedure{stream: m.IsStreamingClient() || m.IsStreamingServer()}
		if !p.stream {
			mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
			if err != nil {
				panic("request message of " + string(m.FullName()) + " is not registered: " + err.Error())
			}
			p.newRequest = func() proto.Message { return mt.New().Interface() }
		}
		t["/"+path+"/"+string(m.Name())] = p
	}
}

// mustService is the registered descriptor of the service named name.
func mustService(name string) protoreflect.ServiceDescriptor {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		panic("service " + name + " is not registered: " + err.Error())
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		panic(name + " is not a service")
	}
	return sd
}
