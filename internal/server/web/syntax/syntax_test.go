package syntax

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/chroma/v2"
)

// TestMain fails before any test runs if the set was parsed while the
// package (or anything it imports) was initialised: the point of the
// package is that nothing is parsed until a diff is shown.
func TestMain(m *testing.M) {
	if builds.Load() != 0 {
		os.Stderr.WriteString("syntax: the lexer set was parsed at package init\n")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func TestEverySetDefinitionParses(t *testing.T) {
	names := Names()
	if len(names) < 40 {
		t.Fatalf("the set has %d lexers: %v", len(names), names)
	}
	for _, want := range []string{"Go", "Python", "JavaScript", "TypeScript", "Rust", "Bash", "YAML", "HTML", "CSS", "Docker"} {
		if !slices.Contains(names, want) {
			t.Errorf("the set has no %s lexer", want)
		}
	}
}

func TestMatchByFileName(t *testing.T) {
	for name, want := range map[string]string{
		"cmd/main.go":         "Go",
		"a/b/app.py":          "Python",
		"web/index.tsx":       "TypeScript",
		"src/lib.rs":          "Rust",
		"Dockerfile":          "Docker",
		"Makefile":            "Makefile",
		"scripts/run.sh":      "Bash",
		".github/ci.yaml":     "YAML",
		"static/site.css":     "CSS",
		"templates/page.html": "HTML",
	} {
		l := Match(name)
		if l == nil {
			t.Errorf("%s: no lexer", name)
			continue
		}
		if got := l.Config().Name; got != want {
			t.Errorf("%s: lexer %s, want %s", name, got, want)
		}
	}
	if l := Match("notes.unknown-extension"); l != nil {
		t.Errorf("an unknown extension matched %s", l.Config().Name)
	}
}

// TestGoTokens checks the project's own Go lexer on the tokens a diff of
// Go shows most.
func TestGoTokens(t *testing.T) {
	src := "package main\n\n// a comment\nfunc f(x int) error {\n\treturn fmt.Errorf(\"bad %d\", x+0x1f)\n}\nvar r = `raw`\n"
	it, err := Match("x.go").Tokenise(nil, src)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]chroma.TokenType{}
	var text strings.Builder
	for _, tok := range it.Tokens() {
		text.WriteString(tok.Value)
		if v := strings.TrimSpace(tok.Value); v != "" {
			got[v] = tok.Type
		}
	}
	if text.String() != src {
		t.Fatalf("the tokens do not add up to the source:\n%q", text.String())
	}
	for v, want := range map[string]chroma.TokenType{
		"package": chroma.KeywordNamespace, "func": chroma.KeywordDeclaration,
		"return": chroma.Keyword, "int": chroma.KeywordType, "error": chroma.KeywordType,
		"// a comment": chroma.CommentSingle, `"bad %d"`: chroma.LiteralString,
		"0x1f": chroma.LiteralNumberHex, "Errorf": chroma.NameFunction, "`raw`": chroma.LiteralString,
	} {
		if got[v] != want {
			t.Errorf("%q: %v, want %v", v, got[v], want)
		}
	}
	for v, ty := range got {
		if ty == chroma.Error {
			t.Errorf("%q lexed as an error", v)
		}
	}
}

// TestBinaryDoesNotLinkChromaRegistries keeps chroma's lexers and styles
// packages (their initializers parse every definition, in every agentrun
// process) out of the binary.
func TestBinaryDoesNotLinkChromaRegistries(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/agentrun/agentrun/cmd/agentrun").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/alecthomas/chroma/v2/lexers" || pkg == "github.com/alecthomas/chroma/v2/styles" {
			t.Errorf("cmd/agentrun links %s", pkg)
		}
	}
}
