package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/redact"
	"github.com/skygo/skygo/internal/ux"
)

// Log layout of one job under ~/sky_logs/<run_timestamp>/ (runtime.md):
// run.log holds every rank's output with a "(head, rank=0, pid=N) " style
// prefix plus the driver's status lines; tasks/run.log (single-node job)
// or tasks/<rank>-<head|workerN>.log hold each rank's raw output;
// setup-<node>.log holds detached setup output per node.

// setupLogName is the setup log of a node, in the job's log dir.
func setupLogName(node int) string { return fmt.Sprintf("setup-%d.log", node) }

// isSetupLog says whether path is a node's setup log: the writer of its
// lines prefixes them in run.log as setup output.
func isSetupLog(path string) bool {
	base := filepath.Base(path)
	return strings.HasPrefix(base, "setup-") && strings.HasSuffix(base, ".log")
}

// jobLog is the shared run.log of one job.
type jobLog struct {
	dir string
	mu  sync.Mutex
	run *os.File
	// redact holds the job's secret values: a job that prints one must
	// not leave it in the node's logs, which `sky logs` and the launch
	// stream read back and which outlive the job.
	redact *redact.Redactor
}

// withSecrets makes the log redact the job's secret values from every
// line a rank writes.
func (l *jobLog) withSecrets(secrets map[string]string) *jobLog {
	vals := make([]string, 0, len(secrets))
	for _, v := range secrets {
		vals = append(vals, v)
	}
	l.redact = redact.New(vals...)
	return l
}

func openJobLog(dir string) (*jobLog, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tasks"), 0o755); err != nil {
		return nil, err
	}
	// Owner only, like the server's request logs: a job may print a
	// credential it was not told is a secret, or one too short to redact.
	f, err := os.OpenFile(filepath.Join(dir, "run.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &jobLog{dir: dir, run: f}, nil
}

// driverLine writes one status line of the driver itself.
func (l *jobLog) driverLine(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.run, format+"\n", args...)
}

func (l *jobLog) close() { l.run.Close() }

// rankFileName is the per-rank log of a job with numNodes nodes.
func rankFileName(numNodes, rank, node int) string {
	if numNodes == 1 {
		return "run.log"
	}
	return fmt.Sprintf("%d-%s.log", rank, nodeName(node))
}

func nodeName(node int) string {
	if node == 0 {
		return "head"
	}
	return "worker" + strconv.Itoa(node)
}

// rankWriter splits one rank's output into lines, writing each raw to the
// rank's own file and prefixed to run.log. When expectHeader is set the
// first line is exec-rank's pid header, which completes the prefix.
type rankWriter struct {
	log          *jobLog
	file         *os.File
	label        func(pid int) string
	prefix       string
	buf          []byte
	expectHeader bool
	pidSeen      func(pid int)

	// styled is prefix as run.log shows it, made once per prefix.
	styled, styledFrom string
}

func (w *rankWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) == 0 {
		w.buf = w.buf[:0:0]
	}
	return len(p), nil
}

func (w *rankWriter) setPid(pid int) {
	w.prefix = w.label(pid)
	if w.pidSeen != nil {
		w.pidSeen(pid)
	}
}

func (w *rankWriter) emit(line []byte) {
	if w.expectHeader {
		w.expectHeader = false
		if rest, ok := bytes.CutPrefix(line, []byte(pidHeader)); ok {
			pid, _ := strconv.Atoi(string(bytes.TrimSpace(rest)))
			w.setPid(pid)
			return
		}
	}
	if w.log.redact != nil {
		line = []byte(w.log.redact.Redact(string(line)))
	}
	if w.file != nil {
		_, _ = w.file.Write(line)
	}
	if w.styledFrom != w.prefix || w.styled == "" {
		w.styled = runLogPrefix(w.prefix, w.file != nil && isSetupLog(w.file.Name()))
		w.styledFrom = w.prefix
	}
	w.log.mu.Lock()
	_, _ = w.log.run.WriteString(w.styled)
	_, _ = w.log.run.Write(line)
	w.log.mu.Unlock()
}

var pidRE = regexp.MustCompile(`pid=(-?[0-9]+)`)

// runLogPrefix turns a rank's label ("(head, rank=0, pid=7) ") into the
// prefix of its lines in run.log, as Ray prints them for SkyPilot: cyan,
// and "(setup pid=7)" for setup output on any node.
func runLogPrefix(label string, setup bool) string {
	label = strings.TrimSpace(label)
	if setup {
		pid := "0"
		if m := pidRE.FindStringSubmatch(label); m != nil {
			pid = m[1]
		}
		label = "(setup pid=" + pid + ")"
	}
	return ux.Cyan + label + ux.Reset + " "
}

// flush writes a last unterminated line.
func (w *rankWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(append(w.buf, '\n'))
		w.buf = nil
	}
}

// tailOffset is the offset where the last n lines of f start (0 for n ≤ 0).
func tailOffset(f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil || n <= 0 {
		return 0, err
	}
	size := st.Size()
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	pos := size
	seen := 0
	// A final newline ends the last line; it does not start a new one.
	skipLast := true
	for pos > 0 {
		read := int64(chunk)
		if pos < read {
			read = pos
		}
		pos -= read
		if _, err := f.ReadAt(buf[:read], pos); err != nil && err != io.EOF {
			return 0, err
		}
		for i := read - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				continue
			}
			if skipLast && pos+i == size-1 {
				skipLast = false
				continue
			}
			seen++
			if seen == n {
				return pos + i + 1, nil
			}
		}
		skipLast = false
	}
	return 0, nil
}

// copyLog writes path to w from the last tail lines (all when tail ≤ 0).
// With follow it keeps reading until done() reports the job finished and
// the file is drained; a missing file is waited for while following.
func copyLog(ctx context.Context, w io.Writer, path string, tail int, follow bool, done func() bool) error {
	var f *os.File
	for {
		var err error
		f, err = os.Open(path)
		if err == nil {
			break
		}
		if !follow || !os.IsNotExist(err) {
			return err
		}
		if done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer f.Close()
	off, err := tailOffset(f, tail)
	if err != nil {
		return err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	for {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		// Check done before the last read so nothing written just
		// before the job ended is lost.
		finished := done()
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if finished {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logPoll is how often a followed log is checked for new lines once it
// has been quiet a while; logPollMin after anything happened.
const (
	logPoll    = 50 * time.Millisecond
	logPollMin = 2 * time.Millisecond
)

// The driver's own end-of-job lines in run.log, which the job stream says
// in SkyPilot's words instead: it closes with "✓ Job finished (status:
// S)." from the job record, for a finished, cancelled or orphaned job
// alike. The driver writes a failed setup's and a failed run's ERROR lines
// in SkyPilot's words already (daemon.go), so they pass through.
var driverEndRE = regexp.MustCompile(`^Job [0-9]+ (finished \(status: [A-Z_]+\)|was [a-z_]+( during setup)?)\.$`)

// jobStartLines are what SkyPilot's driver prints before the job's
// output: it waits for the job's nodes, then starts.
func jobStartLines(numNodes int) (waiting, started string) {
	nodes := fmt.Sprintf("%d node%s", numNodes, map[bool]string{true: "s"}[numNodes != 1])
	waiting = ux.Branch + ux.Styled(ux.Dim, "Waiting for task resources on "+nodes+".")
	started = ux.Last + "Job started. Streaming logs... " + ux.Styled(ux.Dim, "(Ctrl-C to exit log streaming; job will not be killed)")
	return waiting, started
}

// presentLine is one run.log line as the job stream shows it; false drops
// it.
func presentLine(line string) (string, bool) {
	if driverEndRE.MatchString(line) {
		return "", false
	}
	return line, true
}

// streamJob writes a job's log the way SkyPilot's `sky logs` (and the job
// part of `sky launch` and `sky exec`) shows it: the driver's two start
// lines, run.log with the driver's own lines in SkyPilot's words, and,
// once the job is over, "✓ Job finished (status: S).". With tail > 0 only
// the last tail lines of that come first (the closing line on top of
// them). With follow it returns when the job has ended and its log is
// drained. load reads the job's record; it returns the last status seen.
func streamJob(ctx context.Context, w io.Writer, path string, tail int, follow bool, load func() (*jobRow, error)) (agentapi.Status, error) {
	r, err := load()
	if err != nil {
		return "", err
	}
	waiting, started := jobStartLines(r.NumNodes)
	var ring []string // the tail while catching up
	// The poll starts short and doubles while nothing happens, up to
	// logPoll: a job that just started (most followed jobs, right after
	// their submit) shows its first lines and its end within milliseconds,
	// and a quiet long job costs no more reads than a fixed logPoll.
	written, wait := 0, logPollMin
	lastWritten, lastStatus := -1, r.Status
	catchingUp := tail > 0
	out := func(line string) error {
		if catchingUp {
			ring = append(ring, line)
			if len(ring) > tail {
				ring = ring[1:]
			}
			return nil
		}
		written++
		_, err := io.WriteString(w, line+"\n")
		return err
	}

	var (
		f       *os.File
		pending []byte // a line not ended yet
		buf     = make([]byte, 32<<10)
		shown   bool // the start line is out
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	// drain copies what run.log has now; last treats a line without its
	// newline as complete (the job is over).
	drain := func(last bool) error {
		if f == nil {
			var err error
			if f, err = os.Open(path); os.IsNotExist(err) {
				return nil
			} else if err != nil {
				return err
			}
			if tail > 0 {
				// Two lines more: the driver's closing lines are dropped.
				off, err := tailOffset(f, tail+2)
				if err != nil {
					return err
				}
				if off > 0 {
					ring = nil // the start lines are out of the window
				}
				if _, err := f.Seek(off, io.SeekStart); err != nil {
					return err
				}
			}
		}
		for {
			n, err := f.Read(buf)
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				if line, ok := presentLine(string(pending[:i])); ok {
					if err := out(line); err != nil {
						return err
					}
				}
				pending = pending[i+1:]
			}
			if err == io.EOF || n == 0 {
				break
			}
			if err != nil {
				return err
			}
		}
		if last && len(pending) > 0 {
			if line, ok := presentLine(string(pending)); ok {
				if err := out(line); err != nil {
					return err
				}
			}
			pending = nil
		}
		return nil
	}

	if err := out(waiting); err != nil {
		return r.Status, err
	}
	for {
		// The record first: run.log is written only once the job has
		// started, so "Job started" always comes before its lines.
		done := r.Status.Terminal()
		if r.StartAt != nil && !shown {
			shown = true
			if err := out(started); err != nil {
				return r.Status, err
			}
		}
		if shown {
			if err := drain(done || !follow); err != nil {
				return r.Status, err
			}
		}
		if catchingUp {
			catchingUp = false
			for _, line := range ring {
				if err := out(line); err != nil {
					return r.Status, err
				}
			}
			ring = nil
		}
		if done || !follow {
			break
		}
		if written != lastWritten || r.Status != lastStatus {
			wait = logPollMin
		} else {
			wait = min(2*wait, logPoll)
		}
		lastWritten, lastStatus = written, r.Status
		select {
		case <-ctx.Done():
			return r.Status, ctx.Err()
		case <-time.After(wait):
		}
		if r, err = load(); err != nil {
			return "", err
		}
	}
	if !r.Status.Terminal() {
		return r.Status, nil
	}
	return r.Status, out(ux.Finishing(fmt.Sprintf("Job finished (status: %s).", r.Status)))
}
