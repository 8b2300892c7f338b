// Command openapigen writes the API server's OpenAPI description, built
// from the Go types of its operations (internal/server.OpenAPI), to
// docs/openapi.json or the file given with -o ("-" for stdout), and with
// -py the Python SDK's operation table made from that document. `make
// openapi` runs it; its tests fail while a committed file is stale.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/skygo/skygo/internal/core"
	_ "github.com/skygo/skygo/internal/infra/all"     // the infrastructures' operations are part of the API
	_ "github.com/skygo/skygo/internal/infrakind/all" // the kinds the API names
	"github.com/skygo/skygo/internal/server"
	"github.com/skygo/skygo/internal/state"
)

func main() {
	out := flag.String("o", "docs/openapi.json", "where to write the document (- for stdout)")
	py := flag.String("py", "", "also write the Python SDK's operation table here (python/sky/client/_ops.py)")
	flag.Parse()
	doc, err := generate()
	if err == nil {
		if *out == "-" {
			_, err = os.Stdout.Write(doc)
		} else {
			err = os.WriteFile(*out, doc, 0o644)
		}
	}
	if err == nil && *py != "" {
		var table []byte
		if table, err = pythonOps(doc); err == nil {
			err = os.WriteFile(*py, table, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}

// generate builds the operations as `sky api start` does, over a private
// empty home (the op table does not depend on the machine), and describes
// them.
func generate() ([]byte, error) {
	home, err := os.MkdirTemp("", "openapigen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	ctx := context.Background()
	st, err := state.Open(ctx, "", filepath.Join(home, "state.db"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	env, err := core.New(core.Options{Home: home, Store: st, Sky: "sky"})
	if err != nil {
		return nil, err
	}
	return server.OpenAPI(env.Ops())
}
