package external

import (
	"runtime"
	"slices"
	"sort"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/run"
)

// Profile describes one external agent CLI: its data (agent.Info), plus
// Launch, which says how to start it against the model gateway.
type Profile struct {
	agent.Info
	// Launch builds the command, environment and HOME files of one attempt.
	Launch func(LaunchInput) Launch
	// Warm, when set, starts each run's HOME from the CLI's warm HOME
	// (WarmHome).
	Warm *WarmHome
}

// program is what a run of spec starts: the CLI as submit recorded it, or,
// where submit recorded the native program of the CLI's npm launcher
// (agent.Native), that program with the variables the launcher sets. If
// the launcher no longer runs it (the CLI was reinstalled since), the
// program it runs now, or the launcher itself.
func (p *Profile) program(spec run.AgentSpec) (string, []string) {
	if spec.Launcher == "" {
		return spec.Binary, nil
	}
	if prog, env, ok := p.Native.Resolve(spec.Launcher, runtime.GOOS, runtime.GOARCH); ok {
		return prog, env
	}
	return spec.Launcher, nil
}

// launch is p's Launch of in for a run of spec: of the program the run
// starts (program), with the variables its launcher would set.
func (p *Profile) launch(spec run.AgentSpec, in LaunchInput) Launch {
	bin, env := p.program(spec)
	return p.launchProgram(bin, env, in)
}

// launchProgram is p's Launch of in for program bin, env (what program
// gives) before the profile's own variables.
func (p *Profile) launchProgram(bin string, env []string, in LaunchInput) Launch {
	in.Binary = bin
	l := p.Launch(in)
	l.Env = append(env, l.Env...)
	return l
}

// profiles is the table of built-in agent profiles, one file each.
var profiles = []Profile{claudeProfile, codexProfile, geminiProfile, qwenProfile, crushProfile, opencodeProfile}

// CommandName is the AgentSpec.Name of an agent given with --agent-cmd.
const CommandName = agent.CommandName

// Lookup returns the profile called name.
func Lookup(name string) (Profile, bool) {
	for _, p := range profiles {
		if p.Name == name {
			p.Hosts, p.Telemetry, p.Helpers = slices.Clone(p.Hosts), slices.Clone(p.Telemetry), slices.Clone(p.Helpers)
			return p, true
		}
	}
	return Profile{}, false
}

// Names lists the profile names, sorted.
func Names() []string {
	var n []string
	for _, p := range profiles {
		n = append(n, p.Name)
	}
	sort.Strings(n)
	return n
}

// Profiles returns a copy of the table (for help text).
func Profiles() []Profile {
	out := make([]Profile, 0, len(profiles))
	for _, p := range profiles {
		q, _ := Lookup(p.Name)
		out = append(out, q)
	}
	return out
}

// Infos returns the profiles' data, for the agent catalog (agent.Catalog).
func Infos() []agent.Info {
	out := make([]agent.Info, 0, len(profiles))
	for _, p := range Profiles() {
		out = append(out, p.Info)
	}
	return out
}
