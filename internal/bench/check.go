package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
)

// Check is what checking a fixture found: its acceptance must fail on the
// base (else it measures nothing) and pass on its solution, when it has
// one (else nobody can pass it).
type Check struct {
	Fixture string `json:"fixture"`
	OK      bool   `json:"ok"`
	// Problem says what is wrong when not OK.
	Problem string `json:"problem,omitempty"`
	// Base and Solution are the acceptance's judgements ("" for a
	// fixture without a solution).
	Base     Status `json:"base"`
	Solution Status `json:"solution,omitempty"`
	// BaseOutput and SolutionOutput end what the acceptance printed.
	BaseOutput     string `json:"base_output,omitempty"`
	SolutionOutput string `json:"solution_output,omitempty"`
}

// CheckFixture judges fixture f's base and solution with s, in sandboxes
// of backend, its repositories made under dir (which must not exist).
// The error is for a check that could not be done.
func CheckFixture(ctx context.Context, s *Scorer, f *Fixture, backend, dir string) (Check, error) {
	c := Check{Fixture: f.Name}
	repo, base, err := Prepare(ctx, f, filepath.Join(dir, "base"))
	if err != nil {
		return c, err
	}
	sc, err := s.Score(ctx, f, Target{ID: "check-" + f.Name, Repo: repo, Base: base, Backend: backend})
	if err != nil {
		return c, err
	}
	c.Base, c.BaseOutput = sc.Status, output(sc)
	if len(f.Solution) > 0 || len(f.Delete) > 0 {
		if f.Repo != "" {
			return c, fmt.Errorf("fixture %s: a solution needs repo/ (an existing repository is never written to)", f.Name)
		}
		for _, p := range f.AcceptFiles() {
			if slices.Contains(f.Delete, p) || slices.ContainsFunc(f.Solution, func(fl File) bool { return fl.Path == p }) {
				c.Problem = fmt.Sprintf("the solution changes %s, which the acceptance depends on", p)
				return c, nil
			}
		}
		sol := *f
		sol.Files = solved(f)
		repo, base, err := Prepare(ctx, &sol, filepath.Join(dir, "solution"))
		if err != nil {
			return c, err
		}
		sc, err := s.Score(ctx, f, Target{ID: "check-" + f.Name + "-solution", Repo: repo, Base: base, Backend: backend})
		if err != nil {
			return c, err
		}
		c.Solution, c.SolutionOutput = sc.Status, output(sc)
	}
	switch {
	case c.Base != StatusFailed:
		c.Problem = "the acceptance does not fail on the base: it measures nothing"
	case c.Solution != "" && c.Solution != StatusPassed:
		c.Problem = "the acceptance does not pass on the solution"
	default:
		c.OK = true
	}
	return c, nil
}

// solved is the base's files with the solution applied.
func solved(f *Fixture) []File {
	byPath := map[string]File{}
	for _, fl := range f.Files {
		byPath[fl.Path] = fl
	}
	for _, fl := range f.Solution {
		byPath[fl.Path] = fl
	}
	for _, p := range f.Delete {
		delete(byPath, p)
	}
	var out []File
	for _, p := range sortedKeys(byPath) {
		out = append(out, byPath[p])
	}
	return out
}

func output(sc Score) string {
	if sc.Accept == nil {
		return sc.Message
	}
	return sc.Accept.Output
}
