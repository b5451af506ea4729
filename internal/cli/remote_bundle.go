package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/internal/bundlecheck"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
)

// haveDepth is how far back along the base's first parents a submit asks
// the server what it holds: the base, then commits 1, 2, 4, ... back, so
// that a few questions find a recent commit the server holds.
const haveDepth = 1 << 12

// baseBundle is what a submit sends of the base commit: "" when the
// server's project holds it already, else the path of a bundle under dir
// of what the server lacks (the history since the newest of its ancestors
// the server holds; all of it when it holds none, or cannot say).
func (app *App) baseBundle(ctx context.Context, repo, base, dir string, quiet bool) (string, error) {
	say := func(format string, args ...any) {
		if !app.JSON && !quiet {
			fmt.Fprintf(app.Stderr, format+"\n", args...)
		}
	}
	asked, err := ancestry(ctx, repo, base)
	if err != nil {
		return "", fmt.Errorf("bundle the base commit: %w", err)
	}
	have, err := app.serverHas(ctx, asked)
	if err != nil {
		return "", err
	}
	if slices.Contains(have, base) {
		say("the server holds the base commit %s: no history to send", shortCommit(base))
		return "", nil
	}
	path, err := bundleBase(ctx, repo, base, dir, have)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(path); err == nil {
		what := "its whole history"
		if len(have) > 0 {
			what = "its history since " + shortCommit(have[0]) + ", which the server holds"
		}
		say("sending the base commit %s: %s (%s)", shortCommit(base), what, run.FormatSize(fi.Size()))
	}
	return path, nil
}

// ancestry is base and its first-parent ancestors 1, 2, 4, ... back, up
// to haveDepth, newest first.
func ancestry(ctx context.Context, repo, base string) ([]string, error) {
	out, err := bundlecheck.Git(ctx, repo, nil, "rev-list", "--first-parent", fmt.Sprintf("--max-count=%d", haveDepth+1), base)
	if err != nil {
		return nil, err
	}
	all := strings.Fields(out)
	var picked []string
	for i := 0; i < len(all); i = max(2*i, i+1) {
		picked = append(picked, all[i])
	}
	return picked, nil
}

// serverHas asks the server which of commits its project holds, newest
// first as asked. A server that cannot say (one older than the route)
// holds none, as far as a submit knows: the whole history is sent.
func (app *App) serverHas(ctx context.Context, commits []string) ([]string, error) {
	q := url.Values{"have": commits}
	doc, err := app.remote.Get(ctx, "/v1/projects/"+server.DefaultProject+"/commits", q)
	if e, ok := catalog.As(err); ok && e.Code == catalog.NoRoute.Code {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ans server.Commits
	if err := decodeDoc(doc, &ans); err != nil {
		return nil, err
	}
	var have []string
	for _, c := range commits {
		if slices.Contains(ans.Have, c) {
			have = append(have, c)
		}
	}
	return have, nil
}
