package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/llm/anthropic"
	"github.com/agentrunner/agentrunner/llm/openai"
	"github.com/agentrunner/agentrunner/runtime/process"
	"github.com/agentrunner/agentrunner/secrets"
	"github.com/agentrunner/agentrunner/tool/websearch"
	"github.com/agentrunner/agentrunner/toolbox"
	"go.yaml.in/yaml/v3"
)

// runTimeProblems are what a well-formed configuration still fails on at
// run time, which validate reports with the rest: a process agent's
// program that is not installed, an API without credentials that serve
// would refuse to expose, an AGENTRUNNER_* variable that sets nothing.
func runTimeProblems(cfg *config.Config, environ []string, lookPath func(string) (string, error)) config.Problems {
	ps := commandProblems(cfg, lookPath)
	ps = append(ps, listenProblems(cfg)...)
	return append(ps, envProblems(cfg, environ)...)
}

// commandProblems names each process provider in use whose program
// cannot be found: on PATH for a bare name, at its path for an absolute
// one. A program given with a placeholder or a relative path is found
// only at run time, in the attempt's folder, and is left alone.
func commandProblems(cfg *config.Config, lookPath func(string) (string, error)) config.Problems {
	var ps config.Problems
	for _, name := range usedProviders(cfg) {
		p := cfg.Providers[name]
		if p == nil || p.Kind != config.ProviderProcess || len(p.Command) == 0 {
			continue
		}
		program := p.Command[0]
		if strings.Contains(program, "{") || (strings.ContainsAny(program, `/\`) && !filepath.IsAbs(program)) {
			continue
		}
		if _, err := lookPath(program); err != nil {
			ps = append(ps, problem(cfg, "providers."+name+".command[0]", fmt.Errorf(
				"%s cannot be run (%v): every agent on this provider would fail; install it, put it on PATH or give its absolute path", program, cause(err))))
		}
	}
	return ps
}

// cause is the innermost error of a failed program lookup, without the
// program's name that the message gives already.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// listenProblems is serve's refusal of an API without credentials on an
// address other machines reach, said before serve is started.
func listenProblems(cfg *config.Config) config.Problems {
	if authConfigured(cfg.Server.Auth) {
		return nil
	}
	if err := requireLoopback(cfg.Server.Listen); err != nil {
		return config.Problems{problem(cfg, "server.listen", err)}
	}
	return nil
}

// notOverrides are AGENTRUNNER_* variables that are not configuration: the
// client commands', the secrets identity's, those the runner sets for its
// process agents.
var notOverrides = append([]string{envServer, envAPIKey, secrets.IdentityEnv, secrets.IdentityEnv + secrets.FileSuffix}, process.InvocationEnvNames()...)

// envProblems names each AGENTRUNNER_* variable that overrides no key of
// this configuration (a typo, or an entry the file does not have), with
// the closest variable that would. A variable the configuration names as
// holding a secret (key_env: AGENTRUNNER_KEY_ALICE) is not one.
func envProblems(cfg *config.Config, environ []string) config.Problems {
	known := map[string]bool{}
	for _, k := range cfg.Keys() {
		known[k.Env] = true
	}
	secretNames := namedVariables(cfg)
	var ps config.Problems
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, config.EnvPrefix+"_") || known[name] || slices.Contains(notOverrides, name) {
			continue
		}
		if secretNames[name] || secretNames[strings.TrimSuffix(name, secrets.FileSuffix)] {
			continue
		}
		hint := config.SuggestKey(name, slices.Sorted(maps.Keys(known)))
		if strings.HasPrefix(hint, " (known keys") {
			hint = " (the configuration reference lists the keys)"
		}
		ps = append(ps, config.Problem{Where: "environment variable " + name, Message: "sets no configuration key, so it is ignored" + hint})
	}
	return ps
}

// namedVariables are the variables the configuration names: the values of
// its *_env keys (in lists of sections too, such as api_keys) and of the
// lists of variables passed to processes.
func namedVariables(cfg *config.Config) map[string]bool {
	names := map[string]bool{}
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(k, e)
			}
		case []any:
			for _, e := range x {
				walk(key, e)
			}
		case string:
			if strings.HasSuffix(key, "_env") || key == "pass" {
				names[x] = true
			}
		}
	}
	walk("", configYAML(cfg))
	return names
}

// configYAML is the configuration as YAML reads it back: maps, lists and
// scalars.
func configYAML(cfg *config.Config) any {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil
	}
	var v any
	if yaml.Unmarshal(data, &v) != nil {
		return nil
	}
	return v
}

// onlineTimeout bounds each online check of a key.
const onlineTimeout = 10 * time.Second

// keyCheck is one cheap authenticated request that tells whether a key is
// taken.
type keyCheck struct {
	// key is the configuration key that names the variable; name the
	// variable.
	key, name string
	// what names the service in messages.
	what string
	req  *http.Request
}

// onlineProblems checks every provider and tool key in use with one cheap
// authenticated request each (FR-139): a 401 or 403 is a bad key.
func onlineProblems(ctx context.Context, cfg *config.Config, lookupEnv func(string) (string, bool), client *http.Client) config.Problems {
	checks := keyChecks(ctx, cfg, lookupEnv)
	results := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { results[i] = runCheck(client, c) })
	}
	wg.Wait()
	var ps config.Problems
	for i, err := range results {
		if err != nil {
			ps = append(ps, problem(cfg, checks[i].key, err))
		}
	}
	return ps
}

// runCheck makes one check's request, within onlineTimeout.
func runCheck(client *http.Client, c keyCheck) error {
	ctx, cancel := context.WithTimeout(c.req.Context(), onlineTimeout)
	defer cancel()
	resp, err := client.Do(c.req.WithContext(ctx))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which the message names already
		}
		return fmt.Errorf("checking the key in %s: %s cannot be reached: %v", c.name, c.what, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("the key in %s is a bad key: %s refused it (HTTP %d)", c.name, c.what, resp.StatusCode)
	case resp.StatusCode >= 300:
		return fmt.Errorf("checking the key in %s: %s answered HTTP %d", c.name, c.what, resp.StatusCode)
	}
	return nil
}

// keyChecks are the checks of the keys the agents' providers and tools
// use, those that are set (a missing one is reported without --online).
func keyChecks(ctx context.Context, cfg *config.Config, lookupEnv func(string) (string, bool)) []keyCheck {
	var checks []keyCheck
	for _, name := range usedProviders(cfg) {
		if c, ok := providerCheck(ctx, cfg, name, lookupEnv); ok {
			checks = append(checks, c)
		}
	}
	for _, name := range toolbox.InUse(cfg) {
		if c, ok := searchCheck(ctx, cfg, name, lookupEnv); ok {
			checks = append(checks, c)
		}
	}
	return checks
}

// providerCheck lists the models of an OpenAI or Anthropic provider: the
// cheapest request that needs the key.
func providerCheck(ctx context.Context, cfg *config.Config, name string, lookupEnv func(string) (string, bool)) (keyCheck, bool) {
	p := cfg.Providers[name]
	if p == nil || (p.Kind != config.ProviderOpenAI && p.Kind != config.ProviderAnthropic) {
		return keyCheck{}, false
	}
	key, _ := lookupEnv(p.APIKeyEnv)
	if key == "" {
		return keyCheck{}, false
	}
	base, env, models := p.BaseURL, openai.BaseURLEnv, "https://api.openai.com/v1/models"
	if p.Kind == config.ProviderAnthropic {
		env, models = anthropic.BaseURLEnv, "https://api.anthropic.com/v1/models"
	}
	if base == "" {
		base = os.Getenv(env)
	}
	if base != "" {
		models = strings.TrimRight(base, "/") + map[bool]string{true: "/v1/models", false: "/models"}[p.Kind == config.ProviderAnthropic]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, models, nil)
	if err != nil {
		return keyCheck{}, false // base_url is checked by the provider's own validation
	}
	if p.Kind == config.ProviderAnthropic {
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return keyCheck{key: "providers." + name + ".api_key_env", name: p.APIKeyEnv, what: fmt.Sprintf("the %s provider %s (GET %s)", p.Kind, name, models), req: req}, true
}

// searchCheck asks a web_search tool's API for one result.
func searchCheck(ctx context.Context, cfg *config.Config, name string, lookupEnv func(string) (string, bool)) (keyCheck, bool) {
	t := cfg.Tools[name]
	if t == nil || t.Kind != websearch.Kind {
		return keyCheck{}, false
	}
	s, _ := t.Settings.(*websearch.Settings)
	env := s.KeyEnv()
	key, _ := lookupEnv(env)
	if key == "" {
		return keyCheck{}, false
	}
	base := websearch.DefaultBaseURL
	if s != nil && s.BaseURL != "" {
		base = s.BaseURL
	}
	endpoint := strings.TrimRight(base, "/") + "/res/v1/web/search"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?q=agentrunner&count=1", nil)
	if err != nil {
		return keyCheck{}, false
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Subscription-Token", key)
	return keyCheck{key: "tools." + name + ".api_key_env", name: env, what: fmt.Sprintf("the %s tool %s (GET %s)", t.Kind, name, endpoint), req: req}, true
}
