package bench

import (
	"cmp"
	"slices"
)

// Summary is a results file in numbers: per agent/model, per fixture, and
// per pair of them.
type Summary struct {
	File string `json:"file,omitempty"`
	// HTML is the page written from it, when one was.
	HTML  string `json:"html,omitempty"`
	Bench string `json:"bench"`
	// K is the k of pass@k.
	K      int     `json:"k"`
	Runs   int     `json:"runs"`
	Models []Group `json:"models"`
	Tasks  []Group `json:"tasks"`
	Cells  []Group `json:"cells"`
}

// Group is the numbers of a set of runs: one agent/model's (Models), one
// fixture's (Tasks) or one agent/model's on one fixture (Cells).
//
// Runs of status error say nothing of the agent: they are counted in
// Errors and left out of every other number.
type Group struct {
	Name    string `json:"name"` // the agent/model label, the fixture, or "label fixture"
	Agent   string `json:"agent,omitempty"`
	Model   string `json:"model,omitempty"`
	Fixture string `json:"fixture,omitempty"`
	Runs    int    `json:"runs"`
	Passed  int    `json:"passed"`
	Failed  int    `json:"failed"`
	Gamed   int    `json:"gamed"`
	Errors  int    `json:"errors"`
	// PassRate is passed over judged runs (0 when none was judged).
	PassRate float64 `json:"pass_rate"`
	// PassAtK is the chance that at least one of k runs passes, estimated
	// per agent/model and fixture from its runs (the unbiased estimator:
	// 1 - C(n-c, k)/C(n, k); with fewer than k runs, k is their number),
	// then averaged over the group's cells.
	PassAtK      float64 `json:"pass_at_k"`
	MeanTokens   float64 `json:"mean_tokens"`
	MeanCostUSD  float64 `json:"mean_cost_usd"`
	MedianWallMS int64   `json:"median_wall_ms"`
	MeanTurns    float64 `json:"mean_turns"`
	Harness      Harness `json:"harness"`
}

// Summarize sums results up; k < 1 means the largest number of repeats.
func Summarize(h Header, results []Result, k int) Summary {
	if k < 1 {
		k = max(h.Repeat, 1)
		for _, n := range countBy(results, Result.Key) {
			k = max(k, n)
		}
	}
	s := Summary{Bench: h.Bench, K: k, Runs: len(results), Models: []Group{}, Tasks: []Group{}, Cells: []Group{}}
	cells := groupBy(results, Result.Key)
	cellGroups := map[string]Group{}
	for _, key := range orderOf(results, Result.Key) {
		g := makeGroup(key, cells[key], k, nil)
		g.Agent, g.Model, g.Fixture = cells[key][0].Agent.Agent, cells[key][0].Model, cells[key][0].Fixture
		cellGroups[key] = g
		s.Cells = append(s.Cells, g)
	}
	byModel := groupBy(results, func(r Result) string { return r.Label() })
	for _, label := range orderOf(results, func(r Result) string { return r.Label() }) {
		g := makeGroup(label, byModel[label], k, cellGroups)
		g.Agent, g.Model = byModel[label][0].Agent.Agent, byModel[label][0].Model
		s.Models = append(s.Models, g)
	}
	byTask := groupBy(results, func(r Result) string { return r.Fixture })
	for _, name := range orderOf(results, func(r Result) string { return r.Fixture }) {
		g := makeGroup(name, byTask[name], k, cellGroups)
		g.Fixture = name
		s.Tasks = append(s.Tasks, g)
	}
	slices.SortStableFunc(s.Tasks, func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	return s
}

// makeGroup computes the numbers of rs. cells, when given, are the cell
// groups the pass@k of rs is averaged over (else rs is one cell).
func makeGroup(name string, rs []Result, k int, cells map[string]Group) Group {
	g := Group{Name: name, Runs: len(rs)}
	var walls []int64
	var tokens, turns int64
	var cost float64
	judged := 0
	for _, r := range rs {
		switch r.Status {
		case StatusPassed:
			g.Passed++
		case StatusFailed:
			g.Failed++
		case StatusGamed:
			g.Gamed++
		default:
			g.Errors++
			continue
		}
		judged++
		tokens += r.Tokens.Total
		turns += int64(r.Turns)
		cost += r.CostUSD
		walls = append(walls, r.WallMS)
		g.Harness.Add(r.Harness)
	}
	if judged == 0 {
		return g
	}
	g.PassRate = float64(g.Passed) / float64(judged)
	g.MeanTokens = float64(tokens) / float64(judged)
	g.MeanTurns = float64(turns) / float64(judged)
	g.MeanCostUSD = cost / float64(judged)
	g.MedianWallMS = median(walls)
	if cells == nil {
		g.PassAtK = passAtK(judged, g.Passed, k)
		return g
	}
	var sum float64
	n := 0
	for _, key := range orderOf(rs, Result.Key) {
		if c := cells[key]; c.Runs > c.Errors {
			sum += c.PassAtK
			n++
		}
	}
	if n > 0 {
		g.PassAtK = sum / float64(n)
	}
	return g
}

// passAtK is the unbiased estimate of pass@k from n runs of which c
// passed: 1 - C(n-c, k)/C(n, k), computed as a product so that it never
// overflows; k is at most n.
func passAtK(n, c, k int) float64 {
	k = min(k, n)
	if n == 0 || k == 0 {
		return 0
	}
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}

func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func groupBy(rs []Result, key func(Result) string) map[string][]Result {
	m := map[string][]Result{}
	for _, r := range rs {
		m[key(r)] = append(m[key(r)], r)
	}
	return m
}

func countBy(rs []Result, key func(Result) string) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[key(r)]++
	}
	return m
}

// orderOf lists the keys of rs in the order they first appear.
func orderOf(rs []Result, key func(Result) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rs {
		if k := key(r); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// Comparison is how a second results file (B) differs from a first (A),
// per agent/model and per fixture found in either.
type Comparison struct {
	A      string      `json:"a"`
	B      string      `json:"b"`
	K      int         `json:"k"`
	Models []GroupDiff `json:"models"`
	Tasks  []GroupDiff `json:"tasks"`
}

// GroupDiff is one group in A and in B (nil where the file has none),
// and B's numbers minus A's where both have it.
type GroupDiff struct {
	Name  string `json:"name"`
	A     *Group `json:"a"`
	B     *Group `json:"b"`
	Delta *Delta `json:"delta"`
}

// Delta is B minus A.
type Delta struct {
	PassRate     float64 `json:"pass_rate"`
	PassAtK      float64 `json:"pass_at_k"`
	MeanTokens   float64 `json:"mean_tokens"`
	MeanCostUSD  float64 `json:"mean_cost_usd"`
	MedianWallMS int64   `json:"median_wall_ms"`
}

// Compare compares two summaries (made with the same k).
func Compare(a, b Summary) Comparison {
	return Comparison{A: a.File, B: b.File, K: a.K, Models: diffGroups(a.Models, b.Models), Tasks: diffGroups(a.Tasks, b.Tasks)}
}

func diffGroups(as, bs []Group) []GroupDiff {
	out := []GroupDiff{}
	index := map[string]int{}
	for _, g := range as {
		index[g.Name] = len(out)
		out = append(out, GroupDiff{Name: g.Name, A: &g})
	}
	for _, g := range bs {
		i, ok := index[g.Name]
		if !ok {
			out = append(out, GroupDiff{Name: g.Name, B: &g})
			continue
		}
		out[i].B = &g
		a := out[i].A
		out[i].Delta = &Delta{PassRate: g.PassRate - a.PassRate, PassAtK: g.PassAtK - a.PassAtK, MeanTokens: g.MeanTokens - a.MeanTokens,
			MeanCostUSD: g.MeanCostUSD - a.MeanCostUSD, MedianWallMS: g.MedianWallMS - a.MedianWallMS}
	}
	return out
}
