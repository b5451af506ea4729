package archtest

import (
	"go/ast"
	"go/token"
	"regexp"
	"strconv"
	"testing"
)

// TestNoPatternCompiledAtInit: no package-level variable of the module is
// initialised with a compiled regular expression. Every agentrun process
// runs every package's initializers, whatever its role, so such patterns
// are paid for by each start of the CLI, the supervisor and the sandbox's
// pid 1 (internal/lazyre compiles on first use instead). Every pattern
// given to lazyre.New is compiled here, so a bad one still fails a test.
func TestNoPatternCompiledAtInit(t *testing.T) {
	pkgs, fset := parseAll(t)
	lazy := 0
	for _, p := range pkgs {
		for _, f := range p.files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				ast.Inspect(g, func(n ast.Node) bool {
					if _, ok := n.(*ast.FuncLit); ok {
						return false // runs when called, not at init
					}
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					switch selectorName(call.Fun) {
					case "regexp.MustCompile", "regexp.Compile", "regexp.MustCompilePOSIX", "regexp.CompilePOSIX":
						t.Errorf("%s: a pattern compiled at init; use lazyre.New", fset.Position(call.Pos()))
					case "lazyre.New":
						lazy++
						checkPattern(t, fset, call)
					}
					return true
				})
			}
		}
	}
	if lazy == 0 {
		t.Error("no lazyre.New pattern found: the test no longer sees them")
	}
}

// selectorName is "pkg.Name" for a call of pkg.Name, else "".
func selectorName(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return id.Name + "." + sel.Sel.Name
}

// checkPattern compiles the literal pattern of a lazyre.New call.
func checkPattern(t *testing.T, fset *token.FileSet, call *ast.CallExpr) {
	t.Helper()
	lit, ok := call.Args[0].(*ast.BasicLit)
	if len(call.Args) != 1 || !ok || lit.Kind != token.STRING {
		t.Errorf("%s: lazyre.New takes one string literal, so that this test can compile it", fset.Position(call.Pos()))
		return
	}
	src, err := strconv.Unquote(lit.Value)
	if err == nil {
		_, err = regexp.Compile(src)
	}
	if err != nil {
		t.Errorf("%s: %v", fset.Position(call.Pos()), err)
	}
}
