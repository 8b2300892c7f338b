// Package replicaset holds what SkyServe's replicas and the managed-job
// pools' workers have in common: a set of member clusters, each of one
// version of the set's task, kept at a target count and replaced,
// rolling or blue-green, when a new version comes. Its decisions are
// pure functions of the set's members (Nomad's reconcile style: inputs
// in, a plan of actions out), so that every rule is tested without a
// cluster; the controllers of internal/serve and internal/jobs carry the
// plans out with conditional updates of their own rows. A member's own
// life — launch, watch for a lost cluster, drain, drop, clean-up — is
// one member controller (Step) over the set's hooks (Members): SkyServe
// adds its readiness probe and load-balancer drain, pools their setup
// job and job placement.
package replicaset

import (
	"slices"
	"sort"

	"github.com/skygo/skygo/internal/api"
)

// Phase is where a member is in its life, as the planner sees it. The
// live phases come first, in the order members are scaled down in.
type Phase int

const (
	Pending Phase = iota
	Provisioning
	Starting
	NotReady
	Ready
	// Draining: chosen to go; it still holds its place under a cap
	// until its cluster is down.
	Draining
	// Out: failed or lost; it counts toward nothing.
	Out
)

// Live says whether a member serves, or is on its way to.
func (p Phase) Live() bool { return p <= Ready }

// PhaseOf is the phase of a member status. Pool workers have SkyServe's
// replica statuses (SkyPilot runs pools on its serve machinery), so one
// mapping serves both.
func PhaseOf(status string) Phase {
	switch status {
	case api.ReplicaPending:
		return Pending
	case api.ReplicaProvisioning:
		return Provisioning
	case api.ReplicaStarting:
		return Starting
	case api.ReplicaNotReady:
		return NotReady
	case api.ReplicaReady:
		return Ready
	case api.ReplicaShuttingDown:
		return Draining
	}
	return Out
}

// Mode is how members of an older version are replaced.
type Mode int

const (
	// Rolling: new members come up while old ones serve; each READY new
	// member lets one old one go.
	Rolling Mode = iota
	// BlueGreen: traffic stays on the old version until enough new
	// members are READY, then switches at once and the old ones go.
	BlueGreen
)

// ModeOf reads an update mode as the API names it ("" is rolling).
func ModeOf(s string) Mode {
	if s == api.UpdateBlueGreen {
		return BlueGreen
	}
	return Rolling
}

// NoCap is Input.Cap for a set with no limit on its members.
const NoCap = -1

// Member is one member of a set as the planner sees it.
type Member struct {
	ID, Version int
	Phase       Phase
	// Busy is the work placed on the member (a pool worker's jobs): a
	// busy member is never chosen to go.
	Busy int
}

// Input is what one planning step knows of a set.
type Input struct {
	Members []Member
	// Latest is the newest version: the one members are launched of.
	Latest int
	// Target is how many live members of Latest the set wants.
	Target int
	Mode   Mode
	// Cap is the most members the set holds at once, live and draining,
	// of every version; NoCap for none.
	Cap int
	// MaxStarting bounds the new members not READY at once during a
	// rolling update (0: no bound).
	MaxStarting int
	// Broken says the newest version failed before it ever served:
	// nothing more of it is launched until a new version mends it.
	Broken bool
	// Active is the version blue-green traffic goes to now (0: all).
	Active int
}

// Plan is what one step does to the set.
type Plan struct {
	// Launch is how many members of Latest to add.
	Launch int
	// Remove are the members to drain and tear down, in the order chosen.
	Remove []int
	// Active is the version blue-green traffic goes to after the step
	// (0: all); it is Latest from the switch on.
	Active int
}

// Decide plans one step of a set toward Target live members of Latest,
// never holding more than Cap.
//
//   - No older version: scale to the target, down by ScaleDown's order.
//   - rolling: new members are launched into the room the cap leaves
//     (at most MaxStarting not READY at once); each READY new member lets
//     one READY old one go. With no room, one old member goes first to
//     make some.
//   - blue_green: traffic stays on the old version while new members
//     come up; it switches once enough are READY (all of the target, or
//     as many as the cap allows while one old member still serves), and
//     the old members go at once. With a cap of one the old member goes
//     first.
//
// An old member that is not READY serves nobody and goes at once. Busy
// members never go.
func Decide(in Input) Plan {
	var newLive, old []Member
	occupied, newReady, newStarting := 0, 0, 0
	for _, m := range in.Members {
		switch {
		case m.Phase.Live() && m.Version == in.Latest:
			newLive = append(newLive, m)
			occupied++
			switch m.Phase {
			case Ready:
				newReady++
			case NotReady:
			default:
				newStarting++
			}
		case m.Phase.Live():
			old = append(old, m)
			occupied++
		case m.Phase == Draining:
			occupied++
		}
	}
	room := in.Cap - occupied
	if in.Cap == NoCap {
		room = len(in.Members) + in.Target + 1 // always enough
	}
	launch := func(have int) int {
		if in.Broken {
			return 0
		}
		n := min(in.Target-have, room)
		if in.MaxStarting > 0 && len(old) > 0 && in.Mode == Rolling {
			n = min(n, in.MaxStarting-(len(newLive)-newReady))
		}
		return max(n, 0)
	}
	var p Plan
	if len(old) == 0 {
		p.Launch = launch(len(newLive))
		if n := len(newLive) - in.Target; n > 0 {
			p.Remove = ScaleDown(newLive, n)
		}
		return p
	}
	var oldReady []Member
	for _, m := range old {
		switch {
		case m.Phase == Ready:
			oldReady = append(oldReady, m)
		case m.Busy == 0:
			p.Remove = append(p.Remove, m.ID)
			room++
		}
	}
	p.Launch = launch(len(newLive))
	// The cap, not a bound on starting members, holds the set back: an
	// old member makes room.
	cramped := len(newLive) < in.Target && !in.Broken && room <= 0
	if in.Mode == BlueGreen {
		p.Active = in.Active
		switchNow := newReady >= in.Target ||
			(newReady >= 1 && newStarting == 0 && p.Launch == 0 && room <= 0 && len(oldReady) <= 1)
		if switchNow || len(oldReady) == 0 {
			p.Active = in.Latest
			for _, m := range oldReady {
				if m.Busy == 0 {
					p.Remove = append(p.Remove, m.ID)
				}
			}
			return p
		}
		if cramped && newStarting == 0 && (len(oldReady) > 1 || len(newLive) == 0) {
			// With a cap of one the old member makes room, and requests
			// are held until the new one is READY.
			p.Remove = append(p.Remove, ScaleDown(oldReady, 1)...)
		}
		return p
	}
	retired := 0
	if cramped && newStarting == 0 && len(oldReady) > 0 {
		if out := ScaleDown(oldReady, 1); len(out) > 0 {
			p.Remove = append(p.Remove, out...)
			retired = 1
		}
	}
	if excess := len(oldReady) - retired + newReady - in.Target; excess > 0 {
		rest := slices.DeleteFunc(slices.Clone(oldReady), func(m Member) bool { return slices.Contains(p.Remove, m.ID) })
		p.Remove = append(p.Remove, ScaleDown(rest, excess)...)
	}
	return p
}

// ScaleDown picks up to n idle members to go, in SkyPilot's order: by
// phase (PENDING, PROVISIONING, STARTING, NOT_READY, READY), then the
// older version, then the higher id. Busy members are not picked.
func ScaleDown(ms []Member, n int) []int {
	c := slices.DeleteFunc(slices.Clone(ms), func(m Member) bool { return m.Busy > 0 })
	sort.SliceStable(c, func(i, j int) bool {
		a, b := c[i], c[j]
		if a.Phase != b.Phase {
			return a.Phase < b.Phase
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.ID > b.ID
	})
	var out []int
	for i := 0; i < n && i < len(c); i++ {
		out = append(out, c[i].ID)
	}
	return out
}
