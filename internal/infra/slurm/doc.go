// Package slurm is SkyGo's Slurm infrastructure (`infra: slurm[/<cluster>[/<partition>]]`):
// a SkyGo cluster is one long-running sbatch allocation on a Slurm
// cluster reached over SSH through its login node, and commands reach the
// allocated nodes with `srun --overlap`.
//
// The pure pieces, which run no command and are tested against real
// Slurm 22.05 outputs under testdata/:
//   - settings.go: the `slurm:` config keys resolved for one cluster and
//     partition (Settings, ResolveSettings, AllowedClusters);
//   - inventory.go: parsing of `scontrol show partitions -o`, `sinfo
//     --Node`, `scontrol show node -o`, `scontrol show config`;
//   - gres.go: GRES strings, matching a requested GPU name to a cluster's
//     GRES type (MatchGPU) and canonical names for listings;
//   - itype.go: the virtual instance types `4CPU--16GB[--H100:1]`;
//   - feasible.go: whether a partition can hold a request (Fit), default
//     sizes and prices;
//   - sbatch.go: the sbatch script that holds the allocation;
//   - env.go: which SLURM_* variables belong to a job step and are unset
//     before user code.
package slurm
