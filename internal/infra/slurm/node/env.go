package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// User code runs inside a job step SkyGo started (srun --overlap, one task
// on one node). Slurm gives that step's processes two kinds of SLURM_*
// variables: facts about the job's allocation, which scripts read and which
// must stay (seed §4), and the shape of SkyGo's own step, which a nested
// `srun` in user code would read as its input (srun man page, INPUT
// ENVIRONMENT VARIABLES) and so be confined to one task on one node with
// SkyGo's binding. The lists below classify the variables of the sbatch and
// srun man pages (OUTPUT ENVIRONMENT VARIABLES, Slurm 22.05), plus the srun
// input variables a launching srun may have exported.

// stepScoped are exact names that describe the step or its task.
var stepScopedNames = map[string]bool{
	// The task's identity within SkyGo's step: every node's rank is 0 in a
	// one-task step, which would mislead rank-based scripts.
	"SLURM_PROCID": true, "SLURM_LOCALID": true, "SLURM_NODEID": true,
	"SLURM_GTIDS": true, "SLURM_TASK_PID": true,
	// Task counts and layout of the step; srun reads SLURM_NTASKS,
	// SLURM_NPROCS and SLURM_NTASKS_PER_* as its own -n / --ntasks-per-*.
	"SLURM_NTASKS": true, "SLURM_NPROCS": true, "SLURM_TASKS_PER_NODE": true,
	"SLURM_NTASKS_PER_NODE": true, "SLURM_NTASKS_PER_CORE": true,
	"SLURM_NTASKS_PER_GPU": true, "SLURM_NTASKS_PER_SOCKET": true,
	"SLURM_DISTRIBUTION": true, "SLURM_DIST_PLANESIZE": true,
	// Per-task resources of the step (srun inputs: -c, --mem*, --gpus*,
	// --threads-per-core, --hint, --exclusive, --overlap, ...).
	"SLURM_CPUS_PER_TASK": true, "SRUN_CPUS_PER_TASK": true, "SLURM_CPUS_PER_GPU": true,
	"SLURM_MEM_PER_NODE": true, "SLURM_MEM_PER_CPU": true, "SLURM_MEM_PER_GPU": true,
	"SLURM_GPUS": true, "SLURM_GPUS_PER_NODE": true, "SLURM_GPUS_PER_TASK": true,
	"SLURM_GPUS_PER_SOCKET": true, "SLURM_GPU_BIND": true, "SLURM_GPU_FREQ": true,
	"SLURM_CPU_FREQ_REQ": true, "SLURM_TRES_PER_TASK": true, "SLURM_GRES": true,
	"SLURM_THREADS_PER_CORE": true, "SLURM_HINT": true, "SLURM_OVERCOMMIT": true,
	"SLURM_EXCLUSIVE": true, "SLURM_EXACT": true, "SLURM_OVERLAP": true,
	"SLURM_CONTAINER": true,
	// The srun that launched the step: its I/O channel, its host, its
	// output/kill/export modes and the process attributes it propagated.
	"SLURM_SRUN_COMM_HOST": true, "SLURM_SRUN_COMM_PORT": true,
	"SLURM_LAUNCH_NODE_IPADDR": true, "SLURM_UNBUFFEREDIO": true, "SLURM_LABELIO": true,
	"SLURM_KILL_BAD_EXIT": true, "SLURM_EXPORT_ENV": true, "SRUN_EXPORT_ENV": true,
	"SLURM_UMASK": true, "SLURM_PRIO_PROCESS": true, "SLURM_OPEN_MODE": true,
	"SLURM_STDINMODE": true, "SLURM_STDOUTMODE": true, "SLURM_STDERRMODE": true,
	"SLURM_WAIT": true, "SLURM_NO_KILL": true, "SLURM_MPI_TYPE": true,
	"SLURM_STEPID": true,
}

// stepScopedPrefixes cover families: SLURM_STEP_* (id, node list, counts,
// GPUs, launcher port), CPU and memory binding (SLURM_CPU_BIND,
// _TYPE/_LIST/_VERBOSE, SLURM_MEM_BIND*).
var stepScopedPrefixes = []string{"SLURM_STEP_", "SLURM_CPU_BIND", "SLURM_MEM_BIND"}

// stepScoped reports whether name is a step-scoped Slurm variable.
func stepScoped(name string) bool {
	if stepScopedNames[name] {
		return true
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

// rankBase is the agent.RankBase of a node of a Slurm allocation: ranks
// get the physical devices of the allocation (slurmDevices).
func rankBase(home string, env []string) ([]string, func(chosen string) string, bool) {
	base, on := slurmRankBase(home, env)
	if !on {
		return env, nil, false
	}
	node := os.Getenv("CUDA_VISIBLE_DEVICES")
	return base, func(chosen string) string { return slurmDevices(node, chosen) }, true
}

// slurmRankBase adapts a rank's base environment on a node of a Slurm
// allocation: the step-scoped variables removed, the allocation's
// job-scoped ones restored. Off Slurm it returns env unchanged and false.
func slurmRankBase(home string, env []string) ([]string, bool) {
	data, err := os.ReadFile(filepath.Join(home, JobEnvFile))
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
