package slurm

import "strings"

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
var stepScoped = map[string]bool{
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

// StepScoped reports whether a SLURM_* (or SRUN_*) variable describes the
// job step SkyGo started rather than the job, and so is unset before user
// code runs. Job-scoped names are kept: SLURM_JOB_* (SLURM_JOB_ID,
// _NODELIST, _NUM_NODES, _CPUS_PER_NODE, _GPUS, _PARTITION, ...),
// SLURM_JOBID, SLURM_NODELIST, SLURM_NNODES, SLURM_CLUSTER_NAME,
// SLURM_SUBMIT_DIR/_HOST, SLURM_ARRAY_*, SLURM_GPUS_ON_NODE and
// SLURM_CPUS_ON_NODE (this node's share, as the seed keeps the former;
// srun does not read them), SLURM_NODE_ALIASES, SLURM_TOPOLOGY_ADDR* (the
// node's place in the network, not the step's), SLURM_RESTART_COUNT,
// SLURMD_NODENAME, SLURM_CONF and SLURM_CONF_SERVER (needed to reach the
// controller at all) and SLURM_WORKING_CLUSTER. Names it does not know are
// kept.
func StepScoped(name string) bool {
	if stepScoped[name] {
		return true
	}
	for _, p := range stepScopedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// UserEnv filters an environment ("K=V" entries, as os.Environ) for user
// code: step-scoped SLURM_* variables are dropped, and the legacy job
// aliases SLURM_NNODES, SLURM_NODELIST and SLURM_JOBID are set from their
// SLURM_JOB_* names, so that they hold the job's values whatever the
// shape of the step SkyGo launched user code in (a one-node step's own
// node list and count are not what a script reading them means).
func UserEnv(environ []string) []string {
	job := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "SLURM_JOB_NUM_NODES", "SLURM_JOB_NODELIST", "SLURM_JOB_ID":
			job[k] = v
		}
	}
	alias := map[string]string{
		"SLURM_NNODES":   "SLURM_JOB_NUM_NODES",
		"SLURM_NODELIST": "SLURM_JOB_NODELIST",
		"SLURM_JOBID":    "SLURM_JOB_ID",
	}
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if StepScoped(k) {
			continue
		}
		if _, ok := alias[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range sortedKeys(alias) {
		if v, ok := job[alias[k]]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}
