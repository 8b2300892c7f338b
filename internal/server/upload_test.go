package server

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/upload"
)

// TestUploadNeedsAuthAndStaysPerUser: uploads take the server's
// credentials like every call, and one user's upload is nothing to
// another: bob's store lacks alice's blobs, he cannot commit a tree of
// them, and her tree is not his to open.
func TestUploadNeedsAuthAndStaysPerUser(t *testing.T) {
	s := newTestServer(t, Options{BasicAuth: true, InitialBasicAuth: "alice:alicepw"})
	hash, _ := bcrypt.GenerateFromPassword([]byte("bobpw"), bcrypt.MinCost)
	if err := s.store.CreateUser(context.Background(), &state.User{ID: "bob-id", Name: "bob", PasswordHash: string(hash), Role: state.RoleUser}); err != nil {
		t.Fatal(err)
	}
	base := liveServer(t, s)
	as := func(user, pw string) *client.Client {
		c, err := client.New(client.Options{Endpoint: strings.Replace(base, "http://", "http://"+user+":"+pw+"@", 1), Home: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "secret.txt"), []byte("alice-only"), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := []upload.Root{{Name: upload.WorkdirRoot, Source: src}}
	ctx := context.Background()

	if _, err := as("alice", "wrong").Upload(ctx, roots); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("upload with a wrong password: %v, want 401", err)
	}
	rep, err := as("alice", "alicepw").Upload(ctx, roots)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 1 {
		t.Errorf("alice's first upload sent %d files, want 1", rep.Sent)
	}
	scan, err := upload.Scan(roots, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	bob := as("bob", "bobpw")
	var needs api.UploadNeeds
	if err := bob.Do(ctx, http.MethodPost, api.PathUpload, scan.Manifest, &needs); err != nil {
		t.Fatal(err)
	}
	if len(needs.Missing) != 1 {
		t.Errorf("bob's store has alice's blob: missing %v", needs.Missing)
	}
	var ae *client.APIError
	if err := bob.Do(ctx, http.MethodPost, api.PathUploadCommit, scan.Manifest, nil); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("bob committed a tree of alice's blobs: %v", err)
	}
	if _, _, err := upload.Open(paths.Uploads(s.opts.Home), "bob-id", rep.ID); !errors.Is(err, upload.ErrNoTree) {
		t.Errorf("bob's requests can open alice's tree: %v", err)
	}
	if _, release, err := upload.Open(paths.Uploads(s.opts.Home), "alice", UserHash("alice")); err == nil {
		release()
		t.Error("a user id in place of a tree id opened something")
	}
}

// TestUploadResumesAfterCutOff: a blob cut off halfway is resumed from
// what the server kept, not sent again from the start.
func TestUploadResumesAfterCutOff(t *testing.T) {
	s := newTestServer(t, Options{})
	s.uploads.ChunkBytes = 1 << 10
	c, err := client.New(client.Options{Endpoint: liveServer(t, s), Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<10) // 16 KiB: 16 chunks
	if err := os.WriteFile(filepath.Join(src, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	roots := []upload.Root{{Name: upload.WorkdirRoot, Source: src}}
	scan, err := upload.Scan(roots, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := upload.Blobs(scan.Manifest)[0]
	// The first 5 chunks arrive before the connection breaks.
	for off := int64(0); off < 5<<10; off += 1 << 10 {
		if _, err := s.uploads.WriteChunk(LocalUser().ID, b.SHA256, b.Size, off, 0o644, bytes.NewReader(data[off:off+1<<10])); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := c.Upload(context.Background(), roots)
	if err != nil {
		t.Fatal(err)
	}
	if rep.SentBytes != int64(len(data))-5<<10 {
		t.Errorf("resumed upload sent %d bytes, want the %d that were missing", rep.SentBytes, len(data)-5<<10)
	}
	tree, release, err := upload.Open(paths.Uploads(s.opts.Home), LocalUser().ID, rep.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if got, _ := os.ReadFile(filepath.Join(tree, "workdir", "f")); !bytes.Equal(got, data) {
		t.Error("the resumed blob differs from the file")
	}
}

// TestConcurrentUploadsOfTheSameFiles: clients racing to send the same
// blobs and commit the same tree all succeed with one tree.
func TestConcurrentUploadsOfTheSameFiles(t *testing.T) {
	s := newTestServer(t, Options{})
	base := liveServer(t, s)
	src := t.TempDir()
	for i := 0; i < 50; i++ {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%d", i)), bytes.Repeat([]byte{byte(i)}, 1000+i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	roots := []upload.Root{{Name: upload.WorkdirRoot, Source: src}}
	ids := make([]string, 6)
	errs := make([]error, len(ids))
	done := make(chan int)
	for i := range ids {
		go func(i int) {
			defer func() { done <- i }()
			c, err := client.New(client.Options{Endpoint: base, Home: t.TempDir()})
			if err != nil {
				errs[i] = err
				return
			}
			rep, err := c.Upload(context.Background(), roots)
			ids[i], errs[i] = rep.ID, err
		}(i)
	}
	for range ids {
		<-done
	}
	for i := range ids {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Errorf("client %d: id %s, err %v (client 0: %s)", i, ids[i], errs[i], ids[0])
		}
	}
	tree, release, err := upload.Open(paths.Uploads(s.opts.Home), LocalUser().ID, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if got, _ := os.ReadFile(filepath.Join(tree, "workdir", "f49")); len(got) != 1049 {
		t.Errorf("f49 in the tree has %d bytes, want 1049", len(got))
	}
}

// BenchmarkUpload: a workdir of 1000 files of 8 KiB through the client
// and a real HTTP server, the first time (every blob sent and stored) and
// unchanged (hash, one manifest, one commit), against two baselines of
// the same run: tar of the directory to nowhere, and one HTTP PUT of the
// same bytes to a handler that discards them.
func BenchmarkUpload(b *testing.B) {
	const files, size = 1000, 8 << 10
	src := b.TempDir()
	payload := bytes.Repeat([]byte("x"), size)
	for i := 0; i < files; i++ {
		p := filepath.Join(src, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d.py", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		copy(payload, fmt.Sprintf("%08d", i)) // distinct contents
		if err := os.WriteFile(p, payload, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	roots := []upload.Root{{Name: upload.WorkdirRoot, Source: src}}
	home := b.TempDir()
	s, err := New(Options{Home: home, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	hs := httptest.NewServer(s.Handler())
	b.Cleanup(hs.Close)
	c, err := client.New(client.Options{Endpoint: hs.URL, Home: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	stores := 0
	b.Run("first", func(b *testing.B) {
		b.SetBytes(files * size)
		for i := 0; i < b.N; i++ {
			// A fresh store each time, not an emptied one: removing
			// thousands of files leaves the file system work that the
			// next creates would pay for (the untar baseline never
			// removes either).
			stores++ // b.N restarts at 0 for each round
			s.uploads.Dir = filepath.Join(home, "stores", fmt.Sprint(stores))
			rep, err := c.Upload(ctx, roots)
			if err != nil || rep.Sent != files {
				b.Fatalf("sent %d of %d: %v", rep.Sent, files, err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		if _, err := c.Upload(ctx, roots); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(files * size)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			rep, err := c.Upload(ctx, roots)
			if err != nil || rep.Sent != 0 {
				b.Fatalf("sent %d: %v", rep.Sent, err)
			}
		}
	})
	b.Run("baseline-tar", func(b *testing.B) {
		b.SetBytes(files * size)
		for i := 0; i < b.N; i++ {
			if err := tarDir(src, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	putTar := func(b *testing.B, receive func(io.Reader) error) {
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := receive(r.Body); err != nil {
				http.Error(w, err.Error(), 500)
			}
		}))
		defer sink.Close()
		b.SetBytes(files * size)
		for i := 0; i < b.N; i++ {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(tarDir(src, pw)) }()
			req, _ := http.NewRequest(http.MethodPut, sink.URL, pr)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("PUT: %s", resp.Status)
			}
		}
	}
	b.Run("baseline-put", func(b *testing.B) {
		putTar(b, func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err })
	})
	b.Run("baseline-put-untar", func(b *testing.B) {
		dst := b.TempDir()
		n := 0
		putTar(b, func(r io.Reader) error {
			n++
			return untar(r, filepath.Join(dst, fmt.Sprint(n)))
		})
	})
}

// untar writes a tar stream's files under dir: what a server receiving
// a whole archive (SkyPilot's zip upload) does at the least.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, hdr.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode)&0o777)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
}

func tarDir(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name, _ = filepath.Rel(dir, p)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
