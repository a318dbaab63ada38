// Package fencev1 holds the Fence API: fence.proto and the Go code generated
// from it (protoc-gen-go and protoc-gen-connect-go; regenerate with
// `make proto`). The generated code is committed.
package fencev1
