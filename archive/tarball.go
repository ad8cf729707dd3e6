package archive

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// hashRecord is the PAX record that carries each entry's SHA-256, so an
// archive can be checked on its own, without the store or the directory.
const hashRecord = "AGENTRUNNER.sha256"

// maxEntryBytes bounds one entry read back from an archive: far above any
// artifact (8 MiB by default), far below what would strain the runner.
const maxEntryBytes = 256 << 20

// entry is one file of a run's archive: its path relative to the run's
// directory (slash-separated), its bytes and their hash.
type entry struct {
	Name string
	Data []byte
	Sum  string
	Mod  time.Time
	// Stored: the bytes are the store's copy of an artifact, of which the
	// file in the directory is a view.
	Stored bool
}

// entries are a run's files by name.
type entries map[string]*entry

// sorted lists the entries by name, so an archive's layout is stable.
func (es entries) sorted() []*entry {
	out := make([]*entry, 0, len(es))
	for _, name := range slices.Sorted(maps.Keys(es)) {
		out = append(out, es[name])
	}
	return out
}

// writeTemp writes es as a gzipped tar into a new temporary file in dir,
// fsyncs it, sets its modification time to ended (retention by age reads
// it) and returns its path; on failure nothing is left behind.
func writeTemp(dir, id string, es entries, ended time.Time) (_ string, err error) {
	if err := atomicfile.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "."+id+tempInfix+"*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := writeTar(f, es); err != nil {
		return "", fmt.Errorf("write the archive of %s: %w", id, err)
	}
	if err := atomicfile.Sync(f); err != nil {
		return "", fmt.Errorf("fsync the archive of %s: %w", id, err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if !ended.IsZero() {
		if err := os.Chtimes(f.Name(), ended, ended); err != nil {
			return "", err
		}
	}
	return f.Name(), nil
}

// writeTar writes es to w as a gzipped tar, each entry with its hash.
func writeTar(w io.Writer, es entries) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	for _, e := range es.sorted() {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: e.Name, Size: int64(len(e.Data)), Mode: 0o644, ModTime: e.Mod.UTC(),
			Format: tar.FormatPAX, PAXRecords: map[string]string{hashRecord: e.Sum},
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// install renames a written temporary archive to its path and fsyncs the
// directory, so the archive is there whole after a crash, or not at all.
func install(tmp, dst string) error {
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(dst))
}

// errCorrupt marks an archive that cannot be read back or contradicts
// itself.
var errCorrupt = errors.New("archive is damaged")

// read reads back every entry of the archive at path and checks each
// against the hash it was written with; an archive that cannot be read
// whole, or whose bytes do not match their hashes, is errCorrupt.
func read(p string) (entries, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errCorrupt, p, err)
	}
	es := entries{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return es, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", errCorrupt, p, err)
		}
		e, err := readEntry(tr, hdr)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", errCorrupt, p, err)
		}
		es[e.Name] = e
	}
}

// readEntry reads one entry and checks its bytes against its hash.
func readEntry(tr *tar.Reader, hdr *tar.Header) (*entry, error) {
	if hdr.Typeflag != tar.TypeReg || !localName(hdr.Name) {
		return nil, fmt.Errorf("entry %q: not a regular file inside the run's directory", hdr.Name)
	}
	if hdr.Size > maxEntryBytes {
		return nil, fmt.Errorf("entry %q: %d bytes, more than %d", hdr.Name, hdr.Size, maxEntryBytes)
	}
	data, err := io.ReadAll(tr)
	if err != nil {
		return nil, fmt.Errorf("entry %q: %v", hdr.Name, err)
	}
	sum := artifact.Hash(data)
	if want := hdr.PAXRecords[hashRecord]; want != sum {
		return nil, fmt.Errorf("entry %q: its bytes hash to %s, it was written as %q", hdr.Name, sum, want)
	}
	return &entry{Name: hdr.Name, Data: data, Sum: sum, Mod: hdr.ModTime}, nil
}

// localName reports whether a slash-separated name stays inside the run's
// directory.
func localName(name string) bool {
	return name != "" && !strings.HasPrefix(name, "/") && filepath.IsLocal(filepath.FromSlash(name)) && path.Clean(name) == name
}

// ReadFile returns one file of the archive at p, by its name relative to
// the run's directory; ok is false when the archive has no such file.
func ReadFile(p, name string) (data []byte, ok bool, err error) {
	es, err := read(p)
	if err != nil {
		return nil, false, err
	}
	e := es[name]
	if e == nil {
		return nil, false, nil
	}
	return e.Data, true, nil
}

// File is a file of an archived run's directory, as its archive holds it.
type File struct {
	Name   string
	Size   int64
	SHA256 string
	Mod    time.Time
}

// List lists the files of the archive at p, sorted by name.
func List(p string) ([]File, error) {
	es, err := read(p)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, e := range es.sorted() {
		out = append(out, File{Name: e.Name, Size: int64(len(e.Data)), SHA256: e.Sum, Mod: e.Mod})
	}
	return out, nil
}
