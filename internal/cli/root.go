// Package cli is the sky command line.
package cli

import "os"

// Execute runs the sky command line and returns the process exit code.
func Execute() int {
	_ = os.Args
	return 0
}
