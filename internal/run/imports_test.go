package run

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDomainImportsNoImplementation keeps the domain free of the
// implementations behind its seams: internal/run imports nothing of this
// module (stores, backends, agents import it, never the other way).
func TestDomainImportsNoImplementation(t *testing.T) {
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/agentrun/agentrun/") {
				t.Errorf("%s imports %s: the domain package imports nothing of the module", e.Name(), p)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go files read")
	}
}
