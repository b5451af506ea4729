package web

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// parsePages parses each page with the layout.
func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{"when": when, "cost": cost, "short": short, "ended": ended, "join": strings.Join, "tokens": tokenTable, "tokenform": tokenForm}
	pages := map[string]*template.Template{}
	for _, name := range []string{"list", "run", "submit", "login", "error", "tokens", "made", "users", "user", "audit", "policy"} {
		pages[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+name+".html"))
	}
	return pages
}

// when is a document's time as the pages show it (UTC, to the second).
func when(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// cost is a usage's cost in dollars ("" without one).
func cost(u *usageDoc) string {
	if u == nil || u.CostUSD == 0 {
		return ""
	}
	return fmt.Sprintf("$%.4f", u.CostUSD)
}

// short is a commit id's first 12 characters.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// firstLine is s's first line, at most n runes.
func firstLine(s string, n int) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		s += " …"
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
