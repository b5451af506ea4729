# Build and install agentrun from a checkout: `make install`.
# The binary is static (CGO_ENABLED=0: the sandboxes run it inside) and
# stamped with the version (a tag, else the commit) and the build info.

GOBIN ?= $(shell go env GOBIN)
ifeq ($(GOBIN),)
GOBIN := $(shell go env GOPATH)/bin
endif
VERSION ?= $(shell git describe --tags --dirty --match "v*" 2>/dev/null || echo dev)
LDFLAGS := -X github.com/agentrun/agentrun/internal/cli.Version=$(VERSION)

.PHONY: install build test
install:
	mkdir -p "$(GOBIN)"
	CGO_ENABLED=0 go build -buildvcs=auto -trimpath -ldflags "$(LDFLAGS)" -o "$(GOBIN)/agentrun" ./cmd/agentrun
	@echo "installed $(GOBIN)/agentrun ($$("$(GOBIN)/agentrun" version))"

build:
	CGO_ENABLED=0 go build -buildvcs=auto -trimpath -ldflags "$(LDFLAGS)" -o bin/agentrun ./cmd/agentrun

test:
	go test -race -count=1 ./...
