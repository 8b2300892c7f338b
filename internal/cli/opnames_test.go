package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoOperationNames keeps the command line's requests typed by their
// descriptors (internal/apiop): no call that submits an operation may
// name it with a string literal, which the compiler could not check
// against the server's operations.
func TestNoOperationNames(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	submitters := map[string]bool{"call": true, "Call": true, "Submit": true, "StreamOp": true}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !submitters[sel.Sel.Name] {
				return true
			}
			for _, a := range call.Args[:min(2, len(call.Args))] {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					t.Errorf("%s: %s(%s, ...) names an operation by string: use callOp/sendOp with its apiop descriptor",
						fset.Position(call.Pos()), sel.Sel.Name, lit.Value)
				}
			}
			return true
		})
	}
}
