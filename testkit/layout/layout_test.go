package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the repository, from this package's folder.
const root = "../.."

// module is the platform's module path.
const module = "github.com/opsmcp/platform"

// pkg is one folder of Go source in the tree.
type pkg struct {
	dir     string   // from the root, slash-separated
	files   []string // its non-test .go files, by name
	doc     string   // its doc comment's text
	docFile string   // the file carrying it
	imports []string // what its non-test files import
}

// packages reads every folder of Go source under the root, apart from
// test data and dependencies.
func packages(t *testing.T) []*pkg {
	t.Helper()
	var out []*pkg
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "data") {
			return filepath.SkipDir
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		p := &pkg{dir: filepath.ToSlash(rel)}
		hasGo := false
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") {
				continue
			}
			hasGo = true
			if strings.HasSuffix(n, "_test.go") {
				continue
			}
			p.files = append(p.files, n)
			f, err := parser.ParseFile(fset, filepath.Join(path, n), nil, parser.ParseComments|parser.ImportsOnly)
			if err != nil {
				return err
			}
			if f.Doc != nil && p.doc == "" {
				p.doc, p.docFile = f.Doc.Text(), n
			}
			for _, im := range f.Imports {
				v, _ := strconv.Unquote(im.Path.Value)
				p.imports = append(p.imports, v)
			}
		}
		if hasGo {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 30 {
		t.Fatalf("found %d packages: the walk did not start at the repository", len(out))
	}
	return out
}

// fileNames matches what a doc comment names as a Go file or a pattern of
// them: main.go, legacy*.go, cmd/platform/main.go.
var fileNames = regexp.MustCompile(`(?:[\w*-]+/)*[\w*-]+\.go\b`)

// TestDocCommentsNameOnlyFilesThatExistAndListThemAll: a name or pattern
// in a package's doc comment matches one of its non-test files (or, with
// a folder, a file from the root); and a doc comment that names two or
// more of its package's files is a listing, so it names every non-test
// file but the one it is written in and doc.go.
func TestDocCommentsNameOnlyFilesThatExistAndListThemAll(t *testing.T) {
	checked := 0
	for _, p := range packages(t) {
		named := map[string]bool{}
		for _, name := range fileNames.FindAllString(p.doc, -1) {
			dir := filepath.Join(root, p.dir)
			if strings.Contains(name, "/") {
				dir = root
			}
			matches, err := filepath.Glob(filepath.Join(dir, name))
			if err != nil {
				t.Errorf("%s: doc comment names %q, not a pattern: %v", p.dir, name, err)
				continue
			}
			matches = slices.DeleteFunc(matches, func(m string) bool { return strings.HasSuffix(m, "_test.go") })
			if len(matches) == 0 {
				t.Errorf("%s (%s): doc comment names %q, which matches no file", p.dir, p.docFile, name)
				continue
			}
			checked++
			if !strings.Contains(name, "/") {
				for _, m := range matches {
					named[filepath.Base(m)] = true
				}
			}
		}
		if len(named) < 2 {
			continue
		}
		for _, f := range p.files {
			if !named[f] && f != p.docFile && f != "doc.go" {
				t.Errorf("%s (%s): doc comment lists the package's files but leaves out %s", p.dir, p.docFile, f)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d file names checked: the doc comments were not read", checked)
	}
}

// layoutPaths reads the paths docs/layout.md's table names.
func layoutPaths(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs/layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for line := range strings.SplitSeq(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			paths = append(paths, m[1])
		}
	}
	return paths
}

// TestTheLayoutPageNamesEveryPackageAndNothingGone: every path in
// docs/layout.md exists, every Go package and every top-level folder is
// named there or under a folder named there.
func TestTheLayoutPageNamesEveryPackageAndNothingGone(t *testing.T) {
	paths := layoutPaths(t)
	if len(paths) < 20 {
		t.Fatalf("docs/layout.md names %d paths: its table was not read", len(paths))
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("docs/layout.md names %s, which does not exist", p)
		}
	}
	covered := func(dir string) bool {
		for _, p := range paths {
			if dir == p || strings.HasPrefix(dir, p+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range packages(t) {
		if p.dir != "." && !covered(p.dir) {
			t.Errorf("package %s is not in docs/layout.md", p.dir)
		}
	}
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "data" && !covered(e.Name()) && !slices.ContainsFunc(paths, func(p string) bool { return strings.HasPrefix(p, e.Name()+"/") }) {
			t.Errorf("folder %s is not in docs/layout.md", e.Name())
		}
	}
}

// TestTheBinarysDocCommentNamesEveryCommand: each command `platform`
// dispatches (the cases of run in cmd/platform/main.go) is in the
// command's doc comment.
func TestTheBinarysDocCommentNamesEveryCommand(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, "cmd/platform/main.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var commands []string
	ast.Inspect(f, func(n ast.Node) bool {
		fd, ok := n.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "run" {
			return true
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if cc, ok := n.(*ast.CaseClause); ok && len(cc.List) > 0 {
				if lit, ok := cc.List[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					c, _ := strconv.Unquote(lit.Value)
					if c != "help" {
						commands = append(commands, c)
					}
				}
			}
			return true
		})
		return false
	})
	if len(commands) < 7 {
		t.Fatalf("found the commands %v: run's switch was not read", commands)
	}
	doc := f.Doc.Text()
	for _, c := range commands {
		if !regexp.MustCompile(`(?m)^\tplatform ` + regexp.QuoteMeta(c) + `( |$)`).MatchString(doc) {
			t.Errorf("the doc comment of cmd/platform/main.go does not name the command %q", c)
		}
	}
}

// TestShippedCodeImportsNoTestKitAndInternalIsShipped: no non-test file
// outside the test kit imports it, and every package in an internal/
// folder is one the binary imports (directly or not).
func TestShippedCodeImportsNoTestKitAndInternalIsShipped(t *testing.T) {
	all := packages(t)
	byPath := map[string]*pkg{}
	for _, p := range all {
		byPath[module+"/"+p.dir] = p
		if strings.HasPrefix(p.dir, "testkit/") {
			continue
		}
		for _, im := range p.imports {
			if strings.HasPrefix(im, module+"/testkit/") {
				t.Errorf("%s imports %s: shipped code may not import the test kit", p.dir, im)
			}
		}
	}
	shipped := map[string]bool{}
	var walk func(string)
	walk = func(path string) {
		p, ok := byPath[path]
		if !ok || shipped[path] {
			return
		}
		shipped[path] = true
		for _, im := range p.imports {
			walk(im)
		}
	}
	walk(module + "/cmd/platform")
	if !shipped[module+"/server"] || !shipped[module+"/endpoint"] {
		t.Fatalf("the binary's imports were not followed: %d packages", len(shipped))
	}
	for _, p := range all {
		if slices.Contains(strings.Split(p.dir, "/"), "internal") && !shipped[module+"/"+p.dir] {
			t.Errorf("%s is in an internal/ folder but the binary does not import it", p.dir)
		}
	}
}
