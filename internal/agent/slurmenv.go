package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/agent/agentapi"
)

// Slurm's environment inside an allocation comes in two scopes. The
// job-scoped variables (SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_NNODES,
// SLURM_GPUS_ON_NODE, ...) describe the allocation and are what user
// scripts read; they are kept. The step-scoped ones describe the step a
// process was started in (SkyGo's own `srun --overlap` step): its task
// ids, CPU binding, task counts and the srun it reports to. A nested
// `srun` in the user's script would inherit that step's shape from them,
// and a rank would see the wrong SLURM_PROCID, so they are removed before
// user code runs and before the head starts steps on other nodes.

// stepScopedExact are step-scoped names that have no common prefix.
var stepScopedExact = map[string]bool{
	"SLURM_PROCID": true, "SLURM_LOCALID": true, "SLURM_NODEID": true, "SLURM_GTIDS": true,
	"SLURM_TASK_PID": true, "SLURM_NTASKS": true, "SLURM_NPROCS": true, "SLURM_NTASKS_PER_NODE": true,
	"SLURM_TASKS_PER_NODE": true, "SLURM_CPUS_PER_TASK": true, "SLURM_DISTRIBUTION": true,
	"SLURM_LAUNCH_NODE_IPADDR": true, "SLURM_UMASK": true, "SLURM_PRIO_PROCESS": true,
	"SLURM_OVERLAP": true, "SLURM_CPUS_ON_NODE": true, "SLURM_UNBUFFEREDIO": true,
	"SLURM_LABELIO": true, "SLURM_EXCLUSIVE": true, "SLURM_MEM_BIND": true, "SLURM_MEM_BIND_LIST": true,
	"SLURM_MEM_BIND_PREFER": true, "SLURM_MEM_BIND_SORT": true, "SLURM_MEM_BIND_TYPE": true,
	"SLURM_MEM_BIND_VERBOSE": true, "SLURM_JOB_NAME": false, "SLURM_NNODES": false,
}

// stepScopedPrefixes are the families of step-scoped names.
var stepScopedPrefixes = []string{"SLURM_STEP", "SLURM_CPU_BIND", "SLURM_SRUN_COMM_", "SLURM_TOPOLOGY_ADDR", "SLURM_PTY_"}

// stepScoped reports whether name is a step-scoped Slurm variable.
func stepScoped(name string) bool {
	if v, ok := stepScopedExact[name]; ok {
		return v
	}
	for _, p := range stepScopedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// withoutStepVars is env without the step-scoped Slurm variables.
func withoutStepVars(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !stepScoped(k) {
			out = append(out, kv)
		}
	}
	return out
}

// slurmRankBase adapts a rank's base environment on a node of a Slurm
// allocation: the step-scoped variables removed, the allocation's
// job-scoped ones restored. Off Slurm it returns env unchanged and false.
func slurmRankBase(home string, env []string) ([]string, bool) {
	data, err := os.ReadFile(filepath.Join(home, agentapi.SlurmJobEnvFile))
	if err != nil {
		return env, false
	}
	job := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.HasPrefix(k, "SLURM_") && !stepScoped(k) {
			job[k] = v
		}
	}
	out := make([]string, 0, len(env)+len(job))
	for _, kv := range withoutStepVars(env) {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := job[k]; !over {
			out = append(out, kv)
		}
	}
	for k, v := range job {
		out = append(out, k+"="+v)
	}
	return out, true
}

// slurmDevices maps the device indexes the head chose for a rank (0..n-1
// of the node's GPUs) to the devices Slurm gave the allocation on this
// node: without device cgroups CUDA_VISIBLE_DEVICES in a step names the
// node's physical GPUs (2,3 when another job holds 0,1), and the rank
// must get those, not the positions.
func slurmDevices(nodeDevices, chosen string) string {
	if nodeDevices == "" || chosen == "" {
		return chosen
	}
	have := strings.Split(nodeDevices, ",")
	var out []string
	for _, c := range strings.Split(chosen, ",") {
		i, err := strconv.Atoi(c)
		if err != nil || i < 0 || i >= len(have) {
			return chosen
		}
		out = append(out, have[i])
	}
	return strings.Join(out, ",")
}
