//go:build tools

// Package tools pins the binary this wrapper builds, so `go mod tidy` keeps it.
package tools

import _ "k8s.io/kube-state-metrics/v2"
