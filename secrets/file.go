// Package secrets resolves the secrets agentrunner's configuration names
// by variable (api_key_env, token_env, secret_env …): from the
// environment, from a file a NAME_FILE variable points to (the container
// convention), or from an age-encrypted secrets file (FR-100). A Resolver
// is read again on reload, so a rotated key reaches every client at its
// next request without a restart (FR-140).
package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"filippo.io/age"
	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// IdentityEnv holds the age identity (AGE-SECRET-KEY-1…) that decrypts
// the secrets file; IdentityEnv+"_FILE" may name a file holding it
// instead, and secrets.identity_file is read when neither is set.
const IdentityEnv = "AGENTRUNNER_AGE_IDENTITY"

// maxFileBytes bounds a secrets file, an identity file and a NAME_FILE
// file, so a wrong path to a large file fails instead of being read whole.
const maxFileBytes = 1 << 20

// File is an age-encrypted file of secrets by variable name. Its plain
// text is a JSON object {"NAME": "value"}; only the identity decrypts it.
type File struct {
	// Path of the encrypted file.
	Path string
	// Identity decrypts the file; its recipient encrypts it.
	Identity *age.X25519Identity
}

// Read decrypts the file; a file that does not exist holds no secrets.
func (f *File) Read() (map[string]string, error) {
	data, err := readLimited(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "secrets file: %v", err)
	}
	if f.Identity == nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "secrets file %s: no age identity to decrypt it: set %s (or %s_FILE), or secrets.identity_file", f.Path, IdentityEnv, IdentityEnv)
	}
	r, err := age.Decrypt(bytes.NewReader(data), f.Identity)
	if err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "secrets file %s: cannot decrypt it with the identity of recipient %s: %v", f.Path, f.Identity.Recipient(), err)
	}
	plain, err := io.ReadAll(io.LimitReader(r, maxFileBytes))
	if err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "secrets file %s: %v", f.Path, err)
	}
	values := map[string]string{}
	if err := json.Unmarshal(plain, &values); err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "secrets file %s: not a JSON object of strings after decryption", f.Path)
	}
	return values, nil
}

// Write encrypts values to the identity's recipient and replaces the file
// atomically (readable by its owner only).
func (f *File) Write(values map[string]string) error {
	plain, err := json.Marshal(values)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	w, err := age.Encrypt(&out, f.Identity.Recipient())
	if err != nil {
		return err
	}
	if _, err := w.Write(plain); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(f.Path, out.Bytes(), 0o600); err != nil {
		return agentrunner.Errorf(agentrunner.EINTERNAL, "write secrets file: %v", err)
	}
	return nil
}

// Set stores one secret, reading and rewriting the whole file.
func (f *File) Set(name, value string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	values, err := f.Read()
	if err != nil {
		return err
	}
	values[name] = value
	return f.Write(values)
}

// Remove deletes one secret; a name the file does not hold is ENOTFOUND.
func (f *File) Remove(name string) error {
	values, err := f.Read()
	if err != nil {
		return err
	}
	if _, ok := values[name]; !ok {
		return agentrunner.Errorf(agentrunner.ENOTFOUND, "the secrets file %s holds no secret %s", f.Path, name)
	}
	delete(values, name)
	return f.Write(values)
}

// Names lists the names of the secrets in the file, sorted; never values.
func (f *File) Names() ([]string, error) {
	values, err := f.Read()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// CheckName refuses a name that is not a variable's name: a secret is
// found by the name the configuration gives its variable.
func CheckName(name string) error {
	if !config.IsEnvName(name) {
		return agentrunner.Errorf(agentrunner.EINVALID, "%q is not a variable name (letters, digits and _, not starting with a digit): a secret is named as the variable the configuration names", name)
	}
	return nil
}

// ParseIdentity reads an age X25519 identity. The error never quotes it.
func ParseIdentity(text, from string) (*age.X25519Identity, error) {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue // age-keygen writes comments above the key
		}
		id, err := age.ParseX25519Identity(line)
		if err != nil {
			return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s does not hold an age identity (AGE-SECRET-KEY-1…)", from)
		}
		return id, nil
	}
	return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s is empty: it should hold an age identity (AGE-SECRET-KEY-1…)", from)
}

// NewIdentity makes an identity and writes it to path, readable by its
// owner only, refusing to replace a file (that would lose the key of an
// existing secrets file).
func NewIdentity(path string) (*age.X25519Identity, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	text := fmt.Sprintf("# public key: %s\n%s\n", id.Recipient(), id)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, agentrunner.Errorf(agentrunner.ECONFLICT, "%s exists: an identity file is never replaced", path)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return id, f.Close()
}

// readLimited reads a file of at most maxFileBytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxFileBytes)
	}
	return data, nil
}

// exists reports whether path names a file that exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
