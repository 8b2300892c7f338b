package storage

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"abc", "my-bucket.v2", "a1b", strings.Repeat("a", 63)} {
		if err := ValidateName(S3, ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for name, why := range map[string]string{
		"ab": "3 to 63", strings.Repeat("a", 64): "3 to 63", "Upper": "lower-case", "-ab": "start and end",
		"ab-": "start and end", "a..b": "adjacent periods", "192.168.5.4": "IP address", "xn--abc": "xn--",
		"abc-s3alias": "-s3alias", "abc--ol-s3": "--ol-s3", "s3://abc": "Prefix detected", "gs://abc": "Prefix detected",
		"a_b": "lower-case", "": "no name",
	} {
		err := ValidateName(S3, name)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: got %v, want an error saying %q", name, err, why)
		}
	}
}

func TestParseURIAndStores(t *testing.T) {
	store, b, p, err := ParseURI("s3://bkt/a/b/")
	if err != nil || store != S3 || b != "bkt" || p != "a/b" {
		t.Errorf("ParseURI: %s %s %s %v", store, b, p, err)
	}
	if _, _, _, err := ParseURI("gs://bkt"); err == nil || !strings.Contains(err.Error(), "GCS is not available in this build") {
		t.Errorf("gs:// = %v", err)
	}
	if _, _, _, err := ParseURI("ftp://bkt"); err == nil || !strings.Contains(err.Error(), "unknown storage scheme") {
		t.Errorf("ftp:// = %v", err)
	}
	if err := CheckStore("GCS"); err == nil || !strings.Contains(err.Error(), "store GCS is not available in this build") {
		t.Errorf("CheckStore(GCS) = %v", err)
	}
	if err := CheckStore("NOPE"); err == nil || !strings.Contains(err.Error(), "unknown store") {
		t.Errorf("CheckStore(NOPE) = %v", err)
	}
	if CheckStore(S3) != nil || URI(S3, "b", "p") != "s3://b/p" {
		t.Error("S3 must be usable")
	}
}

func TestMountArgs(t *testing.T) {
	o := NodeOptions{Region: "eu-west-1"}
	args, err := MountArgs(api.StorageMount{Name: "b", Mode: Mount, Config: map[string]any{"mount": map[string]any{"read_only": true}}}, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"rclone", "mount", ":s3,provider=AWS,env_auth=true,region=eu-west-1:b", "--daemon", "--daemon-wait", "10s",
		"--allow-other", "--dir-cache-time", "5s", "--read-only"}
	if !slices.Equal(args, want) {
		t.Errorf("MOUNT args\n got %q\nwant %q", args, want)
	}
	// An endpoint (emulator, S3-compatible store) is path-style, not a secret.
	args, _ = MountArgs(api.StorageMount{Name: "b", Mode: Mount}, NodeOptions{Endpoint: "http://10.0.0.1:5000"})
	if args[2] != ":s3,provider=Other,env_auth=true,region=us-east-1,endpoint='http://10.0.0.1:5000',force_path_style=true:b" {
		t.Errorf("endpoint remote: %s", args[2])
	}
	args, err = MountArgs(api.StorageMount{Name: "b", Mode: MountCached, Type: "MODEL_CHECKPOINT_RW",
		Config: map[string]any{"mount_cached": map[string]any{"vfs_cache_max_size": "20G", "transfers": 4}}}, o)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(args[3:], " ")
	for _, w := range []string{"--daemon --daemon-wait 10s --log-level INFO --allow-other --vfs-cache-mode full --dir-cache-time 10s --vfs-cache-poll-interval 10s --vfs-fast-fingerprint",
		"--vfs-cache-max-size 20G", "--vfs-write-back 1s", "--vfs-read-chunk-size 32M", "--vfs-read-chunk-streams 16",
		"--transfers 4 --checkers 8"} {
		if !strings.Contains(got, w) {
			t.Errorf("MOUNT_CACHED args lack %q: %s", w, got)
		}
	}
	if strings.Contains(got, "--read-only") {
		t.Errorf("RW preset is read-only: %s", got)
	}
	args, _ = MountArgs(api.StorageMount{Name: "b", Mode: MountCached, Type: "DATASET_RO"}, o)
	if !slices.Contains(args, "--read-only") || !slices.Contains(args, "8M") {
		t.Errorf("DATASET_RO: %q", args)
	}
	// checkers = max(4, min(2t, 30+1.2t)): 2*20=40 < 54.
	args, _ = MountArgs(api.StorageMount{Name: "b", Mode: MountCached, Config: map[string]any{"mount_cached": map[string]any{"transfers": 20}}}, o)
	if i := slices.Index(args, "--checkers"); i < 0 || args[i+1] != "40" {
		t.Errorf("checkers for 20 transfers: %q", args)
	}
	for _, bad := range []map[string]any{{"vfs_cache_max_size": "10 GB"}, {"vfs_write_back": "soon"}} {
		if _, err := MountArgs(api.StorageMount{Name: "b", Mode: MountCached, Config: map[string]any{"mount_cached": bad}}, o); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestScripts(t *testing.T) {
	s, err := MountScript(api.StorageMount{Name: "b", Dst: "~/data dir", Mode: MountCached}, NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`MP="$HOME"/'data dir'`, "fusermount3 -uz", "umount -l", "mkdir -p \"$MP\"", "chmod 777",
		`--log-file "$LOG"`, `--cache-dir "$HOME"/.cache/sky_rclone/`, "tail -n 40 \"$LOG\"", "exit $rc", "LOCAL_CREDENTIALS"} {
		if !strings.Contains(s, w) {
			t.Errorf("mount script lacks %q:\n%s", w, s)
		}
	}
	c := CopyCommand(api.StorageMount{Name: "b", SubPath: "/x/y/", Dst: "~/data"}, NodeOptions{Endpoint: "http://e:1"})
	// The copy reaches the bucket through the same remote as a mount.
	margs, err := MountArgs(api.StorageMount{Name: "b", Dst: "/m", Mode: Mount}, NodeOptions{Endpoint: "http://e:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"rclone copyto " + quote(margs[2]+"/x/y") + ` "$DST"`, `DST="$HOME"/'data'`,
		"apt-get install -y -qq rclone", "exit $rc", "LOCAL_CREDENTIALS", "Copied s3://b/x/y to ~/data.",
		`'s3://b/x/y: no such object or prefix'`} {
		if !strings.Contains(c, w) {
			t.Errorf("copy script lacks %q:\n%s", w, c)
		}
	}
	for _, script := range []string{c, CopyCommand(api.StorageMount{Name: "b", Dst: "/data"}, NodeOptions{})} {
		if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
			t.Errorf("copy script does not parse (%v): %s\n%s", err, out, script)
		}
	}
	// A whole bucket that is empty is an empty destination, not an error.
	whole := CopyCommand(api.StorageMount{Name: "b", Dst: "/data"}, NodeOptions{})
	if !strings.Contains(whole, `[ -e "$DST" ] || mkdir -p "$DST"`) || strings.Contains(whole, "no such object") {
		t.Errorf("copy script of a whole bucket:\n%s", whole)
	}
	u := UnmountScript([]string{"/a", "~/b"})
	if !strings.Contains(u, "MP='/a'") || !strings.Contains(u, `MP="$HOME"/'b'`) {
		t.Errorf("unmount script: %s", u)
	}
}
