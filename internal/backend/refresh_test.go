package backend

import (
	"testing"

	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

func TestReadNodes(t *testing.T) {
	nodes := func(ss ...provision.NodeStatus) []provision.NodeState {
		out := make([]provision.NodeState, len(ss))
		for i, s := range ss {
			out[i] = provision.NodeState{Index: i, Status: s}
		}
		return out
	}
	up, stopped, pending := provision.NodeUp, provision.NodeStopped, provision.NodePending
	for _, c := range []struct {
		name   string
		nodes  []provision.NodeState
		status state.ClusterStatus
		want   nodesSay
		reason string
	}{
		{"no node left: gone", nil, state.ClusterUp, nodesGone, ""},
		{"no node left of a stopped cluster: gone", nil, state.ClusterStopped, nodesGone, ""},
		{"every node up", nodes(up, up), state.ClusterUp, nodesUp, ""},
		{"every node up of an INIT cluster: the agent decides", nodes(up), state.ClusterInit, nodesUp, ""},
		{"every node stopped", nodes(stopped, stopped), state.ClusterUp, nodesStopped, ""},
		{"a stopped cluster stays stopped", nodes(stopped), state.ClusterStopped, nodesStopped, ""},
		{"a stopped cluster whose nodes came up is not UP until started", nodes(up, up), state.ClusterStopped, nodesPartial, "2 of 2 nodes are up"},
		{"one node of two lost", nodes(up, provision.NodeTerminated), state.ClusterUp, nodesPartial, "1 of 2 nodes are up"},
		{"half stopped, half up", nodes(stopped, up), state.ClusterUp, nodesPartial, "1 of 2 nodes are up"},
		{"still coming up", nodes(pending, pending, up), state.ClusterInit, nodesPartial, "1 of 3 nodes are up"},
		{"stopping", nodes(provision.NodeStopping, stopped), state.ClusterUp, nodesPartial, "0 of 2 nodes are up"},
	} {
		if got, why := readNodes(c.nodes, c.status); got != c.want || why != c.reason {
			t.Errorf("%s: readNodes = (%v, %q), want (%v, %q)", c.name, got, why, c.want, c.reason)
		}
	}
}
