package node

import (
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/agent"
	"github.com/skygo/skygo/internal/agent/agentapi"
)

// Linking the package registers the transport into the agent: a node of
// an allocation needs its job and node options, and is reached with srun
// pinned to that node.
func TestTransportRegistered(t *testing.T) {
	mk, ok := agent.Transports[Transport]
	if !ok {
		t.Fatalf("transport %q is not registered", Transport)
	}
	for _, c := range []struct {
		name string
		node agentapi.Node
		want string // error substring; "" = ok
	}{
		{"no options", agentapi.Node{IP: "n2", Transport: Transport, Home: "/h"}, "needs the options job and node"},
		{"no node", agentapi.Node{IP: "n2", Transport: Transport, Home: "/h", Options: map[string]string{OptJob: "7"}}, "needs the options"},
		{"no home", agentapi.Node{IP: "n2", Transport: Transport, Options: Options("7", "n2")}, "needs the node's home"},
		{"ok", agentapi.Node{IP: "n2", Transport: Transport, Home: "/h", Options: Options("7", "n2")}, ""},
	} {
		r, err := mk(c.node)
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sr := r.(*slurmNodeRunner)
		if got, want := strings.Join(sr.args, " "), "srun --overlap --jobid=7 --nodelist=n2 --nodes=1 --ntasks=1 --quiet"; got != want {
			t.Errorf("%s: args %q, want %q", c.name, got, want)
		}
	}
	if len(agent.RankBases) == 0 {
		t.Fatal("no rank base registered")
	}
}
