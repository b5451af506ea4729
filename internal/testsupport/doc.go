// Package testsupport is what tests across the module share: capability
// checks (the one reader of AGENTRUN_REQUIRE_CAPS), a tmpfs to fill, the
// agentrun binary built once per test process, echo servers on real
// sockets, and temporary git repositories.
//
// Contract: every helper takes the test's testing.TB and fails or skips it
// itself; whatever it makes (directories, mounts, listeners) is removed by
// tb.Cleanup. A missing capability skips the test and says why, except
// where AGENTRUN_REQUIRE_CAPS=1 (CI) says the capability is expected: then
// it fails, so no test skips silently in CI.
//
// It is for tests only: it must never be imported by code that ships in the
// binary (it calls tb.Fatal), only by _test.go files and by the
// conformance suites and other test packages.
package testsupport
