package agent

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openPty opens a new pseudo-terminal pair: the master end the SSH
// session reads and writes, and the slave end the shell gets as its
// controlling terminal. The ioctls go through SyscallConn so the master
// stays in Go's poller (Fd would make it blocking, and then a read could
// not be woken by a deadline).
func openPty() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	var n int
	var ioErr error
	err = control(master, func(fd int) {
		if ioErr = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); ioErr != nil {
			return
		}
		n, ioErr = unix.IoctlGetInt(fd, unix.TIOCGPTN)
	})
	if err == nil {
		err = ioErr
	}
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlocking a pseudo-terminal: %w", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	return master, slave, nil
}

// setWinsize sets the terminal size the programs on the pty see (and
// sends them SIGWINCH).
func setWinsize(master *os.File, cols, rows uint32) error {
	ws := &unix.Winsize{Col: clampU16(cols), Row: clampU16(rows)}
	var ioErr error
	err := control(master, func(fd int) { ioErr = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws) })
	if err != nil {
		return err
	}
	return ioErr
}

func control(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}

func clampU16(v uint32) uint16 {
	if v > 0xffff {
		return 0xffff
	}
	return uint16(v)
}
