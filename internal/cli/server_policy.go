package cli

import (
	"fmt"
	"log/slog"

	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/policy"
)

// fixServerPolicy reads the server's organization policy once, at start
// (--policy FILE, else the one the settings name), and fixes it for the
// commands the server runs for its API: a file that cannot be read stops
// the server, and a file changed later takes effect at the next start,
// never half way through.
func (app *App) fixServerPolicy(o *serverOptions, s config.Settings, cfgErr error, log *slog.Logger) error {
	path := o.Policy
	if path == "" {
		if cfgErr != nil {
			// A config file that does not parse may name a policy: it is
			// never silently ignored.
			return cfgErr
		}
		path = s.Policy
	}
	var org *policy.Org
	if path != "" {
		var err error
		if org, err = policy.LoadOrg(path); err != nil {
			return err
		}
		fmt.Fprintf(app.Stderr, "agentrun server: organization policy %s (%s)\n", path, org.Digest())
		log.Info("policy", "path", path, "digest", org.Digest())
	}
	app.Deps.Policy, app.Deps.PolicyFixed = org, true
	return nil
}

// serverPolicySource says where the server's policy was named, for GET
// /v1/policy: its --policy flag, else as policy show says.
func serverPolicySource(o *serverOptions, getenv func(string) string, s config.Settings) string {
	if o.Policy != "" {
		return "--policy"
	}
	return policySource(getenv, s)
}
