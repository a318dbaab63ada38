# Fence — the two set-up commands are `make run` and `make test`.
GO       ?= go
LISTEN   ?= 127.0.0.1:7420
DATA_DIR ?= ./fence-data
BIN      := bin/fence

.PHONY: run build test test-short vet fmt bench proto lab clean

## run: build and start a single-node server on $(LISTEN) with its data in $(DATA_DIR)
run: build
	./$(BIN) serve --listen $(LISTEN) --data-dir $(DATA_DIR)

## build: build the fence binary into bin/
build:
	$(GO) build -o $(BIN) ./cmd/fence

## test: every test, with the race detector
test: vet
	$(GO) test -race -count=1 -timeout 14m ./...

## test-short: quick loop while developing
test-short:
	$(GO) test -count=1 -short ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: the benchmarks behind docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./state/ ./node/ ./server/ ./guard/...

## lab: the seed's scenario against an embedded server
lab: build
	./$(BIN) lab

## proto: regenerate api/fence/v1 (needs protoc, protoc-gen-go, protoc-gen-connect-go)
proto:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc -I api \
	  --go_out=. --go_opt=module=github.com/fenceworks/fence \
	  --connect-go_out=. --connect-go_opt=module=github.com/fenceworks/fence \
	  api/fence/v1/fence.proto

clean:
	rm -rf bin
