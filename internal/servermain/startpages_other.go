//go:build !linux

package servermain

// releaseStartupPages is Linux's (it reads /proc/self/smaps).
func releaseStartupPages() int { return 0 }
