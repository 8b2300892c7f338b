package provision

// Process ids recorded in files on a node (a runner's session ids, the
// agent's daemon.pid and rank pid files) are read back later, sometimes
// much later: by a teardown, or by the cleanup a host is owed after it was
// unreachable. By then the process may be gone and its id given to another
// process (pid_max is often 32768, and the hosts of one machine can share
// a PID namespace), which a blind `kill -- -PID` or `pkill -s PID` would
// hit: another user's job, or sshd itself. So every kill of a recorded id
// checks first that the id still names the recorded process.

// RecordSelfSh is a bash snippet that writes "PID START" to the file named
// by $0: this shell's pid and its start time (field 22 of /proc/PID/stat,
// clock ticks since boot), the identity OwnedPIDSh checks.
const RecordSelfSh = `sky_st=$(< /proc/$$/stat); sky_st=${sky_st##*) }; sky_st=($sky_st); echo "$$ ${sky_st[19]}" > "$0"`

// OwnedPIDSh defines the POSIX sh function `sky_owned FILE PID`, which
// succeeds when signalling PID, its process group or its session as
// recorded in FILE cannot reach a process that is not the recorded one:
//
//   - no process has the id: while any member of the recorded group or
//     session lives the kernel does not hand the id out again, so whatever
//     is still found by that id is ours;
//   - FILE holds a start time (RecordSelfSh): the process with the id now
//     must have exactly that start time;
//   - FILE holds the pid alone (a file written by the agent): the process
//     must have started no later than the file was written (one second of
//     slack for the boot time's rounding). Ids are handed out cyclically,
//     so reuse within that second would need the whole pid range to wrap.
//
// It only uses /proc, cut, sed and stat, and no word splitting, so the
// login shell that runs it (sh, bash, zsh) does not matter.
const OwnedPIDSh = `sky_owned() { ` +
	`sky_s=$(cat /proc/"$2"/stat 2>/dev/null) || return 0; [ -n "$sky_s" ] || return 0; ` +
	`sky_s=${sky_s##*) }; sky_now=$(printf '%s\n' "$sky_s" | cut -d' ' -f20); ` +
	`sky_rec=$(cut -s -d' ' -f2 "$1" 2>/dev/null); ` +
	`if [ -n "$sky_rec" ]; then [ "$sky_now" = "$sky_rec" ]; return; fi; ` +
	`sky_bt=$(sed -n 's/^btime //p' /proc/stat); sky_hz=$(getconf CLK_TCK 2>/dev/null || echo 100); ` +
	`[ $(( sky_bt + sky_now / sky_hz )) -le $(( $(stat -c %Y "$1") + 1 )) ]; }`
