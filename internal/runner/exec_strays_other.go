//go:build !linux

package runner

import (
	"os"
	"time"

	"github.com/agentrun/agentrun/internal/runner/deathwatch"
)

// Outside Linux there is no child subreaper: a command's descendants that
// leave its process group (setsid, double fork) are not tracked and may
// outlive it.
type marker struct{}

func newMarker() *marker                         { return nil }
func holdForks() func()                          { return func() {} }
func (m *marker) files() []*os.File              { return nil }
func (m *marker) started(pid int)                {}
func (m *marker) waited(pid int)                 {}
func (m *marker) killStrays(int, time.Duration)  {}
func (m *marker) watched(int) deathwatch.Watched { return deathwatch.Watched{} }
func (m *marker) expected() deathwatch.Watched   { return deathwatch.Watched{} }
