package secrets

import (
	"github.com/agentrunner/agentrunner/config"
)

// ForConfig returns the resolver of a workspace: the environment, NAME_FILE
// files and the configuration's secrets file, decrypted with the identity
// of AGENTRUNNER_AGE_IDENTITY (or its _FILE), else secrets.identity_file.
// The identity is read again with the file at each Refresh, so both may be
// rotated.
func ForConfig(cfg *config.Config, lookupEnv func(string) (string, bool)) (*Resolver, error) {
	return New(Options{LookupEnv: lookupEnv, Load: func() (map[string]string, error) {
		f, err := OpenFile(cfg, lookupEnv, false)
		if err != nil {
			return nil, err
		}
		return f.Read()
	}})
}

// OpenFile returns the configuration's secrets file with its identity. An
// identity is needed only when the file exists, or when need is set (to
// write one); without it the file's Identity is nil.
func OpenFile(cfg *config.Config, lookupEnv func(string) (string, bool), need bool) (*File, error) {
	f := &File{Path: cfg.Abs(cfg.Secrets.File)}
	env, _ := New(Options{LookupEnv: lookupEnv})
	switch text, ok := env.Lookup(IdentityEnv); {
	case ok:
		id, err := ParseIdentity(text, env.Source(IdentityEnv))
		if err != nil {
			return nil, err
		}
		f.Identity = id
	case env.Source(IdentityEnv) != "": // a _FILE that cannot be read
		return nil, env.Missing(IdentityEnv)
	case cfg.Secrets.IdentityFile != "":
		path := cfg.Abs(cfg.Secrets.IdentityFile)
		data, err := readLimited(path)
		if err != nil && (need || exists(f.Path)) {
			return nil, err
		}
		if err == nil {
			id, err := ParseIdentity(string(data), "secrets.identity_file "+path)
			if err != nil {
				return nil, err
			}
			f.Identity = id
		}
	}
	return f, nil
}
