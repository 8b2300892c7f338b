package backend

import (
	"errors"
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
)

// Failover's decisions, as pure functions of the error a candidate got:
// provisionWithFailover asks the planner, tries the candidate, and on a
// failure these say what the next plan must avoid and whether the launch
// goes on. Table-tested in failover_test.go.

// failoverStep is what a failed candidate leads to.
type failoverStep struct {
	// next: try other candidates, avoiding block; else the error ends
	// the launch.
	next  bool
	block optimizer.Blocked
	// capacity: the candidate was out of capacity, which
	// --retry-until-up waits out (it starts over once every candidate
	// was).
	capacity bool
}

// afterUnusable decides on a candidate whose infrastructure cannot be
// used at all (not enabled here, not the user's to provision on, no
// provisioner): every place of that infrastructure is blocked.
func afterUnusable(cand optimizer.Candidate) failoverStep {
	return failoverStep{next: true, block: optimizer.Blocked{Cloud: cand.Cloud}}
}

// afterProvisionError decides on a candidate whose provisioning failed.
// Out of capacity blocks that exact offer (cloud, region, zone, instance
// type). Credentials a cloud refuses are refused in every region of it,
// so the cloud is blocked; the places of a capacity infrastructure
// (byCapacity: node pools, batch clusters) each have their own credentials,
// so only that one is. Anything else ends the launch.
func afterProvisionError(err error, cand optimizer.Candidate, byCapacity bool) failoverStep {
	var capErr *provision.CapacityError
	if errors.As(err, &capErr) {
		return failoverStep{next: true, capacity: true,
			block: optimizer.Blocked{Cloud: cand.Cloud, Region: cand.Region, Zone: cand.Zone, InstanceType: cand.InstanceType}}
	}
	var authErr *provision.AuthError
	if errors.As(err, &authErr) {
		bl := optimizer.Blocked{Cloud: cand.Cloud}
		if byCapacity {
			bl.Region = cand.Region
		}
		return failoverStep{next: true, block: bl}
	}
	return failoverStep{}
}

// afterPlanError decides on a planner that found no candidate left
// (err) after the failures so far: with --retry-until-up (retry) and at
// least one candidate out of capacity, the launch starts over after a
// pause; else it fails with every attempt listed, as out of capacity if
// any was (a managed job retries that; it does not fail its prechecks).
func afterPlanError(err error, retry bool, failures []string, capacityFailures int) (startOver bool, final error) {
	switch {
	case retry && capacityFailures > 0:
		return true, nil
	case len(failures) == 0:
		return false, err
	case capacityFailures > 0:
		return false, fmt.Errorf("%w\nProvisioning attempts that failed:\n  %s%w", err, strings.Join(failures, "\n  "), silent{ErrOutOfCapacity})
	}
	return false, fmt.Errorf("%w\nProvisioning attempts that failed:\n  %s", err, strings.Join(failures, "\n  "))
}
