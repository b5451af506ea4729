package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/agentrun/agentrun/"

// root is the module's root directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return dir
}

// pkg is one package's non-test files, parsed.
type pkg struct {
	dir   string // relative to the root, e.g. internal/cli
	files map[string]*ast.File
}

// parseAll parses every package of the module (non-test files, any build
// tag: a file for another OS counts too).
func parseAll(t *testing.T) (map[string]*pkg, *token.FileSet) {
	t.Helper()
	top := root(t)
	fset := token.NewFileSet()
	pkgs := map[string]*pkg{}
	err := filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != top {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, filepath.Dir(path))
		p := pkgs[rel]
		if p == nil {
			p = &pkg{dir: rel, files: map[string]*ast.File{}}
			pkgs[rel] = p
		}
		p.files[path] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs, fset
}

// imports are p's imports inside the module, as directories.
func (p *pkg) imports() []string {
	var out []string
	for _, f := range p.files {
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if rest, ok := strings.CutPrefix(path, module); ok && !slices.Contains(out, rest) {
				out = append(out, rest)
			}
		}
	}
	slices.Sort(out)
	return out
}

// implementations are the packages behind a seam, chosen only by the
// wiring (internal/wire, cmd/agentrun).
var implementations = []string{
	"internal/store/files",
	"internal/store/sqlstore",
	"internal/coord/flock",
	"internal/coord/sqlcoord",
	"internal/sqldb",
	"internal/users/sqlusers",
	"internal/sandbox/all",
	"internal/sandbox/host",
	"internal/sandbox/native",
	"internal/sandbox/docker",
	"internal/sandbox/diskwatch",
	"internal/sandbox/seccomp",
	"internal/agent/external",
	"internal/agent/loop",
	"internal/agent/provider/all",
	"internal/agent/provider/openai",
	"internal/agent/provider/anthropic",
	"internal/wire",
	"internal/queue/riverq",
}

// TestCoreImportsNoImplementation: the CLI, the supervisor and the submit
// service reach every implementation through its seam, directly or
// through anything they import.
func TestCoreImportsNoImplementation(t *testing.T) {
	pkgs, _ := parseAll(t)
	for _, core := range []string{"internal/cli", "internal/supervisor", "internal/submit"} {
		if pkgs[core] == nil {
			t.Fatalf("no package %s", core)
		}
		seen := map[string]string{} // package -> who imported it
		queue := []string{core}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if pkgs[p] == nil {
				continue
			}
			for _, im := range pkgs[p].imports() {
				if _, ok := seen[im]; ok || im == core {
					continue
				}
				seen[im] = p
				if slices.Contains(implementations, im) {
					t.Errorf("%s imports the implementation %s (through %s)", core, im, p)
				}
				queue = append(queue, im)
			}
		}
	}
}

// implementationNames are names that only the wiring may compare with: a
// sandbox backend's, a model provider's, a store's, a coordinator's.
var implementationNames = []string{"host", "native", "docker", "podman", "openai", "anthropic", "files", "flock", "sqlite", "postgres"}

// TestNoBranchOnImplementationNames: no package outside the wiring and
// the implementations themselves compares a value with an
// implementation's name (== "host", case "anthropic"): what differs
// between implementations is a capability they declare.
func TestNoBranchOnImplementationNames(t *testing.T) {
	pkgs, fset := parseAll(t)
	exempt := append(slices.Clone(implementations),
		"cmd/agentrun",
		// The gateway's routes are wire protocols named like their
		// providers; the scripted model server speaks them.
		"internal/gateway", "internal/modelserver", "internal/agent/provider/fakemodel")
	isName := func(e ast.Expr) bool {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return false
		}
		s, _ := strconv.Unquote(lit.Value)
		return slices.Contains(implementationNames, s)
	}
	checked := 0
	for dir, p := range pkgs {
		if slices.Contains(exempt, dir) || strings.HasSuffix(dir, "test") {
			continue
		}
		checked++
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BinaryExpr:
					if (n.Op == token.EQL || n.Op == token.NEQ) && (isName(n.X) || isName(n.Y)) {
						t.Errorf("%s: compares with an implementation's name", fset.Position(n.Pos()))
					}
				case *ast.CaseClause:
					for _, e := range n.List {
						if isName(e) {
							t.Errorf("%s: a case on an implementation's name", fset.Position(e.Pos()))
						}
					}
				}
				return true
			})
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages checked", checked)
	}
}

// Size limits outside tests.
const (
	maxFileLines = 800
	maxFuncLines = 100
)

// TestSizes: no source file over maxFileLines lines and no function (or
// function literal) over maxFuncLines, outside _test.go files.
func TestSizes(t *testing.T) {
	pkgs, fset := parseAll(t)
	for _, p := range pkgs {
		for path, f := range p.files {
			if n := fset.Position(f.End()).Line; n > maxFileLines {
				t.Errorf("%s: %d lines (at most %d)", path, n, maxFileLines)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var body *ast.BlockStmt
				name := "func literal"
				switch d := n.(type) {
				case *ast.FuncDecl:
					body, name = d.Body, d.Name.Name
				case *ast.FuncLit:
					body = d.Body
				}
				if body == nil {
					return true
				}
				if l := fset.Position(body.End()).Line - fset.Position(n.Pos()).Line + 1; l > maxFuncLines {
					t.Errorf("%s: %s is %d lines (at most %d)", fset.Position(n.Pos()), name, l, maxFuncLines)
				}
				return true
			})
		}
	}
}
