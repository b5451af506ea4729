// Package e2e tests the core flow end to end: the real agentrun binary
// (internal/testsupport), real git repositories in temporary directories, real
// detached supervisor processes, real signals. It has no non-test code.
package e2e
