// Package all links in the command-line extras of every infrastructure
// that has them (internal/infra/<name>/cliext): the commands each adds to
// sky through internal/cliext. The command line links it.
package all

import (
	_ "github.com/skygo/skygo/internal/infra/kubernetes/cliext" // sky gpus label
	_ "github.com/skygo/skygo/internal/infra/local/cliext"      // sky local up/down
	_ "github.com/skygo/skygo/internal/infra/slurm/cliext"      // sky slurm convert
	_ "github.com/skygo/skygo/internal/infra/ssh/cliext"        // sky ssh up/down
)
