// Package all links in the node side of every infrastructure that has
// one (internal/infra/<name>/node): a transport by which the head agent
// reaches the other nodes, the rank environment of its nodes. sky-node
// links it; each package registers itself into the agent's registries
// (agent.Transports, agent.RankBases) from init and links nothing beyond
// the standard library and the agent.
package all

import (
	_ "github.com/skygo/skygo/internal/infra/slurm/node" // srun into an allocation
)
